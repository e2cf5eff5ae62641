package clustertest

import (
	"context"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/pmx-dev/pmx/internal/exchangetest"
	"github.com/pmx-dev/pmx/internal/history"
	"github.com/pmx-dev/pmx/internal/poll"
	"github.com/pmx-dev/pmx/internal/store"
)

// testScale scales the chart's shard pool from 2 shards to 3 and back with helm upgrade
// (shard.replicas) while bots trade through the API Service, with the operator's rebalancing on
// (the install leaves it off for the other subtests, whose kills and drains it would answer with
// moves in the middle of their load; here a short interval and cooldown, and no bound on the
// fraction moved, so that the test takes seconds):
//   - up: the new pod must get its share of the OPEN markets, each moved by a planned handoff;
//   - down: the shard that goes hands its markets to the other two (the operator drains it by the
//     planned handoff before it lowers the StatefulSet's replicas), under a load on those very
//     markets.
//
// No placement may be answered 5xx or fail in transit at any moment, none acknowledged may be
// lost, and the books must equal Postgres. Rebalancing is left off again afterwards.
func (c *cluster) testScale(t *testing.T, tg *exchangetest.Target) {
	ctx := t.Context()
	chart := filepath.Join(c.repo, "charts", "pmx")
	newShard := chartPool + "-shard-2"
	var markets []uuid.UUID
	for range 12 {
		markets = append(markets, tg.NewMarket(t, nil).ID)
	}
	load, rec, bots := startLoad(t, tg, "scale", markets)
	defer load.Stop()
	began := time.Now()
	defer func() { // whatever happened, the subtests after this one run as installed
		c.helmRun(t, "upgrade", release, chart, "--namespace", namespace, "--reuse-values",
			"--set", "shard.replicas=2", "--set", "operator.rebalance.enabled=false", "--wait", "--timeout", "3m")
	}()

	c.helmRun(t, "upgrade", release, chart, "--namespace", namespace, "--reuse-values",
		"--set", "shard.replicas=3", "--set", "operator.rebalance.enabled=true",
		"--set", "operator.rebalance.interval=1s", "--set", "operator.rebalance.cooldown=5s",
		"--set", "operator.rebalance.maxFraction=1", "--wait", "--timeout", "3m")
	// Spread: the new pod holds markets, and the moves have stopped (none for 8 s, eight of the
	// intervals): the rebalancer balances by count, or by orders/s once every shard reports it,
	// so how many it moves depends on the load; that it moves some and then rests does not.
	var open, onNew int
	changed := time.Now()
	spread := func(ctx context.Context) (bool, error) {
		o, n, err := openMarkets(ctx, tg.Store, newShard)
		if err != nil {
			return false, err
		}
		if o != open || n != onNew {
			open, onNew, changed = o, n, time.Now()
		}
		return onNew > 0 && time.Since(changed) >= 8*time.Second, nil
	}
	if err := poll.Until(ctx, 2*time.Minute, spread); err != nil {
		t.Fatalf("the new shard %s holds %d of %d OPEN markets two minutes after it joined, the last move %v ago: %v",
			newShard, onNew, open, time.Since(changed).Round(time.Second), err)
	}
	up := time.Now()
	moved := ownedOf(t, tg.Store, newShard, markets)
	t.Logf("scaled to 3 shards: %s holds %d of %d OPEN markets %v after the upgrade began, %d of the 12 under load",
		newShard, onNew, open, up.Sub(began).Round(time.Second), len(moved))

	// Down: load the markets the new pod holds too, so that its handoffs are under load.
	extra := ownedOf(t, tg.Store, newShard, nil)
	if len(extra) > 12 {
		extra = extra[:12]
	}
	more := exchangetest.StartRecordedLoad(bots[:4], extra, rec)
	poll.Wait(t, time.Minute, "orders on the new shard's markets", func() bool { return more.Acked() >= 50 })
	leaving := c.followLogs(t, newShard) // its log goes with it: for the failures' report
	downBegan := time.Now()
	c.helmRun(t, "upgrade", release, chart, "--namespace", namespace, "--reuse-values",
		"--set", "shard.replicas=2", "--wait", "--timeout", "3m")
	poll.Wait(t, 2*time.Minute, newShard+" to hold no market", func() bool {
		owned, err := tg.Store.OwnedMarkets(ctx, newShard)
		return err == nil && len(owned) == 0
	})
	down := time.Now()
	poll.Wait(t, time.Minute, "an order sent after the scale-down to be acknowledged on each load", func() bool {
		return load.Sent(down, time.Now().Add(time.Hour)) > 0 && more.Sent(down, time.Now().Add(time.Hour)) > 0
	})
	more.Stop()
	load.Stop()
	t.Logf("scaled back to 2 shards in %v; %d orders acknowledged under the scaling, %d of them on the leaving shard's markets",
		down.Sub(up).Round(time.Second), load.Acked()+more.Acked(), more.Acked())
	phases := []phase{{"scaling up and spreading", began, up}, {"between", up, downBegan}, {"scaling down", downBegan, time.Now()}}
	load.CheckKept(t, tg)
	more.CheckKept(t, tg)
	if placementFailures(t, phases, load, more) {
		t.Logf("the leaving shard's warnings and errors:\n%s", warnings(leaving()))
		for _, comp := range []string{"shard", "api", "operator"} {
			t.Logf("the %s pods' warnings and errors:\n%s", comp, warnings(c.Kubectl(t, "logs", "-n", namespace,
				"-l", "app.kubernetes.io/component="+comp, "--since=5m", "--tail=-1", "--prefix")))
		}
	}
	exchangetest.CheckInvariants(t, tg)
	exchangetest.CheckHistory(t, tg, rec.History())
	exchangetest.CheckBooksOverAPI(t, tg, bots[0], append(slices.Clone(markets), extra...))
}

