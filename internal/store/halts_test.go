package store

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/pmx-dev/pmx/internal/domain"
	"github.com/pmx-dev/pmx/internal/poll"
	"github.com/pmx-dev/pmx/internal/records"
)

// TestHalts holds migration 033 to its rule: every change of a halt raises the version (a change
// of nothing does not), a batch that decided under another version fails at commit (HaltsMoved),
// a change waits for the batches under way to commit before it lands, and a batch that waited
// for a change checks the version it committed.
func TestHalts(t *testing.T) {
	ctx := context.Background()
	st := newTestStore(t)
	now := time.Now().UTC().Truncate(time.Microsecond)
	name := "halted"
	m, err := st.CreateMarket(ctx, records.Market{ID: uuid.New(), Name: &name, Question: "Halted?", Status: domain.MarketOpen,
		LabelA: "YES", LabelB: "NO", CreatedAt: now, UpdatedAt: now})
	if err != nil {
		t.Fatal(err)
	}
	version := func() int64 {
		t.Helper()
		h, err := st.Halts(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return h.Version
	}
	if v := version(); v != 0 {
		t.Fatalf("a new database's halts are at version %d, want 0", v)
	}

	// A market's pause: changed once, shown on its row and in the halts.
	for i, want := range []bool{true, false} {
		changed, err := st.SetMarketPaused(ctx, m.ID, true, now)
		if err != nil || changed != want {
			t.Fatalf("pausing the market, time %d: changed %v, %v; want %v", i+1, changed, err, want)
		}
	}
	h, err := st.Halts(ctx)
	if err != nil || h.Version != 1 || !h.Markets[m.ID] || h.Exchange {
		t.Fatalf("halts after a pause: %+v, %v; want version 1 with the market", h, err)
	}
	if got, err := st.Market(ctx, m.ID); err != nil || !got.Paused || got.Halted != domain.HaltMarket {
		t.Fatalf("the paused market reads paused %v, halted %q (%v)", got.Paused, got.Halted, err)
	}
	if _, err := st.SetMarketPaused(ctx, uuid.New(), true, now); !errors.Is(err, ErrNotFound) {
		t.Fatalf("pausing a market that does not exist: %v, want ErrNotFound", err)
	}

	// The exchange's halt overrides the market's own.
	if changed, err := st.SetExchangeHalted(ctx, true, now); err != nil || !changed {
		t.Fatalf("halting the exchange: %v, %v", changed, err)
	}
	if got, err := st.Market(ctx, m.ID); err != nil || got.Halted != domain.HaltExchange {
		t.Fatalf("with the exchange halted the market reads halted %q (%v)", got.Halted, err)
	}
	if halted, _, err := st.ExchangeHalt(ctx); err != nil || !halted {
		t.Fatalf("ExchangeHalt: %v, %v", halted, err)
	}
	if v := version(); v != 2 {
		t.Fatalf("version %d after two changes, want 2", v)
	}

	// A batch decided under version 1 fails; under 2 it commits.
	conn, err := st.BatchConn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	for _, c := range []struct {
		version int64
		moved   bool
	}{{1, true}, {2, false}} {
		v := c.version
		_, err := conn.CommitBatch(ctx, &Batch{Now: now, Unlocked: true, Halts: &v})
		if HaltsMoved(err) != c.moved || !c.moved && err != nil {
			t.Fatalf("a batch decided under version %d at version 2: %v, want moved %v", v, err, c.moved)
		}
	}

	// A change waits for a batch under way, which holds the halts' mark from its first statement,
	// and lands after its commit: the batch, decided under version 2, commits.
	waitingForMark := func(what string) {
		t.Helper()
		poll.Wait(t, 10*time.Second, what, func() bool {
			var waiting bool
			err := st.Pool.QueryRow(ctx, `select exists (select 1 from pg_locks where locktype = 'advisory' and not granted)`).Scan(&waiting)
			return err == nil && waiting
		})
	}
	if _, err := conn.BeginBatch(ctx, Begin{}); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := st.SetExchangeHalted(ctx, false, now)
		done <- err
	}()
	waitingForMark("the change to wait for the halts' mark")
	select {
	case err := <-done:
		t.Fatalf("the change landed while a batch held the halts' mark: %v", err)
	default:
	}
	v2 := int64(2)
	if _, err := conn.CommitBatch(ctx, &Batch{Now: now, Halts: &v2}); err != nil {
		t.Fatalf("a batch decided under version 2 that began before the change: %v", err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if v := version(); v != 3 {
		t.Fatalf("version %d after the third change, want 3", v)
	}

	// A batch that waits for the mark behind a change under way reads the version the change
	// committed: decided under version 3, it fails once the change raises it to 4.
	tx, err := st.Pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	if _, err := tx.Exec(ctx, `select change_halts()`); err != nil {
		t.Fatal(err)
	}
	committed := make(chan error, 1)
	go func() {
		v3 := int64(3)
		_, err := conn.CommitBatch(ctx, &Batch{Now: now, Unlocked: true, Halts: &v3})
		committed <- err
	}()
	waitingForMark("the batch to wait for the halts' mark")
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-committed; !HaltsMoved(err) {
		t.Fatalf("a batch decided under version 3 that waited for a change to 4: %v, want HaltsMoved", err)
	}
	if v := version(); v != 4 {
		t.Fatalf("version %d after the fourth change, want 4", v)
	}
}
