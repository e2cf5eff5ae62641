package batches

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/pmx-dev/pmx/internal/records"
)

// TestBatchReadsOnlyItsAccountsAllocations checks what a batch reads of its holder's allocations:
// the rows of the batch's own accounts, however many accounts the holder holds. A batch's
// statements keep the one generic plan they were first given (queueTxStart), and a shard gives
// them their plans in its first batches, while the table is small; such plans once read every
// allocation the holder held (by the primary key's second column, a scan of the whole index) for
// each batch, a cost that grew with the accounts a shard had met.
func TestBatchReadsOnlyItsAccountsAllocations(t *testing.T) {
	ctx := context.Background()
	st, alice, m := newTestTrader(t)

	// A connection of its own, on which auto_explain sends every statement's plan, with what
	// it read, as a notice.
	var mu sync.Mutex
	var plans []string
	cfg := st.Pool.Config().ConnConfig.Copy()
	cfg.OnNotice = func(_ *pgconn.PgConn, n *pgconn.Notice) {
		if _, plan, ok := strings.Cut(n.Message, "plan:"); ok {
			mu.Lock()
			plans = append(plans, plan)
			mu.Unlock()
		}
	}
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })

	seq := int64(0)
	batches := func() {
		t.Helper()
		now := time.Now().UTC().Truncate(time.Microsecond)
		order := func() Batch {
			seq++
			return Batch{Now: now, NewOrders: []records.Order{openOrder(alice, m, seq, "BUY", 10)},
				Cash: []CashDelta{{Account: alice.ID, Available: -10}}}
		}
		if _, err := BeginBatch(ctx, conn, Begin{Accounts: []int64{alice.ID}, Markets: []uuid.UUID{m.ID}, LockAccounts: true}); err != nil {
			t.Fatal(err)
		}
		locked := order()
		if _, err := CommitBatch(ctx, conn, &locked); err != nil {
			t.Fatal(err)
		}
		if _, err := BeginBatch(ctx, conn, Begin{Accounts: []int64{alice.ID}, Markets: []uuid.UUID{m.ID}}); err != nil {
			t.Fatal(err)
		}
		unlocked := order() // with events for the account's feed: the variant that numbers and writes them
		unlocked.Unlocked = true
		unlocked.Cash[0].EventCount, unlocked.Cash[0].Events = 1, []byte(`[{"type":"accepted"}]`)
		if _, err := CommitBatch(ctx, conn, &unlocked); err != nil {
			t.Fatal(err)
		}
		allocated := order() // its holder's rows exist: the accounts' statement updates, inserts none
		allocated.Unlocked, allocated.Allocated = true, true
		if _, err := CommitBatch(ctx, conn, &allocated); err != nil {
			t.Fatal(err)
		}
	}
	batches() // the plans are made while the holder holds one account

	var others []int64
	if err := st.Pool.QueryRow(ctx, `with a as (
			insert into accounts (uid, name, available, granted, created_at, updated_at)
			select gen_random_uuid(), 'other-' || g, 1000, 1000, now(), now() from generate_series(1, 500) g
			returning id)
		select array_agg(id order by id) from a`).Scan(&others); err != nil {
		t.Fatal(err)
	}
	allocateAll(t, st, others...)
	var held int
	if err := st.Pool.QueryRow(ctx, `select count(*) from allocations where holder = ''`).Scan(&held); err != nil {
		t.Fatal(err)
	}

	for _, s := range []string{`load 'auto_explain'`, `set auto_explain.log_min_duration = 0`,
		`set auto_explain.log_analyze = on`, `set auto_explain.log_format = json`,
		`set auto_explain.log_level = notice`, `set auto_explain.log_nested_statements = on`} {
		if _, err := conn.Exec(ctx, s); err != nil {
			t.Fatal(err)
		}
	}
	batches()

	mu.Lock()
	defer mu.Unlock()
	scans := 0
	for _, p := range plans {
		var plan struct {
			Query string `json:"Query Text"`
			Plan  map[string]any
		}
		if err := json.Unmarshal([]byte(p), &plan); err != nil {
			t.Fatalf("a plan auto_explain sent: %v\n%s", err, p)
		}
		read := 0.0
		var walk func(n map[string]any)
		walk = func(n map[string]any) {
			index, _ := n["Index Name"].(string) // a bitmap's index scan names no relation
			if (n["Relation Name"] == "allocations" || strings.HasPrefix(index, "allocations")) && strings.HasSuffix(n["Node Type"].(string), "Scan") {
				scans++
				read += n["Actual Rows"].(float64) * n["Actual Loops"].(float64)
			}
			children, _ := n["Plans"].([]any)
			for _, c := range children {
				walk(c.(map[string]any))
			}
		}
		walk(plan.Plan)
		if read > 2 { // alice has one allocation: a bitmap scan reads it twice, from the index and the table
			t.Errorf("a statement read %.0f rows and index entries of allocations for a batch of one account, whose holder holds %d:\n%s", read, held, plan.Query)
		}
	}
	if scans == 0 {
		t.Fatalf("no plan read allocations (of %d plans): the test checks nothing", len(plans))
	}
}
