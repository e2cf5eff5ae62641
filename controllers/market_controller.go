package controllers

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	pmxv1 "github.com/pmx-dev/pmx/api/v1alpha1"
	"github.com/pmx-dev/pmx/internal/domain"
	"github.com/pmx-dev/pmx/internal/market/marketspec"
	"github.com/pmx-dev/pmx/internal/placement"
	"github.com/pmx-dev/pmx/internal/records"
	"github.com/pmx-dev/pmx/internal/store/bookkeeping"
)

// finalizer keeps a Market until its market is settled: deleting an unsettled market voids it.
const finalizer = "pmx.dev/settle"

// Clock tells the time; tests inject their own.
type Clock interface{ Now() time.Time }

type realClock struct{}

func (realClock) Now() time.Time { return time.Now() }

// MarketReconciler reconciles Market resources with the exchange.
type MarketReconciler struct {
	client.Client
	Scheme   *runtime.Scheme
	Store    MarketStore
	Recorder events.EventRecorder
	// Exchange carries out lifecycle changes, on the shard that owns each market.
	Exchange Exchange
	// ShardTTL is how long a shard stays live after its last heartbeat (default 5s).
	ShardTTL time.Duration
	// Resync is how often an OPEN market is looked at again, to move it off a shard whose heartbeat
	// lapsed (default 2s).
	Resync time.Duration
	Clock  Clock
	// Moves notes each market moved off a lost shard, which the Rebalancer then leaves where it is
	// for its cooldown (nil: none noted).
	Moves *MoveLog

	// waiting counts, per Market, the looks for a live shard to carry out its change (waitForShard).
	waiting sync.Map
}

// +kubebuilder:rbac:groups="",resources=events,verbs=create;patch
// +kubebuilder:rbac:groups=coordination.k8s.io,resources=leases,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch
// +kubebuilder:rbac:groups=pmx.dev,resources=markets,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=pmx.dev,resources=markets/finalizers,verbs=update
// +kubebuilder:rbac:groups=pmx.dev,resources=markets/status,verbs=get;update;patch

// Reconcile brings one Market and its market in Postgres in line with each other.
func (r *MarketReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	log := logf.FromContext(ctx).WithValues("market", req.NamespacedName)
	var mkt pmxv1.Market
	if err := r.Get(ctx, req.NamespacedName, &mkt); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !mkt.DeletionTimestamp.IsZero() {
		wait, err := r.finalize(ctx, &mkt)
		return ctrl.Result{RequeueAfter: wait}, err
	}
	if !controllerutil.ContainsFinalizer(&mkt, finalizer) {
		patch := client.MergeFrom(mkt.DeepCopy())
		controllerutil.AddFinalizer(&mkt, finalizer)
		if err := r.Patch(ctx, &mkt, patch); err != nil {
			return ctrl.Result{}, fmt.Errorf("while adding the finalizer: %w", err)
		}
	}

	obs, err := r.reconcileMarket(ctx, &mkt)
	if err != nil {
		log.Error(err, "reconcile failed; retrying with backoff")
	}
	if serr := r.updateStatus(ctx, &mkt, obs, err); serr != nil && !apierrors.IsNotFound(serr) {
		return ctrl.Result{}, serr
	}
	if err != nil {
		return ctrl.Result{}, err
	}
	if obs.inEvent != nil {
		return ctrl.Result{RequeueAfter: r.Resync}, nil
	}
	if obs.pending != "" && obs.noLive {
		return ctrl.Result{RequeueAfter: r.waitForShard(&mkt, obs.pending)}, nil
	}
	r.doneWaiting(mkt.UID)
	return ctrl.Result{RequeueAfter: r.requeueAfter(&mkt, obs)}, nil
}

// observation is what a reconcile found and did, for the status.
type observation struct {
	row *records.Market
	// pending is the action the spec's intent asks of the market and that is not carried out yet.
	pending domain.MarketAction
	noLive  bool   // OPEN or with a change pending, and no shard is live to own it
	lost    string // with noLive: the owner whose heartbeat lapsed, if a shard owned it
	pool    string // with noLive: the market's pool, none of whose shards is live
	// at is where a market with a live owner is served, as its placement sees it.
	at *placedAt
	// inEvent: the market belongs to an event, whose Event carries out its pending change, or
	// refuses the change when only the Market asks for it.
	inEvent *eventMarket
}

// placedAt is where a market with a live owner is, against where its placement asks.
type placedAt struct {
	shard, shardPool string // its owner and the owner's pool
	pool             string // the market's pool
	alone            bool   // no other market's unit is on its shard
	free             string // dedicated and not alone: a free shard of its pool, if one is live
}

// placed notes in obs where the market of unit u is served: on owner, among live.
func (obs *observation) placed(live []bookkeeping.Shard, owner string, u placement.Unit) {
	i := slices.IndexFunc(live, func(s bookkeeping.Shard) bool { return s.Name == owner })
	if i < 0 {
		return
	}
	s := live[i]
	obs.at = &placedAt{shard: owner, shardPool: placement.Pool(s.Pool), pool: placement.Pool(u.Pool), alone: placement.Alone(s)}
	if u.Dedicated && !obs.at.alone {
		if to, fits := elsewhere(live, i, u); fits {
			obs.at.free = to
		}
	}
}

