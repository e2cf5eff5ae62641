package feed

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/google/uuid"
)

// The hub is the front's side of the live feed. It follows the batches the shards commit (Ingest:
// from the shard in the same process, or streamed from each shard of a distributed exchange) and
// fans them out to the subscriptions of WebSocket connections.
//
// For each market someone subscribes to, a topic holds the book as of its last seq (rebuilt from
// the events), the last events (a ring) and the subscriptions. A topic's sequence is gapless: a
// batch that does not follow on from the topic's last seq (the front joined late, a stream
// reconnected, a market moved to another shard) first brings the topic up to date from Postgres,
// and a batch already seen is skipped, so a front needs Postgres only for such gaps, never per
// event. A sweep once a second compares every topic with its market's last seq in Postgres, so a
// change that reached no stream (a lost connection, a change committed by the operator) is
// delivered within about a second.
//
// A subscription that resumes from a seq is replayed from the ring, or from Postgres when the ring
// no longer holds it, then joins the live fan-out under the topic's lock: no gap, no duplicate.
//
// A topic outlives its last subscription by keepFor (at most keepIdle such topics, the longest
// idle dropped first): a client that unsubscribes and subscribes again, or a page that reloads,
// finds the book already loaded instead of costing a Log.Book (in a distributed exchange, a call
// to the owning shard) each time. A kept topic goes on following its market as a held one does
// (Ingest, the sweep's fills), so it is as gapless when it is taken up again; one that fails is
// dropped like any other.

// Levels is a book's resting quantity at each YES price: bids [0], asks [1].
type Levels [2][100]int64

// Book is a market's whole book as of a seq.
type Book struct {
	Seq       int64
	Status    string
	Levels    Levels
	LastPrice int // the last trade's YES price, 0 if none
}

// MarketState is a market's status and last seq as Postgres has them.
type MarketState struct {
	Market    uuid.UUID
	Status    string
	Seq       int64
	UpdatedAt time.Time
	Event     *uuid.UUID // the event whose outcome the market answers; nil for a market of its own
	// Paused is what pauses the market apart from the exchange's halt: "market" (its own
	// pause), "event" (its event's) or "" (docs/architecture.md §4, "Halts").
	Paused string
}

// Log is where the hub reads what it did not see live.
type Log interface {
	// Book returns a market's whole committed book and the seq it reflects.
	Book(ctx context.Context, market uuid.UUID) (Book, error)
	// EventsAfter returns the batches holding a market's events after seq, oldest first, with at
	// least limit events unless fewer are kept.
	EventsAfter(ctx context.Context, market uuid.UUID, after int64, limit int) ([]Batch, error)
	// FirstEvent returns the first seq of a market still kept (0: none).
	FirstEvent(ctx context.Context, market uuid.UUID) (int64, error)
	// MarketsChanged returns the markets updated since (all of them for the zero time).
	MarketsChanged(ctx context.Context, since time.Time) ([]MarketState, error)
	// ExchangeHalted says whether trading on the whole exchange is halted.
	ExchangeHalted(ctx context.Context) (bool, error)
	AccountLog
}

// Outbox is a connection's queue of messages to send.
type Outbox interface {
	// Send queues a message without waiting. When the queue is full it returns false, and the
	// connection is closed: its client is too slow to follow.
	Send(msg []byte) bool
	// SendWait queues a message, waiting for room, for replays.
	SendWait(ctx context.Context, msg []byte) error
	// Drop closes the connection because the feed could not be followed; the client resumes.
	Drop(reason string)
}

// Subscription is one channel of one market, of the connection's account, or the lifecycle
// channel, that a connection follows.
type Subscription struct {
	Channel string
	Market  uuid.UUID // the market of a market channel
	Account int64     // the account of an account channel (orders, fills)
	Out     Outbox
	// ReadPage, when set, is called before each page a resume reads from Postgres (page 0 the
	// first, before anything of the subscription is queued); an error ends the subscription
	// with it. The front charges a client's limits with it: what a replay costs Postgres grows
	// with its pages, not with the subscribe message.
	ReadPage func(ctx context.Context, page int) error
}

// ErrResyncRequired says a subscription asked to resume from events no longer kept.
var ErrResyncRequired = errors.New("the events after this seq are no longer kept: subscribe without resumeFrom for a snapshot")

// ErrAhead says a subscription asked to resume from a seq the market (or a cursor the account's
// feed) has not reached.
var ErrAhead = errors.New("resumeFrom is beyond the feed's last event: give a seq or cursor the feed gave you")

// Hub defaults.
const (
	DefaultRing  = 4096 // events a topic keeps for resumes
	pageEvents   = 1000 // events per message of a replay, and per read of Postgres
	sweepEvery   = time.Second
	changedSlack = 5 * time.Second // how far back each sweep looks again, for clocks and late commits
	// A topic without subscriptions is kept keepFor (give or take a sweep), at most keepIdle of
	// them: enough for the markets a page lists and a client's reconnects, a bounded cost (a
	// book and a ring each) whatever a client churns through.
	keepFor  = 10 * time.Second
	keepIdle = 256
)

