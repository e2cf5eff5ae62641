package controllers

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	pmxv1 "github.com/pmx-dev/pmx/api/v1alpha1"
	"github.com/pmx-dev/pmx/internal/domain"
	"github.com/pmx-dev/pmx/internal/event"
	"github.com/pmx-dev/pmx/internal/eventrec"
	"github.com/pmx-dev/pmx/internal/exchange"
	"github.com/pmx-dev/pmx/internal/market"
	"github.com/pmx-dev/pmx/internal/records"
)

// eventFinalizer keeps an Event until its event is settled: deleting an unresolved Event voids it,
// all of its markets in one transaction.
const eventFinalizer = "pmx.dev/void-event"

// EventReconciler reconciles Event resources: it records the event, lists each outcome as a
// Market that the Event owns, and has the event's shard close, reopen, resolve or void all of the
// event's markets together. The Market controller records and schedules each of those Markets
// (on one shard: schedule puts a market of an event where its siblings are) and reports them.
type EventReconciler struct {
	client.Client
	Scheme   *runtime.Scheme
	Store    EventStore
	Recorder events.EventRecorder
	// Exchange carries out an event's lifecycle changes, on the shard that owns its markets.
	Exchange EventExchange
	// Resync is how often an Event with a change to carry out, or an OPEN one, is looked at again
	// (default 2s).
	Resync time.Duration
	Clock  Clock
}

// +kubebuilder:rbac:groups=pmx.dev,resources=events,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=pmx.dev,resources=events/finalizers,verbs=update
// +kubebuilder:rbac:groups=pmx.dev,resources=events/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=pmx.dev,resources=markets,verbs=create

// Reconcile brings one Event, its Markets and its event in Postgres in line with each other.
func (r *EventReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	log := logf.FromContext(ctx).WithValues("event", req.NamespacedName)
	var ev pmxv1.Event
	if err := r.Get(ctx, req.NamespacedName, &ev); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !ev.DeletionTimestamp.IsZero() {
		wait, err := r.finalize(ctx, &ev)
		return ctrl.Result{RequeueAfter: wait}, err
	}
	if !controllerutil.ContainsFinalizer(&ev, eventFinalizer) {
		patch := client.MergeFrom(ev.DeepCopy())
		controllerutil.AddFinalizer(&ev, eventFinalizer)
		if err := r.Patch(ctx, &ev, patch); err != nil {
			return ctrl.Result{}, fmt.Errorf("while adding the finalizer: %w", err)
		}
	}
	obs, err := r.reconcileEvent(ctx, &ev)
	if err != nil {
		log.Error(err, "reconcile failed; retrying with backoff")
	}
	if serr := r.updateStatus(ctx, &ev, obs, err); serr != nil && !apierrors.IsNotFound(serr) {
		return ctrl.Result{}, serr
	}
	if err != nil {
		return ctrl.Result{}, err
	}
	if obs.phase == "" || !obs.phase.Final() || obs.pending != "" {
		return ctrl.Result{RequeueAfter: r.Resync}, nil
	}
	return ctrl.Result{}, nil
}

// eventObservation is what a reconcile of an Event found and did, for its status.
type eventObservation struct {
	id uuid.UUID // the event's id in Postgres; uuid.Nil until recorded
	// markets are the Event's Markets in outcome order; nil where one is not created yet.
	markets []*pmxv1.Market
	// rows are the markets' rows in Postgres, in outcome order; nil where one is not recorded yet.
	rows []*records.Market
	// taken names the Markets whose name an outcome needs but that the Event does not own.
	taken []string
	phase pmxv1.MarketPhase // the phase all recorded markets share; "" when they differ or none is
	shard string            // the shard that owns every market, "" when they are not on one
	// pending is the change the spec asks of the event and that is not carried out yet; waiting
	// says why it cannot be now, "" when it is being.
	pending domain.MarketAction
	waiting string
	halted  domain.Halt // what halts trading in the event's markets, as its row says
}

