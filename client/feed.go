package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	// coder/websocket: the maintained, small WebSocket library the server's feed uses too.
	"github.com/coder/websocket"
	"github.com/google/uuid"

	"github.com/pmx-dev/pmx/internal/kit/auth"
)

// Feed channels. book, trades and ticker are a market's; orders and fills the account's;
// lifecycle every market's status changes.
const (
	ChannelBook      = "book"
	ChannelTrades    = "trades"
	ChannelTicker    = "ticker"
	ChannelLifecycle = "lifecycle"
	ChannelOrders    = "orders"
	ChannelFills     = "fills"
)

// Subscription names what a Feed follows.
type Subscription struct {
	Channel  string
	MarketID uuid.UUID // book, trades and ticker only
	// ResumeFrom, when set, starts book or trades after this seq (the last the caller applied)
	// instead of at now; book then sends no snapshot.
	ResumeFrom *int
	// Cursor, when set, starts orders or fills after this cursor of the account's feed (the
	// Cursor of the last message the caller applied, or of a page of Client.AccountEvents)
	// instead of at now.
	Cursor string
}

// BookSnapshot is a market's whole book as of a seq: YES bids best first, YES asks best first.
type BookSnapshot struct {
	Status    MarketStatus
	Bids      []Level
	Asks      []Level
	LastPrice *int
}

// Ticker is a market's best prices as of a seq.
type Ticker struct {
	BestBid, BestAsk, LastPrice *int
}

// MarketChange is a new market ("listed") or a market's new status ("status").
type MarketChange struct {
	Change string
	Status MarketStatus
	At     time.Time
	// EventID is the event whose outcome the market answers (nil for a market of its own): an
	// event's status change arrives as one "status" change per market of the event, each naming it.
	EventID *uuid.UUID
}

// FeedMessage is what a Feed delivers: one message of one subscription, in order.
type FeedMessage struct {
	Type     string // "snapshot", "events", "ticker", "market" or "accountEvents"
	Channel  string
	MarketID uuid.UUID // zero on orders and fills
	// Seq is the seq the message brings its subscription to: a snapshot's, a ticker's, the last
	// event's (on orders and fills, in the last event's stream: keep Cursor).
	Seq int
	// Cursor, on orders and fills, is where the account's feed stands after the message: what to
	// resume from (Subscription.Cursor).
	Cursor        string
	Snapshot      *BookSnapshot  // snapshot
	Events        []MarketEvent  // events: book (every event, gapless) or trades
	AccountEvents []AccountEvent // accountEvents: orders (every event, gapless) or fills
	Ticker        *Ticker        // ticker
	Market        *MarketChange  // market
	// Resynced says the feed could not resume this subscription where it stopped (the events were
	// older than the server keeps): a book starts again from this snapshot; on orders and fills,
	// events were missed, so read the account's state again (GET /orders, /fills).
	Resynced bool
}

// Feed follows subscriptions of the live feed over one WebSocket connection. When the connection
// breaks, or a gapless channel skips a seq, it connects again and resumes every subscription
// after the last seq it delivered, so that its handler sees each event once, in order. Make one
// with Client.Feed; Run it once.
type Feed struct {
	c    *Client
	subs []Subscription

	// OnReconnect, when set, is told why the feed connects again, before it does.
	OnReconnect func(err error)
	// Heartbeat is how long the feed waits for any message before it takes the connection for
	// broken (the server sends one every 10 s); default 30 s.
	Heartbeat time.Duration

	mu   sync.Mutex
	last map[subKey]int // the last seq delivered per subscription, for resuming
	// The account's channels: the cursor to resume from, and the last seq delivered of each
	// stream since (the server sends each event once; these catch a gap on orders).
	cursors map[subKey]string
	streams map[subKey]map[string]int

	ready     chan struct{} // closed when the server has first confirmed every subscription (Ready)
	readyOnce sync.Once
}

type subKey struct {
	channel string
	market  uuid.UUID
}

// Feed returns a Feed of subs.
func (c *Client) Feed(subs ...Subscription) *Feed {
	f := &Feed{c: c, subs: subs, last: make(map[subKey]int), cursors: make(map[subKey]string),
		streams: make(map[subKey]map[string]int), Heartbeat: 30 * time.Second, ready: make(chan struct{})}
	for _, s := range subs {
		if account(s.Channel) {
			if s.Cursor != "" {
				f.cursors[s.key()] = s.Cursor
			}
		} else if s.ResumeFrom != nil {
			f.last[s.key()] = *s.ResumeFrom
		}
	}
	return f
}

