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
	"github.com/jackc/pgx/v5"

	"github.com/pmx-dev/pmx/internal/records"
	"github.com/pmx-dev/pmx/internal/store"
	"github.com/pmx-dev/pmx/internal/storetest"
)

// TestReadsAtScale checks pages of GET /fills and GET /market/candles against plain queries of
// the trades on a database of generated trades, and times them. By default it loads 20,000 trades
// over 20 markets and 100 accounts, which checks the answers in seconds; with $PMX_SCALE_TRADES set
// it loads that many over 100 markets and 1,000 accounts and logs each read's p50 and p99
// (10,000,000 for docs/performance.md's figures; loading takes minutes):
//
//	PMX_SCALE_TRADES=10000000 go test -run TestReadsAtScale -v -timeout 60m ./internal/store
func TestReadsAtScale(t *testing.T) {
	n, markets, accounts, ordersPerMarket := 20_000, 20, 100, 1_000
	timed := false
	if v := os.Getenv("PMX_SCALE_TRADES"); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil || n <= 0 {
			t.Fatalf("PMX_SCALE_TRADES=%q: want a positive number of trades", v)
		}
		markets, accounts, ordersPerMarket, timed = 100, 1000, 10_000, true
	}
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
	// Order seq s of every market belongs to account s mod accounts; trade i is in market
	// i mod markets, between a taker and a maker order of that market, (n − i) × (span / n) before
	// now, so that each market's trade seqs follow its trades' times as a batch writes them.
	if _, err := st.Pool.Exec(ctx, `insert into orders (id, market_id, seq, account_id, side, outcome, price, quantity,
		  filled_quantity, status, created_at, updated_at)
		select gen_random_uuid(), m, s, $2 + s % $3, 'BUY', case when s % 2 = 0 then 'YES' else 'NO' end, 50, 1000, 1000,
		       'FILLED', $4, $4
		from unnest($1::uuid[]) m, generate_series(1, $5) s`, ids, firstAccount, accounts, now.Add(-span), ordersPerMarket); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Pool.Exec(ctx, `insert into trades (id, market_id, seq, kind, yes_price, quantity, taker_order_seq,
		  maker_order_seq, taker_account_id, maker_account_id, taker_side, taker_outcome, taker_price, created_at)
		select gen_random_uuid(), ($1::uuid[])[i % $8 + 1], i / $8 + 1, 'MINT', 30 + (i * 7) % 40, 1 + i % 5,
		       ts, ms, $2 + ts % $3, $2 + ms % $3, 'BUY', case when ts % 2 = 0 then 'YES' else 'NO' end, 50,
		       $4::timestamptz - ($6 - i) * ($5::interval / $6)
		from (select i, 1 + (i * 7919) % $7 as ts, 1 + (i * 104729 + 1) % $7 as ms from generate_series(1::bigint, $6::bigint) i) g`,
		ids, firstAccount, accounts, now, span.String(), n, ordersPerMarket, markets); err != nil {
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
	// measure makes 200 calls of a read; every 20th answer is also checked against the same answer
	// read plainly from the trades (untimed: at scale the plain reads are slow).
	measure := func(name string, call func() (rows int, check func() error, err error)) {
		var took []time.Duration
		rows := 0
		for i := range 200 {
			t0 := time.Now()
			got, check, err := call()
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			took, rows = append(took, time.Since(t0)), rows+got
			if i%20 == 0 {
				if err := check(); err != nil {
					t.Fatalf("%s: %v", name, err)
				}
			}
		}
		if rows == 0 {
			t.Fatalf("%s: 200 calls answered no rows, so the data misses what the read is for", name)
		}
		if timed {
			slices.Sort(took)
			t.Logf("%-52s p50 %8v  p99 %8v  (%.0f rows a call)", name, took[100].Round(time.Microsecond), took[197].Round(time.Microsecond), float64(rows)/200)
		}
	}
	account := func() int64 { return firstAccount + rng.Int64N(int64(accounts)) }
	fills := func(market *uuid.UUID, after *store.Cursor) func() (int, func() error, error) {
		return func() (int, func() error, error) {
			a := account()
			got, err := st.Fills(ctx, a, market, after, 100)
			return len(got), func() error { return checkFills(ctx, st, a, market, after, got) }, err
		}
	}
	measure("GET /fills, first page of 100", fills(nil, nil))
	measure("GET /fills, a page of 100 a month back", fills(nil, &store.Cursor{CreatedAt: now.Add(-30 * 24 * time.Hour), ID: uuid.Max}))
	m := ids[rng.IntN(markets)]
	measure("GET /fills?marketId=, first page of 100", fills(&m, nil))
	candles := func(every time.Duration, count int) func() (int, func() error, error) {
		return func() (int, func() error, error) {
			m, from := ids[rng.IntN(markets)], now.Add(-time.Duration(count)*every)
			got, err := st.Candles(ctx, m, every, from, now)
			return len(got), func() error { return checkCandles(ctx, st, m, every, from, now, got) }, err
		}
	}
	for _, c := range []struct {
		name  string
		every time.Duration
	}{{"1m", time.Minute}, {"5m", 5 * time.Minute}, {"1h", time.Hour}, {"1d", 24 * time.Hour}} {
		measure("GET /market/candles, 100 × "+c.name, candles(c.every, 100))
	}
	measure("GET /market/candles, 1,000 × 1h", candles(time.Hour, 1000))
	measure("GET /market/candles, 1,000 × 5m", candles(5*time.Minute, 1000))
}

