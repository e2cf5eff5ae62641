package apiserver

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"math"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	// coder/websocket (formerly nhooyr.io/websocket): a maintained, small WebSocket library whose
	// every call takes a context, with close codes and read limits built in; it needs no
	// goroutine of its own per connection beyond the reader and writer we run.
	"github.com/coder/websocket"
	"github.com/gin-gonic/gin"
	json "github.com/goccy/go-json"
	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/pmx-dev/pmx/internal/domain"
	"github.com/pmx-dev/pmx/internal/feed"
	"github.com/pmx-dev/pmx/internal/kit/addrlimit"
	"github.com/pmx-dev/pmx/internal/kit/auth"
	"github.com/pmx-dev/pmx/internal/kit/httpkit"
	"github.com/pmx-dev/pmx/internal/kit/ratelimit"
	"github.com/pmx-dev/pmx/internal/store"
	"github.com/pmx-dev/pmx/internal/store/accounts"
)

// The live feed over WebSocket, GET /api/v1/ws: documented message by message in asyncapi.yaml.
// GET /api/v1/ws/public is the same feed without a key, for the market pages (package
// marketpages) and anyone who only watches: the same connections, protocol and hub, less the
// account's channels (orders, fills) and cancelOnDisconnect, with fewer subscriptions a
// connection and a bound on how often its address may subscribe. A connection's reader takes the
// client's messages (subscribe, unsubscribe, ping) and its writer sends from one queue, bounded in
// messages and in bytes, which the hub's fan-out fills without waiting; a client that lets the
// queue fill, or leaves a message unsent for the write timeout, is disconnected as a slow
// consumer and resumes.
//
// What a subscription costs is charged before it starts. A keyed connection's subscribe spends a
// token of its account's read bucket, as a GET does (package ratelimit), and a resume that reads
// Postgres one more for each page beyond the first, as paging GET /market/events or
// /account/events would. A public connection has no account: its client address (package
// addrlimit, across all of the address's connections, so reconnecting does not reset it) has an
// allowance of subscribes, and a tighter one of pages read from Postgres for resumes older than
// the front's ring. A subscribe refused by either is answered rate_limited with how long to wait
// (retryAfterSeconds) and changes nothing; a resume's later pages wait for their tokens instead,
// the subscription being under way.

// Close codes of the feed, beside the standard ones (1001 when the server stops).
const (
	wsSlowConsumer     websocket.StatusCode = 4001 // the client did not read fast enough
	wsHeartbeatTimeout websocket.StatusCode = 4002 // the client sent nothing for too long
	wsFeedInterrupted  websocket.StatusCode = 4003 // the front lost the thread of a market's feed
	wsKeyEnded         websocket.StatusCode = 4004 // the connection's API key was revoked or expired
)

// A connection lasts, and its key may end while it does: a revoked key's connections are closed
// with wsKeyEnded as soon as the replica hears of the revocation (keyCache), and an expired key's
// within feedKeyCheck of the expiry, on every replica. The key's holder has lost the account: the
// connection delivers nothing more, takes no more subscriptions, and a cancelOnDisconnect
// connection closed so cancels no orders (presence.leave), since the key has no authority left
// to act on the account. The reasons are short: a close frame carries at most 123 bytes of them.
const wsKeyRevoked = "the API key was revoked: connect with another key (make one on /settings)"

func wsKeyExpired(at time.Time) string {
	return fmt.Sprintf("the API key expired at %s: connect with another key (make one on /settings)", at.UTC().Format(time.RFC3339))
}