// account reports whether a channel is the account's (resumed from a cursor).
func account(channel string) bool { return channel == ChannelOrders || channel == ChannelFills }

func (s Subscription) key() subKey {
	if s.Channel == ChannelOrders || s.Channel == ChannelFills || s.Channel == ChannelLifecycle {
		return subKey{channel: s.Channel}
	}
	return subKey{channel: s.Channel, market: s.MarketID}
}

// Ready is closed once the server has confirmed every subscription, the first time the feed
// connects: from then on the handler is given every event of each. A bot that must hear of what
// its orders do (its own fills) waits for it before it places the first: an event before it is
// not delivered unless the subscription resumes from an earlier seq.
func (f *Feed) Ready() <-chan struct{} { return f.ready }

// Cursor is where the account's feed stands after what the feed delivered on an orders or fills
// subscription (or its confirmation), if anywhere: keep it to resume from (Subscription.Cursor).
func (f *Feed) Cursor(s Subscription) (string, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	c, ok := f.cursors[s.key()]
	return c, ok
}

// Seq is the last seq the feed delivered on a market's subscription, if any.
func (f *Feed) Seq(s Subscription) (int, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	seq, ok := f.last[s.key()]
	return seq, ok
}

// ErrGap is why a Feed reconnects when a gapless channel skipped a seq.
var ErrGap = errors.New("the feed skipped a seq")

