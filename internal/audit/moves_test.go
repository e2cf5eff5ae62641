package audit_test

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/pmx-dev/pmx/engine"
	"github.com/pmx-dev/pmx/internal/audit"
	"github.com/pmx-dev/pmx/internal/exchange"
	"github.com/pmx-dev/pmx/internal/shard"
	"github.com/pmx-dev/pmx/internal/store"
	"github.com/pmx-dev/pmx/internal/storetest"
)

// TestAuditMovesInOneBatch is the market-maker mix's case (docs/performance.md, "free numbers"):
// one batch moves order R (seq 2), places Q, then moves order P (seq 1), and both move again
// later, so orders.priority keeps neither first move's number. Q meets R, which moved before it;
// had P moved first, Q would have met P. Without the numbers the moves took, the replay gives the
// batch's two free numbers to its moves by order seq (P first) and makes the wrong fill; with the
// numbers the shard now keeps in the "amended" events (and the pruning in order_terms), it replays
// them exactly. A database without them (an older pmx's) audits as before: the guess.
func TestAuditMovesInOneBatch(t *testing.T) {
	ctx := context.Background()
	var (
		st    *store.Store
		p, r  int64
		moves []move
	)
	for attempt := 1; ; attempt++ {
		var ok bool
		if st, _, p, r, _, moves, ok = movesInOneBatch(t, ctx); ok {
			break
		}
		if attempt == 5 {
			t.Fatal("five times the commands did not run in one batch, in order: the test shows nothing")
		}
	}
	audited := func(what string) string {
		t.Helper()
		rep, err := audit.Run(ctx, st.Pool, audit.Options{})
		if err != nil {
			t.Fatal(err)
		}
		var out bytes.Buffer
		rep.Write(&out)
		t.Logf("%s:\n%s", what, out.String())
		if len(rep.Differences) > 0 {
			return out.String()
		}
		if rep.Replayed != 1 || rep.Amends != 4 || rep.Trades != 1 {
			t.Fatalf("%s: the audit replayed %d markets, %d amends and %d trades, want 1, 4 and 1:\n%s", what, rep.Replayed, rep.Amends, rep.Trades, out.String())
		}
		return ""
	}
	if out := audited("from the feeds"); out != "" {
		t.Fatalf("the audit of the batch's moves is not clean:\n%s", out)
	}
	// Each move's number is in its event (never sent to a client: internal/feed's tests).
	if want := []move{{p, 7, true}, {p, 8, false}, {r, 5, true}, {r, 9, false}}; !slices.Equal(moves, want) {
		t.Fatalf("the moves' events are %+v, want %+v", moves, want)
	}
	if _, err := st.PruneEvents(ctx, time.Now().Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	var told int
	if err := st.Pool.QueryRow(ctx, `select count(*) from order_terms where priority is not null`).Scan(&told); err != nil || told != 4 {
		t.Fatalf("order_terms keeps %d moves' numbers (%v), want 4", told, err)
	}
	if out := audited("from order_terms"); out != "" {
		t.Fatalf("the audit of the batch's moves, their feeds pruned, is not clean:\n%s", out)
	}

	// Without the numbers, as an older pmx kept them, the replay guesses as before: by order
	// seq, P first, and so makes Q meet P.
	if _, err := st.Pool.Exec(ctx, `update order_terms set priority = null`); err != nil {
		t.Fatal(err)
	}
	if out := audited("without the numbers"); !strings.Contains(out, "fill: market") ||
		!strings.Contains(out, "is taker seq 6 (account 3), maker seq 2 (account 2), 5 at YES price 40") ||
		!strings.Contains(out, "the replay's fill there is taker seq 6 (account 3), maker seq 1 (account 1), 5 at YES price 40") {
		t.Fatalf("without the numbers the audit does not guess as before:\n%s", out)
	}
}

// move is an "amended" event of the test's orders: the order, the number its move took, and
// whether it came in the batch of Q.
type move struct {
	seq, number int64
	inBatch     bool
}

// movesInOneBatch sets the scene of TestAuditMovesInOneBatch on a database of its own, and says
// whether the commands ran as the test needs (ok): the three in one batch, in the order sent. They
// are sent 200 ms apart while the batch before waits on a lock, so only a machine too busy to run
// a goroutine within 200 ms can reorder them; the test then sets the scene again.
func movesInOneBatch(t *testing.T, ctx context.Context) (st *store.Store, m uuid.UUID, p, r, q int64, moves []move, ok bool) {
	t.Helper()
	st = storetest.New(t)
	s := shard.New(shard.Config{Store: st, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	t.Cleanup(s.Stop)
	m = storetest.Market(t, st)
	alice, bob, carol := storetest.Account(t, st, "alice", 100_000), storetest.Account(t, st, "bob", 100_000), storetest.Account(t, st, "carol", 100_000)
	place := func(account int64, outcome engine.Outcome, price int, q int64) int64 {
		t.Helper()
		o, err := s.Place(ctx, exchange.PlaceRequest{Account: account, Market: m, Side: engine.Buy, Outcome: outcome, Price: price, Quantity: q})
		if err != nil {
			t.Errorf("placing: %v", err)
		}
		return o.Seq
	}
	amend := func(account, seq int64, price int) {
		t.Helper()
		if _, err := s.Amend(ctx, exchange.AmendRequest{Account: account, Market: m, Seq: seq, Side: engine.Buy, Outcome: engine.Yes, Price: price}); err != nil {
			t.Errorf("amending seq %d: %v", seq, err)
		}
	}
	p = place(alice, engine.Yes, 30, 5) // seq 1
	r = place(bob, engine.Yes, 31, 10)  // seq 2
	place(carol, engine.Yes, 5, 1)      // seq 3: every account's cash known to the shard

	// The batch: while the one before it (seq 4) waits on a lock on orders, the commands that come
	// join the next batch in the order they come (the shard's pipeline, internal/shard/batch.go).
	lock, err := st.Pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Rollback(ctx) //nolint:errcheck
	if _, err := lock.Exec(ctx, `lock table orders in share mode`); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	wg.Go(func() { place(alice, engine.Yes, 10, 1) }) // seq 4
	for waiting, deadline := false, time.Now().Add(30*time.Second); !waiting; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Log("the batch of seq 4 never waited on the lock on orders")
			return st, m, 0, 0, 0, nil, false
		}
		if err := st.Pool.QueryRow(ctx, `select exists (select 1 from pg_locks where relation = 'orders'::regclass and not granted
			and database = (select oid from pg_database where datname = current_database()))`).Scan(&waiting); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range []func(){
		func() { amend(bob, r, 40) },                  // R moves to 40: number 5
		func() { q = place(carol, engine.No, 60, 5) }, // Q, seq 6, sells YES at 40: meets R
		func() { amend(alice, p, 40) },                // P moves to 40, behind R: number 7
	} {
		wg.Go(c)
		time.Sleep(200 * time.Millisecond)
	}
	if err := lock.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	amend(alice, p, 35) // both move again: number 8
	amend(bob, r, 36)   // number 9
	if t.Failed() {
		t.FailNow()
	}

	// The premise: the moves and Q in one batch, and Q met R.
	rows, err := st.Pool.Query(ctx, `select o.seq, coalesce((e->>'priority')::bigint, 0), (e->>'at')::timestamptz = q.created_at
		from account_events a cross join jsonb_array_elements(convert_from(a.events, 'UTF8')::jsonb) e
		join orders o on o.id::text = e->'order'->>'id'
		cross join (select created_at from orders where market_id = $1 and seq = $2) q
		where e->>'type' = 'amended' order by o.seq, a.position`, m, q)
	if err != nil {
		t.Fatal(err)
	}
	moves, err = pgx.CollectRows(rows, func(row pgx.CollectableRow) (move, error) {
		var mv move
		err := row.Scan(&mv.seq, &mv.number, &mv.inBatch)
		return mv, err
	})
	if err != nil {
		t.Fatal(err)
	}
	inBatch := func(mvs []move) []bool {
		var b []bool
		for _, mv := range mvs {
			b = append(b, mv.inBatch)
		}
		return b
	}
	var maker int64
	if err := st.Pool.QueryRow(ctx, `select maker_order_seq from trades where market_id = $1 and taker_order_seq = $2`, m, q).Scan(&maker); err != nil || maker != r ||
		q != 6 || len(moves) != 4 || moves[0].seq != p || moves[2].seq != r || !slices.Equal(inBatch(moves), []bool{true, false, true, false}) {
		t.Logf("Q is seq %d and met seq %d (%v), the moves are %+v: the commands did not run in one batch, in order", q, maker, err, moves)
		return st, m, p, r, q, moves, false
	}
	return st, m, p, r, q, moves, true

}
