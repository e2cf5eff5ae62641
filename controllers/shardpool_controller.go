package controllers

import (
	"context"
	"fmt"
	"math"
	"slices"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	pmxv1 "github.com/pmx-dev/pmx/api/v1alpha1"
	"github.com/pmx-dev/pmx/internal/domain"
	"github.com/pmx-dev/pmx/internal/placement"
	"github.com/pmx-dev/pmx/internal/store/bookkeeping"
)

// shardPoolFinalizer keeps a ShardPool until its shards own no market: deleting a pool hands its
// shards' markets to the live shards outside it first, as a scale-down to zero would.
const shardPoolFinalizer = "pmx.dev/drain-pool"

// fieldOwner is the operator's name as a field manager of what it applies (server-side apply).
const fieldOwner = "pmx-operator"

// ShardPoolReconciler runs ShardPools (docs/kubernetes.md, "Shard pools"): it applies each pool's
// StatefulSet, headless Service and PodDisruptionBudget, owned by the pool, and reports the pool's
// shards as Postgres knows them — live (the heartbeats the Market reconciler schedules by), the
// OPEN markets each owns and the orders per second each reported (what the Rebalancer balances by).
//
// A scale-down never takes a shard that owns markets: the shards it removes, the highest ordinals,
// are marked draining in Postgres (store.Drain, the mark a stopping shard puts on itself: nothing
// is scheduled or rebalanced onto them) and emptied by the planned handoff (HandOffShard), and the
// StatefulSet's replicas are lowered only once they own no OPEN market. Deleting a pool does the
// same for all its shards (its finalizer, which a pool carries only while its shards own OPEN
// markets or drain: holdWhileOwning). With no live shard outside those that go to take their
// markets, the scale-down or the deletion waits, the shards serving on, and says so (Draining,
// NoShardToTakeOver). A scale-down undone before it completes takes the drains back.
//
// It records in Postgres the names of the shards each pool is to run (store.ExpectShards; none
// once the pool is being deleted): a shard of the pool that stops with no live shard of its pool
// to hand its markets to waits, bounded, for those not live yet (pmx shard; store.Successors), as
// when a pool replaces the chart's own shards.
//
// The objects are written by server-side apply, with the operator as their field manager: each
// apply states only the fields the operator sets, so the apiserver's defaults and fields others
// own (an annotation kubectl adds, a label a policy engine puts) are neither fought over nor
// written back on every look, and an unchanged pool writes nothing. (CreateOrUpdate would read
// the object, overwrite the fields the operator builds — defaulted ones included, whose zero
// values differ from the apiserver's — and update it whenever the two differ.) Objects of the
// pool's names that the pool does not control are left alone (Ready False, ObjectTaken).
type ShardPoolReconciler struct {
	client.Client
	// APIReader reads what the manager's cache does not hold: a shard's pod, before a drain is
	// taken back.
	APIReader client.Reader
	Scheme    *runtime.Scheme
	Store     ShardPoolStore
	Recorder  events.EventRecorder
	// Namespace is the one namespace whose ShardPools the operator runs: its own, where the
	// Secrets its shards read are. A pool elsewhere is reported OutsideNamespace and left alone.
	Namespace string
	// HandOffShard empties a live shard marked draining by the planned handoff
	// (shardclient.Router.HandOffShard), returning how many markets it handed over.
	HandOffShard func(ctx context.Context, shard string) (int, error)
	// ShardTTL is how long a shard stays live after its last heartbeat (default 5s).
	ShardTTL time.Duration
	// Resync is how often a pool is looked at again for its status, which Postgres changes without
	// a watch (default 10s).
	Resync time.Duration
	// DrainResync is how often a drain is looked at again while shards hand markets over, or wait
	// for a shard to take them (default 1s).
	DrainResync time.Duration
}

