package controllers

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/google/uuid"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/util/retry"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	pmxv1 "github.com/pmx-dev/pmx/api/v1alpha1"
	"github.com/pmx-dev/pmx/internal/records"
	"github.com/pmx-dev/pmx/internal/series"
)

// seriesFinalizer keeps a MarketSeries until its row in Postgres is marked ended, so that GET
// /series stops listing it.
const seriesFinalizer = "pmx.dev/end-series"

// The reasons of a MarketSeries' Ready condition and of the Kubernetes events recorded on it.
const (
	// reasonListed: every instance due is listed (Ready).
	reasonListed = "Listed"
	// reasonInstanceCreated: the series created an instance (an event's reason).
	reasonInstanceCreated recordReason = "InstanceCreated"
	// reasonInstanceDeleted: a settled instance passed keepSettledFor and was deleted.
	reasonInstanceDeleted recordReason = "InstanceDeleted"
	// reasonNameTaken: an instance's name is held by a resource the series does not own.
	reasonNameTaken recordReason = "NameTaken"
)

// SeriesReconciler reconciles MarketSeries resources: it records each series in Postgres, creates
// the instances its schedule makes due (internal/series decides which, from the spec and the
// clock alone), links their markets to the series, and deletes settled instances past
// keepSettledFor. Each instance is created under a name made of its time, so that a second
// create of it — after a restart, by a new leader, or by a look that overlaps another — is
// AlreadyExists and changes nothing; and every look works out anew what must exist, so that an
// operator that was down creates on its return whatever came due meanwhile and has not closed.
type SeriesReconciler struct {
	client.Client
	Scheme   *runtime.Scheme
	Store    SeriesStore
	Recorder events.EventRecorder
	Clock    Clock
	// MaxWait is the longest a series waits to be looked at again (default 5m), whatever its
	// schedule: a bound on what a clock step or a missed watch can delay.
	MaxWait time.Duration
}

// +kubebuilder:rbac:groups=pmx.dev,resources=marketseries,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=pmx.dev,resources=marketseries/finalizers,verbs=update
// +kubebuilder:rbac:groups=pmx.dev,resources=marketseries/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=pmx.dev,resources=markets,verbs=create;delete
// +kubebuilder:rbac:groups=pmx.dev,resources=events,verbs=create;delete

// seriesObservation is what a reconcile of a MarketSeries found and did, for its status.
type seriesObservation struct {
	id        uuid.UUID
	plan      series.Plan
	instances []instance // owned instances after this look, by time
	taken     []string   // names due that a resource the series does not own holds
	wake      time.Time  // when a settled instance may go
}

// instance is one owned instance, Market or Event, as the series sees it.
type instance struct {
	name    string
	at      time.Time // its scheduled time (annotation)
	obj     client.Object
	id      string // status.marketId or status.eventId
	phase   pmxv1.MarketPhase
	settled *metav1.Condition
}

// Reconcile brings one MarketSeries' instances and its row in Postgres in line with its spec and
// the clock.
func (r *SeriesReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	log := logf.FromContext(ctx).WithValues("series", req.NamespacedName)
	var ms pmxv1.MarketSeries
	if err := r.Get(ctx, req.NamespacedName, &ms); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !ms.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, r.finalize(ctx, &ms)
	}
	if !controllerutil.ContainsFinalizer(&ms, seriesFinalizer) {
		patch := client.MergeFrom(ms.DeepCopy())
		controllerutil.AddFinalizer(&ms, seriesFinalizer)
		if err := r.Patch(ctx, &ms, patch); err != nil {
			return ctrl.Result{}, fmt.Errorf("while adding the finalizer: %w", err)
		}
	}
	now := r.Clock.Now()
	s, err := series.New(ms.Name, ms.Spec)
	var obs seriesObservation
	if err == nil {
		obs, err = r.reconcileSeries(ctx, &ms, s, now)
	}
	var invalid *series.Error
	if err != nil && !errors.As(err, &invalid) {
		log.Error(err, "reconcile failed; retrying with backoff")
	}
	if serr := r.updateStatus(ctx, &ms, obs, err); serr != nil && !apierrors.IsNotFound(serr) {
		return ctrl.Result{}, serr
	}
	if errors.As(err, &invalid) {
		return ctrl.Result{}, nil // a change of spec brings it back
	}
	if err != nil {
		return ctrl.Result{}, err
	}
	return ctrl.Result{RequeueAfter: r.wait(now, obs)}, nil
}

// wait is how long until the series must be looked at again: when its next instance comes due or
// a settled one may go, and at most MaxWait.
func (r *SeriesReconciler) wait(now time.Time, obs seriesObservation) time.Duration {
	wait := r.MaxWait
	for _, at := range []time.Time{obs.plan.NextDueAt, obs.wake} {
		if !at.IsZero() {
			wait = min(wait, at.Sub(now))
		}
	}
	return max(wait, 10*time.Millisecond)
}