// Run connects, subscribes, and calls handle with every message until ctx ends (it returns
// ctx's error), handle returns an error (it returns that), the server refuses the key or a
// subscription (a *FeedError, or the dial's error), or the key is revoked or expires while the
// feed runs (ErrKeyEnded). It reconnects after anything else, waiting
// 100 ms and then twice as long each time up to 5 s.
func (f *Feed) Run(ctx context.Context, handle func(FeedMessage) error) error {
	wait := 100 * time.Millisecond
	for {
		delivered, err := f.session(ctx, handle)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		var fatal fatalError
		if errors.As(err, &fatal) {
			return fatal.error
		}
		if delivered {
			wait = 100 * time.Millisecond
		}
		if f.OnReconnect != nil {
			f.OnReconnect(err)
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
		wait = min(2*wait, 5*time.Second)
	}
}

// ErrKeyEnded is why Run ends when the server closes the connection because its API key was
// revoked or expired (close code 4004): every connection with the key is refused from then on.
var ErrKeyEnded = errors.New("pmx feed: the API key was revoked or expired")

// closeKeyEnded is the close code of a connection whose API key ended.
const closeKeyEnded websocket.StatusCode = 4004

// fatalError ends Run: reconnecting would not help.
type fatalError struct{ error }

// FeedError is the server's refusal of a subscription.
type FeedError struct {
	Channel  string
	MarketID string
	Code     string
	Message  string
}

func (e *FeedError) Error() string {
	return fmt.Sprintf("pmx feed: %s %s refused: %s: %s", e.Channel, e.MarketID, e.Code, e.Message)
}

// wireMessage is any message the server sends, the fields of every kind together.
type wireMessage struct {
	Type      string          `json:"type"`
	ID        int             `json:"id"`
	Channel   string          `json:"channel"`
	MarketID  string          `json:"marketId"`
	Seq       *int            `json:"seq"`
	Code      string          `json:"code"`
	Message   string          `json:"message"`
	Status    MarketStatus    `json:"status"`
	Change    string          `json:"change"`
	At        time.Time       `json:"at"`
	Bids      []Level         `json:"bids"`
	Asks      []Level         `json:"asks"`
	LastPrice *int            `json:"lastPrice"`
	BestBid   *int            `json:"bestBid"`
	BestAsk   *int            `json:"bestAsk"`
	Events    json.RawMessage `json:"events"`
	EventID   *uuid.UUID      `json:"eventId"`
	Cursor    string          `json:"cursor"`
}

type subscribe struct {
	Op         string `json:"op"`
	ID         int    `json:"id"`
	Channel    string `json:"channel"`
	MarketID   string `json:"marketId,omitempty"`
	ResumeFrom any    `json:"resumeFrom,omitempty"` // a seq, or on orders and fills a cursor
}

// session is one connection: it subscribes (resuming where the last one stopped), then delivers
// until something breaks. delivered says whether any message reached handle.
func (f *Feed) session(ctx context.Context, handle func(FeedMessage) error) (delivered bool, err error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	url := "ws" + strings.TrimPrefix(f.c.server, "http") + "/ws"
	header := http.Header{"Authorization": {f.c.authorization()}}
	if f.c.signer != nil { // the upgrade is signed like any request
		req, err := http.NewRequest(http.MethodGet, f.c.server+"/ws", nil)
		if err != nil {
			return false, fatalError{err}
		}
		if err := f.c.signer.sign(req); err != nil {
			return false, err
		}
		header.Set(auth.TimestampHeader, req.Header.Get(auth.TimestampHeader))
		header.Set(auth.SignatureHeader, req.Header.Get(auth.SignatureHeader))
	}
	ws, resp, err := websocket.Dial(ctx, url, &websocket.DialOptions{HTTPClient: f.c.hc, HTTPHeader: header})
	if err != nil {
		if resp != nil && (resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden) {
			return false, fatalError{fmt.Errorf("the feed refused the API key (%s): check it", resp.Status)}
		}
		return false, fmt.Errorf("connecting to the feed: %w", err)
	}
	defer ws.CloseNow()
	ws.SetReadLimit(16 << 20)

	// The server closes a connection that says nothing for 60 s.
	go func() {
		t := time.NewTicker(20 * time.Second)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				if ws.Write(ctx, websocket.MessageText, []byte(`{"op":"ping"}`)) != nil {
					return
				}
			}
		}
	}()

	// resync marks the subscriptions whose resume was refused: their next message starts over.
	resync := make(map[subKey]bool)
	pending := make(map[int]Subscription)
	for i, s := range f.subs {
		msg := subscribe{Op: "subscribe", ID: i + 1, Channel: s.Channel}
		if s.key().market != (uuid.UUID{}) {
			msg.MarketID = s.MarketID.String()
		}
		if cursor, ok := f.Cursor(s); ok && account(s.Channel) {
			msg.ResumeFrom = cursor
		} else if seq, ok := f.Seq(s); ok && resumable(s.Channel) {
			msg.ResumeFrom = seq
		}
		if err := writeJSON(ctx, ws, msg); err != nil {
			return false, err
		}
		pending[msg.ID] = s
	}
	if len(pending) == 0 {
		f.readyOnce.Do(func() { close(f.ready) }) // nothing to confirm
	}

	for {
		readCtx, cancelRead := context.WithTimeout(ctx, f.Heartbeat)
		_, data, err := ws.Read(readCtx)
		cancelRead()
		if err != nil {
			if websocket.CloseStatus(err) == closeKeyEnded {
				var ce websocket.CloseError
				errors.As(err, &ce)
				return delivered, fatalError{fmt.Errorf("%w (%s): use another key", ErrKeyEnded, ce.Reason)}
			}
			return delivered, fmt.Errorf("reading the feed: %w", err)
		}
		var m wireMessage
		if err := json.Unmarshal(data, &m); err != nil {
			return delivered, fmt.Errorf("reading the feed's message %q: %w", truncate(data, 200), err)
		}
		switch m.Type {
		case "heartbeat", "pong", "unsubscribed":
			continue
		case "error":
			s, ok := pending[m.ID]
			if ok && m.Code == "resync_required" {
				// Too far behind to resume: subscribe again from now, and say so.
				f.forget(s)
				resync[s.key()] = true
				msg := subscribe{Op: "subscribe", ID: m.ID, Channel: s.Channel, MarketID: m.MarketID}
				if err := writeJSON(ctx, ws, msg); err != nil {
					return delivered, err
				}
				continue
			}
			if ok && m.Code == "unavailable" {
				return delivered, fmt.Errorf("the feed of %s %s is unavailable: %s", m.Channel, m.MarketID, m.Message)
			}
			return delivered, fatalError{&FeedError{Channel: m.Channel, MarketID: m.MarketID, Code: m.Code, Message: m.Message}}
		case "subscribed":
			s, ok := pending[m.ID]
			if !ok {
				continue
			}
			delete(pending, m.ID)
			if len(pending) == 0 {
				f.readyOnce.Do(func() { close(f.ready) })
			}
			// orders and fills say the cursor the live events follow; without a resume that is
			// where they start.
			if m.Cursor != "" && account(s.Channel) {
				if _, known := f.Cursor(s); !known {
					f.mu.Lock()
					f.cursors[s.key()] = m.Cursor
					f.mu.Unlock()
				}
			}
			continue
		}
		out, err := f.accept(m)
		if err != nil {
			return delivered, err
		}
		if (out.Type == "events" && len(out.Events) == 0) || (out.Type == "accountEvents" && len(out.AccountEvents) == 0) {
			continue // everything in it had been delivered before a resume
		}
		k := subKey{channel: out.Channel, market: out.MarketID}
		if resync[k] {
			out.Resynced = true
			delete(resync, k)
		}
		if err := handle(out); err != nil {
			return delivered, fatalError{err}
		}
		delivered = true
	}
}

