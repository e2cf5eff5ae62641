package controllers

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	pmxv1 "github.com/pmx-dev/pmx/api/v1alpha1"
	"github.com/pmx-dev/pmx/internal/domain"
	"github.com/pmx-dev/pmx/internal/poll"
	"github.com/pmx-dev/pmx/internal/shardclient"
)

// poolNS is the namespace whose ShardPools the test's operator runs.
const poolNS = "pmx"

// handOffGate holds the operator's handoffs off the shards that go while it is closed, so that a
// test sees a drain in progress for as long as it needs: a closed gate refuses each handoff with
// an error, as a shard that cannot hand its markets over now would.
type handOffGate struct {
	mu     sync.Mutex
	closed bool
	calls  int // handoffs asked for while closed
}

func (g *handOffGate) set(closed bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.closed, g.calls = closed, 0
}

func (g *handOffGate) refused() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.calls
}

func (g *handOffGate) handOff(ctx context.Context, router *shardclient.Router, shard string) (int, error) {
	g.mu.Lock()
	if g.closed {
		g.calls++
		g.mu.Unlock()
		return 0, errors.New("held back by the test")
	}
	g.mu.Unlock()
	return router.HandOffShard(ctx, shard, time.Second)
}

// pool creates a ShardPool named name in ns with replicas shards.
func (w *world) pool(ns, name string, replicas int32, edit func(*pmxv1.ShardPoolSpec)) *pmxv1.ShardPool {
	w.t.Helper()
	p := &pmxv1.ShardPool{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Spec: pmxv1.ShardPoolSpec{
		Replicas:      ptr.To(replicas),
		Image:         "pmx:test",
		DatabaseURL:   corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "pmx-postgres"}, Key: "database-url"},
		InternalToken: corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "pmx-tokens"}, Key: "internal-token"},
	}}
	if edit != nil {
		edit(&p.Spec)
	}
	if err := w.k8s.Create(w.t.Context(), p); err != nil {
		w.t.Fatal(err)
	}
	return p
}

// eventuallyPool polls the ShardPool until cond holds, and returns it as it then was.
func (w *world) eventuallyPool(p *pmxv1.ShardPool, what string, cond func(*pmxv1.ShardPool) bool) *pmxv1.ShardPool {
	w.t.Helper()
	var got pmxv1.ShardPool
	var err error
	if poll.Until(w.t.Context(), 20*time.Second, func(ctx context.Context) (bool, error) {
		got = pmxv1.ShardPool{}
		err = w.k8s.Get(ctx, client.ObjectKeyFromObject(p), &got)
		return err == nil && cond(&got), nil
	}) != nil {
		w.t.Fatalf("ShardPool %s: timed out waiting until %s; last: %+v (%v)", p.Name, what, got.Status, err)
	}
	return &got
}

// poolCondition reports whether the pool's condition of type has status and reason.
func poolCondition(p *pmxv1.ShardPool, typ pmxv1.ShardPoolConditionType, status metav1.ConditionStatus, reason pmxv1.ShardPoolConditionReason) bool {
	c := meta.FindStatusCondition(p.Status.Conditions, string(typ))
	return c != nil && c.Status == status && c.Reason == string(reason) && c.ObservedGeneration == p.Generation
}

// statefulSet waits for the pool's StatefulSet until cond holds.
func (w *world) statefulSet(pool, what string, cond func(*appsv1.StatefulSet) bool) *appsv1.StatefulSet {
	w.t.Helper()
	var sts appsv1.StatefulSet
	var err error
	if poll.Until(w.t.Context(), 20*time.Second, func(ctx context.Context) (bool, error) {
		sts = appsv1.StatefulSet{}
		err = w.k8s.Get(ctx, client.ObjectKey{Namespace: poolNS, Name: pmxv1.ShardPoolStatefulSetName(pool)}, &sts)
		return err == nil && cond(&sts), nil
	}) != nil {
		w.t.Fatalf("StatefulSet of pool %s: timed out waiting until %s; last: replicas %v (%v)", pool, what, sts.Spec.Replicas, err)
	}
	return &sts
}

