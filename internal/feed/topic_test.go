package feed

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/google/uuid"
)

// TestTopicGapless is the topics' invariant as a property: whatever the interleaving of commits,
// batches delivered late, twice or never (a lost stream), sweeps, retention trimming the oldest
// events, subscribes that resume from anywhere (from the ring or a page at a time from Postgres,
// with all of the above happening between the pages, where the topic's lock is not held) and
// unsubscribes, every subscriber of a market's channel receives its events in order with no gap
// and no duplicate, each as committed (an account's: TestAccountTopic); one still subscribed at the end, once
// the stream and a sweep are through, has every event; a book rebuilt from a snapshot and its
// events equals the committed book, and the last ticker its prices. A topic that loses the
// thread (events trimmed before it read them) drops its subscribers rather than skip.
func TestTopicGapless(t *testing.T) {
	for seed := uint64(1); seed <= 150; seed++ {
		t.Run(fmt.Sprint(seed), func(t *testing.T) { runTopicTrial(t, seed) })
	}
}

// memLog is a feed's Postgres in memory: the committed batches of one market, the oldest trimmed
// by retention, and accounts' feeds (memAccounts).
type memLog struct {
	market  uuid.UUID
	batches []Batch // market batches, in order
	trimmed int     // how many of them retention dropped
	events  []Event // every market event committed: events[i].Seq == i+1
	*memAccounts
	// The halts a sweep reads (hub_halts_test.go).
	paused, status string
	exchange       bool
}

func (l *memLog) kept() []Batch { return l.batches[l.trimmed:] }

func (l *memLog) Book(_ context.Context, market uuid.UUID) (Book, error) {
	var b Book
	for _, e := range l.events {
		b.apply(e)
	}
	return b, nil
}

func after(batches []Batch, seq int64, limit int) []Batch {
	var out []Batch
	n := 0
	for _, b := range batches {
		if b.Last > seq && n < limit {
			out = append(out, b)
			n += int(b.Last - max(b.First-1, seq))
		}
	}
	return out
}

func (l *memLog) EventsAfter(_ context.Context, _ uuid.UUID, seq int64, limit int) ([]Batch, error) {
	return after(l.kept(), seq, limit), nil
}

func (l *memLog) FirstEvent(context.Context, uuid.UUID) (int64, error) {
	if k := l.kept(); len(k) > 0 {
		return k[0].First, nil
	}
	return 0, nil
}

func (l *memLog) MarketsChanged(context.Context, time.Time) ([]MarketState, error) {
	return []MarketState{{Market: l.market, Seq: int64(len(l.events)), Status: cmp.Or(l.status, "OPEN"), Paused: l.paused}}, nil
}

func (l *memLog) ExchangeHalted(context.Context) (bool, error) { return l.exchange, nil }

// recorder is a connection's queue that never fills; a replay's waits run the trial's next steps.
type recorder struct {
	msgs    [][]byte
	dropped bool
	wait    func()
}

func (r *recorder) Send(msg []byte) bool { r.msgs = append(r.msgs, msg); return true }
func (r *recorder) SendWait(_ context.Context, msg []byte) error {
	r.wait()
	r.msgs = append(r.msgs, msg)
	return nil
}
func (r *recorder) Drop(string) { r.dropped = true }

type trialSub struct {
	s      *Subscription
	out    *recorder
	resume *int64
	err    error
	gone   bool // unsubscribed
}

