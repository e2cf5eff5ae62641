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
// and a change waits for the batches checking the version to commit before it lands.
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

	// A change waits for a batch that holds the check, and lands after it.
	tx, err := st.Pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	if _, err := tx.Exec(ctx, `select halt_check(2)`); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := st.SetExchangeHalted(ctx, false, now)
		done <- err
	}()
	poll.Wait(t, 10*time.Second, "the change to wait for the halts' mark", func() bool {
		var waiting bool
		err := st.Pool.QueryRow(ctx, `select exists (select 1 from pg_locks where locktype = 'advisory' and not granted)`).Scan(&waiting)
		return err == nil && waiting
	})
	select {
	case err := <-done:
		t.Fatalf("the change landed while a batch held the check: %v", err)
	default:
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if v := version(); v != 3 {
		t.Fatalf("version %d after the third change, want 3", v)
	}
}