// podsReady sets the pool's StatefulSet's status as its controller would once n pods are up and
// ready: envtest runs no controller and no kubelet.
func (w *world) podsReady(pool string, n int32) {
	w.t.Helper()
	sts := w.statefulSet(pool, "it exists", func(*appsv1.StatefulSet) bool { return true })
	sts.Status = appsv1.StatefulSetStatus{ObservedGeneration: sts.Generation, Replicas: n, ReadyReplicas: n, AvailableReplicas: n,
		CurrentReplicas: n, UpdatedReplicas: n}
	if err := w.k8s.Status().Update(w.t.Context(), sts); err != nil {
		w.t.Fatal(err)
	}
}

// draining lists the live shards that drain.
func (w *world) draining() []string {
	w.t.Helper()
	live, err := w.st.LiveShards(w.t.Context(), time.Second)
	if err != nil {
		w.t.Fatal(err)
	}
	var out []string
	for _, s := range live {
		if s.Draining {
			out = append(out, s.Name)
		}
	}
	return out
}

// expected waits until the shards the pool expects in Postgres (store.ExpectShards, what its
// stopping shards wait for) are want: none, no row.
func (w *world) expected(pool string, want ...string) {
	w.t.Helper()
	var got []string
	var err error
	if poll.Until(w.t.Context(), 20*time.Second, func(ctx context.Context) (bool, error) {
		err = w.st.Pool.QueryRow(ctx, `select coalesce((select shards from shard_pools where name = $1), '{}')`, pool).Scan(&got)
		return err == nil && slices.Equal(got, want), nil
	}) != nil {
		w.t.Fatalf("pool %s: the shards expected %q (%v), want %q", pool, got, err, want)
	}
}

// openOwned lists the OPEN markets a shard owns.
func (w *world) openOwned(shard string) []uuid.UUID {
	w.t.Helper()
	owned, err := w.st.OwnedMarkets(w.t.Context(), shard)
	if err != nil {
		w.t.Fatal(err)
	}
	var out []uuid.UUID
	for _, o := range owned {
		if o.Status == domain.MarketOpen {
			out = append(out, o.Market)
		}
	}
	return out
}

// poolEvents lists the reasons of the Kubernetes events recorded on a ShardPool.
func (w *world) poolEvents(name string) []string {
	w.t.Helper()
	var evs eventsv1.EventList
	if err := w.k8s.List(w.t.Context(), &evs, client.InNamespace(poolNS)); err != nil {
		w.t.Fatal(err)
	}
	var out []string
	for _, e := range evs.Items {
		if e.Regarding.Kind == "ShardPool" && e.Regarding.Name == name {
			out = append(out, e.Reason)
		}
	}
	return out
}

