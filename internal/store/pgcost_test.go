package store

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/pmx-dev/pmx/internal/kit/pgcluster"
	"github.com/pmx-dev/pmx/internal/pgtest"
	"github.com/pmx-dev/pmx/internal/records"
)

// eventsAfter14b4c8f is the event page's query before issue 34, for TestPostgresCostPerCall to
// measure against.
func eventsAfter14b4c8f(table, key string) string {
	return `select ` + key + `, first_seq, last_seq, events from (
		  select *, sum(last_seq - greatest(first_seq, $2 + 1) + 1) over (order by first_seq) - (last_seq - greatest(first_seq, $2 + 1) + 1) as before
		  from ` + table + ` where ` + key + ` = $1 and last_seq > $2) e
		where before < $3 order by first_seq`
}

// TestPostgresCostPerCall measures what Postgres spends on each call of GET /market/events, a
// WebSocket resume from Postgres (the hub's page read) and the markets list, with the statements
// of 14b4c8f and of now, for a market that keeps 20,000 batches and for a fresh one, on a cluster
// of its own with pg_stat_statements, over one connection: its execution time per call and its
// backend's CPU per call (/proc). It is skipped unless PMX_PGCOST is set (docs/performance.md,
// issue 34):
//
//	PMX_PGCOST=1 go test -run TestPostgresCostPerCall -v -timeout 20m ./internal/store
func TestPostgresCostPerCall(t *testing.T) {
	if os.Getenv("PMX_PGCOST") == "" {
		t.Skip("set PMX_PGCOST to measure")
	}
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "pmxpgcost-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	c, err := pgcluster.Start(ctx, pgcluster.Options{DataDir: dir, Ephemeral: true,
		Settings: map[string]string{"shared_preload_libraries": "pg_stat_statements"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Stop(context.Background()) })
	url := pgtest.NewDatabase(t, c)
	sep := "?"
	if strings.Contains(url, "?") {
		sep = "&"
	}
	st, err := Open(ctx, url+sep+"pool_max_conns=1")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(st.Close)
	if _, _, err := st.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	exec := func(sql string, args ...any) {
		t.Helper()
		if _, err := st.Pool.Exec(ctx, sql, args...); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
	exec(`create extension pg_stat_statements`)
	var backend int
	if err := st.Pool.QueryRow(ctx, `select pg_backend_pid()`).Scan(&backend); err != nil {
		t.Fatal(err)
	}

	// 100 markets, newest last: the big one (20,000 batches of 3 events, ~250 bytes each, as a
	// trade and its two levels are) and a fresh one, whose 400 batches just fill a page of 1,000.
	now := time.Now().UTC()
	var markets []uuid.UUID
	for i := range 100 {
		name := fmt.Sprintf("cost-%d", i)
		m, err := st.CreateMarket(ctx, records.Market{ID: uuid.New(), Name: &name, Question: "Cost?",
			CreatedAt: now.Add(-14*24*time.Hour + time.Duration(i)*time.Second)})
		if err != nil {
			t.Fatal(err)
		}
		markets = append(markets, m.ID)
	}
	big, fresh := markets[99], markets[98]
	const size = 3
	for _, m := range []struct {
		id      uuid.UUID
		batches int
	}{{big, 20_000}, {fresh, 400}} {
		exec(`insert into market_events (market_id, first_seq, last_seq, created_at, events)
			select $1, (i - 1) * $3 + 1, i * $3, now(), convert_to(repeat('x', 250), 'UTF8') from generate_series(1, $2) i`,
			m.id, m.batches, size)
		exec(`update markets set event_seq = $2 where id = $1`, m.id, m.batches*size)
	}
	exec(`vacuum analyze`)

	cpu := func() time.Duration {
		raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", backend))
		if err != nil {
			t.Fatal(err)
		}
		f := strings.Fields(string(raw[strings.LastIndexByte(string(raw), ')')+2:]))
		utime, _ := strconv.ParseInt(f[11], 10, 64)
		stime, _ := strconv.ParseInt(f[12], 10, 64)
		return time.Duration(utime+stime) * 10 * time.Millisecond // USER_HZ is 100 on Linux
	}
	t.Logf("| call | statements | Postgres time per call | Postgres CPU per call | wall per call |")
	t.Logf("|---|---|---|---|---|")
	measure := func(name string, call func() error) {
		t.Helper()
		for range 3 {
			if err := call(); err != nil {
				t.Fatalf("%s: %v", name, err)
			}
		}
		exec(`select pg_stat_statements_reset()`)
		cpu0, start, n := cpu(), time.Now(), 0
		for n < 20_000 && (n < 20 || time.Since(start) < 3*time.Second) {
			if err := call(); err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			n++
		}
		wall, spent := time.Since(start), cpu()-cpu0
		var calls int64
		var ms float64
		if err := st.Pool.QueryRow(ctx, `select coalesce(sum(calls), 0)::bigint, coalesce(sum(total_exec_time), 0)::float8
			from pg_stat_statements where query not like '%pg_stat_statements%'`).Scan(&calls, &ms); err != nil {
			t.Fatal(err)
		}
		t.Logf("| %s | %.0f | %.3f ms | %.3f ms | %.3f ms |", name, float64(calls)/float64(n), ms/float64(n),
			spent.Seconds()*1000/float64(n), wall.Seconds()*1000/float64(n))
	}
	// page reads a page of the market's feed, with the query of before issue 34 (old) or the
	// store's own (EventsAfter, internal/store/feedlog).
	page := func(sql string, market uuid.UUID, after int64, limit int, old bool) error {
		if !old {
			_, err := st.EventsAfter(ctx, market, after, limit)
			return err
		}
		rows, err := st.Pool.Query(ctx, sql, market, after, max(limit, 0))
		if err != nil {
			return err
		}
		_, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (EventBatch, error) {
			var b EventBatch
			return b, r.Scan(&b.Market, &b.First, &b.Last, &b.Events)
		})
		return err
	}
	oldSQL := eventsAfter14b4c8f("market_events", "market_id")
	for _, v := range []struct {
		version, sql string
		old          bool
	}{{"14b4c8f", oldSQL, true}, {"now", "", false}} {
		for _, m := range []struct {
			name string
			id   uuid.UUID
			head int64
		}{{"20,000 batches", big, 60_000}, {"fresh", fresh, 1_200}} {
			for _, a := range []struct {
				where string
				after int64
			}{{"from 0", 0}, {"from the middle", m.head / 2}, {"near the head", m.head - 150}} {
				// GET /market/events?after=&limit=100: the market, where its feed starts, a page.
				measure(fmt.Sprintf("%s: GET /market/events %s, %s", v.version, a.where, m.name), func() error {
					if _, err := st.Market(ctx, m.id); err != nil {
						return err
					}
					if _, err := st.FirstEvent(ctx, m.id); err != nil {
						return err
					}
					return page(v.sql, m.id, a.after, 100, v.old)
				})
			}
			for _, a := range []struct {
				where string
				after int64
			}{{"from 0", 0}, {"near the head", m.head - 1000}} {
				// A resume from Postgres: where the feed starts and a page of 1,000 (feed.pageEvents).
				measure(fmt.Sprintf("%s: WebSocket resume %s, %s", v.version, a.where, m.name), func() error {
					if _, err := st.FirstEvent(ctx, m.id); err != nil {
						return err
					}
					return page(v.sql, m.id, a.after, 1000, v.old)
				})
			}
		}
	}

	// The list of 100 markets, fresh and then with two weeks of trading each (an hour candle an
	// hour: what a volume sums). 14b4c8f: a page, each market's row and day candles (ReadCandles),
	// and the page again (at least once; more while markets trade). Now: one statement.
	list := func(history string) {
		measure("14b4c8f: the markets list, "+history, func() error {
			rows, err := st.MarketsPage(ctx, "", nil, 100)
			if err != nil {
				return err
			}
			for _, m := range rows[:99] {
				if _, err := st.Market(ctx, m.ID); err != nil {
					return err
				}
				if _, err := st.Candles(ctx, m.ID, 24*time.Hour, m.CreatedAt.Truncate(24*time.Hour), now); err != nil {
					return err
				}
			}
			_, err = st.MarketsPage(ctx, "", nil, 99)
			return err
		})
		measure("now: the markets list, "+history, func() error {
			_, err := st.MarketList(ctx, nil, 100)
			return err
		})
	}
	list("100 fresh markets")
	exec(`insert into candles_1h (market_id, start, open, high, low, close, volume, trades, first_seq, last_seq)
		select m, date_bin('1 hour', $2::timestamptz, timestamptz '2000-01-01') - h * interval '1 hour', 50, 55, 45, 50, 100, 10, h * 10 + 1, h * 10 + 10
		from unnest($1::uuid[]) m, generate_series(1, 14 * 24) h`, markets, now)
	exec(`vacuum analyze`)
	list("100 markets with two weeks of trades")
}