// +kubebuilder:rbac:groups=pmx.dev,resources=shardpools,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=pmx.dev,resources=shardpools/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=pmx.dev,resources=shardpools/finalizers,verbs=update
// +kubebuilder:rbac:groups=apps,namespace=pmx-system,resources=statefulsets,verbs=get;list;watch;create;patch
// +kubebuilder:rbac:groups="",namespace=pmx-system,resources=services,verbs=get;list;watch;create;patch
// +kubebuilder:rbac:groups=policy,namespace=pmx-system,resources=poddisruptionbudgets,verbs=get;list;watch;create;patch
// +kubebuilder:rbac:groups="",namespace=pmx-system,resources=pods,verbs=get

// The reasons of the Kubernetes events recorded on a ShardPool.
const (
	// reasonDraining: shards that a scale-down or the pool's deletion removes were marked draining,
	// and their markets are being handed to the other live shards.
	reasonDraining recordReason = "Draining"
	// reasonScaled: the pool's StatefulSet was given another number of replicas.
	reasonScaled recordReason = "Scaled"
	// reasonDrainTakenBack: a scale-down was undone before it completed: its shards take markets
	// again.
	reasonDrainTakenBack recordReason = "DrainTakenBack"
)

// poolObservation is what a look at a pool found and did, for its status.
type poolObservation struct {
	outside bool
	taken   []string // objects of the pool's names that it does not control ("StatefulSet x")
	applied bool     // the pool's objects were applied: replicas and the shards below mean something
	// replicas is the StatefulSet's replicas as applied (the spec's and dedicated, or more while
	// shards drain).
	replicas int32
	// dedicated is how many shards the pool runs beyond the spec's replicas for its dedicated
	// markets and events.
	dedicated int32
	pods      appsv1.StatefulSetStatus // the StatefulSet's, as the apply (or the read) answered it
	live      []bookkeeping.Shard      // the pool's live shards
	orders    float64                  // orders per second its live shards reported
	drain     drainObservation
	draining  []string // the shards the operator marked draining and still drains
	applyErr  bool     // the error, if any, came from writing the objects
}

// drainObservation is a scale-down's, or a deletion's, progress.
type drainObservation struct {
	leaving  []string // the shards that go
	owned    int      // OPEN markets they own still
	noTarget bool     // owned > 0 and no live shard outside them can take them
	from, to int32    // the StatefulSet's replicas and what they go to
	deleting bool
	err      error // the last handoff's failure
}