func runTopicTrial(t *testing.T, seed uint64) {
	ctx := context.Background()
	rnd := rand.New(rand.NewPCG(seed, 35))
	log := &memLog{market: uuid.New(), memAccounts: &memAccounts{}}
	h := NewHub(log, slog.New(slog.DiscardHandler), 8)
	h.markets.page = 3
	at := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	var pending []Batch // committed, not yet through the stream
	var subs []*trialSub

	commit := func() {
		n := 1 + rnd.IntN(3)
		var evs []Event
		for range n {
			e := Event{Seq: int64(len(log.events) + 1), Type: TypeLevel, Side: []string{"bid", "ask"}[rnd.IntN(2)],
				Price: 1 + rnd.IntN(99), Quantity: int64(rnd.IntN(4)), At: at}
			if rnd.IntN(3) == 0 {
				e = Event{Seq: e.Seq, Type: TypeTrade, Price: e.Price, Quantity: 1, At: at}
			}
			log.events = append(log.events, e)
			evs = append(evs, e)
		}
		raw, _ := Encode(evs)
		b := Batch{Market: log.market, First: evs[0].Seq, Last: evs[len(evs)-1].Seq, Events: raw}
		log.batches = append(log.batches, b)
		pending = append(pending, b)
	}
	// step is one thing happening beside the subscribes: a commit, the stream delivering or losing
	// a batch or delivering an old one again, a sweep, retention.
	step := func() {
		switch r := rnd.IntN(20); {
		case r < 7:
			commit()
		case r < 13 && len(pending) > 0:
			h.Ingest(ctx, pending[0])
			pending = pending[1:]
		case r < 14 && len(pending) > 0:
			pending = pending[1:] // lost
		case r < 15 && len(log.batches) > 0:
			h.Ingest(ctx, log.batches[rnd.IntN(len(log.batches))])
		case r < 17:
			if _, err := h.sweep(ctx, time.Time{}); err != nil {
				t.Fatal(err)
			}
		case r < 18 && seed%3 == 0 && log.trimmed < len(log.batches)-1:
			log.trimmed++
		}
	}
	channels := []string{ChannelBook, ChannelTrades, ChannelTicker}
	subscribe := func() {
		ch := channels[rnd.IntN(len(channels))]
		// What happens between a replay's pages, bounded for the replay to catch up.
		budget := 30
		between := func() {
			if budget > 0 {
				budget--
				step()
			}
		}
		out := &recorder{wait: between}
		sub := &trialSub{s: &Subscription{Channel: ch, Market: log.market, Out: out,
			ReadPage: func(context.Context, int) error { between(); between(); return nil }}, out: out}
		last := int64(len(log.events))
		if rnd.IntN(3) > 0 {
			r := rnd.Int64N(last + 1)
			sub.resume = &r
		}
		sub.err = h.Subscribe(ctx, sub.s, sub.resume, func(seq *int64) []byte {
			raw, _ := json.Marshal(map[string]any{"type": "subscribed", "seq": seq})
			return raw
		})
		subs = append(subs, sub)
	}
	for range 150 {
		switch r := rnd.IntN(10); {
		case r < 2:
			subscribe()
		case r < 3 && len(subs) > 0:
			s := subs[rnd.IntN(len(subs))]
			if !s.gone {
				h.Unsubscribe(s.s)
				s.gone = true
			}
		default:
			step()
		}
	}
	for _, b := range pending {
		h.Ingest(ctx, b)
	}
	if _, err := h.sweep(ctx, time.Time{}); err != nil {
		t.Fatal(err)
	}
	for i, s := range subs {
		checkSub(t, fmt.Sprintf("subscriber %d (%s, resume %v)", i, s.s.Channel, deref(s.resume)), log, s)
	}
}

func deref(p *int64) any {
	if p == nil {
		return nil
	}
	return *p
}

// checkSub checks what one subscriber received.
func checkSub(t *testing.T, name string, log *memLog, s *trialSub) {
	t.Helper()
	// Only retention (every third seed) may end a subscription: a resume from before the oldest
	// event kept, or a topic that lost the thread.
	if s.err != nil && (errors.Is(s.err, ErrAhead) || log.trimmed == 0) {
		t.Fatalf("%s: %v", name, s.err)
	}
	if s.out.dropped && log.trimmed == 0 {
		t.Fatalf("%s: dropped without retention", name)
	}
	complete := s.err == nil && !s.gone && !s.out.dropped
	if len(s.out.msgs) == 0 {
		if s.err == nil {
			t.Fatalf("%s: subscribed without a confirmation", name)
		}
		return
	}
	var ack struct {
		Type string `json:"type"`
		Seq  *int64 `json:"seq"`
	}
	if err := json.Unmarshal(s.out.msgs[0], &ack); err != nil || ack.Type != "subscribed" {
		t.Fatalf("%s: first message %s", name, s.out.msgs[0])
	}
	if ack.Seq != nil {
		t.Fatalf("%s: confirmation %s", name, s.out.msgs[0])
	}
	msgs := s.out.msgs[1:]
	switch s.s.Channel {
	case ChannelTicker:
		var last *TickerMessage
		for _, raw := range msgs {
			var m TickerMessage
			mustDecode(t, name, raw, &m)
			if m.Type != "ticker" || last != nil && m.Seq < last.Seq {
				t.Fatalf("%s: ticker %s after %+v", name, raw, last)
			}
			last = &m
		}
		if last == nil {
			t.Fatalf("%s: no ticker on subscribing", name)
		}
		if complete {
			var b Book
			for _, e := range log.events {
				b.apply(e)
			}
			bid, ask := b.Best()
			if fmt.Sprint(deref64(last.BestBid), deref64(last.BestAsk), deref64(last.LastPrice)) != fmt.Sprint(bid, ask, b.LastPrice) {
				t.Fatalf("%s: last ticker %s, the book's best %d/%d last %d", name, msgs[len(msgs)-1], bid, ask, b.LastPrice)
			}
		}
		return
	}
	var from int64 // the seq the events follow on from
	var book *Book
	switch {
	case s.resume != nil:
		from = *s.resume
	case s.s.Channel == ChannelBook:
		var snap SnapshotMessage
		mustDecode(t, name, msgs[0], &snap)
		msgs = msgs[1:]
		from = snap.Seq
		book = &Book{Seq: snap.Seq, Status: snap.Status}
		for _, l := range snap.Bids {
			book.Levels[0][l.Price] = l.Quantity
		}
		for _, l := range snap.Asks {
			book.Levels[1][l.Price] = l.Quantity
		}
		if snap.LastPrice != nil {
			book.LastPrice = *snap.LastPrice
		}
		var want Book
		for _, e := range log.events[:snap.Seq] {
			want.apply(e)
		}
		want.Status = book.Status
		if *book != want {
			t.Fatalf("%s: snapshot at %d differs from the committed book", name, snap.Seq)
		}
	default:
		from = -1 // trades without resume: from wherever the topic was
	}
	// Every event of the channel's feed after from, as committed, in order.
	var want []int64
	all := int64(len(log.events))
	for seq := int64(1); seq <= all; seq++ {
		pick := s.s.Channel == ChannelBook || log.events[seq-1].Type == TypeTrade
		if pick && seq > from {
			want = append(want, seq)
		}
	}
	var got []int64
	for _, raw := range msgs {
		var m EventsMessage
		mustDecode(t, name, raw, &m)
		for _, e := range m.Events {
			if m.Channel != s.s.Channel || e.Seq < 1 || e.Seq > all || !e.At.Equal(log.events[e.Seq-1].At) ||
				e.Type != log.events[e.Seq-1].Type || e.Price != log.events[e.Seq-1].Price || e.Quantity != log.events[e.Seq-1].Quantity {
				t.Fatalf("%s: event %+v, committed %+v", name, e, log.events[e.Seq-1])
			}
			if book != nil {
				book.apply(e)
			}
			got = append(got, e.Seq)
		}
	}
	if from < 0 && len(got) > 0 { // trades without resume begin wherever the topic was
		i := slices.Index(want, got[0])
		if i < 0 {
			t.Fatalf("%s: got %v, not a trade", name, got)
		}
		want = want[i:]
	}
	if !complete && len(got) <= len(want) {
		want = want[:len(got)]
	}
	if from < 0 && len(got) == 0 {
		return // subscribed after the last trade: nothing to see
	}
	if !slices.Equal(got, want) {
		t.Fatalf("%s from %d: got seqs %v\nwant %v", name, from, got, want)
	}
	if book != nil && complete {
		var b Book
		for _, e := range log.events {
			b.apply(e)
		}
		b.Status = book.Status
		if *book != b {
			t.Fatalf("%s: the book rebuilt from the snapshot and its events differs from the committed book", name)
		}
	}
}

