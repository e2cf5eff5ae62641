package charttest

import (
	"slices"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"

	pmxv1 "github.com/pmx-dev/pmx/api/v1alpha1"
)

// TestDisruptionBudgets renders the PodDisruptionBudgets of the front API and the shards: by
// default a drain evicts one pod of each at a time; minAvailable replaces maxUnavailable when
// given; each selects exactly its component's pods, never another's.
func TestDisruptionBudgets(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		args     []string
		api, shd intstr.IntOrString
		apiMin   bool // the api's budget is a minAvailable
	}{
		{"default", nil, intstr.FromInt32(1), intstr.FromInt32(1), false},
		{"minAvailable", []string{"--set", "api.replicas=3", "--set", "api.podDisruptionBudget.minAvailable=2",
			"--set-string", "shard.podDisruptionBudget.maxUnavailable=50%"}, intstr.FromInt32(2), intstr.FromString("50%"), true},
	}
	for _, tt := range tests {
		// The pool's budget (the default) is the operator's to make: the ShardPool carries the values.
		pool := decode[pmxv1.ShardPool](t, renderChart(t, "pmx", "pmx", tt.args...), "ShardPool", "default").Spec.PodDisruptionBudget
		if pool == nil || pool.MaxUnavailable == nil || *pool.MaxUnavailable != tt.shd || pool.MinAvailable != nil {
			t.Errorf("%s: the ShardPool's budget %+v, want maxUnavailable %v", tt.name, pool, tt.shd)
		}
		r := renderChart(t, "pmx", "pmx", append(slices.Clone(tt.args), "--set", "shardPool.enabled=false")...)
		ws := workloads(t, r)
		api := decode[policyv1.PodDisruptionBudget](t, r, "PodDisruptionBudget", "pmx-api")
		shard := decode[policyv1.PodDisruptionBudget](t, r, "PodDisruptionBudget", "pmx-shard")
		gotAPI, other := api.Spec.MaxUnavailable, api.Spec.MinAvailable
		if tt.apiMin {
			gotAPI, other = api.Spec.MinAvailable, api.Spec.MaxUnavailable
		}
		if gotAPI == nil || *gotAPI != tt.api || other != nil {
			t.Errorf("%s: api budget maxUnavailable %v minAvailable %v, want %v as the only one", tt.name, api.Spec.MaxUnavailable, api.Spec.MinAvailable, tt.api)
		}
		if shard.Spec.MaxUnavailable == nil || *shard.Spec.MaxUnavailable != tt.shd || shard.Spec.MinAvailable != nil {
			t.Errorf("%s: shard budget maxUnavailable %v minAvailable %v, want maxUnavailable %v", tt.name, shard.Spec.MaxUnavailable, shard.Spec.MinAvailable, tt.shd)
		}
		for _, b := range []struct {
			pdb  *policyv1.PodDisruptionBudget
			want string
		}{{api, "pmx-api"}, {shard, "pmx-shard"}} {
			sel := labels.SelectorFromSet(b.pdb.Spec.Selector.MatchLabels)
			for _, w := range ws {
				if got := sel.Matches(labels.Set(w.labels)); got != (w.name == b.want) {
					t.Errorf("%s: budget %s selects %s's pods: %v", tt.name, b.pdb.Name, w.name, got)
				}
			}
		}
	}
}

// TestAPITopologySpread renders the front API's spreading: by default softly over nodes and zones
// among the pods of its own rollout; the values' constraints replace it; it can be turned off.
func TestAPITopologySpread(t *testing.T) {
	t.Parallel()
	spread := func(args ...string) (*appsv1.Deployment, []corev1.TopologySpreadConstraint) {
		r := renderChart(t, "pmx", "pmx", args...)
		d := decode[appsv1.Deployment](t, r, "Deployment", "pmx-api")
		return d, d.Spec.Template.Spec.TopologySpreadConstraints
	}
	d, got := spread()
	var keys []string
	for _, c := range got {
		keys = append(keys, c.TopologyKey)
		if c.MaxSkew != 1 || c.WhenUnsatisfiable != corev1.ScheduleAnyway || !slices.Equal(c.MatchLabelKeys, []string{"pod-template-hash"}) {
			t.Errorf("default spread over %s: %+v, want maxSkew 1, ScheduleAnyway, matchLabelKeys [pod-template-hash]", c.TopologyKey, c)
		}
		if c.LabelSelector == nil || !labels.SelectorFromSet(c.LabelSelector.MatchLabels).Matches(labels.Set(d.Spec.Template.Labels)) ||
			c.LabelSelector.MatchLabels["app.kubernetes.io/component"] != "api" {
			t.Errorf("default spread over %s selects %v, want the api's own pods %v", c.TopologyKey, c.LabelSelector, d.Spec.Template.Labels)
		}
	}
	if !slices.Equal(keys, []string{"kubernetes.io/hostname", "topology.kubernetes.io/zone"}) {
		t.Errorf("default spread over %v, want nodes and zones", keys)
	}
	if _, got := spread("--set", "api.defaultTopologySpread=false"); len(got) != 0 {
		t.Errorf("defaultTopologySpread=false: %v, want none", got)
	}
	_, got = spread("--set", "api.topologySpreadConstraints[0].maxSkew=2", "--set", "api.topologySpreadConstraints[0].topologyKey=rack",
		"--set", "api.topologySpreadConstraints[0].whenUnsatisfiable=DoNotSchedule")
	if len(got) != 1 || got[0].TopologyKey != "rack" || got[0].MaxSkew != 2 {
		t.Errorf("the values' constraints: rendered %+v, want them alone", got)
	}
	// The shards keep their own: nothing by default.
	for _, args := range [][]string{nil, {"--set", "shardPool.enabled=false"}} {
		r := renderChart(t, "pmx", "pmx", args...)
		for _, w := range workloads(t, r) {
			if w.name == shardWorkload(r) && len(w.pod.TopologySpreadConstraints) != 0 {
				t.Errorf("%s: shards spread by default: %v", w.name, w.pod.TopologySpreadConstraints)
			}
		}
	}
}

// TestPriorityClassName renders the chart's priorityClassName on every pod, the bundled
// Postgres's included, and a component's own in its place.
func TestPriorityClassName(t *testing.T) {
	t.Parallel()
	r := renderChart(t, "pmx", "pmx")
	for _, w := range workloads(t, r) {
		if w.pod.PriorityClassName != "" {
			t.Errorf("%s: priorityClassName %q by default, want none", w.name, w.pod.PriorityClassName)
		}
	}
	r = renderChart(t, "pmx", "pmx", "--set", "priorityClassName=pmx-high", "--set", "shard.priorityClassName=pmx-critical")
	ws := workloads(t, r)
	if len(ws) != 4 {
		t.Fatalf("%d workloads rendered, want the operator, the api, the shards and Postgres", len(ws))
	}
	for _, w := range ws {
		want := "pmx-high"
		if w.name == shardWorkload(r) {
			want = "pmx-critical"
		}
		if w.pod.PriorityClassName != want {
			t.Errorf("%s: priorityClassName %q, want %q", w.name, w.pod.PriorityClassName, want)
		}
	}
}