// Reconcile brings a ShardPool's StatefulSet, Service and PodDisruptionBudget in line with its
// spec, drains the shards a scale-down removes first, and reports the pool's shards.
func (r *ShardPoolReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	log := logf.FromContext(ctx).WithValues("shardpool", req.NamespacedName)
	var pool pmxv1.ShardPool
	if err := r.Get(ctx, req.NamespacedName, &pool); err != nil {
		if apierrors.IsNotFound(err) && req.Namespace == r.Namespace {
			// Gone without its finalizer (its shards owned nothing): none of its shards is to be
			// waited for any more.
			return ctrl.Result{}, r.Store.ExpectShards(ctx, req.Name, nil)
		}
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if pool.Namespace != r.Namespace {
		// Nothing is made for it. A finalizer of an operator that ran it (with another
		// --shard-pool-namespace) goes: this one does not watch what that one made.
		if !pool.DeletionTimestamp.IsZero() && controllerutil.ContainsFinalizer(&pool, shardPoolFinalizer) {
			patch := client.MergeFrom(pool.DeepCopy())
			controllerutil.RemoveFinalizer(&pool, shardPoolFinalizer)
			return ctrl.Result{}, client.IgnoreNotFound(r.Patch(ctx, &pool, patch))
		}
		return ctrl.Result{}, client.IgnoreNotFound(r.updateStatus(ctx, &pool, poolObservation{outside: true}, nil))
	}
	if !pool.DeletionTimestamp.IsZero() {
		return r.finalize(ctx, &pool)
	}
	obs, err := r.reconcilePool(ctx, &pool)
	if err == nil && obs.applied {
		err = r.holdWhileOwning(ctx, &pool, obs)
	}
	if err != nil {
		log.Error(err, "reconcile failed; retrying with backoff")
	}
	if serr := r.updateStatus(ctx, &pool, obs, err); serr != nil && !apierrors.IsNotFound(serr) {
		return ctrl.Result{}, serr
	}
	if err != nil {
		return ctrl.Result{}, err
	}
	if len(obs.drain.leaving) > 0 && obs.drain.owned > 0 {
		return ctrl.Result{RequeueAfter: r.DrainResync}, nil
	}
	return ctrl.Result{RequeueAfter: r.Resync}, nil
}

// reconcilePool records the shards the pool is to run (store.ExpectShards), applies the pool's
// objects, with the StatefulSet's replicas lowered only once the shards that go own no market, and
// reads the pool's shards.
func (r *ShardPoolReconciler) reconcilePool(ctx context.Context, pool *pmxv1.ShardPool) (poolObservation, error) {
	var obs poolObservation
	sts, taken, err := r.owned(ctx, pool)
	if err != nil || len(taken) > 0 {
		obs.taken = taken
		return obs, err
	}
	live, err := r.Store.LiveShards(ctx, r.ShardTTL)
	if err != nil {
		return obs, fmt.Errorf("while listing the live shards: %w", err)
	}
	current := int32(0)
	if sts != nil {
		current = ptr.Deref(sts.Spec.Replicas, 0)
	}
	// A shard of its own for each dedicated market or event of the pool, beyond the replicas, up
	// to maxDedicatedShards.
	units, err := r.Store.DedicatedUnits(ctx, pool.Name)
	if err != nil {
		return obs, fmt.Errorf("while counting the pool's dedicated markets: %w", err)
	}
	obs.dedicated = min(pool.Spec.MaxDedicatedShards, int32(units))
	desired := ptr.Deref(pool.Spec.Replicas, pmxv1.DefaultShardPoolReplicas) + obs.dedicated
	obs.replicas = desired
	// The shards the pool is to run, for a shard of the pool that stops to wait for those not live
	// yet (store.Successors): those a scale-down removes are not among them, even while they drain.
	if err := r.Store.ExpectShards(ctx, pool.Name, shardNames(pool, 0, desired)); err != nil {
		return obs, fmt.Errorf("while recording the shards the pool is to run: %w", err)
	}
	obs.draining = pool.Status.DrainingShards
	if desired < current {
		obs.drain, err = r.drain(ctx, pool, live, current, desired, false)
		if err != nil {
			return obs, err
		}
		if obs.drain.owned > 0 {
			obs.replicas = current // the shards that go still own markets
		}
		obs.draining = union(obs.draining, obs.drain.leaving)
	} else if obs.draining, err = r.takeBackDrains(ctx, pool, desired); err != nil {
		return obs, err
	}
	// The shards the StatefulSet no longer runs are gone, or stopping on their own.
	obs.draining = slices.DeleteFunc(slices.Clone(obs.draining), func(name string) bool {
		o, ok := shardOrdinal(pool, name)
		return !ok || o >= obs.replicas
	})
	if obs.pods, err = r.apply(ctx, pool, obs.replicas); err != nil {
		obs.applyErr = true
		return obs, err
	}
	obs.applied = true
	if sts != nil && current != obs.replicas {
		r.k8sEvent(pool, corev1.EventTypeNormal, reasonScaled, "Scale", "scaled from %d to %d shards", current, obs.replicas)
	}
	return obs, r.readShards(ctx, pool, live, &obs)
}

// owned reads the pool's StatefulSet, and lists the objects of the pool's names (StatefulSet,
// Service, PodDisruptionBudget) that exist and that the pool does not control.
func (r *ShardPoolReconciler) owned(ctx context.Context, pool *pmxv1.ShardPool) (*appsv1.StatefulSet, []string, error) {
	key := types.NamespacedName{Namespace: pool.Namespace, Name: pmxv1.ShardPoolStatefulSetName(pool.Name)}
	sts := &appsv1.StatefulSet{}
	var taken []string
	for _, obj := range []client.Object{sts, &corev1.Service{}, &policyv1.PodDisruptionBudget{}} {
		err := r.Get(ctx, key, obj)
		switch {
		case apierrors.IsNotFound(err):
			if obj == sts {
				sts = nil
			}
		case err != nil:
			return nil, nil, err
		case !metav1.IsControlledBy(obj, pool):
			kind, _, _ := r.Scheme.ObjectKinds(obj)
			name := key.Name
			if len(kind) > 0 {
				name = kind[0].Kind + " " + name
			}
			taken = append(taken, name)
		}
	}
	return sts, taken, nil
}

// apply writes the pool's Service, PodDisruptionBudget and StatefulSet (with replicas) by
// server-side apply, the operator owning the fields it sets, and returns the status of the
// StatefulSet's pods as the apply answered it. (The StatefulSet's watch brings the pool back when
// that status changes.)
func (r *ShardPoolReconciler) apply(ctx context.Context, pool *pmxv1.ShardPool, replicas int32) (appsv1.StatefulSetStatus, error) {
	var pods appsv1.StatefulSetStatus
	sts, err := shardStatefulSet(pool, replicas)
	if err != nil {
		return pods, err
	}
	opts := []client.ApplyOption{client.FieldOwner(fieldOwner), client.ForceOwnership}
	if err := r.Apply(ctx, shardService(pool), opts...); err != nil {
		return pods, fmt.Errorf("while applying the Service of shard pool %s: %w", pool.Name, err)
	}
	if err := r.Apply(ctx, shardDisruptionBudget(pool), opts...); err != nil {
		return pods, fmt.Errorf("while applying the PodDisruptionBudget of shard pool %s: %w", pool.Name, err)
	}
	if err := r.Apply(ctx, sts, opts...); err != nil {
		return pods, fmt.Errorf("while applying the StatefulSet of shard pool %s: %w", pool.Name, err)
	}
	if st := sts.Status; st != nil {
		pods.Replicas, pods.ReadyReplicas = ptr.Deref(st.Replicas, 0), ptr.Deref(st.ReadyReplicas, 0)
	}
	return pods, nil
}

// drain works a scale-down from the StatefulSet's from replicas to to (or a deletion, to 0) on: the
// shards that go are marked draining and emptied by the planned handoff, if some live shard
// outside them can take their markets; what they own afterwards says whether the StatefulSet may
// lose them.
func (r *ShardPoolReconciler) drain(ctx context.Context, pool *pmxv1.ShardPool, live []bookkeeping.Shard, from, to int32, deleting bool) (drainObservation, error) {
	d := drainObservation{leaving: shardNames(pool, to, from), from: from, to: to, deleting: deleting}
	owned, err := r.ownedBy(ctx, d.leaving)
	if err != nil {
		return d, err
	}
	d.owned = owned
	leaving := map[string]bool{}
	for _, name := range d.leaving {
		leaving[name] = true
	}
	target := slices.ContainsFunc(live, func(s bookkeeping.Shard) bool {
		return !leaving[s.Name] && !s.Draining && placement.Pool(s.Pool) == pool.Name
	})
	if d.owned > 0 && !target {
		// Nowhere to hand the markets to: the shards serve on, taking markets as before, until a
		// shard outside them is live.
		d.noTarget = true
		return d, nil
	}
	// Note the shards first, so that a scale-down undone later takes back every drain it made.
	if missing := slices.DeleteFunc(slices.Clone(d.leaving), func(n string) bool { return slices.Contains(pool.Status.DrainingShards, n) }); len(missing) > 0 {
		if err := r.noteDraining(ctx, pool, missing); err != nil {
			return d, err
		}
		why := fmt.Sprintf("before scaling from %d to %d", from, to)
		if deleting {
			why = "before the pool is deleted"
		}
		r.k8sEvent(pool, corev1.EventTypeNormal, reasonDraining, "Drain", "shards %v drain %s: the %d markets they own go to the other live shards",
			missing, why, d.owned)
	}
	for _, name := range d.leaving {
		if err := r.Store.Drain(ctx, name); err != nil {
			return d, fmt.Errorf("while marking shard %s draining: %w", name, err)
		}
	}
	if d.owned == 0 {
		return d, nil
	}
	for _, name := range d.leaving {
		// A shard that is not live has its markets moved by the Market reconciler, as off any lost
		// shard.
		if !slices.ContainsFunc(live, func(s bookkeeping.Shard) bool { return s.Name == name }) {
			continue
		}
		n, err := r.HandOffShard(ctx, name)
		if err != nil {
			d.err = err
			logf.FromContext(ctx).Info("a shard that is to go could not hand all its markets over; trying again", "shard", name, "handed", n, "error", err)
		}
	}
	d.owned, err = r.ownedBy(ctx, d.leaving)
	return d, err
}

// ownedBy counts the OPEN markets the shards own.
func (r *ShardPoolReconciler) ownedBy(ctx context.Context, shards []string) (int, error) {
	n := 0
	for _, name := range shards {
		owned, err := r.Store.OwnedMarkets(ctx, name)
		if err != nil {
			return 0, fmt.Errorf("while reading the markets of shard %s: %w", name, err)
		}
		for _, o := range owned {
			if o.Status == domain.MarketOpen {
				n++
			}
		}
	}
	return n, nil
}

// takeBackDrains takes back the drains of a scale-down undone (the pool's replicas raised again
// before it completed): each shard the operator marked draining that the pool now keeps takes
// markets again, unless its pod is being deleted, and so stopping of its own accord. It returns
// the shards still drained.
func (r *ShardPoolReconciler) takeBackDrains(ctx context.Context, pool *pmxv1.ShardPool, replicas int32) ([]string, error) {
	var still, back []string
	for _, name := range pool.Status.DrainingShards {
		if o, ok := shardOrdinal(pool, name); !ok || o >= replicas {
			still = append(still, name)
			continue
		}
		var pod corev1.Pod
		err := r.APIReader.Get(ctx, types.NamespacedName{Namespace: pool.Namespace, Name: name}, &pod)
		if err != nil && !apierrors.IsNotFound(err) {
			return pool.Status.DrainingShards, fmt.Errorf("while reading the pod of shard %s: %w", name, err)
		}
		if err == nil && !pod.DeletionTimestamp.IsZero() {
			continue // its process drains itself; the pod that replaces it registers afresh
		}
		if err := r.Store.Undrain(ctx, name); err != nil {
			return pool.Status.DrainingShards, fmt.Errorf("while taking back the drain of shard %s: %w", name, err)
		}
		back = append(back, name)
	}
	if len(back) > 0 {
		r.k8sEvent(pool, corev1.EventTypeNormal, reasonDrainTakenBack, "Undrain", "the scale-down to fewer than %d shards was undone: shards %v take markets again", replicas, back)
	}
	return still, nil
}

// readShards notes the pool's live shards among the ones its StatefulSet runs and the orders per
// second they reported.
func (r *ShardPoolReconciler) readShards(ctx context.Context, pool *pmxv1.ShardPool, live []bookkeeping.Shard, obs *poolObservation) error {
	obs.live = slices.DeleteFunc(slices.Clone(live), func(s bookkeeping.Shard) bool {
		o, ok := shardOrdinal(pool, s.Name)
		return !ok || o >= obs.replicas
	})
	if len(obs.live) == 0 {
		return nil
	}
	loads, err := r.Store.ShardLoads(ctx, r.ShardTTL)
	if err != nil {
		return fmt.Errorf("while reading the shards' load: %w", err)
	}
	for _, s := range obs.live {
		for _, rate := range loads[s.Name] {
			obs.orders += rate
		}
	}
	return nil
}

// finalize lets a deleted pool go once its shards own no market: they are drained as in a
// scale-down to zero, and the StatefulSet, Service and PodDisruptionBudget then go with the pool
// (their owner references), the pods handing over on their way out whatever came to them since.
func (r *ShardPoolReconciler) finalize(ctx context.Context, pool *pmxv1.ShardPool) (ctrl.Result, error) {
	if !controllerutil.ContainsFinalizer(pool, shardPoolFinalizer) {
		return ctrl.Result{}, nil
	}
	// The pool expects no shard from now on: its shards are drained (below) and their pods go with
	// it, and none of them that stops is to wait for another of them, draining too
	// (store.Successors).
	if err := r.Store.ExpectShards(ctx, pool.Name, nil); err != nil {
		return ctrl.Result{}, fmt.Errorf("while removing the shards the pool is to run: %w", err)
	}
	sts, _, err := r.owned(ctx, pool)
	if err != nil {
		return ctrl.Result{}, err
	}
	obs := poolObservation{draining: pool.Status.DrainingShards}
	// Only a StatefulSet the pool controls runs its shards: names held by another's are not its.
	if sts != nil && metav1.IsControlledBy(sts, pool) {
		live, err := r.Store.LiveShards(ctx, r.ShardTTL)
		if err != nil {
			return ctrl.Result{}, fmt.Errorf("while listing the live shards: %w", err)
		}
		n := ptr.Deref(sts.Spec.Replicas, 0)
		obs.replicas, obs.pods, obs.applied = n, sts.Status, true
		if obs.drain, err = r.drain(ctx, pool, live, n, 0, true); err != nil {
			return ctrl.Result{}, err
		}
		obs.draining = union(obs.draining, obs.drain.leaving)
		if err := r.readShards(ctx, pool, live, &obs); err != nil {
			return ctrl.Result{}, err
		}
	}
	if obs.drain.owned > 0 {
		if err := r.updateStatus(ctx, pool, obs, nil); err != nil && !apierrors.IsNotFound(err) {
			return ctrl.Result{}, err
		}
		return ctrl.Result{RequeueAfter: r.DrainResync}, nil
	}
	patch := client.MergeFrom(pool.DeepCopy())
	controllerutil.RemoveFinalizer(pool, shardPoolFinalizer)
	return ctrl.Result{}, client.IgnoreNotFound(r.Patch(ctx, pool, patch))
}

// holdWhileOwning puts the pool's finalizer on while its shards own OPEN markets or drain, and
// takes it off once they own none: a pool whose shards own nothing goes at once when deleted —
// above all in helm uninstall, which deletes the chart's pool after the operator's Deployment, its
// RBAC and the bundled Postgres, when no operator could let it go any more (the Markets deleted
// first, as docs/kubernetes.md says, leave the pool's shards nothing). The Market watch brings the
// pool here as soon as a market is placed on or taken off its shards.
func (r *ShardPoolReconciler) holdWhileOwning(ctx context.Context, pool *pmxv1.ShardPool, obs poolObservation) error {
	owned, err := r.ownedBy(ctx, union(shardNames(pool, 0, obs.replicas), obs.draining))
	if err != nil {
		return err
	}
	hold := owned > 0 || len(obs.draining) > 0
	if hold == controllerutil.ContainsFinalizer(pool, shardPoolFinalizer) {
		return nil
	}
	patch := client.MergeFromWithOptions(pool.DeepCopy(), client.MergeFromWithOptimisticLock{})
	if hold {
		controllerutil.AddFinalizer(pool, shardPoolFinalizer)
	} else {
		controllerutil.RemoveFinalizer(pool, shardPoolFinalizer)
	}
	if err := r.Patch(ctx, pool, patch); err != nil {
		return fmt.Errorf("while updating the finalizer (markets owned: %d): %w", owned, err)
	}
	return nil
}

// union is a with the names of b it lacks, in order.
func union(a, b []string) []string {
	out := slices.Clone(a)
	for _, n := range b {
		if !slices.Contains(out, n) {
			out = append(out, n)
		}
	}
	return out
}

// noteDraining adds shards to the pool's status.drainingShards before they are marked draining.
func (r *ShardPoolReconciler) noteDraining(ctx context.Context, pool *pmxv1.ShardPool, shards []string) error {
	patch := client.MergeFromWithOptions(pool.DeepCopy(), client.MergeFromWithOptimisticLock{})
	pool.Status.DrainingShards = union(pool.Status.DrainingShards, shards)
	if err := r.Status().Patch(ctx, pool, patch); err != nil {
		return fmt.Errorf("while noting shards %v as draining: %w", shards, err)
	}
	return nil
}

// selectorOf is the pool's pods' label selector, as the scale subresource reports it.
func selectorOf(pool *pmxv1.ShardPool) string {
	return labels.SelectorFromSet(shardPoolSelector(pool)).String()
}

// roundRate rounds an orders-per-second figure for the status.
func roundRate(rate float64) int64 { return int64(math.Round(rate)) }

// k8sEvent records a Kubernetes event on the ShardPool when a recorder is configured.
func (r *ShardPoolReconciler) k8sEvent(obj runtime.Object, eventType string, reason recordReason, action, note string, args ...any) {
	if r.Recorder != nil {
		r.Recorder.Eventf(obj, nil, eventType, string(reason), action, note, args...)
	}
}

// ShardPoolCache restricts the manager's cache of the objects a ShardPool owns to the namespace
// whose pools the operator runs, where the operator's Role lets it watch them.
func ShardPoolCache(namespace string) map[client.Object]cache.ByObject {
	only := cache.ByObject{Namespaces: map[string]cache.Config{namespace: {}}}
	return map[client.Object]cache.ByObject{&appsv1.StatefulSet{}: only, &corev1.Service{}: only, &policyv1.PodDisruptionBudget{}: only}
}

// SetupWithManager registers the reconciler; a change to a pool's StatefulSet (its pods' readiness
// above all), Service or PodDisruptionBudget brings the pool to be looked at again.
func (r *ShardPoolReconciler) SetupWithManager(mgr ctrl.Manager) error {
	if r.ShardTTL <= 0 {
		r.ShardTTL = 5 * time.Second
	}
	if r.Resync <= 0 {
		r.Resync = 10 * time.Second
	}
	if r.DrainResync <= 0 {
		r.DrainResync = time.Second
	}
	if r.APIReader == nil {
		r.APIReader = mgr.GetAPIReader()
	}
	return ctrl.NewControllerManagedBy(mgr).
		For(&pmxv1.ShardPool{}).
		Owns(&appsv1.StatefulSet{}).
		Owns(&corev1.Service{}).
		Owns(&policyv1.PodDisruptionBudget{}).
		// A Market placed on a shard, moved, or deleted: its pool looks again at whether it holds
		// markets (holdWhileOwning). Its other changes (orders per second, conditions) do not.
		Watches(&pmxv1.Market{}, handler.EnqueueRequestsFromMapFunc(r.poolOfMarket),
			builder.WithPredicates(predicate.Funcs{
				CreateFunc:  func(event.CreateEvent) bool { return false },
				GenericFunc: func(event.GenericEvent) bool { return false },
				UpdateFunc: func(e event.UpdateEvent) bool {
					before, after := e.ObjectOld.(*pmxv1.Market), e.ObjectNew.(*pmxv1.Market)
					return before.Status.Shard != after.Status.Shard || before.Status.Phase != after.Status.Phase ||
						before.DeletionTimestamp.IsZero() != after.DeletionTimestamp.IsZero()
				},
			})).
		Named("shardpool").
		Complete(r)
}

// poolOfMarket is the ShardPool of the operator's namespace that a Market goes to, if it exists
// (in the manager's cache): the Markets of a pool no ShardPool runs — the chart's own StatefulSet's
// shards — bring nothing to look at. (A pool's own deletion brings it, by its watch.)
func (r *ShardPoolReconciler) poolOfMarket(ctx context.Context, obj client.Object) []reconcile.Request {
	mkt, ok := obj.(*pmxv1.Market)
	if !ok {
		return nil
	}
	key := types.NamespacedName{Namespace: r.Namespace, Name: placement.Pool(mkt.Spec.ShardPool)}
	if err := r.Get(ctx, key, &pmxv1.ShardPool{}); err != nil {
		return nil
	}
	return []reconcile.Request{{NamespacedName: key}}
}