// reconcileSeries records the series, creates each instance due that does not exist, links the
// instances' markets to the series and deletes the settled instances past their keep.
func (r *SeriesReconciler) reconcileSeries(ctx context.Context, ms *pmxv1.MarketSeries, s *series.Series, now time.Time) (seriesObservation, error) {
	var obs seriesObservation
	plan, err := s.Plan(now)
	if err != nil {
		return obs, err
	}
	obs.plan = plan
	if obs.id, err = r.record(ctx, ms, s, plan, now); err != nil {
		return obs, err
	}
	have, err := r.instances(ctx, ms, s)
	if err != nil {
		return obs, err
	}
	owned := map[string]bool{}
	for _, in := range have {
		owned[in.name] = true
	}
	for _, due := range plan.Due {
		if owned[due.Name] {
			continue
		}
		in, created, err := r.create(ctx, ms, s, due)
		switch {
		case err != nil:
			return obs, err
		case in == nil:
			obs.taken = append(obs.taken, due.Name)
			continue
		case created:
			r.k8sEvent(ms, corev1.EventTypeNormal, reasonInstanceCreated, "Create", "%s %s for %s, closing at %s",
				kindOf(s), due.Name, due.Time.Format(time.RFC3339), due.ClosesAt.UTC().Format(time.RFC3339))
		}
		have = append(have, *in)
	}
	slices.SortFunc(have, func(a, b instance) int { return a.at.Compare(b.at) })
	if err := r.link(ctx, obs.id, s, have); err != nil {
		return obs, err
	}
	for _, in := range have {
		if in.settled == nil || in.settled.Status != metav1.ConditionTrue || !in.phase.Final() {
			obs.instances = append(obs.instances, in)
			continue
		}
		settledAt := in.settled.LastTransitionTime.Time
		if !s.Expired(in.at, settledAt, now) {
			if at := s.ExpiresAt(in.at, settledAt); obs.wake.IsZero() || at.Before(obs.wake) {
				obs.wake = at
			}
			obs.instances = append(obs.instances, in)
			continue
		}
		if err := r.Delete(ctx, in.obj, client.PropagationPolicy(metav1.DeletePropagationBackground)); client.IgnoreNotFound(err) != nil {
			return obs, fmt.Errorf("while deleting settled instance %s: %w", in.name, err)
		}
		r.k8sEvent(ms, corev1.EventTypeNormal, reasonInstanceDeleted, "Delete", "%s settled at %s, kept %s", in.name,
			settledAt.UTC().Format(time.RFC3339), s.KeepSettled())
	}
	return obs, nil
}

func kindOf(s *series.Series) string {
	if s.IsEvent() {
		return "Event"
	}
	return "Market"
}

// seriesName is the name a MarketSeries is recorded under in Postgres: its namespace and name, as
// a Market's market is (marketName), so that series of different namespaces never collide.
func seriesName(ms *pmxv1.MarketSeries) string {
	if ms.Namespace == "" {
		return ms.Name
	}
	return ms.Namespace + "/" + ms.Name
}

// record writes the series' row, under its name, with the next instance's time.
func (r *SeriesReconciler) record(ctx context.Context, ms *pmxv1.MarketSeries, s *series.Series, plan series.Plan, now time.Time) (uuid.UUID, error) {
	expr, zone := s.Schedule()
	row := records.Series{ID: uuid.New(), Name: seriesName(ms), Kind: records.SeriesOfMarkets, Question: s.Question(),
		Category: s.Category(), Schedule: expr, TimeZone: zone, UpdatedAt: now.UTC()}
	if id, err := uuid.Parse(ms.Status.SeriesID); err == nil {
		row.ID = id // a row recorded already keeps its id anyway; this keeps a lost row's
	}
	if s.IsEvent() {
		row.Kind = records.SeriesOfEvents
	}
	if d := s.Description(); d != "" {
		row.Description = &d
	}
	if plan.Next.Name != "" {
		t := plan.Next.Time.UTC()
		row.NextInstanceAt = &t
	}
	stored, err := r.Store.RecordSeries(ctx, row)
	if err != nil {
		return uuid.Nil, fmt.Errorf("while recording series %s: %w", ms.Name, err)
	}
	return stored.ID, nil
}

