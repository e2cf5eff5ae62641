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

// testPoolUpgrade moves the installed release's shards under the operator and back, with helm
// upgrade, under load:
//   - shardPool.enabled=true: the chart's shard StatefulSet goes and a ShardPool default takes its
//     place; every OPEN market ends on the pool's shards (each chart shard, as it stops, waits,
//     bounded, for the pool's shards and hands its markets to the first live one, releasing to the
//     operator's scheduling what is left when the wait ends). Placements refused meanwhile are
//     counted, not failed: shards of a release before the wait refuse some (docs/kubernetes.md).
//   - shardPool.enabled=false: the pool's finalizer keeps its shards serving until the chart's
//     StatefulSet's are live, then hands every market over by the planned handoff before the pool
//     goes: no placement may be answered 5xx or fail in transit.
//
// None acknowledged may be lost either way, and the history must check against the log.
func (c *cluster) testPoolUpgrade(t *testing.T, tg *exchangetest.Target) {
	ctx := t.Context()
	chart := filepath.Join(c.repo, "charts", "pmx")
	var markets []uuid.UUID
	for range 8 {
		markets = append(markets, tg.NewMarket(t, nil).ID)
	}
	defer func() { // whatever happened, the subtests after this one run as installed
		c.helmRun(t, "upgrade", release, chart, "--namespace", namespace, "--reuse-values",
			"--set", "shardPool.enabled=false", "--wait", "--timeout", "3m")
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

	began := time.Now()
	c.helmRun(t, "upgrade", release, chart, "--namespace", namespace, "--reuse-values",
		"--set", "shardPool.enabled=true", "--wait", "--timeout", "3m")
	poll.Wait(t, 3*time.Minute, "every OPEN market on the pool's shards, the chart's shard pods gone", onShards("default-shard-",
		func(p pod) bool { return strings.HasPrefix(p.Metadata.Name, fullname+"-shard-") }))
	up := time.Now()
	poll.Wait(t, time.Minute, "an order acknowledged after the move to the pool", func() bool {
		return load.Sent(up, time.Now().Add(time.Hour)) > 0
	})
	refused := load.Failures(began, time.Now())
	t.Logf("shards moved under the operator's pool in %v, %d placements refused or lost in transit meanwhile (not acknowledged)%s",
		up.Sub(began).Round(time.Second), len(refused), firstOf(refused))

	downBegan := time.Now()
	c.helmRun(t, "upgrade", release, chart, "--namespace", namespace, "--reuse-values",
		"--set", "shardPool.enabled=false", "--wait", "--timeout", "3m")
	poll.Wait(t, 3*time.Minute, "every OPEN market on the chart's shards, the pool's pods gone", onShards(fullname+"-shard-",
		func(p pod) bool { return p.Metadata.Labels["pmx.dev/shard-pool"] != "" }))
	down := time.Now()
	poll.Wait(t, time.Minute, "an order acknowledged after the move back", func() bool {
		return load.Sent(down, time.Now().Add(time.Hour)) > 0
	})
	load.Stop()
	placementFailures(t, []phase{{"back to the chart's shards", downBegan, time.Now()}}, load)
	t.Logf("back to the chart's shards in %v; %d orders acknowledged in all", down.Sub(downBegan).Round(time.Second), load.Acked())
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
