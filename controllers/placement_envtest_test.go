package controllers

import (
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	pmxv1 "github.com/pmx-dev/pmx/api/v1alpha1"
)

// servedBy is a condition that the Market is OPEN and served by shard.
func servedBy(shard string) func(*pmxv1.Market) bool {
	return func(m *pmxv1.Market) bool { return scheduled(m) && m.Status.Shard == shard }
}

// dedicated is a condition that the Market's Dedicated condition has status and reason.
func dedicated(status metav1.ConditionStatus, reason pmxv1.MarketConditionReason) func(*pmxv1.Market) bool {
	return func(m *pmxv1.Market) bool {
		c := meta.FindStatusCondition(m.Status.Conditions, string(pmxv1.MarketDedicated))
		return c != nil && c.Status == status && c.Reason == string(reason) && c.ObservedGeneration == m.Generation
	}
}

// TestDedicated runs the operator — Market reconciler, Rebalancer, ShardPool reconciler — against
// a real kube-apiserver and Postgres, with in-process shards of two pools (envtest runs no pods:
// the test starts the shard each pod would run):
//   - markets of the default pool never go to the hot pool's shards, nor its markets to theirs;
//   - a dedicated market goes to a free shard of its pool, alone (its Dedicated condition True),
//     and its pool runs one shard more for it, up to spec.maxDedicatedShards, which the scale
//     subresource's status.replicas leaves out;
//   - a shared market of the pool goes to the other shard, never the dedicated one;
//   - when the dedicated market's shard is killed it fails over within its pool, sharing a shard,
//     and when the pod's shard comes back the rebalancer makes it alone again by one planned
//     handoff (of the dedicated market, or of the shared one);
//   - a market whose pool has no live shard waits, and its Scheduled condition names the pool;
//   - placed back as Shared, the pool gives its extra shard back: it hands its market over first.
func TestDedicated(t *testing.T) {
	policy := RebalancePolicy{Margin: 0.2, Interval: 200 * time.Millisecond, Cooldown: 500 * time.Millisecond, MaxFraction: 1}
	w := newWorldWith(t, worldOptions{policy: &policy, shards: []string{"shard-a", "shard-b"}, poolNamespace: poolNS})
	ctx := t.Context()

	hot := w.pool(poolNS, "hot", 1, func(s *pmxv1.ShardPoolSpec) { s.MaxDedicatedShards = 1 })
	w.addShardIn("hot-shard-0", "hot")
	w.waitLive("hot-shard-0", "shard-a", "shard-b")
	solo := w.market("solo", nil)
	w.eventually(solo, "scheduled on the default pool", func(m *pmxv1.Market) bool {
		return scheduled(m) && (m.Status.Shard == "shard-a" || m.Status.Shard == "shard-b")
	})

	election := w.market("election", func(s *pmxv1.MarketSpec) {
		s.ShardPool, s.Placement = "hot", pmxv1.PlacementDedicated
	})
	w.eventually(election, "alone on hot-shard-0", func(m *pmxv1.Market) bool {
		return servedBy("hot-shard-0")(m) && dedicated(metav1.ConditionTrue, pmxv1.ReasonAlone)(m)
	})

	// The pool runs a shard more for it; the scale subresource's replicas are still the spec's.
	w.statefulSet("hot", "it has 2 replicas", func(s *appsv1.StatefulSet) bool { return ptr.Deref(s.Spec.Replicas, 0) == 2 })
	w.podsReady("hot", 2)
	w.addShardIn("hot-shard-1", "hot")
	w.waitLive("hot-shard-0", "hot-shard-1", "shard-a", "shard-b")
	w.eventuallyPool(hot, "one dedicated shard, status.replicas 1", func(p *pmxv1.ShardPool) bool {
		return p.Status.DedicatedShards == 1 && p.Status.Replicas == 1
	})

	// A shared market of the pool goes to the shard that is not dedicated.
	side := w.market("side", func(s *pmxv1.MarketSpec) { s.ShardPool = "hot" })
	w.eventually(side, "on hot-shard-1", servedBy("hot-shard-1"))

	// hot-shard-0 is killed: the election fails over within its pool, sharing hot-shard-1.
	w.beats["hot-shard-0"]()
	w.eventually(election, "failed over to hot-shard-1", servedBy("hot-shard-1"))
	// Its pod's shard comes back under its name, free: the rebalancer makes the election alone
	// again by the planned handoff, moving it there or (while it is in its cooldown after the
	// failover) the shared market.
	w.beat("hot-shard-0")
	var at string
	w.eventually(election, "alone again", func(m *pmxv1.Market) bool {
		at = m.Status.Shard
		return scheduled(m) && strings.HasPrefix(at, "hot-shard-") && dedicated(metav1.ConditionTrue, pmxv1.ReasonAlone)(m)
	})
	other := map[string]string{"hot-shard-0": "hot-shard-1", "hot-shard-1": "hot-shard-0"}[at]
	w.eventually(side, "on the other shard of the pool", servedBy(other))
	if n := w.movesCounted("placement"); n != 1 {
		t.Errorf("pmx_operator_rebalance_moves_total{reason=placement} %v, want the one move that made the election alone", n)
	}
	moves, _ := w.rebalancedEvents(ctx)
	found := false
	for _, m := range moves {
		found = found || m.market == "election" && strings.Contains(m.note, "to shard hot-shard-0") && strings.Contains(m.note, "shard of its own") ||
			m.market == "side" && strings.Contains(m.note, "to shard hot-shard-0") && strings.Contains(m.note, "is dedicated to")
	}
	if !found {
		t.Errorf("Rebalanced events %+v, want the move to hot-shard-0 saying why", moves)
	}

	// A pool with no live shard: the market waits, and says for which pool.
	cold := w.market("cold", func(s *pmxv1.MarketSpec) { s.ShardPool = "cold" })
	got := w.eventually(cold, "waiting for pool cold", func(m *pmxv1.Market) bool {
		c := meta.FindStatusCondition(m.Status.Conditions, string(pmxv1.MarketScheduled))
		return c != nil && c.Status == metav1.ConditionFalse && c.Reason == string(pmxv1.ReasonNoLiveShard)
	})
	if c := meta.FindStatusCondition(got.Status.Conditions, string(pmxv1.MarketScheduled)); !strings.Contains(c.Message, "pool cold") {
		t.Errorf("Scheduled says %q, want it to name pool cold", c.Message)
	}
	if solo := w.eventually(solo, "read", scheduled); strings.HasPrefix(solo.Status.Shard, "hot-") {
		t.Errorf("the default pool's market is on %s", solo.Status.Shard)
	}

	// Placed back as Shared: the pool drains its extra shard, hot-shard-1, whose market goes to
	// hot-shard-0, before its StatefulSet shrinks.
	var m pmxv1.Market
	if err := w.k8s.Get(ctx, client.ObjectKeyFromObject(election), &m); err != nil {
		t.Fatal(err)
	}
	m.Spec.Placement = pmxv1.PlacementShared
	if err := w.k8s.Update(ctx, &m); err != nil {
		t.Fatal(err)
	}
	w.eventually(election, "no Dedicated condition", func(m *pmxv1.Market) bool {
		return m.Status.ObservedGeneration == m.Generation && meta.FindStatusCondition(m.Status.Conditions, string(pmxv1.MarketDedicated)) == nil
	})
	w.statefulSet("hot", "it has 1 replica", func(s *appsv1.StatefulSet) bool { return ptr.Deref(s.Spec.Replicas, 0) == 1 })
	w.eventually(side, "on hot-shard-0", servedBy("hot-shard-0"))
	w.eventually(election, "on hot-shard-0", servedBy("hot-shard-0"))
}