// openMarkets counts the OPEN markets, and those of them shard owns.
func openMarkets(ctx context.Context, st *store.Store, shard string) (open, owned int, err error) {
	err = st.Pool.QueryRow(ctx, `select count(*), count(*) filter (where shard = $1) from markets where status = 'OPEN'`, shard).
		Scan(&open, &owned)
	return open, owned, err
}

// ownedOf lists the OPEN markets shard owns, of among when it is not nil.
func ownedOf(t *testing.T, st *store.Store, shard string, among []uuid.UUID) []uuid.UUID {
	t.Helper()
	owned, err := st.OwnedMarkets(t.Context(), shard)
	if err != nil {
		t.Fatal(err)
	}
	var out []uuid.UUID
	for _, o := range owned {
		if o.Status == "OPEN" && (among == nil || slices.Contains(among, o.Market)) {
			out = append(out, o.Market)
		}
	}
	return out
}

// warnings keeps a log's lines at WARN or ERROR, at most 60, each ending in a newline.
func warnings(log string) string {
	var out strings.Builder
	n := 0
	for line := range strings.Lines(log) {
		if (strings.Contains(line, "level=WARN") || strings.Contains(line, "level=ERROR")) && n < 60 {
			out.WriteString(strings.TrimRight(line, "\n") + "\n")
			n++
		}
	}
	return out.String()
}

// startLoad starts eight bots, accounts named name, placing orders on markets through tg, each
// placement and its answer recorded, and waits until 200 are acknowledged. The caller defers
// load.Stop (which it may also call before its checks).
func startLoad(t *testing.T, tg *exchangetest.Target, name string, markets []uuid.UUID) (*exchangetest.Load, *history.Recorder, []*exchangetest.Client) {
	t.Helper()
	bots := make([]*exchangetest.Client, 8)
	for i := range bots {
		bots[i] = tg.NewAccount(t, name)
	}
	rec := &history.Recorder{} // every placement and its answer, judged against the log at the end
	load := exchangetest.StartRecordedLoad(bots, markets, rec)
	poll.Wait(t, time.Minute, "200 acknowledged orders", func() bool { return load.Acked() >= 200 })
	return load, rec, bots
}

// placementFailures fails t for every placement of loads answered 5xx or not at all in each
// phase, and says whether there was any.
func placementFailures(t *testing.T, phases []phase, loads ...*exchangetest.Load) bool {
	t.Helper()
	failed := false
	for _, l := range loads {
		for _, ph := range phases {
			if f := l.Failures(ph.from, ph.to); len(f) > 0 {
				failed = true
				t.Errorf("%s (%s to %s): %d placements answered 5xx or not at all%s", ph.name,
					ph.from.Format("15:04:05.000"), ph.to.Format("15:04:05.000"), len(f), firstOf(f))
			}
		}
	}
	return failed
}

// phase is a stretch of a subtest under load, named for its failures.
type phase struct {
	name     string
	from, to time.Time
}
