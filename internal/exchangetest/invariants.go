package exchangetest

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pmx-dev/pmx/engine"
	"github.com/pmx-dev/pmx/internal/audit"
)

// invariants are the rules of docs/architecture.md §3 (and a few of the schema's own), each a
// query that returns one row per violation.
var invariants = []struct{ name, query string }{
	{"cash is conserved: Σ wallets + Σ allocations (the exchange's account, which fees pay, among them) + what open BUY orders lock (fee reserves included) + 100 × pairs outstanding + events' collateral + the exchange's remainders = Σ grants", `
		with ` + eventPayouts + `
		select a.money + 100 * p.pairs + e.collateral + r.kept, g.granted
		from (select coalesce(sum(available + locked), 0) as money from account_balances) a,
		     (select coalesce(sum(p.quantity), 0) as pairs from positions p join markets m on m.id = p.market_id
		       where p.outcome = 'YES' and m.event_id is null) p,
		     (select coalesce(sum(pays), 0) as collateral from (select distinct on (event_id) event_id, pays from payout) c) e,
		     (select coalesce(sum(amount), 0) as kept from exchange_remainders) r,
		     (select coalesce(sum(granted), 0) as granted from accounts) g
		where a.money + 100 * p.pairs + e.collateral + r.kept <> g.granted`},
	{"YES shares outstanding = NO shares outstanding, per market of no event", `
		select p.market_id, sum(p.quantity) filter (where p.outcome = 'YES'), sum(p.quantity) filter (where p.outcome = 'NO')
		from positions p join markets m on m.id = p.market_id where m.event_id is null group by p.market_id
		having coalesce(sum(p.quantity) filter (where p.outcome = 'YES'), 0) <> coalesce(sum(p.quantity) filter (where p.outcome = 'NO'), 0)`},
	// The event's ledger (docs/architecture.md §3, event.Totals.Check): whichever outcome wins,
	// the exchange pays the same, the collateral it holds for the event.
	{"for every event and outcome w, what the exchange pays if w wins is the event's collateral", `
		with ` + eventPayouts + `
		select event_id, min(pays), max(pays) from payout group by event_id having min(pays) <> max(pays)`},
	// docs/architecture.md §11: what open BUY orders lock and every holder's room stay within the
	// limit, unless the limit was lowered below the locks, when no holder has room left.
	{"under a maxLockedCash, Σ room + what open BUY orders lock ≤ the limit, or no room", `
		select a.id, a.max_locked_cash, coalesce(r.room, 0), open_buy_locks(a.id)
		from accounts a
		left join (select account_id, sum(room) as room from allocations group by account_id) r on r.account_id = a.id
		where a.max_locked_cash is not null and coalesce(r.room, 0) > 0
		  and coalesce(r.room, 0) + open_buy_locks(a.id) > a.max_locked_cash`},
	{"locked shares = what open SELL orders need", `
		select coalesce(p.account_id, o.account_id), coalesce(p.market_id, o.market_id), coalesce(p.outcome, o.outcome),
		       p.locked_quantity, o.need
		from positions p full join (
			select account_id, market_id, outcome, sum(quantity - filled_quantity) as need from orders
			where side = 'SELL' and status in ('OPEN', 'PARTIALLY_FILLED') group by account_id, market_id, outcome) o
		  on o.account_id = p.account_id and o.market_id = p.market_id and o.outcome = p.outcome
		where coalesce(p.locked_quantity, 0) <> coalesce(o.need, 0)`},
	{"no negative balance", `
		select 'account', id::text, available, 0 from accounts where available < 0
		union all
		select 'allocation', account_id::text || ' ' || holder, available, room from allocations where available < 0 or room < 0
		union all
		select 'position', id::text, quantity, locked_quantity from positions
		where quantity < 0 or locked_quantity < 0 or locked_quantity > quantity`},
	{"orders are consistent with their status", `
		select id, status, quantity, filled_quantity from orders
		where (status = 'FILLED') <> (filled_quantity = quantity)
		   or (status in ('OPEN', 'CANCELLED') and filled_quantity <> 0)
		   or (status in ('PARTIALLY_FILLED', 'PARTIALLY_FILLED_CANCELLED') and (filled_quantity = 0 or filled_quantity = quantity))`},
	{"only OPEN markets have resting orders", `
		select o.id, m.status from orders o join markets m on m.id = o.market_id
		where o.status in ('OPEN', 'PARTIALLY_FILLED') and m.status <> 'OPEN'`},
	{"a settled market holds no shares and paid each holder once", `
		select m.id, m.status, p.account_id, p.quantity from markets m join positions p on p.market_id = m.id
		where m.status in ('RESOLVED', 'CANCELED') and p.quantity <> 0`},
	{"filled quantities equal the trades", `
		select o.id, o.filled_quantity, coalesce(t.q, 0) from orders o left join (
			select market_id, seq, sum(q) as q from (
				select market_id, taker_order_seq as seq, quantity as q from trades
				union all select market_id, maker_order_seq, quantity from trades) x
			group by market_id, seq) t on t.market_id = o.market_id and t.seq = o.seq
		where o.filled_quantity <> coalesce(t.q, 0)`},
	// The hot tables carry no foreign keys (migration 006), so the references are checked here.
	{"every order, trade and position names an existing account and market, every trade its orders", `
		select 'order', o.id from orders o
		where not exists (select 1 from accounts a where a.id = o.account_id)
		   or not exists (select 1 from markets m where m.id = o.market_id)
		union all
		select 'trade', t.id from trades t
		where not exists (select 1 from accounts a where a.id = t.taker_account_id)
		   or not exists (select 1 from accounts a where a.id = t.maker_account_id)
		   or not exists (select 1 from markets m where m.id = t.market_id)
		   or not exists (select 1 from orders o where o.market_id = t.market_id and o.seq = t.taker_order_seq
		                                          and o.account_id = t.taker_account_id)
		   or not exists (select 1 from orders o where o.market_id = t.market_id and o.seq = t.maker_order_seq
		                                          and o.account_id = t.maker_account_id)
		union all
		select 'position', p.id from positions p
		where not exists (select 1 from accounts a where a.id = p.account_id)
		   or not exists (select 1 from markets m where m.id = p.market_id)`},
	// The feed (package feed): each market's kept event batches follow each other without a gap,
	// and the last ends at the market's event_seq.
	{"every market's feed is gapless and ends at its event_seq", `
		select e.market_id, e.first_seq, e.prev_last from (
			select market_id, first_seq, lag(last_seq) over (partition by market_id order by first_seq) as prev_last
			from market_events) e
		where e.prev_last is not null and e.first_seq <> e.prev_last + 1
		union all
		select m.id, m.event_seq, max(e.last_seq) from markets m join market_events e on e.market_id = m.id
		group by m.id, m.event_seq having max(e.last_seq) <> m.event_seq`},
}

