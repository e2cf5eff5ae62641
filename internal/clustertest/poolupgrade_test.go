package clustertest

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/pmx-dev/pmx/internal/exchangetest"
	"github.com/pmx-dev/pmx/internal/poll"
)

// testPoolUpgrade moves the installed release's shards from the operator's pool to the chart's
// own StatefulSet — the chart before pools, shardPool.enabled=false — and back, with helm upgrade,
// under load:
//   - shardPool.enabled=false: the pool's finalizer keeps its shards serving until the chart's
//     StatefulSet's are live, then hands every market over by the planned handoff before the pool
//     goes;
//   - shardPool.enabled=true, the upgrade from the chart before pools: the chart's StatefulSet
//     goes and the pool takes its place; each chart shard, stopping, waits for the pool's shards
//     (the operator records which it is to run) and hands its markets to them by the planned
//     handoff.
//
// No placement may be answered 5xx or fail in transit either way, none acknowledged may be lost,
// and the history must check against the log.
func (c *cluster) testPoolUpgrade(t *testing.T, tg *exchangetest.Target) {
	ctx := t.Context()
	chart := filepath.Join(c.repo, "charts", "pmx")
	var markets []uuid.UUID
	for range 8 {
		markets = append(markets, tg.NewMarket(t, nil).ID)
	}
	defer func() { // whatever happened, the subtests after this one run as installed
		c.helmRun(t, "upgrade", release, chart, "--namespace", namespace, "--reuse-values",
			"--set", "shardPool.enabled=true", "--wait", "--timeout", "3m")
	}()
	load, rec, bots := startLoad(t, tg, "poolupgrade", markets)
	defer load.Stop()
	// onShards says whether every OPEN market is owned by a shard whose name has prefix, and no
	// pod of the other kind is left.
	onShards := func(prefix string, gone func(pod) bool) func() bool {
		return func() bool {
			var off int
			if err := tg.Store.Pool.QueryRow(ctx, `select count(*) from markets where status = 'OPEN' and (shard is null or shard not like $1 || '%')`,
				prefix).Scan(&off); err != nil || off > 0 {
				return false
			}
			return !slices.ContainsFunc(c.pods(t), gone)
		}
	}
	poolPod := func(p pod) bool { return p.Metadata.Labels["pmx.dev/shard-pool"] != "" }
	chartPod := func(p pod) bool { return strings.HasPrefix(p.Metadata.Name, fullname+"-shard-") }

	began := time.Now()
	c.helmRun(t, "upgrade", release, chart, "--namespace", namespace, "--reuse-values",
		"--set", "shardPool.enabled=false", "--wait", "--timeout", "3m")
	poll.Wait(t, 3*time.Minute, "every OPEN market on the chart's shards, the pool's pods gone", onShards(fullname+"-shard-", poolPod))
	off := time.Now()
	poll.Wait(t, time.Minute, "an order acknowledged after the move to the chart's shards", func() bool {
		return load.Sent(off, time.Now().Add(time.Hour)) > 0
	})
	t.Logf("shards moved from the pool to the chart's StatefulSet in %v", off.Sub(began).Round(time.Second))

	// The chart's shards' logs go with their pods: kept for the failures' report.
	stopping := c.followLogs(t, "--selector", "app.kubernetes.io/component=shard", "--prefix", "--tail=0",
		"--max-log-requests=10", "--ignore-errors")
	onBegan := time.Now()
	c.helmRun(t, "upgrade", release, chart, "--namespace", namespace, "--reuse-values",
		"--set", "shardPool.enabled=true", "--wait", "--timeout", "3m")
	poll.Wait(t, 3*time.Minute, "every OPEN market on the pool's shards, the chart's shard pods gone", onShards(chartPool+"-shard-", chartPod))
	on := time.Now()
	poll.Wait(t, time.Minute, "an order acknowledged after the move back to the pool", func() bool {
		return load.Sent(on, time.Now().Add(time.Hour)) > 0
	})
	load.Stop()
	if placementFailures(t, []phase{{"to the chart's shards", began, onBegan}, {"back to the pool", onBegan, time.Now()}}, load) {
		t.Logf("what the chart's shards logged as they stopped:\n%s", stopping())
		t.Logf("the pool's shards' log:\n%s", c.Kubectl(t, "logs", "-n", namespace, "-l", "pmx.dev/shard-pool="+chartPool,
			"--since=5m", "--tail=200", "--prefix"))
		for _, comp := range []string{"api", "operator"} {
			t.Logf("the %s pods' warnings and errors:\n%s", comp, warnings(c.Kubectl(t, "logs", "-n", namespace,
				"-l", "app.kubernetes.io/component="+comp, "--since=5m", "--tail=-1", "--prefix")))
		}
	}
	t.Logf("shards moved back under the pool in %v; %d orders acknowledged in all", on.Sub(onBegan).Round(time.Second), load.Acked())
	load.CheckKept(t, tg)
	exchangetest.CheckInvariants(t, tg)
	exchangetest.CheckHistory(t, tg, rec.History())
	exchangetest.CheckBooksOverAPI(t, tg, bots[0], markets)
}

// firstOf is ", first: " and the first five of failures, or nothing.
func firstOf(failures []string) string {
	if len(failures) == 0 {
		return ""
	}
	return ", first: " + strings.Join(failures[:min(len(failures), 5)], "; ")
}