// Hub fans committed batches out to subscriptions. Create one with NewHub and run its sweep with
// Run.
type Hub struct {
	log      Log
	logger   *slog.Logger
	markets  *topics[uuid.UUID, Event]
	accounts *accountTopics

	mu        sync.Mutex
	lifecycle map[*Subscription]struct{}
	statuses  map[uuid.UUID]string // each market's status as the lifecycle channel last told it
	swept     bool                 // statuses holds every market
	// eventOf is the event of each market of one that a sweep has seen, for the lifecycle's
	// messages: a market's event is fixed when it is made, so an event's close, reopen,
	// resolution or void reaches the channel as its markets' changes, each naming the event.
	// (A batch does not carry the event: a market moved before any sweep saw it is told once
	// without.)
	eventOf map[uuid.UUID]uuid.UUID
	// The halts the lifecycle channel follows: each market's own or event's pause as a sweep last
	// read it, the exchange's halt, and what halts each market as the channel last told it.
	paused   map[uuid.UUID]string
	exchange bool
	told     map[uuid.UUID]string
	seqOf    map[uuid.UUID]int64 // each market's last seq the lifecycle channel saw
}

// NewHub returns a hub reading what it misses from log, keeping the last ring events of each
// market followed (DefaultRing when 0 or less).
func NewHub(log Log, logger *slog.Logger, ring int) *Hub {
	if logger == nil {
		logger = slog.Default()
	}
	if ring <= 0 {
		ring = DefaultRing
	}
	logger = logger.With("component", "feed")
	return &Hub{log: log, logger: logger,
		// An account's events are few beside a market's: no ring, and no topic kept.
		markets:   newTopics(kind[uuid.UUID, Event](markets{log}), "market", logger, ring, keepIdle),
		accounts:  &accountTopics{log: log, logger: logger, page: pageEvents, m: map[int64]*accountTopic{}},
		lifecycle: map[*Subscription]struct{}{}, statuses: map[uuid.UUID]string{}, eventOf: map[uuid.UUID]uuid.UUID{},
		paused: map[uuid.UUID]string{}, told: map[uuid.UUID]string{}, seqOf: map[uuid.UUID]int64{}}
}

// BookLoads is how many times the hub has read a market's whole book (Log.Book): once for each
// topic it starts following.
func (h *Hub) BookLoads() int64 { return h.markets.loads.Load() }

// Topics is how many markets the hub follows, those kept without subscriptions included.
func (h *Hub) Topics() int { return h.markets.len() }

// Ingest takes a committed batch, from whichever shard committed it: a market's or an account's.
func (h *Hub) Ingest(ctx context.Context, b Batch) {
	if b.Account != 0 {
		h.accounts.ingest(ctx, b)
		return
	}
	if b.Status != "" {
		h.statusChanged(b.Market, b.Status, b.Last)
	}
	h.markets.ingest(ctx, b.Market, b)
}

// Subscribe starts a subscription of a market's channel (book, trades, ticker: of s.Market) or
// the lifecycle; the account's channels take SubscribeAccount. Without resume, a book
// subscription begins with a snapshot and a ticker one with the ticker; with resume, the book and
// trades channels replay the events after *resume first. Either way the live events follow with
// no gap and no duplicate. ack(nil) is the confirmation, queued before anything else of the
// subscription.
func (h *Hub) Subscribe(ctx context.Context, s *Subscription, resume *int64, ack func(seq *int64) []byte) error {
	switch s.Channel {
	case ChannelLifecycle:
		h.subscribeLifecycle(s, ack(nil))
		return nil
	case ChannelOrders, ChannelFills:
		return fmt.Errorf("channel %s is an account's: SubscribeAccount", s.Channel)
	default:
		return h.markets.subscribe(ctx, s.Market, s, resume, ack)
	}
}

// SubscribeAccount starts a subscription of one of the account's channels (orders, fills: of
// s.Account). With resume, the events after that cursor are replayed first; without, the
// subscription follows on from where the feed stands. Either way the live events follow, each
// once, each stream's in seq order, and a market's in commit order across the streams it moved
// between (accounttopic.go). ack(cursor) is the confirmation, queued before anything else of the
// subscription: cursor is where the events that follow come after.
func (h *Hub) SubscribeAccount(ctx context.Context, s *Subscription, resume Cursor, ack func(cursor Cursor) []byte) error {
	return h.accounts.subscribe(ctx, s, resume, ack)
}

// Unsubscribe ends a subscription.
func (h *Hub) Unsubscribe(s *Subscription) {
	switch s.Channel {
	case ChannelLifecycle:
		h.mu.Lock()
		defer h.mu.Unlock()
		delete(h.lifecycle, s)
	case ChannelOrders, ChannelFills:
		h.accounts.unsubscribe(s.Account, s)
	default:
		h.markets.unsubscribe(s.Market, s)
	}
}

