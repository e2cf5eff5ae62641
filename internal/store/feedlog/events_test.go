package feedlog

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/pmx-dev/pmx/internal/store/db/dbtest"
)

// batch is a stored batch of events, as a test lays them out.
type batch struct{ first, last int64 }

// pageOf is what a page of the events after after should hold, read the simplest way: every batch
// holding an event after after, oldest first, until they hold at least limit of them.
func pageOf(batches []batch, after int64, limit int) []batch {
	var out []batch
	held := int64(0)
	for _, b := range batches {
		if b.last <= after || held >= int64(limit) {
			continue
		}
		out = append(out, b)
		held += b.last - max(b.first-1, after)
	}
	return out
}

// randomLayout is a feed's batches: 0 to 60 of them, contiguous from a first seq that pruning
// may have moved on, mostly of a few events, now and then of many, with now and then a gap (a
// kept feed has none, but a page must not depend on that).
func randomLayout(rng *rand.Rand) []batch {
	var out []batch
	seq := int64(1)
	if rng.IntN(2) == 0 {
		seq += rng.Int64N(40) // a pruned head
	}
	for range rng.IntN(61) {
		n := 1 + rng.Int64N(4)
		if rng.IntN(10) == 0 {
			n = 1 + rng.Int64N(200)
		}
		if rng.IntN(15) == 0 {
			seq += 1 + rng.Int64N(5)
		}
		out = append(out, batch{seq, seq + n - 1})
		seq += n
	}
	return out
}

// afters are the seqs worth reading after in a layout: before it, its edges, inside it and
// past it.
func afters(rng *rand.Rand, batches []batch) []int64 {
	out := []int64{0, 1, 3, math.MaxInt64 - 1, math.MaxInt64}
	for _, b := range batches {
		if rng.IntN(4) == 0 {
			out = append(out, b.first-1, b.first, b.last-1, b.last, b.last+1)
		}
	}
	if len(batches) > 0 {
		last := batches[len(batches)-1].last
		out = append(out, last-1, last, last+1, last+50)
	}
	return out
}

// TestEventsAfterLayouts reads pages of market and account feeds of random layouts after every
// kind of seq, with limits of one event to more than a feed holds, and compares each with the
// simplest reading of what it should hold.
func TestEventsAfterLayouts(t *testing.T) {
	st := New(dbtest.New(t))
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(34, 1))
	now := time.Now()
	for layout := range 40 {
		batches := randomLayout(rng)
		market, account := uuid.New(), int64(layout+1)
		for _, b := range batches {
			events := []byte(fmt.Sprintf(`[%d,%d]`, b.first, b.last))
			if _, err := st.Pool.Exec(ctx, `insert into market_events (market_id, first_seq, last_seq, created_at, events)
				values ($1, $2, $3, $4, $5)`, market, b.first, b.last, now, events); err != nil {
				t.Fatal(err)
			}
			if _, err := st.Pool.Exec(ctx, `insert into account_events (account_id, first_seq, last_seq, created_at, events)
				values ($1, $2, $3, $4, $5)`, account, b.first, b.last, now, events); err != nil {
				t.Fatal(err)
			}
		}
		for _, after := range afters(rng, batches) {
			for _, limit := range []int{0, 1, 2, 3, 7, 100, 1000} {
				want := pageOf(batches, after, limit)
				got, err := st.EventsAfter(ctx, market, after, limit)
				if err != nil {
					t.Fatalf("layout %v: EventsAfter(%d, %d): %v", batches, after, limit, err)
				}
				var read []batch
				for _, b := range got {
					if b.Market != market || string(b.Events) != fmt.Sprintf(`[%d,%d]`, b.First, b.Last) {
						t.Fatalf("EventsAfter read %+v", b)
					}
					read = append(read, batch{b.First, b.Last})
				}
				if !slices.Equal(read, want) {
					t.Fatalf("layout %v: the market's batches after %d, limit %d: %v, want %v", batches, after, limit, read, want)
				}
				gotAccount, err := st.AccountEventsAfter(ctx, account, after, limit)
				if err != nil {
					t.Fatalf("layout %v: AccountEventsAfter(%d, %d): %v", batches, after, limit, err)
				}
				read = nil
				for _, b := range gotAccount {
					if b.Account != account || string(b.Events) != fmt.Sprintf(`[%d,%d]`, b.First, b.Last) {
						t.Fatalf("AccountEventsAfter read %+v", b)
					}
					read = append(read, batch{b.First, b.Last})
				}
				if !slices.Equal(read, want) {
					t.Fatalf("layout %v: the account's batches after %d, limit %d: %v, want %v", batches, after, limit, read, want)
				}
			}
		}
	}
}

// explained is what EXPLAIN ANALYZE says a query read: rows of tables (those returned and those
// its filters removed) and shared buffers.
type explained struct {
	Rows    float64
	Buffers float64
	Plan    string
}