// reconcileMarket records the market, schedules it and carries out its intent. A market that is
// OPEN, or has a change to undergo, needs a live owner: the owner carries the change out.
func (r *MarketReconciler) reconcileMarket(ctx context.Context, mkt *pmxv1.Market) (observation, error) {
	var obs observation
	row, err := r.record(ctx, mkt)
	if err != nil {
		return obs, err
	}
	if row, err = r.pause(ctx, mkt, row); err != nil {
		return obs, err
	}
	if row, err = r.fees(ctx, mkt, row); err != nil {
		return obs, err
	}
	if row, err = r.place(ctx, mkt, row); err != nil {
		return obs, err
	}
	obs.row = &row
	intent := marketspec.IntentOf(&mkt.Spec)
	action, pending := intent.Next(row.Status, r.Clock.Now())
	if row.Status == domain.MarketOpen || pending {
		if row, err = r.schedule(ctx, mkt, row, &obs); err != nil {
			return obs, err
		}
		obs.row = &row
	}
	if !pending {
		return obs, nil
	}
	obs.pending = action
	if obs.inEvent, err = r.inEvent(ctx, mkt); err != nil || obs.inEvent != nil {
		return obs, err // its Event moves it, with its siblings
	}
	if obs.noLive {
		return obs, nil // Reconcile waits for a shard
	}
	// Say Reconciling first, as a transition can take a while (settlement pays every position);
	// unless Ready is False already, which keeps a failed attempt's error in view.
	if meta.IsStatusConditionTrue(mkt.Status.Conditions, string(pmxv1.MarketReady)) {
		if err := r.updateStatus(ctx, mkt, obs, nil); err != nil {
			return obs, err
		}
	}
	if row, err = r.carryOut(ctx, mkt, row, action); err != nil {
		return obs, err
	}
	obs.row = &row
	obs.pending, _ = intent.Next(row.Status, r.Clock.Now())
	return obs, nil
}

// pause makes the market's own pause what spec.paused says (marketspec.Pause), with a Kubernetes
// event when it changes. It returns the row as it is afterwards.
func (r *MarketReconciler) pause(ctx context.Context, mkt *pmxv1.Market, row records.Market) (records.Market, error) {
	row, changed, err := marketspec.Pause(ctx, r.Store, row, mkt.Spec.Paused, r.Clock.Now())
	if err != nil || !changed {
		return row, err
	}
	reason, action, note := reasonResumed, "Resume", "trading resumed"
	if mkt.Spec.Paused {
		reason, action, note = reasonPaused, "Pause", "trading halted: placements and amends are refused, cancels go on"
	}
	r.k8sEvent(mkt, corev1.EventTypeNormal, reason, action, "market %s: %s", row.ID, note)
	return row, nil
}

// fees makes the market's own fee schedule what spec.fees says (marketspec.SetFees): set, changed,
// or taken away when spec.fees is unset (its orders then carry its event's schedule, or none), with
// a Kubernetes event when it changes. It returns the row as it is afterwards.
func (r *MarketReconciler) fees(ctx context.Context, mkt *pmxv1.Market, row records.Market) (records.Market, error) {
	row, changed, err := marketspec.SetFees(ctx, r.Store, row, mkt.Spec.Fees, r.Clock.Now())
	if err != nil || !changed {
		return row, err
	}
	note := "its own fee schedule taken away: orders placed from now on carry its event's, or none"
	if mkt.Spec.Fees != nil {
		note = "orders placed from now on carry its fee schedule, " + marketspec.DescribeFees(marketspec.FeesOf(mkt.Spec.Fees))
	}
	r.k8sEvent(mkt, corev1.EventTypeNormal, reasonFeesSet, "SetFees", "market %s: %s", row.ID, note)
	return row, nil
}

// place records the pool and the placement the market's spec asks for (store.SetMarketPlacement),
// with a Kubernetes event when they change: the market moves by them at its next scheduling or
// rebalancing. It returns the row as it is afterwards.
func (r *MarketReconciler) place(ctx context.Context, mkt *pmxv1.Market, row records.Market) (records.Market, error) {
	pool, dedicated := placement.Pool(mkt.Spec.ShardPool), mkt.Spec.Placement == pmxv1.PlacementDedicated
	if row.Pool == pool && row.Dedicated == dedicated {
		return row, nil
	}
	changed, err := r.Store.SetMarketPlacement(ctx, row.ID, pool, dedicated)
	if err != nil {
		return row, fmt.Errorf("while recording the market's pool and placement: %w", err)
	}
	if !changed {
		return row, nil
	}
	how := "shares a shard"
	if dedicated {
		how = "has a shard of its own"
	}
	r.k8sEvent(mkt, corev1.EventTypeNormal, reasonPlaced, "Place", "market %s is served by pool %s and %s", row.ID, pool, how)
	row.Pool, row.Dedicated = pool, dedicated
	return row, nil
}

// requeueAfter is when to look at a market again: an OPEN market at its closesAt, and at least
// every Resync to notice a lost shard; any market whose intent is still pending after Resync.
func (r *MarketReconciler) requeueAfter(mkt *pmxv1.Market, obs observation) time.Duration {
	if obs.row == nil {
		return 0
	}
	if obs.row.Status != domain.MarketOpen {
		if obs.pending != "" {
			return r.Resync
		}
		return 0
	}
	wait := r.Resync
	if mkt.Spec.ClosesAt != nil {
		if until := mkt.Spec.ClosesAt.Sub(r.Clock.Now()); until < wait {
			wait = max(until, 10*time.Millisecond)
		}
	}
	return wait
}

// SetupWithManager registers the reconciler.
func (r *MarketReconciler) SetupWithManager(mgr ctrl.Manager) error {
	if r.Clock == nil {
		r.Clock = realClock{}
	}
	if r.ShardTTL <= 0 {
		r.ShardTTL = 5 * time.Second
	}
	if r.Resync <= 0 {
		r.Resync = 2 * time.Second
	}
	return ctrl.NewControllerManagedBy(mgr).
		For(&pmxv1.Market{}).
		Named("market").
		Complete(r)
}
