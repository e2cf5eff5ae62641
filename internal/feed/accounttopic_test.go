package feed

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/pmx-dev/pmx/internal/apijson"
)

// memAccounts is one account's feed in Postgres, in memory: its batches, in every holder's
// stream, in the order they took their positions (commit order here), the oldest trimmed by
// retention. It reads as the store does (feedlog.AccountEventsAfter's contract), the simplest way.
type memAccounts struct {
	batches []Batch
	trimmed int
	events  map[string][]AccountEvent // each stream's events as committed: [h][i].Seq == i+1
	market  map[int64]uuid.UUID       // the market of each event, by its position in the commits
}

func (l *memAccounts) kept() []Batch { return l.batches[l.trimmed:] }

func (l *memAccounts) AccountEventsAfter(_ context.Context, _ int64, after Cursor, limit int, upTo Cursor) ([]Batch, error) {
	var out []Batch
	n := int64(0)
	for _, b := range l.kept() {
		last := b.Last
		if upTo != nil {
			if _, ok := upTo[b.Holder]; !ok {
				continue
			}
			last = min(last, upTo[b.Holder])
		}
		if held := last - max(b.First-1, after[b.Holder]); held > 0 && n < int64(limit) {
			out = append(out, b)
			n += held
		}
	}
	return out, nil
}

func (l *memAccounts) AccountFeed(context.Context, int64) ([]AccountStream, error) {
	var out []AccountStream
	for h, evs := range l.events {
		st := AccountStream{Holder: h, Last: int64(len(evs))}
		for _, b := range l.kept() {
			if b.Holder == h {
				st.First = b.First
				break
			}
		}
		out = append(out, st)
	}
	return out, nil
}

func (l *memAccounts) AccountSeqs(_ context.Context, ids []int64) (map[int64]Cursor, error) {
	streams, _ := l.AccountFeed(context.Background(), 0)
	out := map[int64]Cursor{}
	for _, id := range ids {
		out[id] = FeedEnd(streams)
	}
	return out, nil
}

// TestAccountTopic is the account topics' invariant as a property, over an account trading in
// four markets on three holders' streams, the markets moving between them (and back): whatever the
// interleaving of commits, each holder's stream delivering its batches late, twice or never,
// sweeps, retention, and subscribes that resume from a cursor a subscriber was given (or the
// start, or no cursor) with all of it happening between the pages of their replays, every
// subscriber of the orders and fills channels receives each event after its cursor once, each
// stream's in seq order and each market's in commit order across the streams it moved between,
// each message's cursor the one after what it carried; one still subscribed at the end, once
// the streams and a sweep are through, has every event. Retention may end a subscription
// (resync) or a topic (its subscribers dropped), never skip.
func TestAccountTopic(t *testing.T) {
	for seed := uint64(1); seed <= 120; seed++ {
		t.Run(fmt.Sprint(seed), func(t *testing.T) { runAccountTrial(t, seed) })
	}
}

type accountSub struct {
	s      *Subscription
	out    *recorder
	resume Cursor
	err    error
	gone   bool
}