// eventPayouts is a query's with-list naming payout: for each event and outcome w, what the
// exchange pays if w wins, 100 per YES share of w's market and per NO share of every other one.
const eventPayouts = `held as (
			select m.event_id, m.outcome_key,
			       coalesce(sum(p.quantity) filter (where p.outcome = 'YES'), 0) as yes,
			       coalesce(sum(p.quantity) filter (where p.outcome = 'NO'), 0) as no
			from markets m left join positions p on p.market_id = m.id
			where m.event_id is not null group by m.event_id, m.outcome_key),
		payout as (
			select h.event_id, h.outcome_key,
			       100 * (h.yes - h.no + sum(h.no) over (partition by h.event_id)) as pays
			from held h)`

// CheckInvariants checks every invariant in SQL, and the books in memory against Postgres when the
// target can, reporting each violation; then it audits the database (pmx audit, package
// internal/audit): the engine's replay of every market's commands against every fill, order,
// book, position and balance Postgres holds.
func CheckInvariants(t testing.TB, tg *Target) {
	t.Helper()
	if err := Invariants(context.Background(), tg.Store.Pool); err != nil {
		t.Error(err)
	}
	if tg.CheckBooks != nil {
		if err := tg.CheckBooks(context.Background()); err != nil {
			t.Errorf("books: %v", err)
		}
	}
	Audit(t, tg.Store.Pool)
}

