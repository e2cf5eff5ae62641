package feed

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	json "github.com/goccy/go-json"
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

// ErrAhead says a subscription asked to resume from a seq the market has not reached.
var ErrAhead = errors.New("resumeFrom is beyond the market's last seq")

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
	log    Log
	logger *slog.Logger
	ring   int

	bookLoads atomic.Int64 // Log.Book calls

	mu        sync.Mutex
	topics    map[uuid.UUID]*topic
	kept      map[*topic]struct{} // topics without subscriptions, kept for a while
	accounts  map[int64]*accountTopic
	lifecycle map[*Subscription]struct{}
	statuses  map[uuid.UUID]string // each market's status as the lifecycle channel last told it
	swept     bool                 // statuses holds every market
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
	return &Hub{log: log, logger: logger.With("component", "feed"), ring: ring,
		topics: map[uuid.UUID]*topic{}, kept: map[*topic]struct{}{}, accounts: map[int64]*accountTopic{}, lifecycle: map[*Subscription]struct{}{}, statuses: map[uuid.UUID]string{}}
}

// topic is one market someone follows.
type topic struct {
	hub  *Hub
	id   uuid.UUID
	refs int       // subscriptions and subscriptions being made; under hub.mu
	idle time.Time // when refs last fell to 0, while kept; under hub.mu

	mu     sync.Mutex
	err    error // set when loading failed
	book   Book
	ring   []Event // the last events, up to book.Seq, gapless
	subs   map[*Subscription]struct{}
	ticker TickerMessage
}

// acquire returns the market's topic, loading it on first use; release it when done.
func (h *Hub) acquire(ctx context.Context, id uuid.UUID) (*topic, error) {
	h.mu.Lock()
	t, ok := h.topics[id]
	if ok {
		t.refs++
		delete(h.kept, t)
		h.mu.Unlock()
		t.mu.Lock() // waits for the topic to load
		err := t.err
		t.mu.Unlock()
		if err != nil {
			h.release(t)
			return nil, err
		}
		return t, nil
	}
	t = &topic{hub: h, id: id, refs: 1, subs: map[*Subscription]struct{}{}}
	t.mu.Lock()
	h.topics[id] = t
	h.mu.Unlock()
	defer t.mu.Unlock()
	h.bookLoads.Add(1)
	t.book, t.err = h.log.Book(ctx, id)
	if t.err != nil {
		// Forgotten at once, not kept: the next subscription tries again.
		h.mu.Lock()
		t.refs--
		if h.topics[id] == t {
			delete(h.topics, id)
		}
		h.mu.Unlock()
		return nil, t.err
	}
	t.ticker = t.tick()
	return t, nil
}

// release gives a topic up; the last one out leaves it kept for keepFor.
func (h *Hub) release(t *topic) {
	h.mu.Lock()
	defer h.mu.Unlock()
	t.refs--
	if t.refs > 0 || h.topics[t.id] != t {
		return
	}
	if _, kept := h.kept[t]; kept {
		return // the sweep's own hold ended: still idle since it was
	}
	t.idle = time.Now()
	h.kept[t] = struct{}{}
	if len(h.kept) > keepIdle {
		var oldest *topic
		for k := range h.kept {
			if oldest == nil || k.idle.Before(oldest.idle) {
				oldest = k
			}
		}
		h.forget(oldest)
	}
}

// forget drops a kept topic. Under h.mu.
func (h *Hub) forget(t *topic) {
	delete(h.kept, t)
	if t.refs == 0 && h.topics[t.id] == t {
		delete(h.topics, t.id)
	}
}

// dropIdle forgets the topics kept longer than keepFor.
func (h *Hub) dropIdle(now time.Time) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for t := range h.kept {
		if t.refs == 0 && now.Sub(t.idle) >= keepFor {
			h.forget(t)
		}
	}
}

// BookLoads is how many times the hub has read a market's whole book (Log.Book): once for each
// topic it starts following.
func (h *Hub) BookLoads() int64 { return h.bookLoads.Load() }

// Topics is how many markets the hub follows, those kept without subscriptions included.
func (h *Hub) Topics() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.topics)
}