// reconcileEvent records the event with its outcome markets, keeps its Markets as its spec says,
// and has the event's shard carry out the change its spec asks for once all of its markets are on
// that shard.
func (r *EventReconciler) reconcileEvent(ctx context.Context, ev *pmxv1.Event) (eventObservation, error) {
	var obs eventObservation
	e, err := r.recordEvent(ctx, ev)
	if err != nil {
		return obs, err
	}
	obs.halted = e.Halted
	if err := r.ensureMarkets(ctx, ev, &obs); err != nil {
		return obs, err
	}
	if err := r.readRows(ctx, e, &obs); err != nil {
		return obs, err
	}
	action, pending := eventNext(&ev.Spec, e.Status, r.Clock.Now())
	if !pending {
		return obs, nil
	}
	obs.pending = action
	if obs.shard == "" {
		obs.waiting = "its markets are not all on one shard yet"
		return obs, nil
	}
	change := domain.EventAction{Action: action}
	if action == domain.ResolveYes {
		change.Outcome = ev.Spec.Resolution
	}
	switch err := r.Exchange.TransitionEvent(ctx, e.ID, change); {
	case errors.Is(err, exchange.ErrUnavailable):
		obs.waiting = "no live shard owns all of its markets yet"
		return obs, nil
	case err != nil:
		return obs, fmt.Errorf("while carrying out %s on event %s: %w", change, e.ID, err)
	}
	if e, err = r.Store.Event(ctx, e.ID); err != nil {
		return obs, err
	}
	r.k8sEvent(ev, corev1.EventTypeNormal, transitionReason(action), string(action), "event %s: %s, all %d markets together; now %s", e.ID, change, len(e.Outcomes), e.Status)
	if err := r.readRows(ctx, e, &obs); err != nil {
		return obs, err
	}
	obs.pending, _ = eventNext(&ev.Spec, e.Status, r.Clock.Now())
	obs.waiting = ""
	return obs, nil
}

// eventNext is the change that moves an event in status toward its spec at time now: the
// resolution (resolving to an outcome is domain.ResolveYes, with the outcome's key), else closing,
// at closesAt too, and reopening, as a market's intent does.
func eventNext(spec *pmxv1.EventSpec, status domain.MarketStatus, now time.Time) (domain.MarketAction, bool) {
	live := status == domain.MarketOpen || status == domain.MarketClosed
	switch {
	case spec.Resolution == pmxv1.EventResolutionCanceled && live:
		return domain.CancelMarket, true
	case spec.Resolution != "" && live:
		return domain.ResolveYes, true
	case spec.Resolution != "" || !live:
		return "", false
	}
	in := intentOfEvent(spec)
	return in.Next(status, now)
}

// ensureMarkets creates each outcome's Market, owned by the Event, and keeps its spec the one the
// Event's spec makes (marketSpec); a Market of the name that the Event does not own is left alone
// and reported.
func (r *EventReconciler) ensureMarkets(ctx context.Context, ev *pmxv1.Event, obs *eventObservation) error {
	obs.markets = make([]*pmxv1.Market, len(ev.Spec.Outcomes))
	for i, o := range ev.Spec.Outcomes {
		want := marketSpec(ev, o)
		var m pmxv1.Market
		key := client.ObjectKey{Namespace: ev.Namespace, Name: pmxv1.MarketName(ev.Name, o.Key)}
		err := r.Get(ctx, key, &m)
		switch {
		case apierrors.IsNotFound(err):
			m = pmxv1.Market{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name,
				Labels: map[string]string{pmxv1.LabelEvent: ev.Name, pmxv1.LabelOutcome: o.Key}}, Spec: want}
			if err := controllerutil.SetControllerReference(ev, &m, r.Scheme); err != nil {
				return err
			}
			if err := r.Create(ctx, &m); err != nil {
				return fmt.Errorf("while creating Market %s for outcome %s: %w", key.Name, o.Key, err)
			}
			r.k8sEvent(ev, corev1.EventTypeNormal, reasonMarketCreated, "Create", "Market %s lists outcome %s", key.Name, o.Key)
		case err != nil:
			return err
		case !metav1.IsControlledBy(&m, ev):
			obs.taken = append(obs.taken, key.Name)
			continue
		default:
			if m.Spec.Resolution != "" && m.Spec.Resolution != want.Resolution {
				want.Resolution = m.Spec.Resolution // set once (CEL); the Market controller reports it
			}
			want.Paused = m.Spec.Paused // an outcome's market may be paused on its own
			want.Fees = m.Spec.Fees     // and have a fee schedule of its own
			if !equality.Semantic.DeepEqual(m.Spec, want) {
				patch := client.MergeFrom(m.DeepCopy())
				m.Spec = want
				if err := r.Patch(ctx, &m, patch); err != nil {
					return fmt.Errorf("while updating Market %s: %w", key.Name, err)
				}
			}
		}
		obs.markets[i] = &m
	}
	return nil
}

// marketSpec is the spec of the Market that lists outcome o of ev: the one its market is recorded
// with (eventrec.MarketSpec, so that the Market controller's marketspec.Record keeps the same text),
// the lifecycle fields its Event sets (lifecycleOf), and its Event's pool and placement.
func marketSpec(ev *pmxv1.Event, o pmxv1.EventOutcome) pmxv1.MarketSpec {
	spec := eventrec.MarketSpec(specOf(ev), event.Outcome{Key: o.Key, Label: o.Label})
	spec.Closed, spec.Resolution = lifecycleOf(ev, o.Key)
	spec.ShardPool, spec.Placement = ev.Spec.ShardPool, ev.Spec.Placement // an event's markets are one unit
	return spec
}