// instances lists the series' instances: the Markets (or Events) it labelled and controls.
func (r *SeriesReconciler) instances(ctx context.Context, ms *pmxv1.MarketSeries, s *series.Series) ([]instance, error) {
	opts := []client.ListOption{client.InNamespace(ms.Namespace), client.MatchingLabels{pmxv1.LabelSeries: ms.Name}}
	var out []instance
	if s.IsEvent() {
		var list pmxv1.EventList
		if err := r.List(ctx, &list, opts...); err != nil {
			return nil, err
		}
		for i := range list.Items {
			ev := &list.Items[i]
			if metav1.IsControlledBy(ev, ms) {
				out = append(out, eventInstance(ev))
			}
		}
		return out, nil
	}
	var list pmxv1.MarketList
	if err := r.List(ctx, &list, opts...); err != nil {
		return nil, err
	}
	for i := range list.Items {
		m := &list.Items[i]
		if metav1.IsControlledBy(m, ms) {
			out = append(out, marketInstance(m))
		}
	}
	return out, nil
}

func instanceTime(obj metav1.Object) time.Time {
	t, _ := time.Parse(time.RFC3339, obj.GetAnnotations()[pmxv1.AnnotationInstanceTime])
	return t
}

func marketInstance(m *pmxv1.Market) instance {
	return instance{name: m.Name, at: instanceTime(m), obj: m, id: m.Status.MarketID, phase: m.Status.Phase,
		settled: meta.FindStatusCondition(m.Status.Conditions, string(pmxv1.MarketSettled))}
}

func eventInstance(ev *pmxv1.Event) instance {
	return instance{name: ev.Name, at: instanceTime(ev), obj: ev, id: ev.Status.EventID, phase: ev.Status.Phase,
		settled: meta.FindStatusCondition(ev.Status.Conditions, string(pmxv1.MarketSettled))}
}

// create creates the instance due, owned by the series. An instance of that name that exists
// already is the series' own (created before, by this or an earlier process): it is returned,
// and created is false. One the series does not own is neither touched nor returned.
func (r *SeriesReconciler) create(ctx context.Context, ms *pmxv1.MarketSeries, s *series.Series, due series.Instance) (*instance, bool, error) {
	objMeta := metav1.ObjectMeta{Namespace: ms.Namespace, Name: due.Name,
		Labels:      map[string]string{pmxv1.LabelSeries: ms.Name},
		Annotations: map[string]string{pmxv1.AnnotationInstanceTime: due.Time.UTC().Format(time.RFC3339)}}
	var obj client.Object
	if s.IsEvent() {
		obj = &pmxv1.Event{ObjectMeta: objMeta, Spec: s.EventSpec(due)}
	} else {
		obj = &pmxv1.Market{ObjectMeta: objMeta, Spec: s.MarketSpec(due)}
	}
	if err := controllerutil.SetControllerReference(ms, obj, r.Scheme); err != nil {
		return nil, false, err
	}
	err := r.Create(ctx, obj)
	created := err == nil
	if apierrors.IsAlreadyExists(err) {
		err = r.Get(ctx, client.ObjectKeyFromObject(obj), obj)
		if apierrors.IsNotFound(err) {
			// Made, by an earlier look, and not in the cache yet: the next look sees it.
			return &instance{name: due.Name, at: due.Time, obj: obj}, false, nil
		}
	}
	if err != nil {
		return nil, false, fmt.Errorf("while creating %s %s: %w", kindOf(s), due.Name, err)
	}
	if !metav1.IsControlledBy(obj, ms) {
		r.k8sEvent(ms, corev1.EventTypeWarning, reasonNameTaken, "Create", "%s %s exists and is not this series': rename or delete it to list the instance of %s",
			kindOf(s), due.Name, due.Time.Format(time.RFC3339))
		return nil, false, nil
	}
	var in instance
	switch o := obj.(type) {
	case *pmxv1.Event:
		in = eventInstance(o)
	case *pmxv1.Market:
		in = marketInstance(o)
	}
	if in.at.IsZero() {
		in.at = due.Time
	}
	return &in, created, nil
}

// link records the instances recorded so far as the series' in Postgres; their rows are made by
// the Market and Event controllers, so an instance is linked at the first look after its id shows.
func (r *SeriesReconciler) link(ctx context.Context, id uuid.UUID, s *series.Series, have []instance) error {
	var ids []uuid.UUID
	for _, in := range have {
		if u, err := uuid.Parse(in.id); err == nil {
			ids = append(ids, u)
		}
	}
	if len(ids) == 0 {
		return nil
	}
	var err error
	if s.IsEvent() {
		err = r.Store.LinkSeries(ctx, id, nil, ids)
	} else {
		err = r.Store.LinkSeries(ctx, id, ids, nil)
	}
	if err != nil {
		return fmt.Errorf("while linking the instances of series %s: %w", s.Name, err)
	}
	return nil
}

