package audit_test

import (
	"context"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/pmx-dev/pmx/engine"
	"github.com/pmx-dev/pmx/internal/audit"
	"github.com/pmx-dev/pmx/internal/store/db/dbtest"
)

// BenchmarkAuditMarket audits one market of about a million log events — placements, cancels and
// trades — written straight into Postgres from a random stream run through the engine (the
// writing is not timed), and reports the audit's events per second.
//
//	go test -run '^$' -bench BenchmarkAuditMarket -benchtime 3x -timeout 600s ./internal/audit/
func BenchmarkAuditMarket(b *testing.B) {
	pool := dbtest.New(b)
	ctx := context.Background()
	const accounts, grant = 64, int64(1) << 50
	ids := make([]int64, accounts)
	for i := range ids {
		ids[i] = dbtest.Account(b, pool, "trader"+string(rune('a'+i%26))+string(rune('a'+i/26)), grant)
	}
	m := dbtest.Market(b, pool, nil)

	// A stream of BUY YES and BUY NO orders around a drifting mid (so every trade mints and no
	// account ever sells what it lacks), about a third of those resting cancelled later.
	r := rand.New(rand.NewPCG(1, 54))
	book := engine.New(1 << 16)
	var res engine.Result
	type row struct {
		id               uuid.UUID
		account          int64
		side, outcome    string
		price            int
		qty, filled      int64
		status, reason   string
		created, updated time.Time
	}
	var orders []row
	var trades [][]any
	cash := map[int64]int64{}
	shares := map[[2]int64]int64{}
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	at := func(step int) time.Time { return base.Add(time.Duration(step) * time.Microsecond) }
	var resting []int64
	mid, events := 50, 0
	for events < 1_000_000 {
		step := len(orders) + 1
		if len(resting) > 200 && r.IntN(3) == 0 { // cancel a random resting order, before this step
			i := r.IntN(len(resting))
			seq := resting[i]
			resting[i] = resting[len(resting)-1]
			resting = resting[:len(resting)-1]
			if st, err := book.Cancel(engine.OrderID(seq)); err == nil {
				o := &orders[seq-1]
				o.status, o.reason, o.updated, o.filled = st.Status.String(), "USER", at(step), st.Filled
				events++
			}
		}
		mid = min(max(mid+r.IntN(3)-1, 10), 90)
		acct := ids[r.IntN(accounts)]
		outcome, price := engine.Yes, mid-3+r.IntN(7)
		if r.IntN(2) == 0 {
			outcome, price = engine.No, 100-mid-3+r.IntN(7)
		}
		price = min(max(price, 1), 99)
		o := engine.Order{ID: engine.OrderID(step), Account: engine.AccountID(acct), Side: engine.Buy, Outcome: outcome,
			Price: price, Quantity: 1 + r.Int64N(20)}
		if err := book.Submit(o, &res); err != nil {
			b.Fatal(err)
		}
		orders = append(orders, row{id: uuid.New(), account: acct, side: "BUY", outcome: outcome.String(), price: price,
			qty: o.Quantity, created: at(step), updated: at(step)})
		events++
		for _, f := range res.Fills {
			trades = append(trades, []any{uuid.New(), m, int64(len(trades) + 1), f.Kind.String(), f.YesPrice, f.Quantity,
				int64(f.Taker.Order), int64(f.Maker.Order), int64(f.Taker.Account), int64(f.Maker.Account),
				f.Taker.Side.String(), f.Taker.Outcome.String(), f.Taker.Price, at(step)})
			for _, l := range []*engine.Leg{&f.Taker, &f.Maker} {
				cash[int64(l.Account)] += l.Cash + l.CashLocked
				shares[[2]int64{int64(l.Account), int64(l.Outcome)}] += l.Shares
				mk := &orders[l.Order-1]
				mk.filled, mk.status, mk.updated = l.Filled, l.Status.String(), at(step)
			}
			events++
		}
		for _, c := range res.Cancelled {
			orders[c.ID-1].status, orders[c.ID-1].reason, orders[c.ID-1].filled = c.Status.String(), "SELF_TRADE", c.Filled
			orders[c.ID-1].updated = at(step)
		}
		self := &orders[step-1]
		self.filled, self.status = res.Order.Filled, res.Order.Status.String()
		if res.Order.Status.Resting() {
			resting = append(resting, int64(step))
		}
	}
	locked := map[int64]int64{}
	for _, st := range book.Resting(nil) {
		c, _ := st.Lock()
		locked[int64(st.Account)] += c
	}
	rows := make([][]any, len(orders))
	for i, o := range orders {
		var reason any
		if o.reason != "" {
			reason = o.reason
		}
		rows[i] = []any{o.id, m, int64(i + 1), o.account, o.side, o.outcome, o.price, o.qty, o.filled, o.status,
			o.created, o.updated, "GTC", false, "CANCEL_RESTING", reason}
	}
	if _, err := pool.CopyFrom(ctx, pgx.Identifier{"orders"}, []string{"id", "market_id", "seq", "account_id", "side", "outcome",
		"price", "quantity", "filled_quantity", "status", "created_at", "updated_at", "time_in_force", "post_only", "self_trade",
		"cancel_reason"}, pgx.CopyFromRows(rows)); err != nil {
		b.Fatal(err)
	}
	if _, err := pool.CopyFrom(ctx, pgx.Identifier{"trades"}, []string{"id", "market_id", "seq", "kind", "yes_price", "quantity",
		"taker_order_seq", "maker_order_seq", "taker_account_id", "maker_account_id", "taker_side", "taker_outcome", "taker_price",
		"created_at"}, pgx.CopyFromRows(trades)); err != nil {
		b.Fatal(err)
	}
	for k, q := range shares {
		if _, err := pool.Exec(ctx, `insert into positions (account_id, market_id, outcome, id, quantity, locked_quantity, created_at, updated_at)
			values ($1, $2, $3, $4, $5, 0, $6, $6)`, k[0], m, engine.Outcome(k[1]).String(), uuid.New(), q, base); err != nil {
			b.Fatal(err)
		}
	}
	for _, id := range ids {
		if _, err := pool.Exec(ctx, `update accounts set available = $2, locked = $3 where id = $1`,
			id, grant+cash[id]-locked[id], locked[id]); err != nil {
			b.Fatal(err)
		}
	}
	if _, err := pool.Exec(ctx, `update markets set last_trade_price = $2 where id = $1`, m, book.LastTradePrice()); err != nil {
		b.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `vacuum analyze`); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	var last *audit.Report
	for b.Loop() {
		rep, err := audit.Run(ctx, pool, audit.Options{})
		if err != nil {
			b.Fatal(err)
		}
		if len(rep.Differences) > 0 {
			b.Fatalf("%d differences, the first: %s", len(rep.Differences), rep.Differences[0])
		}
		last = rep
	}
	b.ReportMetric(float64(last.LogEvents()), "events")
	b.ReportMetric(last.EventsPerSecond(), "events/s")
	b.Logf("%d orders, %d cancels, %d trades: %d events in %s", last.Orders, last.Cancel, last.Trades, last.LogEvents(), last.Took)
}
