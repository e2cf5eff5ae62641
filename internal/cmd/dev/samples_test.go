package dev

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/pmx-dev/pmx/api/v1alpha1"
	"github.com/pmx-dev/pmx/config"
	"github.com/pmx-dev/pmx/engine"
	"github.com/pmx-dev/pmx/internal/domain"
	"github.com/pmx-dev/pmx/internal/logtest"
	"github.com/pmx-dev/pmx/internal/market/marketspec"
	"github.com/pmx-dev/pmx/internal/pgtest"
	"github.com/pmx-dev/pmx/internal/poll"
	"github.com/pmx-dev/pmx/internal/store"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// TestDevLoadsSamples starts pmx dev with its default --markets, twice on one database: it loads
// the sample markets, each with the fee schedule its manifest gives, the sample event (config/samples/events), the event with one open market
// per outcome, and the sample series (config/samples/series) with its instances listed; a restart
// finds them recorded and records them again without a second copy.
func TestDevLoadsSamples(t *testing.T) {
	samples, err := v1alpha1.LoadMarketsFS(config.Samples(), "config/samples")
	if err != nil {
		t.Fatal(err)
	}
	db := pgtest.NewDatabase(t, pgtest.Shared(t))
	for run := range 2 {
		ctx := t.Context()
		stop := startDev(t, db, builtinMarkets)
		st, err := store.Open(ctx, db)
		if err != nil {
			t.Fatal(err)
		}
		e, err := st.EventByName(ctx, "rate-decision-2027-06")
		if err != nil {
			t.Fatalf("run %d: the sample event: %v", run, err)
		}
		if len(e.Outcomes) != 4 || e.Question != "What will the ECB decide on its deposit rate on 10 June 2027?" {
			t.Errorf("run %d: the sample event %+v", run, e)
		}
		open, err := st.Markets(ctx, domain.MarketOpen)
		if err != nil {
			t.Fatal(err)
		}
		ofEvent := 0
		for _, m := range open {
			if m.EventID != nil && *m.EventID == e.ID {
				ofEvent++
			}
		}
		if ofEvent != 4 || len(open) < 4+2 {
			t.Errorf("run %d: %d open markets, %d of the sample event; want the sample markets and 4 of the event's", run, len(open), ofEvent)
		}
		// Each sample market carries the fee schedule its manifest gives (spec.fees), or none.
		for _, mf := range samples {
			m, err := st.MarketByName(ctx, mf.Name)
			want := marketspec.FeesOf(mf.Spec.Fees)
			switch {
			case err != nil:
				t.Errorf("run %d: sample market %s: %v", run, mf.Name, err)
			case want == nil && (m.OwnFees || m.Fees != engine.Fees{}), want != nil && (!m.OwnFees || m.Fees != *want):
				t.Errorf("run %d: sample market %s has fees %+v (its own: %v), want %s", run, mf.Name, m.Fees, m.OwnFees, marketspec.DescribeFees(want))
			}
		}
		// The sample daily series lists two instances ahead of now, each once, whatever the run.
		series, err := st.SeriesPage(ctx, nil, 10)
		if err != nil || len(series) != 1 || series[0].Name != "rain-paris-daily" {
			t.Fatalf("run %d: series %+v, %v; want the sample rain-paris-daily", run, series, err)
		}
		instances, err := st.SeriesInstances(ctx, series[0])
		if err != nil || len(instances) < 2 {
			t.Errorf("run %d: the sample series' instances %+v, %v; want at least 2 listed", run, instances, err)
		}
		var linked int
		for _, m := range open {
			if m.SeriesID != nil && *m.SeriesID == series[0].ID {
				linked++
			}
		}
		if linked != len(instances) {
			t.Errorf("run %d: %d open markets of the series, %d instances", run, linked, len(instances))
		}
		st.Close()
		stop()
	}
}

// startDev starts pmx dev on the database db with --markets markets, waits until it runs, and
// returns what stops it, failing t unless it stops cleanly. A test that fails first stops it as
// it ends, before its database goes.
func startDev(t *testing.T, db, markets string) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	cmd := NewCommand()
	out := &logtest.Buffer{}
	cmd.SetOut(out)
	cmd.SetArgs([]string{"--addr", "127.0.0.1:0", "--metrics-addr", "", "--database-url", db, "--data-dir", t.TempDir(),
		"--admin-token", "dev-samples-test-token-0123456789abcdef", "--shards", "1", "--log-level", "warn", "--markets", markets})
	exited := make(chan struct{})
	var runErr error
	go func() {
		defer close(exited)
		runErr = cmd.ExecuteContext(ctx)
	}()
	t.Cleanup(func() { cancel(); <-exited })
	poll.Wait(t, time.Minute, "pmx dev running", func() bool {
		select {
		case <-exited:
			t.Fatalf("pmx dev stopped: %v\n%s", runErr, out)
		default:
		}
		return strings.Contains(out.String(), "pmx is running")
	})
	return func() {
		t.Helper()
		cancel()
		<-exited
		if runErr != nil {
			t.Fatalf("pmx dev: %v", runErr)
		}
	}
}