// Audit runs pmx audit's check on the database pool reaches, failing t on each difference, and
// logs its summary (what it replayed, in how long).
func Audit(t testing.TB, pool *pgxpool.Pool) {
	t.Helper()
	r, err := audit.Run(context.Background(), pool, audit.Options{})
	if err != nil {
		t.Errorf("audit: %v", err)
		return
	}
	var out strings.Builder
	r.Write(&out)
	if len(r.Differences) > 0 {
		t.Errorf("audit:\n%s", out.String())
		return
	}
	t.Logf("audit: %s", out.String())
}

// Querier runs a query: a pool, a connection or a transaction.
type Querier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}

// Invariants checks every invariant in SQL and returns the violations found.
func Invariants(ctx context.Context, q Querier) error {
	var problems []string
	for _, inv := range invariants {
		rows, err := q.Query(ctx, inv.query)
		if err != nil {
			return fmt.Errorf("%s: %w", inv.name, err)
		}
		for rows.Next() {
			vals, err := rows.Values()
			if err != nil {
				rows.Close()
				return err
			}
			problems = append(problems, fmt.Sprintf("violated: %s: %v", inv.name, vals))
			if len(problems) > 20 {
				break
			}
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return fmt.Errorf("%s: %w", inv.name, err)
		}
	}
	if len(problems) > 0 {
		return fmt.Errorf("%s", strings.Join(problems, "\n"))
	}
	return nil
}

// CheckBooksOverAPI compares each market's order book, as the API serves it, with the book rebuilt
// from the resting orders in Postgres: for a target in another process, whose memory the test
// cannot reach.
func CheckBooksOverAPI(t testing.TB, tg *Target, c *Client, markets []uuid.UUID) {
	t.Helper()
	ctx := context.Background()
	for _, id := range markets {
		resting, err := tg.Store.RestingOrders(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		m, err := tg.Store.Market(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		states := make([]engine.OrderState, len(resting))
		for i, o := range resting {
			side, _ := engine.ParseSide(o.Side)
			outcome, _ := engine.ParseOutcome(o.Outcome)
			states[i] = engine.OrderState{Order: engine.Order{ID: engine.OrderID(o.Seq), Account: engine.AccountID(o.AccountID),
				Side: side, Outcome: outcome, Price: o.Price, Quantity: o.Quantity}, Filled: o.FilledQuantity}
		}
		last := 0
		if m.LastTradePrice != nil {
			last = *m.LastTradePrice
		}
		book, err := engine.Rebuild(states, last)
		if err != nil {
			t.Fatalf("market %s: %v", id, err)
		}
		var want engine.Depth
		book.Depth(10, &want)
		got := c.Book(t, id)
		if fmt.Sprint(levels(got.Yes.Bids), levels(got.Yes.Asks)) != fmt.Sprint(want.Yes.Bids, want.Yes.Asks) {
			t.Errorf("market %s: the API serves bids %v asks %v, Postgres rebuilds %v %v", id,
				got.Yes.Bids, got.Yes.Asks, want.Yes.Bids, want.Yes.Asks)
		}
	}
}

func levels(ls []Level) []engine.Level {
	out := make([]engine.Level, len(ls))
	for i, l := range ls {
		out[i] = engine.Level{Price: l.Price, Quantity: l.Quantity, Total: l.Total}
	}
	return out
}
