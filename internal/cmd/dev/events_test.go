package dev

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/pmx-dev/pmx/engine"
	"github.com/pmx-dev/pmx/internal/domain"
	"github.com/pmx-dev/pmx/internal/pgtest"
	"github.com/pmx-dev/pmx/internal/store"
)

// eventManifest is an Event manifest of two outcomes, with extra lines at the end of its spec.
func eventManifest(extra string) string {
	return `apiVersion: pmx.dev/v1alpha1
kind: Event
metadata:
  name: cup-2027
spec:
  question: Who wins the 2027 cup?
  category: sports
  outcomes:
  - key: red
    label: Red
  - key: blue
    label: Blue
` + extra
}

// TestDevEventManifestPauseAndFees: pmx dev makes an Event manifest's spec.paused and spec.fees
// the event's at start, as the operator makes an Event's (eventrec.Pause, SetFees): the event is
// halted ("event") with the schedule, which its markets without one of their own carry; started
// again with a manifest that leaves both out, the event is resumed and its schedule taken away.
func TestDevEventManifestPauseAndFees(t *testing.T) {
	dir := t.TempDir()
	events := filepath.Join(dir, "events")
	if err := os.Mkdir(events, 0o755); err != nil {
		t.Fatal(err)
	}
	db := pgtest.NewDatabase(t, pgtest.Shared(t))
	ctx := t.Context()
	for _, run := range []struct {
		name   string
		extra  string
		paused bool
		fees   engine.Fees
	}{
		{"paused with fees", "  paused: true\n  fees:\n    takerBps: 700\n    makerBps: -175\n", true, engine.Fees{Taker: 700, Maker: -175}},
		{"without them", "", false, engine.Fees{}},
	} {
		if err := os.WriteFile(filepath.Join(events, "cup.yaml"), []byte(eventManifest(run.extra)), 0o644); err != nil {
			t.Fatal(err)
		}
		stop := startDev(t, db, dir)
		st, err := store.Open(ctx, db)
		if err != nil {
			t.Fatal(err)
		}
		e, err := st.EventByName(ctx, "cup-2027")
		if err != nil {
			t.Fatalf("%s: the event: %v", run.name, err)
		}
		halted := domain.NotHalted
		if run.paused {
			halted = domain.HaltEvent
		}
		if e.Paused != run.paused || e.Halted != halted || e.Fees != run.fees {
			t.Errorf("%s: the event is paused %v (halted %q) with fees %+v; want paused %v (halted %q) with %+v",
				run.name, e.Paused, e.Halted, e.Fees, run.paused, halted, run.fees)
		}
		for _, o := range e.Outcomes {
			m, err := st.Market(ctx, o.MarketID)
			if err != nil || m.Halted != halted || m.Fees != run.fees || m.OwnFees || m.Paused {
				t.Errorf("%s: outcome %s's market: halted %q, fees %+v (its own: %v), paused on its own %v, %v; want halted %q by its event, with its fees %+v",
					run.name, o.Key, m.Halted, m.Fees, m.OwnFees, m.Paused, err, halted, run.fees)
			}
		}
		st.Close()
		stop()
	}
}