// Feed defaults (Config.Feed).
const (
	defaultWSQueue = 1024 // messages a connection may have waiting
	// Bytes a connection may have waiting: 32 replay pages of about 128 KiB, or a few seconds of
	// a busy market's events. The messages' bound alone let a connection hold 1,024 replay pages
	// (128 MiB); this one bounds a front's memory by its connections at 4 MiB each.
	defaultWSQueueBytes    = 4 << 20
	defaultWSHeartbeat     = 10 * time.Second
	defaultWSClientTimeout = 60 * time.Second
	defaultWSWriteTimeout  = 10 * time.Second
	wsMaxSubscriptions     = 1000
	wsMaxClientMessage     = 4096
	// A public connection (no key) may hold wsMaxPublicSubscriptions subscriptions, and its
	// client address may subscribe wsPublicSubscribeRate times a second beyond a first burst of as
	// many as one connection may hold: the market pages subscribe to a few channels of one market,
	// or to the lifecycle and the trades of a list's newest markets, once; what a subscription may
	// cost (a market's book, from the shard in a distributed exchange) is bounded without an
	// account to count it against.
	wsMaxPublicSubscriptions = 100
	wsPublicSubscribeRate    = 10
	// Pages of a public resume older than the front's ring (DefaultRing events a market), read
	// from Postgres, an address may have read: wsPublicReplayRate a second in bursts of
	// wsPublicReplayBurst, apart from and tighter than the subscribes, as a page is the feed's
	// costliest read. A page is up to 1,000 events, so a burst replays 10,000 events at once: a
	// market page's few channels resuming after a dropped connection, with room to spare. A client
	// that follows the feed resumes from the ring, which is free; one further behind than a
	// burst is better served by a snapshot (a subscription without resumeFrom). Two pages a second
	// is what a browser tab needs, and a few milliseconds of Postgres a second per address.
	wsPublicReplayRate  = 2
	wsPublicReplayBurst = 10
)

// FeedConfig configures the WebSocket feed.
type FeedConfig struct {
	// Queue bounds the messages waiting to be sent on one connection (default 1024).
	Queue int
	// QueueBytes bounds the bytes of the messages waiting to be sent on one connection
	// (default 4 MiB). A replay fills at most half of each bound, the rest being for the live
	// messages of the connection's other subscriptions.
	QueueBytes int
	// WriteTimeout is how long a message may take to be written to a connection (default 10s):
	// a client that reads nothing for that long is disconnected as a slow consumer.
	WriteTimeout time.Duration
	// Heartbeat is how often the server sends a heartbeat message (default 10s).
	Heartbeat time.Duration
	// ClientTimeout is how long the server waits for any message from a client before it closes
	// the connection (default 60s): clients send a ping at least that often.
	ClientTimeout time.Duration
	// Ring is how many of each followed market's last events the front keeps in memory for
	// resumes (default feed.DefaultRing); older ones are read from Postgres.
	Ring int
}

func (c *FeedConfig) defaults() {
	if c.Queue <= 0 {
		c.Queue = defaultWSQueue
	}
	if c.QueueBytes <= 0 {
		c.QueueBytes = defaultWSQueueBytes
	}
	if c.WriteTimeout <= 0 {
		c.WriteTimeout = defaultWSWriteTimeout
	}
	if c.Heartbeat <= 0 {
		c.Heartbeat = defaultWSHeartbeat
	}
	if c.ClientTimeout <= 0 {
		c.ClientTimeout = defaultWSClientTimeout
	}
}

// feedMetrics counts the feed's connections and what became of them.
type feedMetrics struct {
	conns   prometheus.Gauge
	sent    prometheus.Counter
	closed  *prometheus.CounterVec
	limited *prometheus.CounterVec
}