// Ingest takes a committed batch, from whichever shard committed it.
func (h *Hub) Ingest(ctx context.Context, b Batch) {
	if b.Account != 0 {
		h.ingestAccount(ctx, b)
		return
	}
	if b.Status != "" {
		h.statusChanged(b.Market, b.Status, b.Last)
	}
	h.mu.Lock()
	t := h.topics[b.Market]
	h.mu.Unlock()
	if t == nil {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.err != nil || b.Last <= t.book.Seq {
		return
	}
	if b.First > t.book.Seq+1 {
		if err := t.fill(ctx, b.First-1); err != nil {
			t.fail(err)
			return
		}
	}
	events, err := Decode(b.Events)
	if err != nil {
		t.fail(fmt.Errorf("while reading the events %d to %d: %w", b.First, b.Last, err))
		return
	}
	t.apply(events)
}

// fill brings the topic up to at least seq from Postgres. Under t.mu.
func (t *topic) fill(ctx context.Context, seq int64) error {
	for t.book.Seq < seq {
		batches, err := t.hub.log.EventsAfter(ctx, t.id, t.book.Seq, pageEvents)
		if err != nil {
			return fmt.Errorf("while reading the events after %d: %w", t.book.Seq, err)
		}
		before := t.book.Seq
		for _, b := range batches {
			events, err := Decode(b.Events)
			if err != nil {
				return err
			}
			t.apply(events)
		}
		if t.book.Seq == before {
			return fmt.Errorf("the events after %d up to %d are not kept", before, seq)
		}
	}
	return nil
}

// fail ends a topic that could not follow its market: its connections are closed, for their
// clients to resume. Under t.mu.
func (t *topic) fail(err error) {
	t.hub.logger.Warn("lost the thread of a market's feed; its subscribers are disconnected to resume",
		"market", t.id, "seq", t.book.Seq, "err", err)
	t.err = err
	for s := range t.subs {
		s.Out.Drop("the feed of market " + t.id.String() + " was interrupted: reconnect and resume from your last seq")
	}
	clear(t.subs)
	t.hub.mu.Lock()
	if t.hub.topics[t.id] == t {
		delete(t.hub.topics, t.id)
	}
	delete(t.hub.kept, t)
	t.hub.mu.Unlock()
}

// apply takes events in order (those already applied are skipped) and fans them out. Under t.mu.
func (t *topic) apply(events []Event) {
	i := 0
	for i < len(events) && events[i].Seq <= t.book.Seq {
		i++
	}
	events = events[i:]
	if len(events) == 0 {
		return
	}
	for _, e := range events {
		if e.Seq != t.book.Seq+1 {
			// Cannot happen with batches as the shards write them; a topic that skipped would
			// be wrong for good, so it ends.
			t.fail(fmt.Errorf("event %d follows %d", e.Seq, t.book.Seq))
			return
		}
		t.book.apply(e)
	}
	t.ring = append(t.ring, events...)
	if n := t.hub.ring; len(t.ring) > 2*n {
		t.ring = append(t.ring[:0], t.ring[len(t.ring)-n:]...)
	}
	var book, trades []byte
	var tradeEvents []Event
	ticker := t.tick()
	tickerChanged := ticker.BestBid != t.ticker.BestBid || ticker.BestAsk != t.ticker.BestAsk || ticker.LastPrice != t.ticker.LastPrice
	if tickerChanged {
		t.ticker = ticker
	} else {
		t.ticker.Seq = ticker.Seq
	}
	for s := range t.subs {
		var msg []byte
		switch s.Channel {
		case ChannelBook:
			if book == nil {
				book = encode(EventsMessage{Type: "events", Channel: ChannelBook, MarketID: t.id, Events: events})
			}
			msg = book
		case ChannelTrades:
			if trades == nil {
				tradeEvents = tradesOf(events)
				if len(tradeEvents) == 0 {
					trades = []byte{}
				} else {
					trades = encode(EventsMessage{Type: "events", Channel: ChannelTrades, MarketID: t.id, Events: tradeEvents})
				}
			}
			msg = trades
		case ChannelTicker:
			if tickerChanged {
				msg = encode(t.ticker)
			}
		}
		if len(msg) > 0 {
			s.Out.Send(msg)
		}
	}
}

// apply changes the book by one event.
func (b *Book) apply(e Event) {
	b.Seq = e.Seq
	switch e.Type {
	case TypeLevel:
		side := 0
		if e.Side == "ask" {
			side = 1
		}
		if e.Price > 0 && e.Price < len(b.Levels[side]) {
			b.Levels[side][e.Price] = e.Quantity
		}
	case TypeTrade:
		b.LastPrice = e.Price
	case TypeStatus:
		b.Status = e.Status
	}
}

// Best returns the best bid and ask (0: none).
func (b *Book) Best() (bid, ask int) {
	for p := len(b.Levels[0]) - 1; p > 0; p-- {
		if b.Levels[0][p] > 0 {
			bid = p
			break
		}
	}
	for p := 1; p < len(b.Levels[1]); p++ {
		if b.Levels[1][p] > 0 {
			ask = p
			break
		}
	}
	return bid, ask
}

// tick is the topic's ticker message now. Under t.mu.
func (t *topic) tick() TickerMessage {
	bid, ask := t.book.Best()
	return TickerMessage{Type: "ticker", Channel: ChannelTicker, MarketID: t.id, Seq: t.book.Seq,
		BestBid: optionalPrice(bid), BestAsk: optionalPrice(ask), LastPrice: optionalPrice(t.book.LastPrice)}
}

// snapshot is the book channel's first message. Under t.mu.
func (t *topic) snapshot() SnapshotMessage {
	m := SnapshotMessage{Type: "snapshot", Channel: ChannelBook, MarketID: t.id, Seq: t.book.Seq, Status: t.book.Status,
		Bids: []Level{}, Asks: []Level{}, LastPrice: optionalPrice(t.book.LastPrice)}
	for p := len(t.book.Levels[0]) - 1; p > 0; p-- {
		if q := t.book.Levels[0][p]; q > 0 {
			m.Bids = append(m.Bids, Level{Price: p, Quantity: q})
		}
	}
	for p := 1; p < len(t.book.Levels[1]); p++ {
		if q := t.book.Levels[1][p]; q > 0 {
			m.Asks = append(m.Asks, Level{Price: p, Quantity: q})
		}
	}
	return m
}

func tradesOf(events []Event) []Event {
	var out []Event
	for _, e := range events {
		if e.Type == TypeTrade {
			out = append(out, e)
		}
	}
	return out
}

// encode writes a message; the messages are plain structs, which always encode.
func encode(v any) []byte {
	raw, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("feed: encoding %T: %v", v, err))
	}
	return raw
}

