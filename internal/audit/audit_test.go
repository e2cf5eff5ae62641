package audit_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/pmx-dev/pmx/engine"
	"github.com/pmx-dev/pmx/internal/audit"
	cmdaudit "github.com/pmx-dev/pmx/internal/cmd/audit"
	"github.com/pmx-dev/pmx/internal/domain"
	"github.com/pmx-dev/pmx/internal/event"
	"github.com/pmx-dev/pmx/internal/eventrec"
	"github.com/pmx-dev/pmx/internal/exchange"
	"github.com/pmx-dev/pmx/internal/pgtest"
	"github.com/pmx-dev/pmx/internal/shard"
	"github.com/pmx-dev/pmx/internal/store"
	"github.com/pmx-dev/pmx/internal/storetest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// traded is a database after real trading through a shard, and what the tests need of it.
type traded struct {
	url    string
	st     *store.Store
	market uuid.UUID // the market the faults are injected in
	alice  int64
	bob    int64
}

// trade runs real trading through a standalone shard: crosses, partial fills, cancels, amends in
// place and amends that move an order (twice), self-trade prevention, IOC, a market resolved, one
// voided, one closed and reopened, and an event of three outcomes with conversions, resolved.
func trade(t *testing.T) *traded {
	t.Helper()
	ctx := context.Background()
	url := pgtest.NewDatabase(t, pgtest.Shared(t))
	st, err := store.Open(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(st.Close)
	if _, _, err := st.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	s := shard.New(shard.Config{Store: st, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	t.Cleanup(s.Stop)
	d := &traded{url: url, st: st, market: storetest.Market(t, st), alice: storetest.Account(t, st, "alice", 100_000),
		bob: storetest.Account(t, st, "bob", 100_000)}
	carol := storetest.Account(t, st, "carol", 100_000)
	place := func(p exchange.PlaceRequest) int64 {
		t.Helper()
		o, err := s.Place(ctx, p)
		if err != nil {
			t.Fatalf("placing %+v: %v", p, err)
		}
		return o.Seq
	}
	order := func(account int64, m uuid.UUID, side engine.Side, outcome engine.Outcome, price int, q int64) exchange.PlaceRequest {
		return exchange.PlaceRequest{Account: account, Market: m, Side: side, Outcome: outcome, Price: price, Quantity: q}
	}
	amend := func(account int64, m uuid.UUID, seq int64, outcome engine.Outcome, price int, remaining int64) {
		t.Helper()
		if _, err := s.Amend(ctx, exchange.AmendRequest{Account: account, Market: m, Seq: seq, Side: engine.Buy, Outcome: outcome,
			Price: price, Remaining: remaining}); err != nil {
			t.Fatalf("amending seq %d: %v", seq, err)
		}
	}
	cancel := func(account int64, m uuid.UUID, seq int64) {
		t.Helper()
		if _, err := s.Cancel(ctx, exchange.CancelRequest{Account: account, Market: m, Seq: seq}); err != nil {
			t.Fatalf("cancelling seq %d: %v", seq, err)
		}
	}
	m := d.market
	a1 := place(order(d.alice, m, engine.Buy, engine.Yes, 40, 10))
	place(order(d.alice, m, engine.Buy, engine.Yes, 41, 5))
	place(order(d.bob, m, engine.Buy, engine.No, 60, 7)) // fills 5 at 41, then 2 at 40: two fills, two makers
	c1 := place(order(carol, m, engine.Buy, engine.No, 55, 3))
	amend(d.alice, m, a1, engine.Yes, 42, 0)                    // moves to the back at 42
	amend(d.alice, m, a1, engine.Yes, 0, 4)                     // in place: fewer shares
	amend(d.alice, m, a1, engine.Yes, 46, 0)                    // moves again, crosses carol at 45
	b2 := place(order(d.bob, m, engine.Buy, engine.No, 50, 10)) // rests at YES 50
	amend(d.bob, m, b2, engine.No, 0, 4)                        // in place
	a3 := place(order(d.alice, m, engine.Buy, engine.Yes, 30, 5))
	cancel(d.alice, m, a3)
	place(order(d.bob, m, engine.Sell, engine.No, 45, 2)) // meets bob's own ask at 50: self-trade cancels it
	place(exchange.PlaceRequest{Account: carol, Market: m, Side: engine.Buy, Outcome: engine.Yes, Price: 60, Quantity: 9,
		TimeInForce: engine.IOC}) // nothing left to meet but carol's own: IOC
	place(order(carol, m, engine.Buy, engine.Yes, 35, 6))
	place(order(d.bob, m, engine.Buy, engine.No, 66, 4)) // partially fills carol's 35
	_ = c1

	// A market closed (its orders cancelled), reopened, traded and resolved.
	m2 := storetest.Market(t, st)
	place(order(d.alice, m2, engine.Buy, engine.Yes, 70, 3))
	if err := s.Transition(ctx, m2, domain.CloseMarket); err != nil {
		t.Fatal(err)
	}
	if err := s.Transition(ctx, m2, domain.ReopenMarket); err != nil {
		t.Fatal(err)
	}
	place(order(d.alice, m2, engine.Buy, engine.Yes, 70, 3))
	place(order(d.bob, m2, engine.Buy, engine.No, 30, 3))
	place(order(carol, m2, engine.Buy, engine.No, 20, 2))
	if err := s.Transition(ctx, m2, domain.ResolveYes); err != nil {
		t.Fatal(err)
	}
	// A market voided.
	m3 := storetest.Market(t, st)
	place(order(d.bob, m3, engine.Buy, engine.Yes, 55, 4))
	place(order(carol, m3, engine.Buy, engine.No, 45, 4))
	if err := s.Transition(ctx, m3, domain.CancelMarket); err != nil {
		t.Fatal(err)
	}
	// An event of three outcomes: NO bought in each, converted, and resolved.
	spec := eventrec.Spec{Question: "Which one", Category: "test"}
	for i := range 3 {
		spec.Outcomes = append(spec.Outcomes, event.Outcome{Key: fmt.Sprintf("o%d", i), Label: fmt.Sprintf("Number %d", i)})
	}
	e, _, err := eventrec.Record(ctx, st, uuid.Nil, "test/audit", spec, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range e.Outcomes {
		place(order(d.alice, o.MarketID, engine.Buy, engine.Yes, 30, 4))
		place(order(d.bob, o.MarketID, engine.Buy, engine.No, 70, 4))
	}
	if _, err := s.Convert(ctx, exchange.ConvertRequest{Account: d.bob, Event: e.ID, Outcomes: []string{"o0", "o1"}, Quantity: 2}); err != nil {
		t.Fatal(err)
	}
	if err := s.TransitionEvent(ctx, e.ID, domain.EventAction{Action: domain.ResolveYes, Outcome: "o1"}); err != nil {
		t.Fatal(err)
	}
	// A second event, voided: what it keeps of the collateral is checked too.
	v, _, err := eventrec.Record(ctx, st, uuid.Nil, "test/void", spec, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range v.Outcomes {
		place(order(d.alice, o.MarketID, engine.Buy, engine.Yes, 20, 3))
		place(order(carol, o.MarketID, engine.Buy, engine.No, 80, 3))
	}
	if _, err := s.Convert(ctx, exchange.ConvertRequest{Account: carol, Event: v.ID, Outcomes: []string{"o0", "o2"}, Quantity: 1}); err != nil {
		t.Fatal(err)
	}
	if err := s.TransitionEvent(ctx, v.ID, domain.EventAction{Action: domain.CancelMarket}); err != nil {
		t.Fatal(err)
	}
	return d
}

func run(t *testing.T, d *traded) *audit.Report {
	t.Helper()
	r, err := audit.Run(context.Background(), d.st.Pool, audit.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// TestAuditAfterTrading audits a database after real trading, finds it clean, then injects one
// fault at a time and checks that the audit names it (and the command exits 1), undoing each.
func TestAuditAfterTrading(t *testing.T) {
	d := trade(t)
	ctx := context.Background()
	r := run(t, d)
	var out bytes.Buffer
	r.Write(&out)
	t.Log(out.String())
	if len(r.Differences) > 0 || len(r.CannotCheck) > 0 {
		t.Fatalf("the audit of real trading is not clean:\n%s", out.String())
	}
	if r.Replayed != 9 || r.Amends < 3 || r.Cancel < 3 || r.Trades < 10 || r.Conversions != 2 || r.Accounts != 4 || // three traders and the exchange's own
		r.AccountFills != 2*r.Trades { // every trade's two fills, each account's feed kept whole
		t.Fatalf("the audit checked less than the trading did: %+v", r)
	}

	exec := func(sql string, args ...any) {
		t.Helper()
		if _, err := d.st.Pool.Exec(ctx, sql, args...); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
	// A cancel in the batch that placed its order (a batch of a placement and a cancel of
	// everything, say) is as good: the replay waits for the placement.
	exec(`update orders set updated_at = created_at where market_id = $1 and cancel_reason = 'USER'`, d.market)
	if r := run(t, d); len(r.Differences) > 0 {
		t.Fatalf("a cancel in its order's own batch: %v", r.Differences)
	}
	faults := []struct {
		name, inject, undo string
		want               []string // each must be in some difference's text
	}{{
		name:   "a trade's price changed",
		inject: `update trades set yes_price = yes_price + 1 where market_id = $1 and seq = 1`,
		undo:   `update trades set yes_price = yes_price - 1 where market_id = $1 and seq = 1`,
		want:   []string{"fill: market", "trade seq 1 ", "at YES price 42", "at YES price 41"},
	}, {
		name: "two fills swapped",
		inject: `update trades t set maker_order_seq = u.maker_order_seq, yes_price = u.yes_price, quantity = u.quantity
			from trades u where t.market_id = $1 and u.market_id = $1 and t.seq in (1, 2) and u.seq = 3 - t.seq`,
		undo: `update trades t set maker_order_seq = u.maker_order_seq, yes_price = u.yes_price, quantity = u.quantity
			from trades u where t.market_id = $1 and u.market_id = $1 and t.seq in (1, 2) and u.seq = 3 - t.seq`,
		want: []string{"trade seq 1 is taker seq 3 (account 2), maker seq 1", "trade seq 2 is taker seq 3 (account 2), maker seq 2"},
	}, {
		name:   "an order's status flipped",
		inject: `update orders set status = 'OPEN' where market_id = $1 and seq = 2`,
		undo:   `update orders set status = 'FILLED' where market_id = $1 and seq = 2`,
		want:   []string{"order: market", "order seq 2 is OPEN with 5 filled in Postgres; the replay makes it FILLED"},
	}, {
		name:   "a cash row off by a cent",
		inject: `update accounts set available = available + 1 where id = (select id from accounts where name = 'alice')`,
		undo:   `update accounts set available = available - 1 where id = (select id from accounts where name = 'alice')`,
		want:   []string{"cash: account 1 holds", "its grant and every flow since make"},
	}, {
		name: "an acknowledged order deleted",
		inject: `create table deleted_order as select * from orders where market_id = $1 and seq = 9;
			delete from orders where market_id = $1 and seq = 9`,
		undo: `insert into orders select * from deleted_order; drop table deleted_order`,
		want: []string{"numbering: market", "no order holds number 9 of the order sequence"},
	}, {
		name: "a batch of the market's feed lost",
		inject: `create table lost_batch as select * from market_events where market_id = $1
				and convert_from(events, 'UTF8') like '%"type":"trade"%' order by first_seq offset 1 limit 1;
			delete from market_events where (market_id, first_seq) in (select market_id, first_seq from lost_batch)`,
		undo: `insert into market_events select * from lost_batch; drop table lost_batch`,
		want: []string{"feed: market", "is not the trades' next after the one before it"},
	}, {
		name:   "a fill in an account's feed altered",
		inject: fillEvents(`jsonb_set(e, '{fill,quantity}', to_jsonb((e->'fill'->>'quantity')::int + 1))`, 1),
		undo:   fillEvents(`jsonb_set(e, '{fill,quantity}', to_jsonb((e->'fill'->>'quantity')::int - 1))`, 1),
		want:   []string{"account feed: market", "is a TAKER fill of 6 for order", "is a MAKER fill of 6 for order", "trade seq 1 is 5 for account"},
	}, {
		name:   "a fill lost from an account's feed",
		inject: fillEvents(`jsonb_set(e, '{type}', '"lost"')`, 2),
		undo:   fillEvents(`jsonb_set(e, '{type}', '"fill"')`, 2),
		want:   []string{"account feed: market", "trade seq 2 has no fill event in account 1's feed", "trade seq 2 has no fill event in account 2's feed"},
	}, {
		name: "a batch of a moved order's terms unreadable",
		inject: `create table broken_batch as select * from account_events where account_id = (select id from accounts where name = 'alice')
				and convert_from(events, 'UTF8') like '%"type":"amended"%' order by first_seq limit 1;
			update account_events e set events = convert_to('[{"type":"amended"', 'UTF8') from broken_batch b
				where (e.account_id, e.holder, e.first_seq) = (b.account_id, b.holder, b.first_seq)`,
		undo: `update account_events e set events = b.events from broken_batch b
				where (e.account_id, e.holder, e.first_seq) = (b.account_id, b.holder, b.first_seq);
			drop table broken_batch`,
		want: []string{"account feed: account 1's events", "do not read as the orders' terms the replay needs",
			"look at account_events row (account_id, holder, first_seq) = (1, "},
	}, {
		name:   "the numbers a moved order's moves took altered in its account's feed",
		inject: moveNumbers(`jsonb_set(e, '{priority}', to_jsonb((e->>'priority')::int + 100))`),
		undo:   moveNumbers(`jsonb_set(e, '{priority}', to_jsonb((e->>'priority')::int - 100))`),
		want: []string{"numbering: market", "took number 105 of the order sequence when amended to 10 at 42, per its account's feed, but the market's orders end at number",
			"has priority 6, but its last move took number 106 of the order sequence, per its account's feed"},
	}, {
		name: "an account's feed numbered with a gap",
		inject: `update account_events set first_seq = first_seq + 1, last_seq = last_seq + 1
			where account_id = (select id from accounts where name = 'alice')
			  and first_seq = (select max(first_seq) from account_events where account_id = (select id from accounts where name = 'alice'))`,
		undo: `update account_events set first_seq = first_seq - 1, last_seq = last_seq - 1
			where account_id = (select id from accounts where name = 'alice')
			  and first_seq = (select max(first_seq) from account_events where account_id = (select id from accounts where name = 'alice'))`,
		want: []string{"account feed: account 1's stream", "jumps from event", "ends at event"},
	}}
	for _, f := range faults {
		t.Run(f.name, func(t *testing.T) {
			for _, stmt := range strings.Split(f.inject, ";") {
				exec(stmt, args(stmt, d)...)
			}
			defer func() {
				for _, stmt := range strings.Split(f.undo, ";") {
					exec(stmt, args(stmt, d)...)
				}
			}()
			r := run(t, d)
			var out bytes.Buffer
			r.Write(&out)
			t.Log(out.String())
			for _, w := range f.want {
				if !strings.Contains(out.String(), w) {
					t.Errorf("the audit did not name the fault (%q missing):\n%s", w, out.String())
				}
			}
			cmd := cmdaudit.NewCommand()
			var cmdOut bytes.Buffer
			cmd.SetOut(&cmdOut)
			cmd.SilenceErrors, cmd.SilenceUsage = true, true
			cmd.SetArgs([]string{"--database-url", d.url, "--log-level", "warn"})
			if err := cmd.ExecuteContext(ctx); !errors.Is(err, cmdaudit.ErrDifferences) {
				t.Errorf("pmx audit answered %v, want %v (exit status 1):\n%s", err, cmdaudit.ErrDifferences, cmdOut.String())
			}
		})
	}
	if r := run(t, d); len(r.Differences) > 0 {
		t.Fatalf("the faults were not undone: %v", r.Differences)
	}

	// A feed written before the shards told the numbers moves took (migration 039): the replay
	// gives the free numbers to the moves in time order, as before, right here (no batch moved
	// two orders).
	exec(moveNumbers(`e - 'priority'`), d.market)
	if r := run(t, d); len(r.Differences) > 0 || r.Amends < 3 {
		t.Fatalf("the feeds without the moves' numbers: %+v", r)
	}

	// Past retention: with the accounts' feeds gone, the market whose order was moved by amends
	// cannot be replayed, which the audit says, rather than call it a difference; the others are.
	exec(`delete from account_events`)
	r = run(t, d)
	out.Reset()
	r.Write(&out)
	t.Log(out.String())
	if len(r.Differences) > 0 || r.Replayed != 8 || !strings.Contains(out.String(), "not checked: market "+d.market.String()+" is not replayed: order") ||
		!strings.Contains(out.String(), "not checked: the cash of 4 accounts with orders or fees in a market not replayed") {
		t.Fatalf("the audit past retention:\n%s", out.String())
	}
}

// TestAuditAfterPruning prunes every feed event of real trading by the shards' own pruning
// (Store.PruneEvents, what the sweeper runs), which keeps the terms of the orders amends moved in
// order_terms: the market whose order was moved twice is still replayed whole and found clean,
// and a fault injected into those kept terms is a difference that names them.
func TestAuditAfterPruning(t *testing.T) {
	d := trade(t)
	ctx := context.Background()
	var moved uuid.UUID
	if err := d.st.Pool.QueryRow(ctx, `select id from orders where market_id = $1 and priority is not null`, d.market).Scan(&moved); err != nil {
		t.Fatal(err)
	}
	// Pruned a batch at a time, up to each batch that holds an event of the moved order's, the
	// order's terms are read part from order_terms, part from its feed, and the audit is clean.
	const terms = `exists (select 1 from jsonb_array_elements(convert_from(events, 'UTF8')::jsonb) e
		where e->'order'->>'id' = $1::text and e->>'type' in ('accepted', 'amended'))`
	rows, err := d.st.Pool.Query(ctx, `select created_at from account_events where `+terms+` order by position`, moved)
	if err != nil {
		t.Fatal(err)
	}
	cutoffs, err := pgx.CollectRows(rows, pgx.RowTo[time.Time])
	if err != nil {
		t.Fatal(err)
	}
	if len(cutoffs) < 4 { // accepted, and three amends
		t.Fatalf("the moved order's events are in %d batches: the test shows little", len(cutoffs))
	}
	for i, cutoff := range cutoffs {
		if _, err := d.st.PruneEvents(ctx, cutoff); err != nil {
			t.Fatal(err)
		}
		var archived, kept int
		if err := d.st.Pool.QueryRow(ctx, `select (select count(*) from order_terms where order_id = $1),
			(select count(*) from account_events where `+terms+`)`, moved).Scan(&archived, &kept); err != nil {
			t.Fatal(err)
		}
		if archived != i || kept != len(cutoffs)-i {
			t.Fatalf("pruned up to the moved order's batch %d: order_terms holds %d of its events, its feed %d batches", i, archived, kept)
		}
		r := run(t, d)
		var out bytes.Buffer
		r.Write(&out)
		if len(r.Differences) > 0 || r.Replayed != 9 || strings.Contains(out.String(), "is not replayed") {
			t.Fatalf("pruned up to the moved order's batch %d, the audit is not clean or not whole:\n%s", i, out.String())
		}
	}
	if _, err := d.st.PruneEvents(ctx, time.Now().Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	var left int
	if err := d.st.Pool.QueryRow(ctx, `select (select count(*) from account_events) + (select count(*) from market_events)`).Scan(&left); err != nil {
		t.Fatal(err)
	}
	if left != 0 {
		t.Fatalf("%d event batches left after pruning them all", left)
	}
	r := run(t, d)
	var out bytes.Buffer
	r.Write(&out)
	t.Log(out.String())
	if len(r.Differences) > 0 || r.Replayed != 9 || r.Amends < 3 || strings.Contains(out.String(), "is not replayed") ||
		len(r.CannotCheck) != 1 || !strings.Contains(r.CannotCheck[0], "the accounts' feeds: none is kept") {
		t.Fatalf("the audit after pruning every feed is not clean, or not whole:\n%s", out.String())
	}
	for _, f := range []struct{ name, inject, undo string }{{
		name:   "the terms accepted altered",
		inject: `update order_terms set price = price - 1 where order_id = $1 and not amended`,
		undo:   `update order_terms set price = price + 1 where order_id = $1 and not amended`,
	}, {
		name:   "an amend's price altered",
		inject: `update order_terms set price = price + 2 where order_id = $1 and seq = (select max(seq) from order_terms where order_id = $1)`,
		undo:   `update order_terms set price = price - 2 where order_id = $1 and seq = (select max(seq) from order_terms where order_id = $1)`,
	}} {
		t.Run(f.name, func(t *testing.T) {
			if _, err := d.st.Pool.Exec(ctx, f.inject, moved); err != nil {
				t.Fatal(err)
			}
			defer func() {
				if _, err := d.st.Pool.Exec(ctx, f.undo, moved); err != nil {
					t.Fatal(err)
				}
			}()
			r := run(t, d)
			var out bytes.Buffer
			r.Write(&out)
			t.Log(out.String())
			if want := "order_terms rows order_id = " + moved.String(); len(r.Differences) == 0 || !strings.Contains(out.String(), want) {
				t.Errorf("the audit did not name the fault (%q missing):\n%s", want, out.String())
			}
		})
	}
	if r := run(t, d); len(r.Differences) > 0 {
		t.Fatalf("the faults were not undone: %v", r.Differences)
	}
}

// fillEvents is a statement that rewrites, with change (an expression of e, one event as jsonb),
// the fill events of the market's trade of seq in the accounts' feeds, and no other event.
func fillEvents(change string, seq int) string {
	return fmt.Sprintf(`update account_events set events = convert_to((
			select jsonb_agg(case when e->>'type' in ('fill', 'lost') and e->'fill'->>'tradeId' = t.id::text then %s else e end order by i)::text
			from jsonb_array_elements(convert_from(events, 'UTF8')::jsonb) with ordinality as x(e, i)), 'UTF8')
		from trades t
		where t.market_id = $1 and t.seq = %d and position(t.id::text in convert_from(events, 'UTF8')) > 0`, change, seq)
}

// moveNumbers is a statement that rewrites, with change (an expression of e, one event as jsonb),
// every event of the accounts' feeds that tells the number a move took ("priority"), and no other.
func moveNumbers(change string) string {
	return fmt.Sprintf(`update account_events set events = convert_to((
			select jsonb_agg(case when e ? 'priority' then %s else e end order by i)::text
			from jsonb_array_elements(convert_from(events, 'UTF8')::jsonb) with ordinality as x(e, i)), 'UTF8')
		where position('"priority"' in convert_from(events, 'UTF8')) > 0 and $1::uuid is not null`, change)
}

// args gives a statement the argument it names: $1 the market.
func args(stmt string, d *traded) []any {
	if strings.Contains(stmt, "$1") {
		return []any{d.market}
	}
	return nil
}

// TestAuditReadOnly runs the audit, and the command, on connections where Postgres refuses every
// write (default_transaction_read_only, as on a hot standby): it writes nothing, so it runs.
func TestAuditReadOnly(t *testing.T) {
	d := trade(t)
	ctx := context.Background()
	cfg, err := pgx.ParseConfig(d.url)
	if err != nil {
		t.Fatal(err)
	}
	cfg.RuntimeParams["default_transaction_read_only"] = "on"
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, `update accounts set available = available`); err == nil {
		t.Fatal("the read-only connection wrote: the test shows nothing")
	}
	var progress bytes.Buffer
	r, err := audit.Run(ctx, conn, audit.Options{Progress: slog.New(slog.NewTextHandler(&progress, nil)), ProgressEvery: time.Nanosecond})
	if err != nil {
		t.Fatalf("the audit failed on a read-only connection: %v", err)
	}
	if len(r.Differences) > 0 {
		t.Fatalf("differences: %v", r.Differences)
	}
	if !strings.Contains(progress.String(), "msg=\"audit progress\" markets=9 of=9") {
		t.Errorf("the audit's progress:\n%s", progress.String())
	}
	cmd := cmdaudit.NewCommand()
	var out bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetArgs([]string{"--database-url", d.url + "&options=-c%20default_transaction_read_only%3Don", "--market", d.market.String()})
	if !strings.Contains(d.url, "?") {
		cmd.SetArgs([]string{"--database-url", d.url + "?options=-c%20default_transaction_read_only%3Don", "--market", d.market.String()})
	}
	if err := cmd.ExecuteContext(ctx); err != nil {
		t.Fatalf("pmx audit --market on a read-only connection: %v\n%s", err, out.String())
	}
	if !strings.Contains(out.String(), "audited 1 markets") || !strings.Contains(out.String(), "not checked: accounts' cash") {
		t.Errorf("pmx audit --market printed:\n%s", out.String())
	}
}