func newFeedMetrics(reg prometheus.Registerer, hub *feed.Hub) *feedMetrics {
	m := &feedMetrics{
		conns: prometheus.NewGauge(prometheus.GaugeOpts{Name: "pmx_feed_connections",
			Help: "WebSocket feed connections open."}),
		sent: prometheus.NewCounter(prometheus.CounterOpts{Name: "pmx_feed_messages_sent_total",
			Help: "Messages written to WebSocket feed connections."}),
		closed: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "pmx_feed_closed_total",
			Help: "WebSocket feed connections closed by the server, by reason (slow_consumer: the queue's bound or the write timeout, heartbeat_timeout, feed_interrupted, key_ended: its API key was revoked or expired, going_away, message_too_big) or by the client (client)."},
			[]string{"reason"}),
		limited: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "pmx_feed_rate_limited_total",
			Help: "Feed subscriptions refused rate_limited, by the limit spent (account_reads, public_subscribes, public_replays)."},
			[]string{"limit"}),
	}
	reg.MustRegister(m.conns, m.sent, m.closed, m.limited,
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "pmx_feed_book_loads_total",
			Help: "Markets' whole books the feed read to start following them (from the owning shard in a distributed exchange)."},
			func() float64 { return float64(hub.BookLoads()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "pmx_feed_topics",
			Help: "Markets the feed follows, those kept for a while after their last subscription included."},
			func() float64 { return float64(hub.Topics()) }))
	return m
}

// wsLimits are the public feed's limits per client address, across all of its connections.
type wsLimits struct {
	subscribes *addrlimit.Limiter // subscribe messages
	replays    *addrlimit.Limiter // pages of resumes read from Postgres
}

func newWSLimits() *wsLimits {
	return &wsLimits{subscribes: addrlimit.New(wsPublicSubscribeRate, wsMaxPublicSubscriptions),
		replays: addrlimit.New(wsPublicReplayRate, wsPublicReplayBurst)}
}

// closeReasons names the close codes in the metrics.
var closeReasons = map[websocket.StatusCode]string{
	wsSlowConsumer: "slow_consumer", wsHeartbeatTimeout: "heartbeat_timeout", wsFeedInterrupted: "feed_interrupted",
	wsKeyEnded: "key_ended", websocket.StatusGoingAway: "going_away", websocket.StatusMessageTooBig: "message_too_big",
}

// wsReply answers a client's message.
type wsReply struct {
	Type     string `json:"type"` // subscribed, unsubscribed, pong, error
	ID       int64  `json:"id"`
	Channel  string `json:"channel,omitempty"`
	MarketID string `json:"marketId,omitempty"`
	Code     string `json:"code,omitempty"`
	Message  string `json:"message,omitempty"`
	// Cursor, on subscribing to an account channel: where in the account's feed the events that
	// follow come after (feed.Cursor). Seq, beside it, is the same in the feed's first form while
	// the feed is its one stream "" (deprecated: resume from the cursor).
	Cursor string `json:"cursor,omitempty"`
	Seq    *int64 `json:"seq,omitempty"`
	// RetryAfterSeconds, on rate_limited: how long until the limit allows the subscription.
	RetryAfterSeconds float64 `json:"retryAfterSeconds,omitempty"`
}

type wsHeartbeat struct {
	Type string    `json:"type"` // heartbeat
	At   time.Time `json:"at"`
}

// wsConn is one client connection.
type wsConn struct {
	s       *Server
	ws      *websocket.Conn
	account int64  // 0 on a public connection
	public  bool   // a connection without a key (GET /api/v1/ws/public): market channels only
	addr    string // the client's address (addrlimit.Key), which a public connection's limits count
	q       chan []byte

	// key is the API key the connection was opened with (or that fetched its ws-token), which it
	// ends with (keyCache.watch); nil on a public connection, or one by a ws-token from before
	// tokens had keys.
	key *accounts.KeyRecord

	// The bytes of the messages in q, and at most how many; room is signalled when the writer
	// takes a message, for SendWait.
	queued   atomic.Int64
	maxBytes int64
	room     chan struct{}
	// The context of the write under way (nil between writes), whose deadline is the write timeout.
	writing atomic.Pointer[context.Context]

	closeOnce sync.Once
	closing   chan struct{}
	code      websocket.StatusCode
	reason    string

	subs map[subKey]*feed.Subscription // the reader's own
}

type subKey struct {
	channel string
	market  uuid.UUID
}

