package charttest

import (
	"maps"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	pmxv1 "github.com/pmx-dev/pmx/api/v1alpha1"
)

// The chart's ports its NetworkPolicies name.
const (
	shardInternalPort = 8090
	metricsPort       = 9090
	postgresPort      = 5432
	apiPort           = 8080
)

// TestNetworkPolicyDefault checks, by evaluating the rendered NetworkPolicies as Kubernetes does,
// that only the release's front API and operator pods reach the shards' internal API, only its operator, API and
// shard pods reach the bundled Postgres, and nothing else changes: metrics stay open to scrapers,
// the front API to everyone, and no pod's outgoing traffic (DNS, the kube-apiserver) is limited.
func TestNetworkPolicyDefault(t *testing.T) {
	t.Parallel()
	// The policies are the same with the shards as the chart's pool (the default) or its own
	// StatefulSet: both kinds of shard pod are judged, from a render that has both workloads' labels.
	pool := renderChart(t, "pmx", "exchange")
	r := renderChart(t, "pmx", "exchange", "--set", "shardPool.enabled=false")
	policies := networkPolicies(t, r)
	if len(policies) != 3 {
		t.Fatalf("%d NetworkPolicies rendered, want 3 (shards, ShardPools' shards, Postgres)", len(policies))
	}
	if p := networkPolicies(t, pool); !slices.EqualFunc(p, policies, func(a, b networkingv1.NetworkPolicy) bool { return equality.Semantic.DeepEqual(a, b) }) {
		t.Errorf("the policies differ with the shards as a pool:\n%v\n%v", p, policies)
	}
	pods := podLabels(t, r)
	api, shard, op, pg := pods["pmx-api"], pods["pmx-shard"], pods["pmx-operator"], pods["pmx-postgres"]
	pooled := poolShardLabels("default")
	if got := podLabels(t, pool)["default-shard"]; !labels.SelectorFromSet(pooled).Matches(labels.Set(got)) {
		t.Errorf("the chart's pool's shards are labelled %v, want %v among them", got, pooled)
	}
	stranger := map[string]string{"app": "curl"}
	otherRelease := maps.Clone(api)
	otherRelease["app.kubernetes.io/instance"] = "other"

	for _, c := range []struct {
		what     string
		from, to map[string]string
		port     int32
		want     bool
	}{
		{"api to a shard's internal API", api, shard, shardInternalPort, true},
		{"a shard to a shard's internal API", shard, shard, shardInternalPort, false},
		{"the operator to a shard's internal API", op, shard, shardInternalPort, true},
		{"Postgres to a shard's internal API", pg, shard, shardInternalPort, false},
		{"another pod to a shard's internal API", stranger, shard, shardInternalPort, false},
		{"another release's api to a shard's internal API", otherRelease, shard, shardInternalPort, false},
		{"another pod to a shard's other ports", stranger, shard, apiPort, false},
		{"a scraper to a shard's metrics", stranger, shard, metricsPort, true},
		{"api to a pool shard's internal API", api, pooled, shardInternalPort, true},
		{"the operator to a pool shard's internal API", op, pooled, shardInternalPort, true},
		{"a pool shard to a pool shard's internal API", pooled, pooled, shardInternalPort, false},
		{"another pod to a pool shard's internal API", stranger, pooled, shardInternalPort, false},
		{"another release's api to a pool shard's internal API", otherRelease, pooled, shardInternalPort, false},
		{"a scraper to a pool shard's metrics", stranger, pooled, metricsPort, true},

		{"the operator to Postgres", op, pg, postgresPort, true},
		{"api to Postgres", api, pg, postgresPort, true},
		{"a shard to Postgres", shard, pg, postgresPort, true},
		{"a pool shard to Postgres", pooled, pg, postgresPort, true},
		{"another pod to Postgres", stranger, pg, postgresPort, false},
		{"another release's api to Postgres", otherRelease, pg, postgresPort, false},

		{"anyone to the front API", stranger, api, apiPort, true},
		{"a scraper to the front API's metrics", stranger, api, metricsPort, true},
		{"a scraper to the operator's metrics", stranger, op, metricsPort, true},
	} {
		if got := allows(t, policies, c.from, c.to, c.port); got != c.want {
			t.Errorf("%s (port %d): allowed %t, want %t", c.what, c.port, got, c.want)
		}
	}
	for _, p := range policies {
		if !slices.Equal(p.Spec.PolicyTypes, []networkingv1.PolicyType{networkingv1.PolicyTypeIngress}) || len(p.Spec.Egress) > 0 {
			t.Errorf("NetworkPolicy %s: policy types %v: want Ingress alone, so that DNS and the kube-apiserver stay reachable", p.Name, p.Spec.PolicyTypes)
		}
	}

	// The ports the policies open are the ones the pods serve and their clients dial.
	checkContainerPort(t, r, "StatefulSet", "pmx-shard", shardInternalPort, metricsPort)
	checkContainerPort(t, r, "StatefulSet", "pmx-postgres", postgresPort)
	shards := r.find("StatefulSet", "pmx-shard")
	if !strings.Contains(string(shards.raw), "--addr=:8090") {
		t.Error("the shards no longer listen on port 8090 (the port they advertise with their IPs), which their NetworkPolicy opens to the front API and the operator")
	}
}

