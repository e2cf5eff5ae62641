package apiserver

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync"
	"time"

	// coder/websocket (formerly nhooyr.io/websocket): a maintained, small WebSocket library whose
	// every call takes a context, with close codes and read limits built in; it needs no
	// goroutine of its own per connection beyond the reader and writer we run.
	"github.com/coder/websocket"
	"github.com/gin-gonic/gin"
	json "github.com/goccy/go-json"
	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/pmx-dev/pmx/domain"
	"github.com/pmx-dev/pmx/feed"
	"github.com/pmx-dev/pmx/httpkit"
	"github.com/pmx-dev/pmx/store"
)

// The live feed over WebSocket, GET /api/v1/ws: documented message by message in asyncapi.yaml.
// GET /api/v1/ws/public is the same feed without a key, for the market pages (package
// marketpages) and anyone who only watches: the same connections, protocol and hub, less the
// account's channels (orders, fills) and cancelOnDisconnect, with fewer subscriptions a
// connection and a bound on how often it may subscribe. A connection's reader takes the client's
// messages (subscribe, unsubscribe, ping) and its writer sends from one bounded queue, which the hub's fan-out fills without waiting; a client
// that lets the queue fill is disconnected with close code wsSlowConsumer and resumes.

// Close codes of the feed, beside the standard ones (1001 when the server stops).
const (
	wsSlowConsumer     websocket.StatusCode = 4001 // the client did not read fast enough
	wsHeartbeatTimeout websocket.StatusCode = 4002 // the client sent nothing for too long
	wsFeedInterrupted  websocket.StatusCode = 4003 // the front lost the thread of a market's feed
)

// Feed defaults (Config.Feed).
const (
	defaultWSQueue         = 1024 // messages a connection may have waiting
	defaultWSHeartbeat     = 10 * time.Second
	defaultWSClientTimeout = 60 * time.Second
	wsWriteTimeout         = 10 * time.Second
	wsMaxSubscriptions     = 1000
	wsMaxClientMessage     = 4096
	// A public connection (no key) may hold wsMaxPublicSubscriptions subscriptions and subscribe
	// at most wsPublicSubscribeRate times a second beyond a first burst of as many as it may
	// hold: the market pages subscribe to a few channels of one market, or to the lifecycle and
	// the trades of a list's newest markets, once; what a subscription may cost Postgres (a
	// market's book, a replay) is bounded without an account to count it against.
	wsMaxPublicSubscriptions = 100
	wsPublicSubscribeRate    = 10
)

// FeedConfig configures the WebSocket feed.
type FeedConfig struct {
	// Queue bounds the messages waiting to be sent on one connection (default 1024).
	Queue int
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
	if c.Heartbeat <= 0 {
		c.Heartbeat = defaultWSHeartbeat
	}
	if c.ClientTimeout <= 0 {
		c.ClientTimeout = defaultWSClientTimeout
	}
}

// feedMetrics counts the feed's connections and what became of them.
type feedMetrics struct {
	conns  prometheus.Gauge
	sent   prometheus.Counter
	closed *prometheus.CounterVec
}

func newFeedMetrics(reg prometheus.Registerer) *feedMetrics {
	m := &feedMetrics{
		conns: prometheus.NewGauge(prometheus.GaugeOpts{Name: "pmx_feed_connections",
			Help: "WebSocket feed connections open."}),
		sent: prometheus.NewCounter(prometheus.CounterOpts{Name: "pmx_feed_messages_sent_total",
			Help: "Messages written to WebSocket feed connections."}),
		closed: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "pmx_feed_closed_total",
			Help: "WebSocket feed connections closed by the server, by reason (slow_consumer, heartbeat_timeout, feed_interrupted, going_away) or by the client (client)."},
			[]string{"reason"}),
	}
	reg.MustRegister(m.conns, m.sent, m.closed)
	return m
}

// closeReasons names the close codes in the metrics.
var closeReasons = map[websocket.StatusCode]string{
	wsSlowConsumer: "slow_consumer", wsHeartbeatTimeout: "heartbeat_timeout", wsFeedInterrupted: "feed_interrupted",
	websocket.StatusGoingAway: "going_away", websocket.StatusMessageTooBig: "message_too_big",
}

// wsReply answers a client's message.
type wsReply struct {
	Type     string `json:"type"` // subscribed, unsubscribed, pong, error
	ID       int64  `json:"id"`
	Channel  string `json:"channel,omitempty"`
	MarketID string `json:"marketId,omitempty"`
	Code     string `json:"code,omitempty"`
	Message  string `json:"message,omitempty"`
	// Seq, on subscribing to an account channel: the account's seq the events that follow come after.
	Seq *int64 `json:"seq,omitempty"`
}

type wsHeartbeat struct {
	Type string    `json:"type"` // heartbeat
	At   time.Time `json:"at"`
}

// wsConn is one client connection.
type wsConn struct {
	s       *Server
	ws      *websocket.Conn
	account int64 // 0 on a public connection
	public  bool  // a connection without a key (GET /api/v1/ws/public): market channels only
	q       chan []byte

	// A public connection's subscribe allowance: tokens, refilled at wsPublicSubscribeRate a
	// second up to wsMaxPublicSubscriptions, as of when.
	tokens float64
	when   time.Time

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

// Send queues a message without waiting; a full queue closes the connection.
func (c *wsConn) Send(msg []byte) bool {
	select {
	case c.q <- msg:
		return true
	default:
		c.close(wsSlowConsumer, fmt.Sprintf("slow consumer: more than %d messages waited to be sent; reconnect and resume from your last seq", cap(c.q)))
		return false
	}
}

// SendWait queues a message, waiting for room.
func (c *wsConn) SendWait(ctx context.Context, msg []byte) error {
	select {
	case c.q <- msg:
		return nil
	case <-c.closing:
		return errors.New("connection closing")
	case <-ctx.Done():
		return ctx.Err()
	}
}

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
	s.serveFeed(c, accountOf(c), cancelOnDisconnect)
}