// Send queues a message without waiting; a full queue closes the connection. A message larger
// than the bytes' bound goes into an empty queue, so that every message can be sent.
func (c *wsConn) Send(msg []byte) bool {
	n := int64(len(msg))
	if q := c.queued.Add(n); q > c.maxBytes && q != n {
		c.queued.Add(-n)
		c.close(wsSlowConsumer, fmt.Sprintf("slow consumer: more than %d bytes waited to be sent; reconnect and resume from your last seq", c.maxBytes))
		return false
	}
	select {
	case c.q <- msg:
		return true
	default:
		c.queued.Add(-n)
		c.close(wsSlowConsumer, fmt.Sprintf("slow consumer: more than %d messages waited to be sent; reconnect and resume from your last seq", cap(c.q)))
		return false
	}
}

// SendWait queues a message of a replay, waiting for room: until the queue is less than half
// full, in messages and bytes, or empty. The other half is for the live messages of the
// connection's other subscriptions, which Send queues without waiting while a replay goes on.
func (c *wsConn) SendWait(ctx context.Context, msg []byte) error {
	n := int64(len(msg))
	for {
		if q := c.queued.Load(); q == 0 || q+n <= c.maxBytes/2 && len(c.q) < cap(c.q)/2 {
			c.queued.Add(n)
			select {
			case c.q <- msg:
				return nil
			case <-c.closing:
				c.queued.Add(-n)
				return errWSClosing
			case <-ctx.Done():
				c.queued.Add(-n)
				return ctx.Err()
			}
		}
		select {
		case <-c.room:
		case <-c.closing:
			return errWSClosing
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// errWSClosing ends what waits on a connection that is closing.
var errWSClosing = errors.New("connection closing")

// Drop closes the connection because a market's feed was interrupted.
func (c *wsConn) Drop(reason string) { c.close(wsFeedInterrupted, reason) }

// close asks the writer to close the connection with a code; the first reason wins.
func (c *wsConn) close(code websocket.StatusCode, reason string) {
	c.closeOnce.Do(func() {
		c.code, c.reason = code, reason
		name, ok := closeReasons[code]
		if !ok {
			name = "client"
		}
		c.s.feedMetrics.closed.WithLabelValues(name).Inc()
		close(c.closing)
	})
}

// refuseTokenCancel refuses a feed connection by ws-token that asks for cancelOnDisconnect, before
// the token is spent. A token travels in the URL, which proxies, logs and browser history may
// keep: whoever read it within its minute could connect first and, by closing, cancel every open
// order of the account. Cancel-on-disconnect takes the API key in the Authorization header.
func (s *Server) refuseTokenCancel(c *gin.Context) {
	if _, token := c.GetQuery("token"); token && c.Query("cancelOnDisconnect") == "true" {
		httpkit.AbortUnread(c, httpkit.FieldError("cancelOnDisconnect", "invalid_value",
			"cancelOnDisconnect cancels the account's orders and needs the API key in the Authorization header: a ws-token travels in the URL, where others may read it; connect with the token without cancelOnDisconnect, or with the key"))
		return
	}
	c.Next()
}

// serveWS upgrades an authenticated request to the feed.
func (s *Server) serveWS(c *gin.Context) {
	cancelOnDisconnect := false
	if v, ok := c.GetQuery("cancelOnDisconnect"); ok {
		if v != "true" && v != "false" {
			httpkit.AbortUnread(c, httpkit.FieldError("cancelOnDisconnect", "invalid_value", "cancelOnDisconnect must be true or false"))
			return
		}
		cancelOnDisconnect = v == "true"
	}
	var key *accounts.KeyRecord
	if rec, ok := c.Value(keyRecordKey).(accounts.KeyRecord); ok && rec.Prefix != "" {
		key = &rec
	}
	gen, _ := c.Value(keyGenKey).(uint64)
	s.serveFeed(c, accountOf(c), key, gen, cancelOnDisconnect)
}

// servePublicWS upgrades a request without a key to the public feed: the market channels only.
func (s *Server) servePublicWS(c *gin.Context) {
	if _, ok := c.GetQuery("cancelOnDisconnect"); ok {
		httpkit.AbortUnread(c, httpkit.FieldError("cancelOnDisconnect", "invalid_value",
			"cancelOnDisconnect cancels an account's orders: connect to /api/v1/ws with an API key for it"))
		return
	}
	s.serveFeed(c, 0, nil, 0, false)
}

// serveFeed runs a feed connection: an account's (account > 0), or a public one (account 0). An
// account's connection ends with its key, which was read at the key cache's generation gen.
func (s *Server) serveFeed(c *gin.Context, account int64, key *accounts.KeyRecord, gen uint64, cancelOnDisconnect bool) {
	// Cross-origin pages may connect: the feed never authenticates by cookie (a bearer key or a
	// token the page fetched with one), so another site gains nothing from a visitor's browser.
	ws, err := websocket.Accept(sizedHijacker{c.Writer}, c.Request, &websocket.AcceptOptions{InsecureSkipVerify: true})
	if err != nil {
		return // Accept has answered
	}
	// The HTTP server's read and write deadlines are for requests, not for a feed that lasts.
	rc := http.NewResponseController(c.Writer)
	_ = rc.SetReadDeadline(time.Time{})
	_ = rc.SetWriteDeadline(time.Time{})
	ws.SetReadLimit(wsMaxClientMessage)
	conn := &wsConn{s: s, ws: ws, account: account, key: key, public: account == 0, addr: addrlimit.Key(c.Request),
		q: make(chan []byte, s.cfg.Feed.Queue), maxBytes: int64(s.cfg.Feed.QueueBytes), room: make(chan struct{}, 1),
		closing: make(chan struct{}), subs: map[subKey]*feed.Subscription{}}
	s.feedMu.Lock()
	if s.feedClosed {
		s.feedMu.Unlock()
		_ = ws.Close(websocket.StatusGoingAway, "the server is stopping: reconnect and resume from your last seq")
		return
	}
	s.feedConns.Add(1)
	s.feedMu.Unlock()
	defer s.feedConns.Done()
	s.feedMetrics.conns.Inc()
	defer s.feedMetrics.conns.Dec()
	if key != nil {
		s.keys.watch(conn, gen)
		defer s.keys.unwatch(conn)
	}
	// Counted out before the gauge drops, for the orders to be cancelled by the time it has.
	if cancelOnDisconnect {
		if err := s.presence.join(s.feedCtx, account); err != nil {
			_ = ws.Close(websocket.StatusTryAgainLater, "could not record the connection for cancelOnDisconnect: try again")
			return
		}
		defer func() { s.presence.leave(account, conn.keyHeld()) }()
	}
	ctx, cancel := context.WithCancel(s.feedCtx)
	defer cancel()
	writerDone := make(chan struct{})
	go func() {
		defer close(writerDone)
		conn.write(ctx)
		cancel() // ends the reader
	}()
	conn.read(ctx)
	conn.close(conn.readEnded(), "")
	<-writerDone
	for _, sub := range conn.subs {
		s.hub.Unsubscribe(sub)
	}
}

// write sends the queue and the heartbeats until the connection closes.
func (c *wsConn) write(ctx context.Context) {
	beat := time.NewTicker(c.s.cfg.Feed.Heartbeat)
	defer beat.Stop()
	timeout := c.s.cfg.Feed.WriteTimeout
	send := func(msg []byte) bool {
		wctx, cancel := context.WithTimeout(ctx, timeout)
		defer cancel()
		c.writing.Store(&wctx)
		defer c.writing.Store(nil)
		if err := c.ws.Write(wctx, websocket.MessageText, msg); err != nil {
			if ctx.Err() == nil && errors.Is(wctx.Err(), context.DeadlineExceeded) {
				// A slow consumer too, though no close frame can follow a write cut short
				// (the library drops the connection): the client sees it end abnormally.
				c.close(wsSlowConsumer, "")
			} else {
				c.close(websocket.StatusAbnormalClosure, "")
			}
			return false
		}
		c.s.feedMetrics.sent.Inc()
		return true
	}
	for {
		// A close goes first: a client that overflowed its queue is told why as soon as the
		// write under way is through, not after the queue it let build up.
		select {
		case <-c.closing:
			c.closeWS()
			return
		default:
		}
		select {
		case msg := <-c.q:
			c.queued.Add(-int64(len(msg)))
			select {
			case c.room <- struct{}{}:
			default:
			}
			if !send(msg) {
				c.ws.CloseNow()
				return
			}
		case <-beat.C:
			if !send(encodeJSON(wsHeartbeat{Type: "heartbeat", At: time.Now().UTC()})) {
				c.ws.CloseNow()
				return
			}
		case <-c.closing:
			c.closeWS()
			return
		case <-ctx.Done():
			c.close(websocket.StatusGoingAway, "the server is stopping: reconnect and resume from your last seq")
			c.closeWS()
			return
		}
	}
}

// keyHeld says whether the connection's key still had authority over the account when the
// connection ended: it was not closed for its key's end (wsKeyEnded), and the key had not expired
// by then even if checkFeeds had yet to notice. It is asked once the connection has closed.
func (c *wsConn) keyHeld() bool {
	return c.code != wsKeyEnded && (c.key == nil || !auth.Expired(c.key.ExpiresAt, c.s.now()))
}

// readEnded is the close code when the reader stops: the client's close, or a slow consumer's
// when a write timed out. A write that times out drops the connection, which ends the reader
// too, maybe before the writer has said why.
func (c *wsConn) readEnded() websocket.StatusCode {
	if w := c.writing.Load(); w != nil && errors.Is((*w).Err(), context.DeadlineExceeded) {
		return wsSlowConsumer
	}
	return websocket.StatusNormalClosure
}

// closeWS closes the connection with the code and reason close recorded.
func (c *wsConn) closeWS() {
	if c.code == websocket.StatusAbnormalClosure {
		c.ws.CloseNow()
		return
	}
	_ = c.ws.Close(c.code, c.reason)
}

// wsSendBuffer bounds the kernel's send buffer of a feed connection (Linux allows twice it): what a
// client does not read backs up into the connection's queue, which is bounded and watched, rather
// than into kernel memory that grows to megabytes by default.
const wsSendBuffer = 64 << 10

// sizedHijacker gives the connection a WebSocket takes over its bounded send buffer.
type sizedHijacker struct{ gin.ResponseWriter }

func (w sizedHijacker) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	conn, rw, err := w.ResponseWriter.Hijack()
	if tc, ok := conn.(*net.TCPConn); ok {
		_ = tc.SetWriteBuffer(wsSendBuffer)
	}
	return conn, rw, err
}

// read handles the client's messages until the connection closes. A client silent for
// ClientTimeout is closed with wsHeartbeatTimeout by the writer (a timer, not the read's context,
// whose end would drop the connection without a close frame).
func (c *wsConn) read(ctx context.Context) {
	timeout := c.s.cfg.Feed.ClientTimeout
	idle := time.AfterFunc(timeout, func() {
		c.close(wsHeartbeatTimeout, fmt.Sprintf("no message from the client in %s: send a ping more often", timeout))
	})
	defer idle.Stop()
	for {
		typ, raw, err := c.ws.Read(ctx)
		if err != nil {
			if websocket.CloseStatus(err) == websocket.StatusMessageTooBig {
				c.close(websocket.StatusMessageTooBig, "")
			}
			return
		}
		idle.Stop() // a subscription's replay may take a while: the client's silence counts from its end
		if req, refused := parseRequest(typ == websocket.MessageText, raw, c.public); refused != nil {
			c.reply(*refused)
		} else {
			c.handle(ctx, req)
		}
		idle.Reset(timeout)
	}
}

func (c *wsConn) reply(r wsReply) { c.Send(encodeJSON(r)) }

func (c *wsConn) fail(req wsRequest, code, message string) {
	c.reply(wsReply{Type: "error", ID: req.ID, Channel: req.Channel, MarketID: req.MarketID, Code: code, Message: message})
}

// handle runs one client message, which parseRequest has read and checked.
func (c *wsConn) handle(ctx context.Context, req wsRequest) {
	// A closing connection takes nothing more: one whose key was just revoked, say, must not start
	// a subscription (a fills resume from 0 replays the account's history) while its close goes
	// out. An expired key is caught here at once, not only by checkFeeds' next tick.
	if c.key != nil && auth.Expired(c.key.ExpiresAt, c.s.now()) {
		c.close(wsKeyEnded, wsKeyExpired(*c.key.ExpiresAt))
	}
	select {
	case <-c.closing:
		return
	default:
	}
	if req.Op == "ping" {
		c.reply(wsReply{Type: "pong", ID: req.ID})
		return
	}
	key := subKey{channel: req.Channel, market: req.Market}
	ack := wsReply{ID: req.ID, Channel: req.Channel, MarketID: req.MarketID}
	if req.Op == "unsubscribe" {
		sub, ok := c.subs[key]
		if !ok {
			c.fail(req, "not_subscribed", "this connection is not subscribed to that channel (of that market)")
			return
		}
		c.s.hub.Unsubscribe(sub)
		delete(c.subs, key)
		ack.Type = "unsubscribed"
		c.reply(ack)
		return
	}
	if _, ok := c.subs[key]; ok {
		c.fail(req, "already_subscribed", "this connection is already subscribed to that channel (of that market)")
		return
	}
	if c.public && len(c.subs) >= wsMaxPublicSubscriptions {
		c.fail(req, "too_many_subscriptions", fmt.Sprintf("a connection without a key may hold %d subscriptions: unsubscribe from one first, or connect to /api/v1/ws with an API key", wsMaxPublicSubscriptions))
		return
	}
	if !c.public && len(c.subs) >= wsMaxSubscriptions {
		c.fail(req, "too_many_subscriptions", fmt.Sprintf("a connection may hold %d subscriptions: open another connection", wsMaxSubscriptions))
		return
	}
	if err := c.allowSubscribe(ctx); err != nil {
		c.refuse(req, err)
		return
	}
	ack.Type = "subscribed"
	// Account is used by the account's channels only (which a public connection may not take).
	sub := &feed.Subscription{Channel: req.Channel, Market: key.market, Account: c.account, Out: c, ReadPage: c.readPage}
	var err error
	if req.Channel == feed.ChannelOrders || req.Channel == feed.ChannelFills {
		err = c.s.hub.SubscribeAccount(ctx, sub, req.Cursor, func(cursor feed.Cursor) []byte {
			ack.Cursor = cursor.String()
			if cursor.Only("") {
				seq := cursor.Seq("")
				ack.Seq = &seq
			}
			return encodeJSON(ack)
		})
	} else {
		err = c.s.hub.Subscribe(ctx, sub, req.ResumeFrom, func(*int64) []byte { return encodeJSON(ack) })
	}
	var limited *wsLimited
	switch {
	case err == nil:
		c.subs[key] = sub
	case errors.As(err, &limited):
		c.refuse(req, err)
	case errors.Is(err, domain.ErrUnknownMarket), errors.Is(err, store.ErrNotFound):
		c.fail(req, "unknown_market", "no market has this id")
	case errors.Is(err, feed.ErrResyncRequired):
		c.fail(req, "resync_required", err.Error())
	case errors.Is(err, feed.ErrAhead):
		c.fail(req, "invalid_resume_from", err.Error())
	case ctx.Err() != nil, errors.Is(err, errWSClosing):
	default:
		c.s.log.Warn("could not start a feed subscription", "channel", req.Channel, "market", req.MarketID, "err", err)
		c.fail(req, "unavailable", "the subscription could not start; try again")
	}
}

// wsLimited is a subscription refused by a rate limit, and how long until the limit allows it.
type wsLimited struct {
	limit   string // the metrics' name of the limit
	message string
	wait    time.Duration
}

func (e *wsLimited) Error() string { return e.message }

// refuse answers a subscription a limit refused (or the error of charging it).
func (c *wsConn) refuse(req wsRequest, err error) {
	var limited *wsLimited
	if !errors.As(err, &limited) {
		c.s.log.Warn("could not charge a feed subscription", "channel", req.Channel, "err", err)
		c.fail(req, "unavailable", "the subscription could not start; try again")
		return
	}
	c.s.feedMetrics.limited.WithLabelValues(limited.limit).Inc()
	// To the millisecond, at least one: a client that waits as long will be let in.
	wait := max(0.001, math.Ceil(limited.wait.Seconds()*1000)/1000)
	c.reply(wsReply{Type: "error", ID: req.ID, Channel: req.Channel, MarketID: req.MarketID, Code: "rate_limited",
		Message: fmt.Sprintf("%s: wait %g s and subscribe again", limited.message, wait), RetryAfterSeconds: wait})
}

// allowSubscribe charges a subscription to the connection's limits: the account's read bucket,
// or the client address's allowance of public subscribes. A *wsLimited says it may not start.
func (c *wsConn) allowSubscribe(ctx context.Context) error {
	if c.public {
		if ok, wait := c.s.wsLimits.subscribes.Allow(c.addr, 1, time.Now()); !ok {
			return &wsLimited{limit: "public_subscribes", wait: wait, message: fmt.Sprintf(
				"subscriptions without a key are limited to %d a second from one address, after a first %d (across its connections)",
				wsPublicSubscribeRate, wsMaxPublicSubscriptions)}
		}
		return nil
	}
	return c.takeRead(ctx)
}

// takeRead spends a token of the account's read bucket.
func (c *wsConn) takeRead(ctx context.Context) error {
	d, err := c.s.limiter.Take(ctx, c.account, ratelimit.Read, 1)
	if err != nil {
		return err
	}
	if !d.Allowed {
		return &wsLimited{limit: "account_reads", wait: d.RetryAfter, message: fmt.Sprintf(
			"the account's read rate limit is spent (%g a second, bursts of %g; each subscription and each page of a resume read from the database counts, as GET requests do): see GET /api/v1/account/limits",
			d.Limit.Rate, d.Limit.Burst)}
	}
	return nil
}

// readPage charges a page of a resume read from Postgres (feed.Subscription.ReadPage). The first
// page of a keyed connection's resume is the subscription's own token; a public connection's
// address spends one of its replays for each. The first page is refused when the limit is spent;
// a later one, the subscription being under way, waits for its token.
func (c *wsConn) readPage(ctx context.Context, page int) error {
	if !c.public && page == 0 {
		return nil
	}
	for {
		var err error
		if c.public {
			if ok, wait := c.s.wsLimits.replays.Allow(c.addr, 1, time.Now()); !ok {
				err = &wsLimited{limit: "public_replays", wait: wait, message: fmt.Sprintf(
					"resumes without a key from further back than the server keeps in memory are limited to %d pages a second from one address, in bursts of %d: resume more often, or subscribe without resumeFrom for a snapshot",
					wsPublicReplayRate, wsPublicReplayBurst)}
			}
		} else {
			err = c.takeRead(ctx)
		}
		var limited *wsLimited
		if !errors.As(err, &limited) || page == 0 {
			return err
		}
		select {
		case <-time.After(limited.wait):
		case <-c.closing:
			return errWSClosing
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

func encodeJSON(v any) []byte {
	raw, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("apiserver: encoding %T: %v", v, err))
	}
	return raw
}