// explain runs query with args (literals: uuids and numbers) as a prepared statement, in a custom
// or generic plan (what pgx's statement cache gets after a few calls), and says what it read.
func explain(t *testing.T, st *Log, query string, generic bool, args ...any) explained {
	t.Helper()
	ctx := context.Background()
	pc, err := st.Pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Release()
	conn := pc.Conn()
	types, values := make([]string, len(args)), make([]string, len(args))
	for i, a := range args {
		types[i], values[i] = "bigint", fmt.Sprint(a)
		if id, ok := a.(uuid.UUID); ok {
			types[i], values[i] = "uuid", "'"+id.String()+"'"
		}
	}
	mode := "force_custom_plan"
	if generic {
		mode = "force_generic_plan"
	}
	for _, q := range []string{"set plan_cache_mode = " + mode,
		"prepare explained(" + strings.Join(types, ", ") + ") as " + query} {
		if _, err := conn.Exec(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	defer conn.Exec(ctx, "deallocate explained; reset plan_cache_mode")
	var out []struct{ Plan map[string]any }
	if err := conn.QueryRow(ctx, "explain (analyze, buffers, format json) execute explained("+strings.Join(values, ", ")+")").Scan(&out); err != nil {
		t.Fatal(err)
	}
	var e explained
	var walk func(n map[string]any)
	walk = func(n map[string]any) {
		if _, ok := n["Relation Name"]; ok {
			loops, _ := n["Actual Loops"].(float64)
			for _, k := range []string{"Actual Rows", "Rows Removed by Filter", "Rows Removed by Index Recheck"} {
				v, _ := n[k].(float64)
				e.Rows += v * loops
			}
		}
		plans, _ := n["Plans"].([]any)
		for _, p := range plans {
			walk(p.(map[string]any))
		}
	}
	walk(out[0].Plan)
	for _, k := range []string{"Shared Hit Blocks", "Shared Read Blocks"} {
		v, _ := out[0].Plan[k].(float64)
		e.Buffers += v
	}
	plan, _ := json.Marshal(out[0].Plan)
	e.Plan = string(plan)
	return e
}

// TestEventPagesBounded reads pages of a market's and an account's feeds that keep 20,000
// batches (60,000 events) from the start, the middle and near the head, and checks from the plans
// that each read about as many rows as it returned, not the feed: issue 34's page from seq 0 read
// every batch, one near the head the whole table. So do the reads of where a feed starts.
func TestEventPagesBounded(t *testing.T) {
	st := New(dbtest.New(t))
	ctx := context.Background()
	const batches, size = 20_000, 3
	market, account := uuid.New(), int64(7)
	// Other feeds' rows around them, so that a scan of the table is not a scan of one feed.
	if _, err := st.Pool.Exec(ctx, `insert into market_events (market_id, first_seq, last_seq, created_at, events)
		select m, (i - 1) * $2 + 1, i * $2, now(), '[{"type":"trade"},{"type":"level"},{"type":"level"}]'
		from unnest(array[$3::uuid, gen_random_uuid(), gen_random_uuid()]) m, generate_series(1, $1) i`, batches, size, market); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Pool.Exec(ctx, `insert into account_events (account_id, first_seq, last_seq, created_at, events)
		select a, (i - 1) * $2 + 1, i * $2, now(), '[{"type":"order"},{"type":"fill"},{"type":"fill"}]'
		from unnest(array[$3::bigint, $3 + 1, $3 + 2]) a, generate_series(1, $1) i`, batches, size, account); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Pool.Exec(ctx, `vacuum analyze market_events, account_events`); err != nil {
		t.Fatal(err)
	}
	const head = batches * size
	for _, c := range []struct {
		name  string
		after int64
		limit int
	}{
		{"from 0", 0, 100}, {"from 0", 0, 1000}, {"from the middle", head / 2, 100}, {"from the middle", head/2 + 1, 1000},
		{"near the head", head - 10, 100}, {"near the head", head - 10, 1000}, {"at the head", head, 1000},
	} {
		for _, generic := range []bool{false, true} {
			for _, q := range []struct {
				table, sql string
				key        any
			}{{"market_events", marketEventsAfter, market}, {"account_events", accountEventsAfter, account}} {
				e := explain(t, st, q.sql, generic, eventsAfterArgs(q.key, c.after, c.limit)...)
				// The batches that hold the page's events, one before them and one after.
				most := float64(min(c.limit, head-int(c.after)))/size + 3
				if e.Rows > most || e.Buffers > 20+most/10 {
					t.Errorf("a page of %s %s (after %d, limit %d, generic plan %v) read %.0f rows and %.0f buffers, want at most %.0f and %.0f: %s",
						q.table, c.name, c.after, c.limit, generic, e.Rows, e.Buffers, most, 20+most/10, e.Plan)
				}
			}
		}
	}
	for _, q := range []struct {
		name, sql string
		key       any
	}{
		{"FirstEvent", firstEventSQL, market},
		{"AccountFeed", accountFeedSQL, account},
	} {
		for _, generic := range []bool{false, true} {
			if e := explain(t, st, q.sql, generic, q.key); e.Rows > 2 || e.Buffers > 10 {
				t.Errorf("%s (generic plan %v) read %.0f rows and %.0f buffers: %s", q.name, generic, e.Rows, e.Buffers, e.Plan)
			}
		}
	}
}