// servePublicWS upgrades a request without a key to the public feed: the market channels only.
func (s *Server) servePublicWS(c *gin.Context) {
	if _, ok := c.GetQuery("cancelOnDisconnect"); ok {
		httpkit.AbortUnread(c, httpkit.FieldError("cancelOnDisconnect", "invalid_value",
			"cancelOnDisconnect cancels an account's orders: connect to /api/v1/ws with an API key for it"))
		return
	}
	s.serveFeed(c, 0, false)
}

// serveFeed runs a feed connection: an account's (account > 0), or a public one (account 0).
func (s *Server) serveFeed(c *gin.Context, account int64, cancelOnDisconnect bool) {
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
	conn := &wsConn{s: s, ws: ws, account: account, public: account == 0, q: make(chan []byte, s.cfg.Feed.Queue),
		closing: make(chan struct{}), subs: map[subKey]*feed.Subscription{},
		tokens: wsMaxPublicSubscriptions, when: time.Now()}
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
	// Counted out before the gauge drops, for the orders to be cancelled by the time it has.
	if cancelOnDisconnect {
		if err := s.presence.join(s.feedCtx, account); err != nil {
			_ = ws.Close(websocket.StatusTryAgainLater, "could not record the connection for cancelOnDisconnect: try again")
			return
		}
		defer s.presence.leave(account)
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
	conn.close(websocket.StatusNormalClosure, "")
	<-writerDone
	for _, sub := range conn.subs {
		conn.unsubscribe(sub)
	}
}

// write sends the queue and the heartbeats until the connection closes.
func (c *wsConn) write(ctx context.Context) {
	beat := time.NewTicker(c.s.cfg.Feed.Heartbeat)
	defer beat.Stop()
	send := func(msg []byte) bool {
		wctx, cancel := context.WithTimeout(ctx, wsWriteTimeout)
		defer cancel()
		if err := c.ws.Write(wctx, websocket.MessageText, msg); err != nil {
			c.close(websocket.StatusAbnormalClosure, "")
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
		c.unsubscribe(sub)
		delete(c.subs, key)
		ack.Type = "unsubscribed"
		c.reply(ack)
		return
	}
	if _, ok := c.subs[key]; ok {
		c.fail(req, "already_subscribed", "this connection is already subscribed to that channel (of that market)")
		return
	}
	if c.public {
		if len(c.subs) >= wsMaxPublicSubscriptions {
			c.fail(req, "too_many_subscriptions", fmt.Sprintf("a connection without a key may hold %d subscriptions: unsubscribe from one first, or connect to /api/v1/ws with an API key", wsMaxPublicSubscriptions))
			return
		}
		if !c.allowSubscribe(time.Now()) {
			c.fail(req, "rate_limited", fmt.Sprintf("a connection without a key may subscribe %d times a second after its first %d: wait a moment and subscribe again", wsPublicSubscribeRate, wsMaxPublicSubscriptions))
			return
		}
	} else if len(c.subs) >= wsMaxSubscriptions {
		c.fail(req, "too_many_subscriptions", fmt.Sprintf("a connection may hold %d subscriptions: open another connection", wsMaxSubscriptions))
		return
	}
	ack.Type = "subscribed"
	sub := &feed.Subscription{Channel: req.Channel, Market: key.market, Out: c}
	var err error
	switch req.Channel {
	case feed.ChannelLifecycle:
		c.s.hub.SubscribeLifecycle(sub, encodeJSON(ack))
		c.subs[key] = sub
		return
	case feed.ChannelOrders, feed.ChannelFills:
		sub.Account = c.account
		err = c.s.hub.SubscribeAccount(ctx, sub, req.ResumeFrom, func(seq int64) []byte {
			ack.Seq = &seq
			return encodeJSON(ack)
		})
	default:
		err = c.s.hub.Subscribe(ctx, sub, req.ResumeFrom, encodeJSON(ack))
	}
	switch {
	case err == nil:
		c.subs[key] = sub
	case errors.Is(err, domain.ErrUnknownMarket), errors.Is(err, store.ErrNotFound):
		c.fail(req, "unknown_market", "no market has this id")
	case errors.Is(err, feed.ErrResyncRequired):
		c.fail(req, "resync_required", err.Error())
	case errors.Is(err, feed.ErrAhead):
		c.fail(req, "invalid_resume_from", err.Error())
	case ctx.Err() != nil:
	default:
		c.s.log.Warn("could not start a feed subscription", "channel", req.Channel, "market", req.MarketID, "err", err)
		c.fail(req, "unavailable", "the subscription could not start; try again")
	}
}

// allowSubscribe spends a public connection's token for a subscription, if it has one. The
// reader's own.
func (c *wsConn) allowSubscribe(now time.Time) bool {
	c.tokens = min(wsMaxPublicSubscriptions, c.tokens+now.Sub(c.when).Seconds()*wsPublicSubscribeRate)
	c.when = now
	if c.tokens < 1 {
		return false
	}
	c.tokens--
	return true
}

func (c *wsConn) unsubscribe(sub *feed.Subscription) {
	switch sub.Channel {
	case feed.ChannelLifecycle:
		c.s.hub.UnsubscribeLifecycle(sub)
	case feed.ChannelOrders, feed.ChannelFills:
		c.s.hub.UnsubscribeAccount(sub)
	default:
		c.s.hub.Unsubscribe(sub)
	}
}

func encodeJSON(v any) []byte {
	raw, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("apiserver: encoding %T: %v", v, err))
	}
	return raw
}