func deref64(p *int) int {
	if p == nil {
		return 0
	}
	return *p
}

func mustDecode(t *testing.T, name string, raw []byte, v any) {
	t.Helper()
	if err := json.Unmarshal(raw, v); err != nil {
		t.Fatalf("%s: %s: %v", name, raw, err)
	}
}

// TestTopicsKept checks the kept topics' bounds: a market's topic outlives its last subscription
// (taken up again without loading its book again), at most keepIdle of them, the longest idle
// dropped first, none past keepFor; an account's topic is not kept.
func TestTopicsKept(t *testing.T) {
	ctx := context.Background()
	log := &memLog{market: uuid.New(), memAccounts: &memAccounts{}}
	h := NewHub(log, slog.New(slog.DiscardHandler), 0)
	ack := func(*int64) []byte { return []byte("{}") }
	follow := func(s *Subscription) {
		if err := h.Subscribe(ctx, s, nil, ack); err != nil {
			t.Fatal(err)
		}
		h.Unsubscribe(s)
	}
	first := &Subscription{Channel: ChannelBook, Market: uuid.New(), Out: &recorder{}}
	follow(first)
	for range keepIdle - 1 {
		follow(&Subscription{Channel: ChannelTicker, Market: uuid.New(), Out: &recorder{}})
	}
	if n, loads := h.Topics(), h.BookLoads(); n != keepIdle || loads != keepIdle {
		t.Fatalf("%d topics kept after %d book loads, want %d", n, loads, keepIdle)
	}
	follow(first) // taken up again: no load, and idle since now
	if loads := h.BookLoads(); loads != keepIdle {
		t.Fatalf("a kept topic loaded its book again (%d loads)", loads)
	}
	follow(&Subscription{Channel: ChannelTrades, Market: uuid.New(), Out: &recorder{}})
	if n := h.Topics(); n != keepIdle {
		t.Fatalf("%d topics kept, want at most %d", n, keepIdle)
	}
	h.markets.mu.Lock()
	_, kept := h.markets.m[first.Market]
	h.markets.mu.Unlock()
	if !kept {
		t.Fatal("the topic taken up last but one was dropped before the longest idle")
	}
	orders := &Subscription{Channel: ChannelOrders, Account: 7, Out: &recorder{}}
	if err := h.SubscribeAccount(ctx, orders, nil, func(Cursor) []byte { return []byte("{}") }); err != nil {
		t.Fatal(err)
	}
	if n := len(h.accounts.m); n != 1 {
		t.Fatalf("%d account topics while subscribed", n)
	}
	h.Unsubscribe(orders)
	if n := len(h.accounts.m); n != 0 {
		t.Fatalf("%d account topics kept", n)
	}
	h.markets.dropIdle(time.Now().Add(keepFor))
	if n := h.Topics(); n != 0 {
		t.Fatalf("%d topics kept past keepFor", n)
	}
}