// checkFills compares a page of an account's fills with the same page read plainly: every trade
// the account took part in, as taker and as maker, newest first.
func checkFills(ctx context.Context, st *store.Store, account int64, market *uuid.UUID, after *store.Cursor, got []records.Fill) error {
	var afterAt *time.Time
	afterID := uuid.Nil
	if after != nil {
		afterAt, afterID = &after.CreatedAt, after.ID
	}
	rows, err := st.Pool.Query(ctx, `select id, role, quantity from (
		  select id, 'TAKER' as role, quantity, created_at, market_id from trades where taker_account_id = $1
		  union all
		  select id, 'MAKER', quantity, created_at, market_id from trades where maker_account_id = $1) f
		where ($2::uuid is null or market_id = $2) and ($3::timestamptz is null or (created_at, id) < ($3, $4))
		order by created_at desc, id desc, role limit 100`, account, market, afterAt, afterID)
	if err != nil {
		return err
	}
	type fill struct {
		id       uuid.UUID
		role     string
		quantity int64
	}
	want, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (fill, error) {
		var f fill
		return f, r.Scan(&f.id, &f.role, &f.quantity)
	})
	if err != nil {
		return err
	}
	// A trade between two orders of one account is two fills side by side with the same time and
	// id, which either order answers truly; compare them in the plain read's order.
	have := make([]fill, len(got))
	for i, f := range got {
		have[i] = fill{f.TradeID, f.Role, f.Quantity}
		if i > 0 && have[i].id == have[i-1].id && have[i].role < have[i-1].role {
			have[i], have[i-1] = have[i-1], have[i]
		}
	}
	if !slices.Equal(have, want) {
		return fmt.Errorf("account %d: got %d fills %v, the trades say %d: %v", account, len(have), have, len(want), want)
	}
	return nil
}

// checkCandles compares a market's candles with the same candles summed plainly from its trades,
// bucketed as the rolled-up minutes (or hours) the read uses: an interval holds the minutes that
// begin from the one holding from until before to.
func checkCandles(ctx context.Context, st *store.Store, market uuid.UUID, every time.Duration, from, to time.Time, got []records.Candle) error {
	base := "1 minute"
	if every >= time.Hour {
		base = "1 hour"
	}
	rows, err := st.Pool.Query(ctx, `select date_bin($2::interval, created_at, timestamptz '2000-01-01 00:00:00+00'),
		       (array_agg(yes_price order by seq))[1], max(yes_price), min(yes_price), (array_agg(yes_price order by seq desc))[1],
		       sum(quantity), count(*)
		from (select *, date_bin($5::interval, created_at, timestamptz '2000-01-01 00:00:00+00') as b from trades
		      where market_id = $1) t
		where b >= date_bin($2::interval, $3::timestamptz, timestamptz '2000-01-01 00:00:00+00') and b < $4
		group by 1 order by 1`, market, every, from, to, base)
	if err != nil {
		return err
	}
	want, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (records.Candle, error) {
		var c records.Candle
		var o, h, l, cl int16
		err := r.Scan(&c.Start, &o, &h, &l, &cl, &c.Volume, &c.Trades)
		c.Open, c.High, c.Low, c.Close = int(o), int(h), int(l), int(cl)
		return c, err
	})
	if err != nil {
		return err
	}
	if !slices.EqualFunc(got, want, func(a, b records.Candle) bool {
		return a.Start.Equal(b.Start) && a.Open == b.Open &&
			a.High == b.High && a.Low == b.Low && a.Close == b.Close && a.Volume == b.Volume && a.Trades == b.Trades
	}) {
		return fmt.Errorf("market %s, %v from %v: got %d candles %+v, the trades say %d: %+v", market, every, from, len(got), got, len(want), want)
	}
	return nil
}
