package feedlog

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/pmx-dev/pmx/internal/feed"
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
				gotAccount, err := st.AccountEventsAfter(ctx, account, map[string]int64{"": after}, limit, nil)
				if err != nil {
					t.Fatalf("layout %v: AccountEventsAfter(%d, %d): %v", batches, after, limit, err)
				}
				read = nil
				for _, b := range gotAccount {
					if b.Account != account || b.Holder != "" || string(b.Events) != fmt.Sprintf(`[%d,%d]`, b.First, b.Last) {
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
		switch v := a.(type) {
		case uuid.UUID:
			types[i], values[i] = "uuid", "'"+v.String()+"'"
		case string:
			types[i], values[i] = "text", "'"+v+"'"
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

// TestEventPagesBounded reads pages of a market's feed and of an account's stream that keep 20,000
// batches (60,000 events) from the start, the middle and near the head, and checks from the plans
// that each read about as many rows as it returned, not the feed: issue 34's page from seq 0 read
// every batch, one near the head the whole table. The account's stream is one of three of its
// feed, interleaved by position. So do the reads of where a feed and its streams start.
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
	if _, err := st.Pool.Exec(ctx, `insert into account_events (account_id, holder, first_seq, last_seq, created_at, events)
		select a, h, (i - 1) * $2 + 1, i * $2, now(), '[{"type":"order"},{"type":"fill"},{"type":"fill"}]'
		from generate_series(1, $1) i, unnest(array[$3::bigint, $3 + 1, $3 + 2]) a, unnest(array['', 'shard-a', 'shard-b']) h
		order by i`, batches, size, account); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Pool.Exec(ctx, `insert into accounts (id, uid, name, available, granted, event_seq, created_at, updated_at) overriding system value
		values ($1, gen_random_uuid(), 'a', 0, 0, $2, now(), now())`, account, batches*size); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Pool.Exec(ctx, `insert into allocations (account_id, holder, event_seq)
		values ($1, 'shard-a', $2), ($1, 'shard-b', $2)`, account, batches*size); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Pool.Exec(ctx, `vacuum analyze market_events, account_events, accounts, allocations`); err != nil {
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
				args       []any
				rowsPerBuf float64 // of the feed read, in the heap pages it shares with the others
			}{{"market_events", marketEventsAfter, eventsAfterArgs(market, c.after, c.limit), 10},
				// A stream's rows share their pages with the two other accounts' and the two other
				// streams': 9 feeds' rows interleaved, where the markets' are 3.
				{"account_events", accountStreamAfter, append(eventsAfterArgs(account, c.after, c.limit), "shard-a"), 5}} {
				e := explain(t, st, q.sql, generic, q.args...)
				// The batches that hold the page's events, one before them and one after.
				most := float64(min(c.limit, head-int(c.after)))/size + 3
				if buffers := 20 + most/q.rowsPerBuf; e.Rows > most || e.Buffers > buffers {
					t.Errorf("a page of %s %s (after %d, limit %d, generic plan %v) read %.0f rows and %.0f buffers, want at most %.0f and %.0f: %s",
						q.table, c.name, c.after, c.limit, generic, e.Rows, e.Buffers, most, buffers, e.Plan)
				}
			}
		}
	}
	for _, q := range []struct {
		name, sql string
		key       any
		rows      float64
	}{
		{"FirstEvent", firstEventSQL, market, 2},
		// The account's row, its two allocations and each of the three streams' first batch; and
		// the exchange's account's row (migration 035), which Postgres's scan of a table of two
		// rows passes over.
		{"AccountFeed", accountFeedSQL, account, 7},
	} {
		for _, generic := range []bool{false, true} {
			if e := explain(t, st, q.sql, generic, q.key); e.Rows > q.rows || e.Buffers > 5*q.rows {
				t.Errorf("%s (generic plan %v) read %.0f rows and %.0f buffers: %s", q.name, generic, e.Rows, e.Buffers, e.Plan)
			}
		}
	}
}

// streamBatch is a stored batch of an account's stream, as TestAccountStreams lays them out.
type streamBatch struct {
	holder      string
	first, last int64
	position    int64
	market      uuid.UUID
}

