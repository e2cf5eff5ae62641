package feedlog

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/pmx-dev/pmx/internal/apijson"
	"github.com/pmx-dev/pmx/internal/feed"
	"github.com/pmx-dev/pmx/internal/store/db/dbtest"
)

// keptTerm is an order_terms row, as the test expects it and reads it back.
type keptTerm struct {
	order            uuid.UUID
	holder           string
	seq, position    int64
	amended          bool
	price            int
	quantity, filled int64
	at               time.Time
}

// TestPruneKeepsOrderTerms prunes accounts' feeds of random orders — resting, finished, moved by
// amends, amended in place — laid out in batches of random sizes across two streams, with
// several sweepers at once taking a few batches per transaction, then prunes again what a restore
// put back: order_terms must hold every "accepted" and "amended" event of each order moved or
// still resting, once, as the test wrote it, and nothing of the others; every batch is deleted.
func TestPruneKeepsOrderTerms(t *testing.T) {
	ctx := context.Background()
	st := New(dbtest.New(t))
	rng := rand.New(rand.NewPCG(54, 37))
	market := dbtest.Market(t, st.Pool, nil)
	old := time.Now().Add(-48 * time.Hour).UTC().Truncate(time.Microsecond)

	type stream struct {
		account int64
		holder  string
		events  []feed.AccountEvent
	}
	var streams []*stream
	for i := range 3 {
		account := dbtest.Account(t, st.Pool, fmt.Sprint("pruned", i), 1000)
		for _, h := range []string{"", "shard-1"} {
			streams = append(streams, &stream{account: account, holder: h})
		}
	}
	var want []keptTerm
	type pending struct {
		s *stream
		t keptTerm
	}
	var terms []pending
	for n := range 120 {
		s := streams[rng.IntN(len(streams))]
		id, price, quantity := uuid.New(), 1+rng.IntN(99), 1+rng.Int64N(50)
		status, priority := "FILLED", any(nil)
		at := old.Add(time.Duration(n) * time.Millisecond)
		o := apijson.Order{ID: id, MarketID: market, Side: "BUY", Outcome: "YES", Price: price, Quantity: quantity, Status: "OPEN"}
		events := []feed.AccountEvent{{Type: feed.AccountAccepted, Order: &o, At: at}}
		var mine []keptTerm
		mine = append(mine, keptTerm{order: id, holder: s.holder, price: price, quantity: quantity, at: at})
		filled := int64(0)
		for k := range rng.IntN(4) {
			a := o
			a.Price, a.Quantity, a.FilledQuantity = 1+rng.IntN(99), quantity+rng.Int64N(5), filled
			at := at.Add(time.Duration(k+1) * time.Microsecond)
			events = append(events, feed.AccountEvent{Type: feed.AccountFill, FilledQuantity: filled, At: at},
				feed.AccountEvent{Type: feed.AccountAmended, Order: &a, At: at})
			mine = append(mine, keptTerm{order: id, holder: s.holder, amended: true, price: a.Price, quantity: a.Quantity, filled: filled, at: at})
			filled++
		}
		keep := false
		switch rng.IntN(3) {
		case 0: // resting: an amend may still move it
			status, keep = "OPEN", true
		case 1: // moved by an amend
			if len(mine) > 1 {
				priority, keep = int64(1000+n), true
			}
		}
		if _, err := st.Pool.Exec(ctx, `insert into orders (id, market_id, seq, account_id, side, outcome, price, quantity,
			filled_quantity, status, created_at, updated_at, priority) values ($1, $2, $3, $4, 'BUY', 'YES', $5, $6, 0, $7, $8, $8, $9)`,
			id, market, n+1, s.account, price, quantity, status, at, priority); err != nil {
			t.Fatal(err)
		}
		// The order's events, numbered in its stream: accepted, then a fill and an amend each time.
		for i, e := range events {
			s.events = append(s.events, e)
			if keep && e.Type != feed.AccountFill {
				k := mine[i/2]
				k.seq = int64(len(s.events))
				terms = append(terms, pending{s, k})
			}
		}
	}
	// Each stream's events in batches of 1 to 5, each batch a row at the next position.
	position := int64(0)
	pos := map[*stream]map[int64]int64{} // seq → its batch's position
	type row struct {
		s           *stream
		first, last int64
		raw         []byte
	}
	var rows []row
	for _, s := range streams {
		pos[s] = map[int64]int64{}
		for first := int64(1); first <= int64(len(s.events)); {
			last := min(first+rng.Int64N(5), int64(len(s.events)))
			raw, err := feed.EncodeAccount(s.events[first-1 : last])
			if err != nil {
				t.Fatal(err)
			}
			position++
			for q := first; q <= last; q++ {
				pos[s][q] = position
			}
			rows = append(rows, row{s, first, last, raw})
			first = last + 1
		}
	}
	insert := func() {
		t.Helper()
		for i, r := range rows {
			if _, err := st.Pool.Exec(ctx, `insert into account_events (account_id, holder, first_seq, last_seq, position, created_at, events)
				values ($1, $2, $3, $4, $5, $6, $7)`, r.s.account, r.s.holder, r.first, r.last, pos[r.s][r.first], old.Add(time.Duration(i)), r.raw); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, p := range terms {
		p.t.position = pos[p.s][p.t.seq]
		want = append(want, p.t)
	}
	// A recent batch, which the pruning keeps.
	recent, err := feed.EncodeAccount([]feed.AccountEvent{{Type: feed.AccountAccepted, Order: &apijson.Order{ID: uuid.New()}, At: time.Now()}})
	if err != nil {
		t.Fatal(err)
	}
	insert()
	if _, err := st.Pool.Exec(ctx, `insert into account_events (account_id, holder, first_seq, last_seq, created_at, events)
		values ($1, 'recent', 1, 1, now(), $2)`, streams[0].account, recent); err != nil {
		t.Fatal(err)
	}

	prune := func() {
		t.Helper()
		var wg sync.WaitGroup
		errs := make(chan error, 4)
		for range 4 {
			wg.Go(func() {
				for {
					n, err := st.pruneAccountEvents(ctx, time.Now().Add(-time.Hour), 3)
					if err != nil {
						errs <- err
						return
					}
					if n == 0 {
						return
					}
				}
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
	}
	check := func(when string) {
		t.Helper()
		var left int
		if err := st.Pool.QueryRow(ctx, `select count(*) from account_events`).Scan(&left); err != nil {
			t.Fatal(err)
		}
		if left != 1 {
			t.Errorf("%s: %d account event batches left, want the recent one", when, left)
		}
		got, err := st.Pool.Query(ctx, `select order_id, holder, seq, position, amended, price, quantity, filled, at from order_terms`)
		if err != nil {
			t.Fatal(err)
		}
		var have []keptTerm
		for got.Next() {
			var k keptTerm
			if err := got.Scan(&k.order, &k.holder, &k.seq, &k.position, &k.amended, &k.price, &k.quantity, &k.filled, &k.at); err != nil {
				t.Fatal(err)
			}
			k.at = k.at.UTC()
			have = append(have, k)
		}
		if err := got.Err(); err != nil {
			t.Fatal(err)
		}
		key := func(k keptTerm) string { return fmt.Sprint(k.order, k.holder, k.seq) }
		slices.SortFunc(have, func(a, b keptTerm) int { return strings.Compare(key(a), key(b)) })
		slices.SortFunc(want, func(a, b keptTerm) int { return strings.Compare(key(a), key(b)) })
		if len(have) != len(want) {
			t.Fatalf("%s: order_terms holds %d rows, want %d", when, len(have), len(want))
		}
		for i := range want {
			if have[i] != want[i] {
				t.Errorf("%s: order_terms holds %+v, want %+v", when, have[i], want[i])
			}
		}
	}
	prune()
	check("pruned by four sweepers at once")
	if len(want) < 20 {
		t.Fatalf("only %d terms to keep: the test shows little", len(want))
	}
	insert() // a restore puts the batches back
	prune()
	check("pruned again")
	n, err := st.PruneEvents(ctx, time.Now().Add(-time.Hour))
	if err != nil || n != 0 {
		t.Fatalf("a third pruning deleted %d batches (%v), want none", n, err)
	}
	check("pruned a third time")
}

// TestPruneKeepsUnreadableBatches prunes a feed one of whose old batches does not decode: the
// pruning fails with an error naming the batch, and deletes nothing, rather than lose the terms
// it may hold.
func TestPruneKeepsUnreadableBatches(t *testing.T) {
	ctx := context.Background()
	st := New(dbtest.New(t))
	account := dbtest.Account(t, st.Pool, "unreadable", 0)
	old := time.Now().Add(-48 * time.Hour)
	good, err := feed.EncodeAccount([]feed.AccountEvent{{Type: feed.AccountAccepted, Order: &apijson.Order{ID: uuid.New()}, At: old}})
	if err != nil {
		t.Fatal(err)
	}
	for i, raw := range [][]byte{good, []byte(`[{"type":"amended"`)} {
		if _, err := st.Pool.Exec(ctx, `insert into account_events (account_id, holder, first_seq, last_seq, created_at, events)
			values ($1, '', $2, $2, $3, $4)`, account, i+1, old, raw); err != nil {
			t.Fatal(err)
		}
	}
	_, err = st.PruneEvents(ctx, time.Now().Add(-time.Hour))
	if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("account_events row (account_id, holder, first_seq) = (%d, '', 2) does not read", account)) {
		t.Fatalf("pruning an unreadable batch answered %v", err)
	}
	var left int
	if err := st.Pool.QueryRow(ctx, `select count(*) from account_events`).Scan(&left); err != nil {
		t.Fatal(err)
	}
	if left != 2 {
		t.Fatalf("%d of the 2 batches left after a pruning that failed", left)
	}
}