// subscribeLifecycle follows every market's status changes and new markets, live.
func (h *Hub) subscribeLifecycle(s *Subscription, ack []byte) {
	h.mu.Lock()
	defer h.mu.Unlock()
	s.Out.Send(ack)
	h.lifecycle[s] = struct{}{}
}

// statusChanged tells the lifecycle subscribers of a market's status, once per change.
func (h *Hub) statusChanged(id uuid.UUID, status string, seq int64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.tellLifecycle(id, status, seq, false)
}

// tellLifecycle tells the lifecycle subscribers of a new market (swept: one the hub has not seen
// before, found OPEN by a sweep) or a change of status. Under h.mu.
func (h *Hub) tellLifecycle(id uuid.UUID, status string, seq int64, swept bool) {
	h.seqOf[id] = max(h.seqOf[id], seq)
	was, known := h.statuses[id]
	if known && was == status {
		return
	}
	h.statuses[id] = status
	if !h.swept || len(h.lifecycle) == 0 {
		return // the first sweep learns what there is; nothing is new yet
	}
	change := ChangeStatus
	if !known && swept && status == "OPEN" {
		change = ChangeListed
	}
	m := MarketMessage{Type: "market", Channel: ChannelLifecycle, MarketID: id, Change: change,
		Status: status, Seq: seq, At: time.Now().UTC()}
	if status == "OPEN" || status == "CLOSED" {
		m.Halted = h.told[id]
	}
	h.tell(m)
}

// tell sends a lifecycle message to every subscriber, naming the market's event. Under h.mu.
func (h *Hub) tell(m MarketMessage) {
	if ev, ok := h.eventOf[m.MarketID]; ok {
		m.EventID = &ev
	}
	msg := encode(m)
	for s := range h.lifecycle {
		s.Out.Send(msg)
	}
}

// tellHalt tells the lifecycle subscribers that trading in a market was halted or resumed, once
// per change of what halts it (a market not OPEN or CLOSED is never told). Under h.mu.
func (h *Hub) tellHalt(id uuid.UUID) {
	status := h.statuses[id]
	if status != "OPEN" && status != "CLOSED" {
		delete(h.told, id) // settled: never halted again, and nothing to tell
		return
	}
	halted := h.paused[id]
	if h.exchange {
		halted = "exchange"
	}
	if was := h.told[id]; was == halted {
		return
	}
	h.told[id] = halted
	if !h.swept || len(h.lifecycle) == 0 {
		return
	}
	change := ChangeHalted
	if halted == "" {
		change = ChangeResumed
	}
	h.tell(MarketMessage{Type: "market", Channel: ChannelLifecycle, MarketID: id, Change: change,
		Status: status, Seq: h.seqOf[id], At: time.Now().UTC(), Halted: halted})
}

// Run sweeps once a second until ctx ends: the lifecycle channel learns of new markets and of
// status changes no stream carried, and every topic catches up with its market's or account's
// last seq.
func (h *Hub) Run(ctx context.Context) {
	tick := time.NewTicker(sweepEvery)
	defer tick.Stop()
	var since time.Time
	for {
		next, err := h.sweep(ctx, since)
		if err == nil {
			since = next
		} else if ctx.Err() == nil {
			h.logger.Warn("could not compare the feed with the database; trying again", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// sweep looks at the markets updated since and returns where the next sweep begins.
func (h *Hub) sweep(ctx context.Context, since time.Time) (time.Time, error) {
	exchange, err := h.log.ExchangeHalted(ctx)
	if err != nil {
		return since, err
	}
	changed, err := h.log.MarketsChanged(ctx, since)
	if err != nil {
		return since, err
	}
	next := since
	seqs := make(map[uuid.UUID]int64, len(changed))
	h.mu.Lock()
	flipped := exchange != h.exchange
	h.exchange = exchange
	for _, m := range changed {
		if m.Event != nil {
			h.eventOf[m.Market] = *m.Event
		}
		h.tellLifecycle(m.Market, m.Status, m.Seq, true)
		h.paused[m.Market] = m.Paused
		h.tellHalt(m.Market)
		seqs[m.Market] = m.Seq
		if m.UpdatedAt.Add(-changedSlack).After(next) {
			next = m.UpdatedAt.Add(-changedSlack)
		}
	}
	if flipped {
		for id := range h.statuses {
			h.tellHalt(id)
		}
	}
	h.swept = true
	h.mu.Unlock()
	h.markets.dropIdle(time.Now())
	_ = h.markets.catchUp(ctx, func([]uuid.UUID) (map[uuid.UUID]int64, error) { return seqs, nil })
	if err := h.accounts.catchUpAll(ctx); err != nil {
		return next, err
	}
	return next, nil
}