// accountPageOf is what a page of an account's feed after the cursor after should hold, read the
// simplest way: every batch in position order holding an event after after (and not after upTo,
// of upTo's streams only, when set), until they hold at least limit of them.
func accountPageOf(batches []streamBatch, after, upTo map[string]int64, limit int) []streamBatch {
	var out []streamBatch
	held := int64(0)
	for _, b := range batches {
		last := b.last
		if upTo != nil {
			u, ok := upTo[b.holder]
			if !ok {
				continue
			}
			last = min(last, u)
		}
		if n := last - max(b.first-1, after[b.holder]); n > 0 && held < int64(limit) {
			out = append(out, b)
			held += n
		}
	}
	return out
}

// TestAccountStreams lays out accounts' feeds of three holders' streams interleaved by position,
// their markets moving from holder to holder (the old holder's batches of a market all before the
// new one's first), and reads pages after cursors anywhere in them (each stream's seq before,
// inside or past it; a holder left out of the cursor is at 0), whole or up to a cursor, comparing
// each with the simplest reading. Then, from every cursor a walk through the feed page by page
// gave (feed.AccountPage), the rest of the feed read page by page holds every event after the
// cursor once, and each market's in the order the batches took their positions.
func TestAccountStreams(t *testing.T) {
	st := New(dbtest.New(t))
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(53, 11))
	holders := []string{"", "shard-a", "shard-b"}
	now := time.Now().UTC()
	for layout := range 12 {
		account := dbtest.Account(t, st.Pool, fmt.Sprint("streams", layout), 0)
		markets := []uuid.UUID{uuid.New(), uuid.New(), uuid.New()}
		owner := map[uuid.UUID]string{}
		for _, m := range markets {
			owner[m] = holders[rng.IntN(len(holders))]
		}
		last := map[string]int64{}
		var batches []streamBatch
		position := int64(1_000 * layout)
		for range rng.IntN(80) {
			m := markets[rng.IntN(len(markets))]
			if rng.IntN(6) == 0 {
				owner[m] = holders[rng.IntN(len(holders))] // moved
			}
			h := owner[m]
			n := 1 + rng.Int64N(3)
			if rng.IntN(10) == 0 {
				n = 1 + rng.Int64N(30)
			}
			position += 1 + rng.Int64N(3)
			b := streamBatch{holder: h, first: last[h] + 1, last: last[h] + n, position: position, market: m}
			last[h] = b.last
			batches = append(batches, b)
			events := make([]map[string]any, n)
			for i := range events {
				events[i] = map[string]any{"type": "accepted", "order": map[string]any{"marketId": m}, "at": now}
			}
			raw, _ := json.Marshal(events)
			if _, err := st.Pool.Exec(ctx, `insert into account_events (account_id, holder, first_seq, last_seq, position, created_at, events)
				values ($1, $2, $3, $4, $5, $6, $7)`, account, h, b.first, b.last, b.position, now, raw); err != nil {
				t.Fatal(err)
			}
		}
		// Where the streams' last numbers are kept: the account's row for "", allocations for the others.
		if _, err := st.Pool.Exec(ctx, `update accounts set event_seq = $2 where id = $1`, account, last[""]); err != nil {
			t.Fatal(err)
		}
		for _, h := range holders[1:] {
			if _, err := st.Pool.Exec(ctx, `insert into allocations (account_id, holder, event_seq) values ($1, $2, $3)`, account, h, last[h]); err != nil {
				t.Fatal(err)
			}
		}
		streams, err := st.AccountFeed(ctx, account)
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range streams {
			if s.Last != last[s.Holder] || s.Last == 0 || s.First != 1 {
				t.Fatalf("layout %d: stream %+v, last %d", layout, s, last[s.Holder])
			}
		}
		if len(streams) != len(last) {
			t.Fatalf("layout %d: streams %+v, want %v", layout, streams, last)
		}
		seqs, err := st.AccountSeqs(ctx, []int64{account})
		if err != nil || !maps.Equal(seqs[account], last) && !(len(last) == 0 && seqs[account] == nil) {
			t.Fatalf("layout %d: AccountSeqs %v, %v; want %v", layout, seqs, err, last)
		}
		read := func(after, upTo map[string]int64, limit int) []streamBatch {
			t.Helper()
			got, err := st.AccountEventsAfter(ctx, account, after, limit, upTo)
			if err != nil {
				t.Fatalf("layout %d: AccountEventsAfter(%v, %d, %v): %v", layout, after, limit, upTo, err)
			}
			var out []streamBatch
			for _, b := range got {
				if b.Account != account {
					t.Fatalf("read %+v", b)
				}
				out = append(out, streamBatch{holder: b.Holder, first: b.First, last: b.Last, position: b.Position})
			}
			return out
		}
		strip := func(bs []streamBatch) []streamBatch {
			out := make([]streamBatch, len(bs))
			for i, b := range bs {
				out[i] = streamBatch{holder: b.holder, first: b.first, last: b.last, position: b.position}
			}
			return out
		}
		for range 60 {
			after := map[string]int64{}
			for _, h := range holders {
				if rng.IntN(4) > 0 {
					after[h] = rng.Int64N(last[h] + 3)
				}
			}
			var upTo map[string]int64
			if rng.IntN(3) == 0 {
				upTo = map[string]int64{}
				for _, h := range holders {
					if rng.IntN(3) > 0 {
						upTo[h] = after[h] + rng.Int64N(10)
					}
				}
			}
			limit := []int{0, 1, 2, 5, 20, 1000}[rng.IntN(6)]
			if got, want := read(after, upTo, limit), strip(accountPageOf(batches, after, upTo, limit)); !slices.Equal(got, want) {
				t.Fatalf("layout %d: after %v up to %v, limit %d:\n%v\nwant\n%v", layout, after, upTo, limit, got, want)
			}
		}
		// Every cursor a walk through the feed gives, then the rest of the feed from each.
		page := func(after feed.Cursor, limit int) ([]feed.AccountEvent, feed.Cursor) {
			t.Helper()
			got, err := st.AccountEventsAfter(ctx, account, after, limit, nil)
			if err != nil {
				t.Fatal(err)
			}
			batches := make([]feed.Batch, len(got))
			for i, b := range got {
				batches[i] = feed.Batch{Account: b.Account, Holder: b.Holder, First: b.First, Last: b.Last, Events: b.Events}
			}
			events, next, err := feed.AccountPage(batches, after, limit, nil)
			if err != nil {
				t.Fatal(err)
			}
			return events, next
		}
		positionOf := func(e feed.AccountEvent) int64 {
			for _, b := range batches {
				if b.holder == e.Stream && b.first <= e.Seq && e.Seq <= b.last {
					return b.position
				}
			}
			t.Fatalf("event %d of stream %q was never written", e.Seq, e.Stream)
			return 0
		}
		cursors := []feed.Cursor{{}}
		for c := (feed.Cursor{}); ; {
			events, next := page(c, 1+rng.IntN(7))
			if len(events) == 0 {
				break
			}
			cursors, c = append(cursors, next), next
		}
		for _, from := range cursors {
			seen := map[string]bool{}
			lastPos := map[uuid.UUID]int64{}
			for c := from; ; {
				events, next := page(c, 1+rng.IntN(7))
				if len(events) == 0 {
					break
				}
				for _, e := range events {
					k := fmt.Sprint(e.Stream, "/", e.Seq)
					if seen[k] || e.Seq <= from[e.Stream] {
						t.Fatalf("layout %d, from %v: event %s again, or before the cursor", layout, from, k)
					}
					seen[k] = true
					p := positionOf(e)
					if p < lastPos[e.Market()] {
						t.Fatalf("layout %d, from %v: event %s of market %s after a later one", layout, from, k, e.Market())
					}
					lastPos[e.Market()] = p
				}
				c = next
			}
			for _, h := range holders {
				for seq := from[h] + 1; seq <= last[h]; seq++ {
					if !seen[fmt.Sprint(h, "/", seq)] {
						t.Fatalf("layout %d, from %v: event %d of stream %q never read", layout, from, seq, h)
					}
				}
			}
		}
	}
}
