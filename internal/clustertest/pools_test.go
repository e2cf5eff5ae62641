package clustertest

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/pmx-dev/pmx/internal/exchangetest"
	"github.com/pmx-dev/pmx/internal/poll"
)

// poolJSON is a ShardPool of the release's namespace running the test's image, reading the
// chart's Secrets.
func poolJSON(name string, replicas, maxDedicated int) string {
	return fmt.Sprintf(`{"apiVersion": "pmx.dev/v1alpha1", "kind": "ShardPool",
		"metadata": {"name": %q, "namespace": %q},
		"spec": {"replicas": %d, "maxDedicatedShards": %d, "image": "pmx:dev", "imagePullPolicy": "Never",
			"databaseURL": {"name": %q, "key": "database-url"}, "internalToken": {"name": %q, "key": "internal-token"},
			"args": ["--max-open-orders=%d"]}}`,
		name, namespace, replicas, maxDedicated, fullname+"-postgres", fullname+"-tokens", exchangetest.SuiteMaxOpenOrders)
}

// testPools runs a second ShardPool beside the chart's (default), on real pods: hot, which runs
// no shared shard and at most one dedicated. A Market asking for a dedicated shard of hot gets
// one, which the pool adds for it; it trades under load, with markets of the default pool beside
// it, while default scales 2 → 3 → 2 through its scale subresource (kubectl scale) with the
// rebalancer on: the new shard takes markets of its pool, never the hot one, and the scale-down
// hands them over before its pod goes. No placement may be answered 5xx or fail in transit, none
// acknowledged may be lost, the history must check against the log, and the hot market must stay
// alone on its shard throughout. The hot market and its pool are deleted at the end.
func (c *cluster) testPools(t *testing.T, tg *exchangetest.Target) {
	chart := filepath.Join(c.repo, "charts", "pmx")
	defer func() { // whatever happened, the subtests after this one run as installed
		c.run(t, 3*time.Minute, c.KubectlPath, "delete", "mkt", "hot-election", "--ignore-not-found", "--wait", "--timeout=2m")
		c.run(t, 4*time.Minute, c.KubectlPath, "delete", "shardpool", "hot", "-n", namespace, "--ignore-not-found", "--wait", "--timeout=3m")
		c.Kubectl(t, "scale", "-n", namespace, "shardpool/"+chartPool, "--replicas=2")
		poll.Wait(t, 3*time.Minute, "pool hot's pods to go, and pool default's third", func() bool {
			return !slices.ContainsFunc(c.pods(t), func(p pod) bool {
				return p.Metadata.Labels["pmx.dev/shard-pool"] == "hot" || p.Metadata.Name == chartPool+"-shard-2"
			})
		})
		c.helmRun(t, "upgrade", release, chart, "--namespace", namespace, "--reuse-values",
			"--set", "operator.rebalance.enabled=false", "--wait", "--timeout", "3m")
	}()
	c.helmRun(t, "upgrade", release, chart, "--namespace", namespace, "--reuse-values",
		"--set", "operator.rebalance.enabled=true", "--set", "operator.rebalance.interval=1s",
		"--set", "operator.rebalance.cooldown=5s", "--set", "operator.rebalance.maxFraction=1", "--wait", "--timeout", "3m")
	c.applyJSON(t, poolJSON("hot", 0, 1))

	// The hot market: the hot pool adds a shard for it, which takes it alone.
	c.applyJSON(t, `{"apiVersion": "pmx.dev/v1alpha1", "kind": "Market", "metadata": {"name": "hot-election", "namespace": "default"},
		"spec": {"question": "Will the hot pool keep its market alone?", "category": "test", "shardPool": "hot", "placement": "Dedicated"}}`)
	hotStatus := func() (id, shard, dedicated string) {
		out := c.Kubectl(t, "get", "mkt", "hot-election", "-n", "default", "-o",
			`jsonpath={.status.marketId} {.status.shard} {.status.conditions[?(@.type=="Dedicated")].reason}`)
		f := strings.Fields(out)
		for len(f) < 3 {
			f = append(f, "")
		}
		return f[0], f[1], f[2]
	}
	var hotID, hotShard, why string
	poll.Wait(t, 3*time.Minute, "the hot market alone on the shard its pool added", func() bool {
		hotID, hotShard, why = hotStatus()
		return hotShard == "hot-shard-0" && why == "Alone"
	})
	hot := uuid.MustParse(hotID)
	// status.replicas, the scale subresource's, leaves the dedicated shard out (0: omitted).
	if out := c.Kubectl(t, "get", "shardpool", "hot", "-n", namespace, "-o", "jsonpath={.status.dedicatedShards}/{.status.replicas}"); out != "1/" {
		t.Errorf("pool hot: dedicatedShards/status.replicas %q, want 1 and none", out)
	}
	poll.Wait(t, 3*time.Minute, "pool default's two shards live", func() bool {
		return c.Kubectl(t, "get", "shardpool", "default", "-n", namespace, "-o", "jsonpath={.status.liveShards}") == "2"
	})

	markets := []uuid.UUID{hot}
	for range 8 {
		markets = append(markets, tg.NewMarket(t, nil).ID)
	}
	load, rec, bots := startLoad(t, tg, "pools", markets)
	defer load.Stop()
	alone := func(when string) {
		t.Helper()
		if _, shard, why := hotStatus(); shard != "hot-shard-0" || why != "Alone" {
			t.Errorf("%s: the hot market is on %q (%s), want alone on hot-shard-0", when, shard, why)
		}
		if owned := ownedOf(t, tg.Store, "hot-shard-0", nil); !slices.Equal(owned, []uuid.UUID{hot}) {
			t.Errorf("%s: hot-shard-0 owns %v, want the hot market alone", when, owned)
		}
	}

	// Up: the new shard of pool default gets markets of its pool.
	began := time.Now()
	c.Kubectl(t, "scale", "-n", namespace, "shardpool/default", "--replicas=3")
	poll.Wait(t, 3*time.Minute, "default-shard-2 to hold markets", func() bool {
		return len(ownedOf(t, tg.Store, "default-shard-2", nil)) > 0
	})
	up := time.Now()
	alone("after the scale-up")
	t.Logf("pool default scaled to 3 in %v: default-shard-2 holds %d markets", up.Sub(began).Round(time.Second),
		len(ownedOf(t, tg.Store, "default-shard-2", nil)))

	// Down: the shard that goes hands its markets over, under load, before its pod stops.
	leaving := c.followLogs(t, "default-shard-2")
	downBegan := time.Now()
	c.Kubectl(t, "scale", "-n", namespace, "shardpool/default", "--replicas=2")
	poll.Wait(t, 3*time.Minute, "default-shard-2 to hold no market and its pod to go", func() bool {
		gone := !slices.ContainsFunc(c.pods(t), func(p pod) bool { return p.Metadata.Name == "default-shard-2" })
		return gone && len(ownedOf(t, tg.Store, "default-shard-2", nil)) == 0
	})
	down := time.Now()
	poll.Wait(t, time.Minute, "an order sent after the scale-down to be acknowledged", func() bool {
		return load.Sent(down, time.Now().Add(time.Hour)) > 0
	})
	load.Stop()
	alone("after the scale-down")
	t.Logf("pool default scaled back to 2 in %v; %d orders acknowledged", down.Sub(downBegan).Round(time.Second), load.Acked())

	phases := []phase{{"scaling up", began, up}, {"between", up, downBegan}, {"scaling down", downBegan, time.Now()}}
	if placementFailures(t, phases, load) {
		t.Logf("the leaving shard's warnings and errors:\n%s", warnings(leaving()))
		t.Logf("the operator's warnings and errors:\n%s", warnings(c.Kubectl(t, "logs", "-n", namespace,
			"-l", "app.kubernetes.io/component=operator", "--since=5m", "--tail=-1", "--prefix")))
	}
	load.CheckKept(t, tg)
	exchangetest.CheckInvariants(t, tg)
	exchangetest.CheckHistory(t, tg, rec.History())
	exchangetest.CheckBooksOverAPI(t, tg, bots[0], markets)
}