// readRows reads the event's phase, its markets' rows in outcome order and the shard they share.
func (r *EventReconciler) readRows(ctx context.Context, e records.Event, obs *eventObservation) error {
	rows, err := r.Store.EventMarkets(ctx, e)
	if err != nil {
		return fmt.Errorf("while reading the markets of event %s: %w", e.ID, err)
	}
	obs.id, obs.phase, obs.shard = e.ID, pmxv1.MarketPhase(e.Status), ""
	obs.rows = make([]*records.Market, len(rows))
	shards := map[string]int{}
	for i := range rows {
		obs.rows[i] = &rows[i]
		if rows[i].Shard != nil {
			shards[*rows[i].Shard]++
		}
	}
	for s, n := range shards {
		if n == len(rows) {
			obs.shard = s
		}
	}
	return nil
}

// finalize voids a deleted Event's event if it was never settled, all of its markets in one
// transaction of their shard, then lets the Event go (and with it, through their owner
// references, its Markets, whose markets are settled by then). It returns how long to wait when
// no live shard owns all of the event's markets yet.
func (r *EventReconciler) finalize(ctx context.Context, ev *pmxv1.Event) (time.Duration, error) {
	if !controllerutil.ContainsFinalizer(ev, eventFinalizer) {
		return 0, nil
	}
	e, ok, err := r.existingEvent(ctx, ev)
	if err != nil {
		return 0, err
	}
	if ok && (e.Status == domain.MarketOpen || e.Status == domain.MarketClosed) {
		// Its Markets ask to be voided too: a change pending has the Market controller put each
		// on a live shard, with its siblings, which the void needs.
		if err := r.voidMarkets(ctx, ev); err != nil {
			return 0, err
		}
		switch err := r.Exchange.TransitionEvent(ctx, e.ID, domain.EventAction{Action: domain.CancelMarket}); {
		case errors.Is(err, exchange.ErrUnavailable):
			r.k8sEvent(ev, corev1.EventTypeWarning, reasonWaitingForShard, string(domain.CancelMarket),
				"no live shard owns all of the event's markets yet; waiting to void it")
			return max(r.Resync, time.Second), nil
		case err != nil && !errors.Is(err, market.ErrIllegalTransition):
			return 0, fmt.Errorf("while voiding the deleted event: %w", err)
		}
		r.k8sEvent(ev, corev1.EventTypeNormal, reasonVoided, "Cancel", "deleted before settlement: event %s voided, all %d markets together", e.ID, len(e.Outcomes))
	}
	patch := client.MergeFrom(ev.DeepCopy())
	controllerutil.RemoveFinalizer(ev, eventFinalizer)
	return 0, client.IgnoreNotFound(r.Patch(ctx, ev, patch))
}

// voidMarkets sets resolution CANCELED on the deleted Event's Markets that have none.
func (r *EventReconciler) voidMarkets(ctx context.Context, ev *pmxv1.Event) error {
	for _, o := range ev.Spec.Outcomes {
		var m pmxv1.Market
		err := r.Get(ctx, client.ObjectKey{Namespace: ev.Namespace, Name: pmxv1.MarketName(ev.Name, o.Key)}, &m)
		switch {
		case apierrors.IsNotFound(err):
			continue
		case err != nil:
			return err
		}
		if !metav1.IsControlledBy(&m, ev) || m.Spec.Resolution != "" {
			continue
		}
		patch := client.MergeFrom(m.DeepCopy())
		m.Spec.Resolution = pmxv1.ResolutionCanceled
		if err := client.IgnoreNotFound(r.Patch(ctx, &m, patch)); err != nil {
			return fmt.Errorf("while voiding Market %s: %w", m.Name, err)
		}
	}
	return nil
}

// k8sEvent records a Kubernetes event on the Event when a recorder is configured.
func (r *EventReconciler) k8sEvent(obj runtime.Object, eventType string, reason recordReason, action, note string, args ...any) {
	if r.Recorder != nil {
		r.Recorder.Eventf(obj, nil, eventType, string(reason), action, note, args...)
	}
}

// SetupWithManager registers the reconciler; a change to one of an Event's Markets (its status
// above all) brings the Event to be looked at again.
func (r *EventReconciler) SetupWithManager(mgr ctrl.Manager) error {
	if r.Clock == nil {
		r.Clock = realClock{}
	}
	if r.Resync <= 0 {
		r.Resync = 2 * time.Second
	}
	return ctrl.NewControllerManagedBy(mgr).
		For(&pmxv1.Event{}).
		Owns(&pmxv1.Market{}).
		Named("event").
		Complete(r)
}