// resumable reports whether a channel takes resumeFrom.
func resumable(channel string) bool {
	return channel == ChannelBook || channel == ChannelTrades || channel == ChannelOrders || channel == ChannelFills
}

// gapless reports whether every seq of a channel follows the one before (the others skip).
func gapless(channel string) bool { return channel == ChannelBook || channel == ChannelOrders }

// accept checks a message against the subscription's last seq and records its own: events must
// come after it and, on gapless channels, one after another; a book snapshot starts it over.
// What the server sent again (seq at or before the last) is dropped from the message.
func (f *Feed) accept(m wireMessage) (FeedMessage, error) {
	out := FeedMessage{Type: m.Type, Channel: m.Channel}
	if m.MarketID != "" {
		id, err := uuid.Parse(m.MarketID)
		if err != nil {
			return out, fmt.Errorf("the feed sent a bad marketId %q", m.MarketID)
		}
		out.MarketID = id
	}
	k := subKey{channel: m.Channel, market: out.MarketID}
	f.mu.Lock()
	defer f.mu.Unlock()
	last, known := f.last[k]
	switch m.Type {
	case "snapshot":
		out.Snapshot = &BookSnapshot{Status: m.Status, Bids: m.Bids, Asks: m.Asks, LastPrice: m.LastPrice}
		out.Seq = deref(m.Seq)
	case "ticker":
		out.Ticker = &Ticker{BestBid: m.BestBid, BestAsk: m.BestAsk, LastPrice: m.LastPrice}
		out.Seq = deref(m.Seq)
	case "market":
		out.Market = &MarketChange{Change: m.Change, Status: m.Status, At: m.At, EventID: m.EventID}
		out.Seq = deref(m.Seq)
		f.last[k] = out.Seq
		return out, nil
	case "events":
		if err := json.Unmarshal(m.Events, &out.Events); err != nil {
			return out, fmt.Errorf("reading the feed's events: %w", err)
		}
		var err error
		if out.Events, out.Seq, err = sequenced(out.Events, func(e MarketEvent) int { return e.Seq }, last, known, m.Channel); err != nil {
			return out, fmt.Errorf("%w (market %s)", err, out.MarketID)
		}
	case "accountEvents":
		if err := json.Unmarshal(m.Events, &out.AccountEvents); err != nil {
			return out, fmt.Errorf("reading the feed's account events: %w", err)
		}
		// Each stream's events follow on from the last the feed delivered of it (on orders,
		// gapless), the streams in the order the server sends them.
		streams := f.streams[k]
		if streams == nil {
			streams = map[string]int{}
			f.streams[k] = streams
		}
		for _, e := range out.AccountEvents {
			stream := deref(e.Stream)
			last, known := streams[stream]
			if known && (e.Seq <= last || m.Channel == ChannelOrders && e.Seq != last+1) {
				return out, fmt.Errorf("%w: %s stream %q went from %d to %d", ErrGap, m.Channel, stream, last, e.Seq)
			}
			streams[stream], out.Seq = e.Seq, e.Seq
		}
		out.Cursor = m.Cursor
		f.cursors[k] = m.Cursor
		return out, nil
	default:
		return out, fmt.Errorf("the feed sent a message of unknown type %q", m.Type)
	}
	f.last[k] = out.Seq
	return out, nil
}

// sequenced keeps the events after last (those at or before it were sent again across a resume)
// and, on a gapless channel, fails with ErrGap unless each is the one after the one before. It
// returns them and the seq they bring the subscription to.
func sequenced[E any](events []E, seqOf func(E) int, last int, known bool, channel string) ([]E, int, error) {
	kept := events[:0]
	for _, e := range events {
		seq := seqOf(e)
		if known && seq <= last {
			continue
		}
		if known && gapless(channel) && seq != last+1 {
			return nil, last, fmt.Errorf("%w: %s went from %d to %d", ErrGap, channel, last, seq)
		}
		last, known = seq, true
		kept = append(kept, e)
	}
	return kept, last, nil
}

func (f *Feed) forget(s Subscription) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.last, s.key())
	delete(f.cursors, s.key())
	delete(f.streams, s.key())
}

func deref[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}

func writeJSON(ctx context.Context, ws *websocket.Conn, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return ws.Write(ctx, websocket.MessageText, b)
}