func runAccountTrial(t *testing.T, seed uint64) {
	ctx := context.Background()
	rnd := rand.New(rand.NewPCG(seed, 53))
	const account = 7
	log := &memAccounts{events: map[string][]AccountEvent{}, market: map[int64]uuid.UUID{}}
	h := NewHub(&memLog{memAccounts: log}, slog.New(slog.DiscardHandler), 0)
	h.accounts.page = 3
	holders := []string{"", "shard-a", "shard-b"}
	markets := make([]uuid.UUID, 4)
	owner := map[uuid.UUID]string{}
	epoch := map[uuid.UUID]int64{}
	for i := range markets {
		markets[i] = uuid.New()
		owner[markets[i]] = holders[rnd.IntN(len(holders))]
	}
	at := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	pending := map[string][]Batch{} // each holder's stream: committed, not yet through
	position := map[string]int64{}  // each event's place in the commits, by stream and seq
	key := func(holder string, seq int64) string { return fmt.Sprintf("%s/%d", holder, seq) }
	var given []Cursor // cursors subscribers were given
	var subs []*accountSub

	commit := func() {
		m := markets[rnd.IntN(len(markets))]
		if rnd.IntN(8) == 0 { // the market moves (or its holder restarts): in a new epoch
			owner[m] = holders[rnd.IntN(len(holders))]
			epoch[m]++
		}
		holder := owner[m]
		var evs []AccountEvent
		for range 1 + rnd.IntN(2) {
			e := AccountEvent{Type: AccountAccepted, Order: &apijson.Order{MarketID: m}, At: at}
			if rnd.IntN(2) == 0 {
				e = AccountEvent{Type: AccountFill, Fill: &apijson.Fill{MarketID: m}, At: at}
			}
			evs = append(evs, e)
		}
		raw, _ := EncodeAccount(evs)
		first := int64(len(log.events[holder]) + 1)
		for i := range evs {
			evs[i].Stream, evs[i].Seq = holder, first+int64(i)
			position[key(holder, evs[i].Seq)] = int64(len(position))
		}
		log.events[holder] = append(log.events[holder], evs...)
		b := Batch{Account: account, Holder: holder, First: first, Last: first + int64(len(evs)) - 1, Events: raw}
		if rnd.IntN(10) > 0 { // else from a shard that sends no epochs
			b.Epochs = map[uuid.UUID]int64{m: epoch[m]}
		}
		log.batches = append(log.batches, b)
		pending[holder] = append(pending[holder], b)
	}
	step := func() {
		holder := holders[rnd.IntN(len(holders))]
		switch r := rnd.IntN(20); {
		case r < 7:
			commit()
		case r < 13 && len(pending[holder]) > 0:
			h.Ingest(ctx, pending[holder][0])
			pending[holder] = pending[holder][1:]
		case r < 14 && len(pending[holder]) > 0:
			pending[holder] = pending[holder][1:] // lost
		case r < 15 && len(log.batches) > 0:
			h.Ingest(ctx, log.batches[rnd.IntN(len(log.batches))])
		case r < 17:
			if err := h.accounts.catchUpAll(ctx); err != nil {
				t.Fatal(err)
			}
		case r < 18 && seed%4 == 0 && log.trimmed < len(log.batches)-1:
			log.trimmed++
		}
	}
	// given collects the cursors of a subscriber's confirmation and messages.
	collect := func(out *recorder) {
		for _, raw := range out.msgs {
			var m struct{ Cursor string }
			if json.Unmarshal(raw, &m) == nil && m.Cursor != "" {
				if c, err := ParseCursor(m.Cursor); err == nil {
					given = append(given, c)
				}
			}
		}
	}
	subscribe := func() {
		ch := []string{ChannelOrders, ChannelFills}[rnd.IntN(2)]
		budget := 30
		between := func() {
			if budget > 0 {
				budget--
				step()
			}
		}
		out := &recorder{wait: between}
		sub := &accountSub{s: &Subscription{Channel: ch, Account: account, Out: out,
			ReadPage: func(context.Context, int) error { between(); between(); return nil }}, out: out}
		switch r := rnd.IntN(4); {
		case r == 0:
		case r == 1 || len(given) == 0:
			sub.resume = Cursor{}
		default:
			sub.resume = given[rnd.IntN(len(given))].Clone()
		}
		sub.err = h.SubscribeAccount(ctx, sub.s, sub.resume, func(c Cursor) []byte {
			raw, _ := json.Marshal(map[string]any{"type": "subscribed", "cursor": c.String()})
			return raw
		})
		subs = append(subs, sub)
	}
	for range 200 {
		switch r := rnd.IntN(10); {
		case r < 2:
			subscribe()
		case r < 3 && len(subs) > 0:
			s := subs[rnd.IntN(len(subs))]
			if !s.gone {
				h.Unsubscribe(s.s)
				s.gone = true
				collect(s.out)
			}
		default:
			step()
		}
	}
	for _, holder := range holders {
		for _, b := range pending[holder] {
			h.Ingest(ctx, b)
		}
	}
	if err := h.accounts.catchUpAll(ctx); err != nil {
		t.Fatal(err)
	}
	for i, s := range subs {
		checkAccountSub(t, fmt.Sprintf("subscriber %d (%s, resume %v)", i, s.s.Channel, s.resume), log, s, position, key)
	}
}