// updateStatus writes what the look found: the series' id, its last and next instance, how many
// it has, and Ready.
func (r *SeriesReconciler) updateStatus(ctx context.Context, ms *pmxv1.MarketSeries, obs seriesObservation, rerr error) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		want := desiredSeriesStatus(ms, obs, rerr)
		if equality.Semantic.DeepEqual(ms.Status, want) {
			return nil
		}
		obj := ms.DeepCopy()
		patch := client.MergeFromWithOptions(ms.DeepCopy(), client.MergeFromWithOptimisticLock{})
		obj.Status = want
		err := r.Status().Patch(ctx, obj, patch)
		switch {
		case err == nil:
			ms.ResourceVersion, ms.Status = obj.ResourceVersion, obj.Status
		case apierrors.IsConflict(err):
			var stored pmxv1.MarketSeries
			if gerr := r.Get(ctx, client.ObjectKeyFromObject(ms), &stored); gerr != nil {
				return gerr
			}
			ms.ResourceVersion, ms.Status = stored.ResourceVersion, stored.Status
		}
		return err
	})
}

func desiredSeriesStatus(ms *pmxv1.MarketSeries, obs seriesObservation, rerr error) pmxv1.MarketSeriesStatus {
	st := *ms.Status.DeepCopy()
	st.ObservedGeneration = ms.Generation
	ready := metav1.Condition{Type: string(pmxv1.MarketReady), ObservedGeneration: ms.Generation}
	var invalid *series.Error
	switch {
	case errors.As(rerr, &invalid):
		ready.Status, ready.Reason, ready.Message = metav1.ConditionFalse, string(pmxv1.ReasonInvalidSpec), rerr.Error()
		meta.SetStatusCondition(&st.Conditions, ready)
		return st
	case rerr != nil:
		ready.Status, ready.Reason, ready.Message = metav1.ConditionFalse, string(errorReason(rerr)), rerr.Error()
		meta.SetStatusCondition(&st.Conditions, ready)
		return st
	}
	if obs.id != uuid.Nil {
		st.SeriesID = obs.id.String()
	}
	st.Instances = int32(len(obs.instances))
	if n := len(obs.instances); n > 0 {
		last := obs.instances[n-1]
		st.LastInstance = last.name
		st.LastInstanceTime = &metav1.Time{Time: last.at.UTC()}
	}
	st.NextInstance, st.NextInstanceTime = "", nil
	if next := obs.plan.Next; next.Name != "" {
		st.NextInstance = next.Name
		st.NextInstanceTime = &metav1.Time{Time: next.Time.UTC()}
	}
	if len(obs.taken) > 0 {
		ready.Status, ready.Reason = metav1.ConditionFalse, string(reasonNameTaken)
		ready.Message = fmt.Sprintf("instances %v are held by resources this series does not own; rename or delete them", obs.taken)
	} else {
		ready.Status, ready.Reason = metav1.ConditionTrue, reasonListed
		ready.Message = fmt.Sprintf("%d instances due are listed", len(obs.plan.Due))
	}
	meta.SetStatusCondition(&st.Conditions, ready)
	return st
}

// finalize marks a deleted series' row ended, so that GET /series no longer lists it, and lets
// the resource go; its instances go with it through their owner references (delete the series
// with --cascade=orphan to keep them).
func (r *SeriesReconciler) finalize(ctx context.Context, ms *pmxv1.MarketSeries) error {
	if !controllerutil.ContainsFinalizer(ms, seriesFinalizer) {
		return nil
	}
	if err := r.Store.EndSeries(ctx, seriesName(ms), r.Clock.Now().UTC()); err != nil {
		return fmt.Errorf("while ending series %s: %w", ms.Name, err)
	}
	patch := client.MergeFrom(ms.DeepCopy())
	controllerutil.RemoveFinalizer(ms, seriesFinalizer)
	return client.IgnoreNotFound(r.Patch(ctx, ms, patch))
}

// k8sEvent records a Kubernetes event on the MarketSeries when a recorder is configured.
func (r *SeriesReconciler) k8sEvent(obj runtime.Object, eventType string, reason recordReason, action, note string, args ...any) {
	if r.Recorder != nil {
		r.Recorder.Eventf(obj, nil, eventType, string(reason), action, note, args...)
	}
}

// SetupWithManager registers the reconciler; a change to one of a series' instances (its
// settlement above all) brings the series to be looked at again.
func (r *SeriesReconciler) SetupWithManager(mgr ctrl.Manager) error {
	if r.Clock == nil {
		r.Clock = realClock{}
	}
	if r.MaxWait <= 0 {
		r.MaxWait = 5 * time.Minute
	}
	return ctrl.NewControllerManagedBy(mgr).
		For(&pmxv1.MarketSeries{}).
		Owns(&pmxv1.Market{}).
		Owns(&pmxv1.Event{}).
		Named("marketseries").
		Complete(r)
}
