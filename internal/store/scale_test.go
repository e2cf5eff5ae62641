package store_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/pmx-dev/pmx/internal/records"
	"github.com/pmx-dev/pmx/internal/store"
	"github.com/pmx-dev/pmx/internal/storetest"
)

// TestReadsAtScale times pages of GET /fills and GET /market/candles on a database holding
// $PMX_SCALE_TRADES trades (10,000,000 for docs/performance.md) over 100 markets, 1,000 accounts
// and 100 days; it is skipped unless the variable is set, as loading takes minutes:
//
//	PMX_SCALE_TRADES=10000000 go test -run TestReadsAtScale -v -timeout 60m ./internal/store
func TestReadsAtScale(t *testing.T) {
	n, err := strconv.Atoi(os.Getenv("PMX_SCALE_TRADES"))
	if err != nil || n <= 0 {
		t.Skip("set PMX_SCALE_TRADES to the number of trades to load")
	}
	const markets, accounts, ordersPerMarket = 100, 1000, 10_000
	const span = 100 * 24 * time.Hour
	ctx := context.Background()
	st := storetest.New(t)
	now := time.Now().UTC()
	var ids []uuid.UUID
	for i := range markets {
		name := fmt.Sprintf("scale-%d", i)
		m, err := st.CreateMarket(ctx, records.Market{ID: uuid.New(), Name: &name, Question: "Scale?", CreatedAt: now.Add(-span)})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, m.ID)
	}
	var firstAccount int64
	for i := range accounts {
		a, err := st.CreateAccount(ctx, fmt.Sprintf("scale-%d", i), 1_000_000, now)
		if err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			firstAccount = a.ID
		}
	}
	start := time.Now()
	// Order seq s of every market belongs to account s mod 1,000; trade i is in market i mod 100,
	// between a taker and a maker order of that market, i × (span / n) before now.
	if _, err := st.Pool.Exec(ctx, `insert into orders (id, market_id, seq, account_id, side, outcome, price, quantity,
		  filled_quantity, status, created_at, updated_at)
		select gen_random_uuid(), m, s, $2 + s % $3, 'BUY', case when s % 2 = 0 then 'YES' else 'NO' end, 50, 1000, 1000,
		       'FILLED', $4, $4
		from unnest($1::uuid[]) m, generate_series(1, $5) s`, ids, firstAccount, accounts, now.Add(-span), ordersPerMarket); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Pool.Exec(ctx, `insert into trades (id, market_id, seq, kind, yes_price, quantity, taker_order_seq,
		  maker_order_seq, taker_account_id, maker_account_id, taker_side, taker_outcome, taker_price, created_at)
		select gen_random_uuid(), ($1::uuid[])[i % 100 + 1], i / 100 + 1, 'MINT', 30 + (i * 7) % 40, 1 + i % 5,
		       ts, ms, $2 + ts % $3, $2 + ms % $3, 'BUY', case when ts % 2 = 0 then 'YES' else 'NO' end, 50,
		       $4::timestamptz - i * ($5::interval / $6)
		from (select i, 1 + (i * 7919) % $7 as ts, 1 + (i * 104729 + 1) % $7 as ms from generate_series(1::bigint, $6::bigint) i) g`,
		ids, firstAccount, accounts, now, span.String(), n, ordersPerMarket); err != nil {
		t.Fatal(err)
	}
	if err := st.RebuildCandles(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Pool.Exec(ctx, `analyze`); err != nil {
		t.Fatal(err)
	}
	t.Logf("loaded %d trades and %d orders in %v", n, markets*ordersPerMarket, time.Since(start).Round(time.Second))

	rng := rand.New(rand.NewPCG(1, 2))
	measure := func(name string, call func() (int, error)) {
		var took []time.Duration
		rows := 0
		for range 200 {
			t0 := time.Now()
			got, err := call()
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			took, rows = append(took, time.Since(t0)), rows+got
		}
		slices.Sort(took)
		t.Logf("%-52s p50 %8v  p99 %8v  (%.0f rows a call)", name, took[100].Round(time.Microsecond), took[197].Round(time.Microsecond), float64(rows)/200)
	}
	account := func() int64 { return firstAccount + rng.Int64N(accounts) }
	measure("GET /fills, first page of 100", func() (int, error) {
		f, err := st.Fills(ctx, account(), nil, nil, 100)
		return len(f), err
	})
	measure("GET /fills, a page of 100 a month back", func() (int, error) {
		f, err := st.Fills(ctx, account(), nil, &store.Cursor{CreatedAt: now.Add(-30 * 24 * time.Hour), ID: uuid.Max}, 100)
		return len(f), err
	})
	measure("GET /fills?marketId=, first page of 100", func() (int, error) {
		m := ids[rng.IntN(markets)]
		f, err := st.Fills(ctx, account(), &m, nil, 100)
		return len(f), err
	})
	for _, c := range []struct {
		name  string
		every time.Duration
	}{{"1m", time.Minute}, {"5m", 5 * time.Minute}, {"1h", time.Hour}, {"1d", 24 * time.Hour}} {
		measure("GET /market/candles, 100 × "+c.name, func() (int, error) {
			got, err := st.Candles(ctx, ids[rng.IntN(markets)], c.every, now.Add(-100*c.every), now)
			return len(got), err
		})
	}
	measure("GET /market/candles, 1,000 × 1h", func() (int, error) {
		got, err := st.Candles(ctx, ids[rng.IntN(markets)], time.Hour, now.Add(-1000*time.Hour), now)
		return len(got), err
	})
	measure("GET /market/candles, 1,000 × 5m", func() (int, error) {
		got, err := st.Candles(ctx, ids[rng.IntN(markets)], 5*time.Minute, now.Add(-5000*time.Minute), now)
		return len(got), err
	})
}