// checkAccountSub checks what one subscriber of an account's channel received.
func checkAccountSub(t *testing.T, name string, log *memAccounts, s *accountSub, position map[string]int64, key func(string, int64) string) {
	t.Helper()
	if s.err != nil && (errors.Is(s.err, ErrAhead) || log.trimmed == 0) {
		t.Fatalf("%s: %v", name, s.err)
	}
	if s.out.dropped && log.trimmed == 0 {
		t.Fatalf("%s: dropped without retention", name)
	}
	if len(s.out.msgs) == 0 {
		if s.err == nil {
			t.Fatalf("%s: subscribed without a confirmation", name)
		}
		return
	}
	complete := s.err == nil && !s.gone && !s.out.dropped
	var ack struct{ Type, Cursor string }
	mustDecode(t, name, s.out.msgs[0], &ack)
	from, err := ParseCursor(ack.Cursor)
	if ack.Type != "subscribed" || err != nil || s.resume != nil && !maps.Equal(from, s.resume.Clone()) {
		t.Fatalf("%s: confirmation %s", name, s.out.msgs[0])
	}
	orders := s.s.Channel == ChannelOrders
	at := from.Clone()               // the cursor after what was received
	lastPos := map[uuid.UUID]int64{} // each market's last event received, by position
	for _, raw := range s.out.msgs[1:] {
		var m AccountEventsMessage
		mustDecode(t, name, raw, &m)
		if m.Type != "accountEvents" || m.Channel != s.s.Channel || len(m.Events) == 0 {
			t.Fatalf("%s: message %s", name, raw)
		}
		for _, e := range m.Events {
			evs := log.events[e.Stream]
			if e.Seq < 1 || e.Seq > int64(len(evs)) {
				t.Fatalf("%s: event %+v was never committed", name, e)
			}
			w := evs[e.Seq-1]
			if e.Type != w.Type || e.Market() != w.Market() || !e.At.Equal(w.At) {
				t.Fatalf("%s: event %+v, committed %+v", name, e, w)
			}
			// Each stream gapless (on the orders channel; the fills channel skips what is not a
			// fill) and never again.
			if e.Seq <= at[e.Stream] || orders && e.Seq != at[e.Stream]+1 {
				t.Fatalf("%s: event %d of stream %q after %d", name, e.Seq, e.Stream, at[e.Stream])
			}
			for seq := at[e.Stream] + 1; seq < e.Seq; seq++ {
				if evs[seq-1].Type == AccountFill {
					t.Fatalf("%s: fill %d of stream %q skipped", name, seq, e.Stream)
				}
			}
			at[e.Stream] = e.Seq
			m, p := e.Market(), position[key(e.Stream, e.Seq)]
			if last, ok := lastPos[m]; ok && p < last {
				t.Fatalf("%s: event %d of stream %q (market %s) after a later one of the market", name, e.Seq, e.Stream, m)
			}
			lastPos[m] = p
		}
		c, err := ParseCursor(m.Cursor)
		if err != nil || !c.Covers(at) || orders && !maps.Equal(c, at) {
			t.Fatalf("%s: message cursor %v after %v", name, c, at)
		}
		if !orders {
			at = c
		}
	}
	if !complete {
		return
	}
	for holder, evs := range log.events {
		for seq := at[holder] + 1; seq <= int64(len(evs)); seq++ {
			if orders || evs[seq-1].Type == AccountFill {
				t.Fatalf("%s: event %d of stream %q never came (received up to %d)", name, seq, holder, at[holder])
			}
		}
	}
}