// TestShardPool runs the operator's ShardPool reconciler against a real kube-apiserver and
// Postgres, with in-process shards registered under the pool's pods' names (envtest runs no pods:
// the test plays the StatefulSet controller's part by setting its status) and the Market
// reconciler scheduling markets onto them:
//   - a pool makes its StatefulSet, headless Service and PodDisruptionBudget, owned by it, with
//     the spec's essentials;
//   - its status reports the pods ready, the shards live in Postgres, their markets and orders/s,
//     which `kubectl get shardpools` shows;
//   - `kubectl scale` (the scale subresource) changes the StatefulSet's replicas, and the shards
//     the pool expects in Postgres (what its stopping shards wait for);
//   - a scale-down marks the shard that goes draining and hands its markets to the others before
//     the StatefulSet loses it, saying so in Draining; one undone before it completes takes the
//     drain back;
//   - names held by objects the pool does not own, and a pool outside the operator's namespace,
//     are refused;
//   - deleting a pool whose shards own markets waits for a live shard outside it, then hands them
//     over before the pool goes, which expects no shard from then on.
func TestShardPool(t *testing.T) {
	gate := &handOffGate{}
	w := newWorldWith(t, worldOptions{poolNamespace: poolNS, handOff: gate.handOff})
	ctx := t.Context()

	// The pool and its objects.
	p := w.pool(poolNS, "default", 3, func(s *pmxv1.ShardPoolSpec) {
		s.Args = []string{"--log-level=debug"}
		s.Env = []corev1.EnvVar{{Name: "GOGC", Value: "200"}}
		s.Resources = corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2")},
			Limits: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("2Gi")}}
		s.NodeSelector = map[string]string{"pmx.dev/role": "matching"}
		s.Tolerations = []corev1.Toleration{{Key: "dedicated", Operator: corev1.TolerationOpEqual, Value: "pmx", Effect: corev1.TaintEffectNoSchedule}}
		s.Affinity = &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{PreferredDuringSchedulingIgnoredDuringExecution: []corev1.WeightedPodAffinityTerm{{
			Weight: 100, PodAffinityTerm: corev1.PodAffinityTerm{TopologyKey: "kubernetes.io/hostname",
				LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{pmxv1.LabelShardPool: "default"}}}}}}}
		s.TopologySpreadConstraints = []corev1.TopologySpreadConstraint{{MaxSkew: 1, TopologyKey: "topology.kubernetes.io/zone",
			WhenUnsatisfiable: corev1.ScheduleAnyway, LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{pmxv1.LabelShardPool: "default"}}}}
		s.PriorityClassName = "pmx-critical"
		s.PodMetadata = &pmxv1.ShardPoolPodMetadata{Annotations: map[string]string{"checksum/config": "abc"}}
		s.PodDisruptionBudget = &pmxv1.ShardPoolDisruptionBudget{MaxUnavailable: ptr.To(intstr.FromInt32(2))}
	})
	t.Run("Objects", func(t *testing.T) {
		sts := w.statefulSet("default", "it has 3 replicas", func(s *appsv1.StatefulSet) bool { return ptr.Deref(s.Spec.Replicas, 0) == 3 })
		checkOwned(t, sts, p.Name)
		spec := sts.Spec
		if spec.ServiceName != "default-shard" || spec.PodManagementPolicy != appsv1.ParallelPodManagement ||
			spec.Selector.MatchLabels[pmxv1.LabelShardPool] != "default" || spec.Template.Labels[pmxv1.LabelShardPool] != "default" {
			t.Errorf("StatefulSet spec: service %q, policy %q, selector %v, pod labels %v", spec.ServiceName, spec.PodManagementPolicy,
				spec.Selector, spec.Template.Labels)
		}
		pod := spec.Template.Spec
		if len(pod.Containers) != 1 {
			t.Fatalf("containers %+v", pod.Containers)
		}
		c := pod.Containers[0]
		if c.Image != "pmx:test" || !slices.Equal(c.Args, []string{"shard", "--addr=:8090", "--metrics-addr=:9090", "--log-level=debug"}) {
			t.Errorf("container image %q, args %q", c.Image, c.Args)
		}
		env := map[string]corev1.EnvVar{}
		for _, e := range c.Env {
			env[e.Name] = e
		}
		if env["PMX_SHARD_NAME"].Value != "$(POD_NAME)" || env["POD_NAME"].ValueFrom == nil || env["PMX_ADVERTISE_ADDRESS"].Value != "$(POD_IP)" ||
			env["GOGC"].Value != "200" {
			t.Errorf("env %+v", c.Env)
		}
		for name, want := range map[string][2]string{"PMX_DATABASE_URL": {"pmx-postgres", "database-url"}, "PMX_INTERNAL_TOKEN": {"pmx-tokens", "internal-token"}} {
			if from := env[name].ValueFrom; from == nil || from.SecretKeyRef == nil || from.SecretKeyRef.Name != want[0] || from.SecretKeyRef.Key != want[1] {
				t.Errorf("%s from %+v, want Secret %s key %s", name, from, want[0], want[1])
			}
		}
		if c.Resources.Requests.Cpu().String() != "2" || c.Resources.Limits.Memory().String() != "2Gi" || c.ReadinessProbe == nil ||
			c.ReadinessProbe.HTTPGet.Path != "/readyz" || c.StartupProbe == nil || c.LivenessProbe == nil {
			t.Errorf("resources %+v, probes %+v %+v %+v", c.Resources, c.StartupProbe, c.LivenessProbe, c.ReadinessProbe)
		}
		if sc := c.SecurityContext; sc == nil || !ptr.Deref(sc.ReadOnlyRootFilesystem, false) || !ptr.Deref(sc.RunAsNonRoot, false) ||
			ptr.Deref(sc.AllowPrivilegeEscalation, true) {
			t.Errorf("container security context %+v, want the chart's restricted one", sc)
		}
		if pod.NodeSelector["pmx.dev/role"] != "matching" || len(pod.Tolerations) != 1 || pod.Affinity == nil || pod.Affinity.PodAntiAffinity == nil ||
			len(pod.TopologySpreadConstraints) != 1 || pod.PriorityClassName != "pmx-critical" || ptr.Deref(pod.AutomountServiceAccountToken, true) ||
			ptr.Deref(pod.TerminationGracePeriodSeconds, 0) != pmxv1.DefaultShardPoolGracePeriod || spec.Template.Annotations["checksum/config"] != "abc" {
			t.Errorf("pod spec: nodeSelector %v, tolerations %v, affinity %v, spread %v, priority %q, automount %v, grace %v, annotations %v",
				pod.NodeSelector, pod.Tolerations, pod.Affinity, pod.TopologySpreadConstraints, pod.PriorityClassName,
				pod.AutomountServiceAccountToken, pod.TerminationGracePeriodSeconds, spec.Template.Annotations)
		}

		var svc corev1.Service
		if err := w.k8s.Get(ctx, client.ObjectKey{Namespace: poolNS, Name: "default-shard"}, &svc); err != nil {
			t.Fatal(err)
		}
		checkOwned(t, &svc, p.Name)
		if svc.Spec.ClusterIP != corev1.ClusterIPNone || !svc.Spec.PublishNotReadyAddresses || svc.Spec.Selector[pmxv1.LabelShardPool] != "default" ||
			len(svc.Spec.Ports) != 2 || svc.Spec.Ports[0].Port != 8090 {
			t.Errorf("Service spec %+v, want headless over the pool's pods", svc.Spec)
		}
		var pdb policyv1.PodDisruptionBudget
		if err := w.k8s.Get(ctx, client.ObjectKey{Namespace: poolNS, Name: "default-shard"}, &pdb); err != nil {
			t.Fatal(err)
		}
		checkOwned(t, &pdb, p.Name)
		if pdb.Spec.MaxUnavailable == nil || pdb.Spec.MaxUnavailable.IntValue() != 2 || pdb.Spec.MinAvailable != nil ||
			pdb.Spec.Selector.MatchLabels[pmxv1.LabelShardPool] != "default" {
			t.Errorf("PodDisruptionBudget spec %+v, want maxUnavailable 2 over the pool's pods", pdb.Spec)
		}
		got := w.eventuallyPool(p, "its objects are made and it waits for its shards", func(p *pmxv1.ShardPool) bool {
			return poolCondition(p, pmxv1.ShardPoolReady, metav1.ConditionFalse, pmxv1.ReasonProgressing) &&
				poolCondition(p, pmxv1.ShardPoolDraining, metav1.ConditionFalse, pmxv1.ReasonNoShardLeaving)
		})
		// No finalizer while its shards own no market: deleted now, it would go at once.
		if got.Status.StatefulSet != "default-shard" || got.Status.Selector != "app.kubernetes.io/component=shard,pmx.dev/shard-pool=default" ||
			slices.Contains(got.Finalizers, shardPoolFinalizer) {
			t.Errorf("status %+v, finalizers %v, want none", got.Status, got.Finalizers)
		}
	})

	// The pods come up: each registers its shard under its pod's name, and markets are scheduled
	// onto them, two each.
	t.Run("Status", func(t *testing.T) {
		for i := range 3 {
			w.addShard(fmt.Sprintf("default-shard-%d", i))
		}
		w.podsReady("default", 3)
		w.waitLive("default-shard-0", "default-shard-1", "default-shard-2")
		for i := range 6 {
			w.eventually(w.market(fmt.Sprintf("pooled-%d", i), nil), "scheduled", scheduled)
		}
		incarnation, err := w.st.Incarnation(ctx, "default-shard-0")
		if err != nil {
			t.Fatal(err)
		}
		// The shard's report of the orders per second its markets took (every fifth heartbeat of a
		// shard process; the test's shards only beat).
		if err := w.st.ReportLoad(ctx, "default-shard-0", incarnation, map[uuid.UUID]float64{uuid.New(): 10, uuid.New(): 2.4}); err != nil {
			t.Fatal(err)
		}
		w.eventuallyPool(p, "its 3 shards are ready and live with the 6 markets, its finalizer on", func(p *pmxv1.ShardPool) bool {
			s := p.Status
			return s.Replicas == 3 && s.ReadyReplicas == 3 && s.LiveShards == 3 && s.Markets == 6 && s.OrdersPerSecond == 12 &&
				poolCondition(p, pmxv1.ShardPoolReady, metav1.ConditionTrue, pmxv1.ReasonShardsReady) &&
				slices.Contains(p.Finalizers, shardPoolFinalizer)
		})
		out := w.env.Kubectl(t, "get", "shardpools", "-n", poolNS)
		lines := strings.Split(strings.TrimSpace(out), "\n")
		if len(lines) != 2 || !slices.Equal(strings.Fields(lines[0]), []string{"NAME", "DESIRED", "READY", "LIVE", "MARKETS", "ORDERS/S", "DRAINING", "AGE"}) ||
			!slices.Equal(strings.Fields(lines[1])[:7], []string{"default", "3", "3", "3", "6", "12", "False"}) {
			t.Errorf("kubectl get shardpools:\n%s", out)
		}
	})

	// The scale subresource: kubectl scale, as an autoscaler would.
	t.Run("Scale", func(t *testing.T) {
		w.env.Kubectl(t, "scale", "-n", poolNS, "shardpool/default", "--replicas=4")
		w.statefulSet("default", "it has 4 replicas", func(s *appsv1.StatefulSet) bool { return ptr.Deref(s.Spec.Replicas, 0) == 4 })
		w.expected("default", "default-shard-0", "default-shard-1", "default-shard-2", "default-shard-3")
		raw := w.env.Kubectl(t, "get", "--raw", "/apis/pmx.dev/v1alpha1/namespaces/"+poolNS+"/shardpools/default/scale")
		var scale struct {
			Spec   struct{ Replicas int32 }
			Status struct {
				Replicas int32
				Selector string
			}
		}
		if err := json.Unmarshal([]byte(raw), &scale); err != nil {
			t.Fatal(err)
		}
		if scale.Spec.Replicas != 4 || scale.Status.Replicas != 3 || scale.Status.Selector != "app.kubernetes.io/component=shard,pmx.dev/shard-pool=default" {
			t.Errorf("the scale subresource: %s", raw)
		}
		// Back to 3: default-shard-3 never started, owns nothing, and goes at once.
		w.env.Kubectl(t, "scale", "-n", poolNS, "shardpool/default", "--replicas=3")
		w.statefulSet("default", "it has 3 replicas again", func(s *appsv1.StatefulSet) bool { return ptr.Deref(s.Spec.Replicas, 0) == 3 })
		w.expected("default", "default-shard-0", "default-shard-1", "default-shard-2")
	})

	// Down to 2: default-shard-2 drains first. While the gate holds its handoffs back, the
	// StatefulSet keeps it; once it is open, its markets move to the other two by the planned
	// handoff, and only then does the StatefulSet lose it.
	t.Run("ScaleDownDrains", func(t *testing.T) {
		leaving := w.openOwned("default-shard-2")
		if len(leaving) == 0 {
			t.Fatal("default-shard-2 owns no market: the drain would be vacuous")
		}
		gate.set(true)
		w.env.Kubectl(t, "scale", "-n", poolNS, "shardpool/default", "--replicas=2")
		w.eventuallyPool(p, "draining", func(p *pmxv1.ShardPool) bool {
			return poolCondition(p, pmxv1.ShardPoolDraining, metav1.ConditionTrue, pmxv1.ReasonHandingOver) &&
				slices.Equal(p.Status.DrainingShards, []string{"default-shard-2"}) && gate.refused() >= 2
		})
		if got := w.draining(); !slices.Equal(got, []string{"default-shard-2"}) {
			t.Errorf("shards draining in Postgres %v, want default-shard-2", got)
		}
		w.expected("default", "default-shard-0", "default-shard-1") // the shard that goes is not, while it drains
		if sts := w.statefulSet("default", "read", func(*appsv1.StatefulSet) bool { return true }); ptr.Deref(sts.Spec.Replicas, 0) != 3 {
			t.Fatalf("the StatefulSet has %d replicas while default-shard-2 still owns %d markets, want 3", ptr.Deref(sts.Spec.Replicas, 0), len(w.openOwned("default-shard-2")))
		}
		if got := w.openOwned("default-shard-2"); len(got) != len(leaving) {
			t.Fatalf("default-shard-2 owns %d markets with its handoffs held back, want %d", len(got), len(leaving))
		}

		gate.set(false)
		w.statefulSet("default", "it has 2 replicas", func(s *appsv1.StatefulSet) bool { return ptr.Deref(s.Spec.Replicas, 0) == 2 })
		if got := w.openOwned("default-shard-2"); len(got) != 0 {
			t.Fatalf("the StatefulSet lost default-shard-2 while it owned %v", got)
		}
		// Handed over, not failed over: the shard was live throughout, no Market saw it lost, and
		// the markets trade on their new shards.
		for _, id := range leaving {
			o, err := w.st.Owner(ctx, id)
			if err != nil || o.Status != domain.MarketOpen || (o.Shard != "default-shard-0" && o.Shard != "default-shard-1") {
				t.Errorf("market %s after the drain: %+v (%v)", id, o, err)
			}
		}
		if lost, _ := w.eventsOf(ctx, reasonShardLost); len(lost) > 0 {
			t.Errorf("markets failed over: %+v", lost)
		}
		alice, _ := w.account("alice")
		w.call(alice, "POST", "/api/v1/order", order(leaving[0].String(), "BUY", "YES", 40, 1), http.StatusCreated, nil)

		// The pod goes: its shard stops beating and unregisters, as a stopping shard does, and the
		// pool settles at 2.
		w.beats["default-shard-2"]()
		incarnation, err := w.st.Incarnation(ctx, "default-shard-2")
		if err != nil {
			t.Fatal(err)
		}
		if err := w.st.Unregister(ctx, "default-shard-2", incarnation); err != nil {
			t.Fatal(err)
		}
		w.waitLive("default-shard-0", "default-shard-1")
		w.podsReady("default", 2)
		w.eventuallyPool(p, "settled at 2 shards", func(p *pmxv1.ShardPool) bool {
			return poolCondition(p, pmxv1.ShardPoolDraining, metav1.ConditionFalse, pmxv1.ReasonNoShardLeaving) &&
				poolCondition(p, pmxv1.ShardPoolReady, metav1.ConditionTrue, pmxv1.ReasonShardsReady) &&
				len(p.Status.DrainingShards) == 0 && p.Status.LiveShards == 2 && p.Status.Markets == 6
		})
		if events := w.poolEvents("default"); !slices.Contains(events, string(reasonDraining)) || !slices.Contains(events, string(reasonScaled)) {
			t.Errorf("the pool's events %v, want Draining and Scaled", events)
		}
	})

	// Down to 1 and back to 2 before default-shard-1 is empty: its drain is taken back.
	t.Run("ScaleDownUndone", func(t *testing.T) {
		gate.set(true)
		w.env.Kubectl(t, "scale", "-n", poolNS, "shardpool/default", "--replicas=1")
		w.eventuallyPool(p, "draining default-shard-1", func(p *pmxv1.ShardPool) bool {
			return poolCondition(p, pmxv1.ShardPoolDraining, metav1.ConditionTrue, pmxv1.ReasonHandingOver) &&
				slices.Equal(p.Status.DrainingShards, []string{"default-shard-1"}) && gate.refused() >= 1
		})
		if got := w.draining(); !slices.Equal(got, []string{"default-shard-1"}) {
			t.Errorf("shards draining in Postgres %v, want default-shard-1", got)
		}
		w.env.Kubectl(t, "scale", "-n", poolNS, "shardpool/default", "--replicas=2")
		w.eventuallyPool(p, "no longer draining", func(p *pmxv1.ShardPool) bool {
			return poolCondition(p, pmxv1.ShardPoolDraining, metav1.ConditionFalse, pmxv1.ReasonNoShardLeaving) && len(p.Status.DrainingShards) == 0
		})
		gate.set(false)
		if got := w.draining(); len(got) != 0 {
			t.Errorf("shards draining in Postgres %v after the scale-down was undone, want none", got)
		}
		if sts := w.statefulSet("default", "read", func(*appsv1.StatefulSet) bool { return true }); ptr.Deref(sts.Spec.Replicas, 0) != 2 {
			t.Errorf("the StatefulSet has %d replicas, want 2 throughout", ptr.Deref(sts.Spec.Replicas, 0))
		}
		if len(w.openOwned("default-shard-1")) == 0 {
			t.Error("default-shard-1 lost its markets to a scale-down that was undone")
		}
		if events := w.poolEvents("default"); !slices.Contains(events, string(reasonDrainTakenBack)) {
			t.Errorf("the pool's events %v, want DrainTakenBack", events)
		}
	})

	// Names held by objects the pool does not control are left alone; so is a pool outside the
	// operator's namespace.
	t.Run("Refused", func(t *testing.T) {
		taken := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "taken-shard", Namespace: poolNS},
			Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 80}}}}
		if err := w.k8s.Create(ctx, taken); err != nil {
			t.Fatal(err)
		}
		tp := w.pool(poolNS, "taken", 1, nil)
		got := w.eventuallyPool(tp, "refused", func(p *pmxv1.ShardPool) bool {
			return poolCondition(p, pmxv1.ShardPoolReady, metav1.ConditionFalse, pmxv1.ReasonObjectTaken)
		})
		if c := meta.FindStatusCondition(got.Status.Conditions, string(pmxv1.ShardPoolReady)); !strings.Contains(c.Message, "Service taken-shard") {
			t.Errorf("Ready says %q, want it to name the Service", c.Message)
		}
		if err := w.k8s.Get(ctx, client.ObjectKey{Namespace: poolNS, Name: "taken-shard"}, &appsv1.StatefulSet{}); !apierrors.IsNotFound(err) {
			t.Errorf("a pool whose Service name is taken made a StatefulSet (%v)", err)
		}
		if err := w.k8s.Get(ctx, client.ObjectKeyFromObject(taken), taken); err != nil || len(taken.OwnerReferences) > 0 {
			t.Errorf("the Service the pool does not own: owners %v (%v)", taken.OwnerReferences, err)
		}
		if err := w.k8s.Delete(ctx, tp); err != nil {
			t.Fatal(err)
		}
		w.gone(tp)

		stray := w.pool("default", "stray", 1, nil)
		got = w.eventuallyPool(stray, "refused", func(p *pmxv1.ShardPool) bool {
			return poolCondition(p, pmxv1.ShardPoolReady, metav1.ConditionFalse, pmxv1.ReasonOutsideNamespace)
		})
		if len(got.Finalizers) > 0 {
			t.Errorf("a pool outside the operator's namespace has finalizers %v", got.Finalizers)
		}
		if err := w.k8s.Get(ctx, client.ObjectKey{Namespace: "default", Name: "stray-shard"}, &appsv1.StatefulSet{}); !apierrors.IsNotFound(err) {
			t.Errorf("a pool outside the operator's namespace has a StatefulSet (%v)", err)
		}
	})

	// Deleting the pool: its shards own the six markets and no shard outside it is live, so the
	// deletion waits, the shards serving on and taking markets; once shard-a is live, they hand
	// their markets to it and the pool goes.
	t.Run("Delete", func(t *testing.T) {
		if err := w.k8s.Delete(ctx, p); err != nil {
			t.Fatal(err)
		}
		w.eventuallyPool(p, "its deletion waits for a shard outside it", func(p *pmxv1.ShardPool) bool {
			return !p.DeletionTimestamp.IsZero() && poolCondition(p, pmxv1.ShardPoolDraining, metav1.ConditionTrue, pmxv1.ReasonNoShardToTakeOver)
		})
		if got := w.draining(); len(got) != 0 {
			t.Errorf("shards draining in Postgres %v with nowhere to hand their markets, want none", got)
		}
		w.expected("default") // from the deletion on, before the pool goes
		w.addShard("shard-a")
		w.gone(p)
		if n := len(w.openOwned("shard-a")); n != 6 {
			t.Errorf("shard-a owns %d markets after the pool went, want the 6", n)
		}
		for _, name := range []string{"default-shard-0", "default-shard-1"} {
			if got := w.openOwned(name); len(got) != 0 {
				t.Errorf("%s owns %v after its pool went", name, got)
			}
		}
	})
}

// checkOwned checks that the pool is obj's controller, so that deleting it deletes obj.
func checkOwned(t *testing.T, obj metav1.Object, pool string) {
	t.Helper()
	ref := metav1.GetControllerOf(obj)
	if ref == nil || ref.Kind != "ShardPool" || ref.Name != pool || !ptr.Deref(ref.BlockOwnerDeletion, false) {
		t.Errorf("%s's controller %+v, want ShardPool %s", obj.GetName(), ref, pool)
	}
}

// gone waits until the ShardPool no longer exists.
func (w *world) gone(p *pmxv1.ShardPool) {
	w.t.Helper()
	var got pmxv1.ShardPool
	if err := poll.Until(w.t.Context(), 20*time.Second, func(ctx context.Context) (bool, error) {
		err := w.k8s.Get(ctx, client.ObjectKeyFromObject(p), &got)
		return apierrors.IsNotFound(err), client.IgnoreNotFound(err)
	}); err != nil {
		w.t.Fatalf("ShardPool %s still there: %+v (%v)", p.Name, got.Status, err)
	}
}