// Subscribe starts a subscription of a market channel (book, trades or ticker). Without resume,
// a book subscription begins with a snapshot and a ticker one with the ticker; with resume, the
// book and trades channels replay the events after *resume first. Either way the live events
// follow with no gap and no duplicate. The subscription's first message is queued only after
// every message ack queues (the confirmation), which Subscribe sends first.
func (h *Hub) Subscribe(ctx context.Context, s *Subscription, resume *int64, ack []byte) error {
	t, err := h.acquire(ctx, s.Market)
	if err != nil {
		return err
	}
	if err := t.subscribe(ctx, s, resume, ack); err != nil {
		h.release(t)
		return err
	}
	return nil
}

func (t *topic) subscribe(ctx context.Context, s *Subscription, resume *int64, ack []byte) error {
	if s.Channel == ChannelTicker || resume == nil {
		t.mu.Lock()
		defer t.mu.Unlock()
		if t.err != nil {
			return t.err
		}
		s.Out.Send(ack)
		switch s.Channel {
		case ChannelBook:
			s.Out.Send(encode(t.snapshot()))
		case ChannelTicker:
			s.Out.Send(encode(t.ticker))
		}
		t.subs[s] = struct{}{}
		return nil
	}
	after := *resume
	acked := false
	sendWait := func(m []byte) error { return s.Out.SendWait(ctx, m) }
	// sendPage queues a page of the replay, each message waiting for room, after the
	// confirmation if it has not gone yet; it returns the seq the replay has reached.
	sendPage := func(events []Event) (int64, error) {
		if !acked {
			if err := s.Out.SendWait(ctx, ack); err != nil {
				return 0, err
			}
			acked = true
		}
		if err := t.replay(s, events, sendWait); err != nil {
			return 0, err
		}
		return events[len(events)-1].Seq, nil
	}
	for page := 0; ; {
		t.mu.Lock()
		if t.err != nil {
			t.mu.Unlock()
			return t.err
		}
		if after > t.book.Seq {
			// The client has seen events this topic has not yet: they came through another
			// front, or a stream this one has not read yet. They are in Postgres if they are real.
			if err := t.fill(ctx, after); err != nil {
				t.mu.Unlock()
				return ErrAhead
			}
		}
		oldest := t.book.Seq - int64(len(t.ring)) // the ring holds the events after it
		if after >= oldest {
			rest := t.ring[after-oldest:]
			if len(rest) <= pageEvents {
				// The last page, queued and joined to the live events under the lock.
				if !acked {
					s.Out.Send(ack)
				}
				t.replay(s, rest, func(m []byte) error {
					s.Out.Send(m)
					return nil
				})
				t.subs[s] = struct{}{}
				t.mu.Unlock()
				return nil
			}
			// More than a page behind: a page at a time, each waiting for room in the
			// connection's queue without the lock, as from Postgres.
			events := slices.Clone(rest[:pageEvents])
			t.mu.Unlock()
			var err error
			if after, err = sendPage(events); err != nil {
				return err
			}
			continue
		}
		t.mu.Unlock()
		// Too far behind for the ring: read a page from Postgres, without the lock.
		if s.ReadPage != nil {
			if err := s.ReadPage(ctx, page); err != nil {
				return err
			}
		}
		page++
		first, err := t.hub.log.FirstEvent(ctx, t.id)
		if err != nil {
			return err
		}
		if first == 0 || after+1 < first {
			return ErrResyncRequired
		}
		batches, err := t.hub.log.EventsAfter(ctx, t.id, after, pageEvents)
		if err != nil {
			return err
		}
		events, err := MarketPage(batches, after, pageEvents)
		if err != nil {
			return err
		}
		if len(events) == 0 || events[0].Seq != after+1 {
			return ErrResyncRequired
		}
		if after, err = sendPage(events); err != nil {
			return err
		}
	}
}