// TestNetworkPolicyOff checks networkPolicy.enabled=false renders none; and that with an external
// database there is no Postgres policy (the chart cannot reach it) but the shards keep theirs.
func TestNetworkPolicyOff(t *testing.T) {
	t.Parallel()
	if n := len(renderChart(t, "pmx", "exchange", "--set", "networkPolicy.enabled=false").ofKind("NetworkPolicy")); n != 0 {
		t.Errorf("networkPolicy.enabled=false rendered %d NetworkPolicies", n)
	}
	r := renderChart(t, "exchange", "markets", "-f", valuesFile("values-external-url.yaml"))
	policies := networkPolicies(t, r)
	if len(policies) != 2 || policies[0].Name != "exchange-pmx-shard" || policies[1].Name != "exchange-pmx-shard-pools" {
		t.Fatalf("with an external database: NetworkPolicies %v, want the shards' alone", r.ofKind("NetworkPolicy"))
	}
	pods := podLabels(t, r)
	shards := pods[shardWorkload(r)]
	if shards == nil || allows(t, policies, map[string]string{"app": "curl"}, shards, shardInternalPort) ||
		!allows(t, policies, pods["exchange-pmx-api"], shards, shardInternalPort) {
		t.Error("with an external database the shards' internal API is not the front API's alone")
	}
}

// poolShardLabels are the labels the operator gives a ShardPool's shard pods
// (controllers/shardpool_objects.go): none of the release's instance labels.
func poolShardLabels(pool string) map[string]string {
	return map[string]string{"app.kubernetes.io/name": "pmx", "app.kubernetes.io/managed-by": "pmx-operator",
		"app.kubernetes.io/component": "shard", pmxv1.LabelShardPool: pool}
}

func networkPolicies(t *testing.T, r *render) []networkingv1.NetworkPolicy {
	t.Helper()
	var out []networkingv1.NetworkPolicy
	for _, m := range r.ofKind("NetworkPolicy") {
		p := decode[networkingv1.NetworkPolicy](t, r, "NetworkPolicy", m.obj.GetName())
		if p.Namespace != r.namespace {
			t.Errorf("NetworkPolicy %s in namespace %q, want the release's %q", p.Name, p.Namespace, r.namespace)
		}
		out = append(out, *p)
	}
	return out
}

// podLabels are the labels of each workload's pods, by workload name.
func podLabels(t *testing.T, r *render) map[string]map[string]string {
	out := map[string]map[string]string{}
	for _, w := range workloads(t, r) {
		out[w.name] = w.labels
	}
	return out
}

// allows says whether policies, all in one namespace with from and to, let a pod labelled from open
// a TCP connection to port of a pod labelled to: a pod no policy selects for Ingress takes every
// connection; one that some policy selects, only those a rule of such a policy allows.
func allows(t *testing.T, policies []networkingv1.NetworkPolicy, from, to map[string]string, port int32) bool {
	t.Helper()
	isolated := false
	for _, p := range policies {
		if !selects(t, &p.Spec.PodSelector, to) || !slices.Contains(p.Spec.PolicyTypes, networkingv1.PolicyTypeIngress) {
			continue
		}
		isolated = true
		for _, rule := range p.Spec.Ingress {
			if !portAllowed(rule.Ports, port) {
				continue
			}
			if len(rule.From) == 0 {
				return true
			}
			for _, peer := range rule.From {
				if peer.NamespaceSelector != nil || peer.IPBlock != nil || peer.PodSelector == nil {
					t.Errorf("NetworkPolicy %s: a peer other than a pod of the release's namespace: %+v", p.Name, peer)
					continue
				}
				if selects(t, peer.PodSelector, from) {
					return true
				}
			}
		}
	}
	return !isolated
}

func selects(t *testing.T, s *metav1.LabelSelector, l map[string]string) bool {
	t.Helper()
	sel, err := metav1.LabelSelectorAsSelector(s)
	if err != nil {
		t.Fatal(err)
	}
	return sel.Matches(labels.Set(l))
}

func portAllowed(ports []networkingv1.NetworkPolicyPort, port int32) bool {
	if len(ports) == 0 {
		return true
	}
	for _, p := range ports {
		if (p.Protocol == nil || *p.Protocol == corev1.ProtocolTCP) && p.Port != nil && p.Port.IntVal == port && p.EndPort == nil {
			return true
		}
	}
	return false
}

// checkContainerPort checks that the first container of a workload's pods serves each of ports.
func checkContainerPort(t *testing.T, r *render, kind, name string, ports ...int32) {
	t.Helper()
	for _, w := range workloads(t, r) {
		if w.kind != kind || w.name != name {
			continue
		}
		for _, port := range ports {
			if !slices.ContainsFunc(w.pod.Containers[0].Ports, func(p corev1.ContainerPort) bool { return p.ContainerPort == port }) {
				t.Errorf("%s %s serves no port %d, which its NetworkPolicy names", kind, name, port)
			}
		}
		return
	}
	t.Errorf("no %s %s rendered", kind, name)
}