// replay sends events to a subscription in messages of at most pageEvents.
func (t *topic) replay(s *Subscription, events []Event, send func([]byte) error) error {
	if s.Channel == ChannelTrades {
		events = tradesOf(events)
	}
	for len(events) > 0 {
		n := min(len(events), pageEvents)
		if err := send(encode(EventsMessage{Type: "events", Channel: s.Channel, MarketID: t.id, Events: events[:n]})); err != nil {
			return err
		}
		events = events[n:]
	}
	return nil
}

// Unsubscribe ends a market subscription.
func (h *Hub) Unsubscribe(s *Subscription) {
	h.mu.Lock()
	t := h.topics[s.Market]
	h.mu.Unlock()
	if t == nil {
		return
	}
	t.mu.Lock()
	_, ok := t.subs[s]
	delete(t.subs, s)
	t.mu.Unlock()
	if ok {
		h.release(t)
	}
}

// SubscribeLifecycle follows every market's status changes and new markets, live.
func (h *Hub) SubscribeLifecycle(s *Subscription, ack []byte) {
	h.mu.Lock()
	defer h.mu.Unlock()
	s.Out.Send(ack)
	h.lifecycle[s] = struct{}{}
}

// UnsubscribeLifecycle ends a lifecycle subscription.
func (h *Hub) UnsubscribeLifecycle(s *Subscription) {
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.lifecycle, s)
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
	msg := encode(MarketMessage{Type: "market", Channel: ChannelLifecycle, MarketID: id, Change: change,
		Status: status, Seq: seq, At: time.Now().UTC()})
	for s := range h.lifecycle {
		s.Out.Send(msg)
	}
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
	changed, err := h.log.MarketsChanged(ctx, since)
	if err != nil {
		return since, err
	}
	next := since
	h.mu.Lock()
	var behind []*topic
	var seqs []int64
	for _, m := range changed {
		h.tellLifecycle(m.Market, m.Status, m.Seq, true)
		if t := h.topics[m.Market]; t != nil {
			t.refs++
			behind, seqs = append(behind, t), append(seqs, m.Seq)
		}
		if m.UpdatedAt.Add(-changedSlack).After(next) {
			next = m.UpdatedAt.Add(-changedSlack)
		}
	}
	h.swept = true
	h.mu.Unlock()
	h.dropIdle(time.Now())
	for i, t := range behind {
		t.mu.Lock()
		if t.err == nil && t.book.Seq < seqs[i] {
			if err := t.fill(ctx, seqs[i]); err != nil {
				t.fail(err)
			}
		}
		t.mu.Unlock()
		h.release(t)
	}
	if err := h.sweepAccounts(ctx); err != nil {
		return next, err
	}
	return next, nil
}
