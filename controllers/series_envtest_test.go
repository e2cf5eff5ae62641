package controllers

import (
	"context"
	"maps"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	pmxv1 "github.com/pmx-dev/pmx/api/v1alpha1"
	"github.com/pmx-dev/pmx/internal/k8stest"
	"github.com/pmx-dev/pmx/internal/poll"
	"github.com/pmx-dev/pmx/internal/records"
	"github.com/pmx-dev/pmx/internal/store"
	"github.com/pmx-dev/pmx/internal/storetest"
)

// manualClock is a clock the test sets.
type manualClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *manualClock) Now() time.Time  { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *manualClock) Set(t time.Time) { c.mu.Lock(); defer c.mu.Unlock(); c.now = t }

// within reports whether cond holds within timeout (poll.Until).
func within(timeout time.Duration, cond func() bool) bool {
	return poll.Until(context.Background(), timeout, func(context.Context) (bool, error) { return cond(), nil }) == nil
}

// seriesOperator is the MarketSeries controller alone, against a real kube-apiserver and
// Postgres, with a clock the test sets; stop ends it as an operator's exit or a lost lease does.
type seriesOperator struct {
	stop func()
}

func startSeriesOperator(t *testing.T, env *k8stest.Env, st *store.Store, clock Clock) *seriesOperator {
	t.Helper()
	skip := true
	mgr, err := ctrl.NewManager(env.Config, ctrl.Options{Scheme: env.Scheme, Metrics: metricsserver.Options{BindAddress: "0"},
		Controller: config.Controller{SkipNameValidation: &skip}})
	if err != nil {
		t.Fatal(err)
	}
	// MaxWait short: the clock moves when the test says, not as real time passes.
	r := &SeriesReconciler{Client: mgr.GetClient(), Scheme: env.Scheme, Store: st, Clock: clock,
		MaxWait: 50 * time.Millisecond, Recorder: mgr.GetEventRecorder("pmx-operator")}
	if err := r.SetupWithManager(mgr); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := mgr.Start(ctx); err != nil {
			t.Errorf("manager: %v", err)
		}
	}()
	var once sync.Once
	op := &seriesOperator{stop: func() { once.Do(func() { cancel(); <-done }) }}
	t.Cleanup(op.stop)
	return op
}

// instanceUIDs are the series' Markets by name, with their UIDs.
func instanceUIDs(t *testing.T, c client.Client, series string) map[string]string {
	t.Helper()
	var list pmxv1.MarketList
	if err := c.List(context.Background(), &list, client.InNamespace("default"), client.MatchingLabels{pmxv1.LabelSeries: series}); err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, m := range list.Items {
		out[m.Name] = string(m.UID)
	}
	return out
}

// waitInstances waits until the series' Markets are exactly want, and returns them with their UIDs.
func waitInstances(t *testing.T, c client.Client, series string, want ...string) map[string]string {
	t.Helper()
	var got map[string]string
	if !within(10*time.Second, func() bool {
		got = instanceUIDs(t, c, series)
		return slices.Equal(slices.Sorted(maps.Keys(got)), want)
	}) {
		t.Fatalf("instances %v, want %v", slices.Sorted(maps.Keys(got)), want)
	}
	return got
}

func getSeries(t *testing.T, c client.Client, name string) pmxv1.MarketSeries {
	t.Helper()
	var ms pmxv1.MarketSeries
	if err := c.Get(context.Background(), client.ObjectKey{Namespace: "default", Name: name}, &ms); err != nil {
		t.Fatal(err)
	}
	return ms
}

// TestSeriesInstances runs a daily series through a week of its clock against a real
// kube-apiserver: its instances are created on schedule, with their names, times and owner; an
// operator that restarts creates none twice; one that was down creates on its return every
// instance due meanwhile; a settled instance goes once kept keepSettledFor and is never made
// again; the series and its instances' markets are in Postgres.
func TestSeriesInstances(t *testing.T) {
	env := k8stest.Start(t)
	st := storetest.New(t)
	ctx := context.Background()
	paris, err := time.LoadLocation("Europe/Paris")
	if err != nil {
		t.Fatal(err)
	}
	clock := &manualClock{now: time.Date(2027, 6, 1, 12, 0, 0, 0, paris)}
	op := startSeriesOperator(t, env, st, clock)

	keep := int32(2)
	ms := &pmxv1.MarketSeries{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "rain"},
		Spec: pmxv1.MarketSeriesSpec{Schedule: "0 18 * * *", TimeZone: "Europe/Paris", KeepListed: &keep,
			ResolvesAfter:  &metav1.Duration{Duration: 15 * time.Hour},
			KeepSettledFor: &metav1.Duration{Duration: 24 * time.Hour},
			Market:         &pmxv1.SeriesMarketTemplate{Question: "Will it rain in Paris on {date}?", Category: "weather"}}}
	if err := env.Client.Create(ctx, ms); err != nil {
		t.Fatal(err)
	}

	// Noon on 1 June: today's and tomorrow's are listed.
	first := waitInstances(t, env.Client, "rain", "rain-20270601-1800", "rain-20270602-1800")
	var m pmxv1.Market
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: "default", Name: "rain-20270601-1800"}, &m); err != nil {
		t.Fatal(err)
	}
	closes := time.Date(2027, 6, 1, 16, 0, 0, 0, time.UTC)
	if !m.Spec.ClosesAt.Time.Equal(closes) || !m.Spec.ResolvesAt.Time.Equal(closes.Add(15*time.Hour)) ||
		m.Spec.Question != "Will it rain in Paris on 2027-06-01?" || m.Annotations[pmxv1.AnnotationInstanceTime] != "2027-06-01T16:00:00Z" {
		t.Errorf("instance: closesAt %s, resolvesAt %s, question %q, annotations %v", m.Spec.ClosesAt, m.Spec.ResolvesAt, m.Spec.Question, m.Annotations)
	}
	if owner := metav1.GetControllerOf(&m); owner == nil || owner.Kind != "MarketSeries" || owner.Name != "rain" {
		t.Errorf("instance's controller %+v, want the MarketSeries rain", owner)
	}
	var status pmxv1.MarketSeriesStatus
	if !within(10*time.Second, func() bool {
		status = getSeries(t, env.Client, "rain").Status
		return status.NextInstance == "rain-20270603-1800" && status.LastInstance == "rain-20270602-1800" &&
			meta.IsStatusConditionTrue(status.Conditions, "Ready")
	}) {
		t.Fatalf("status %+v, want last rain-20270602-1800, next rain-20270603-1800, Ready", status)
	}
	if !status.NextInstanceTime.Time.Equal(time.Date(2027, 6, 3, 16, 0, 0, 0, time.UTC)) || status.Instances != 2 {
		t.Errorf("next instance's time %s, instances %d", status.NextInstanceTime, status.Instances)
	}
	id, err := uuid.Parse(status.SeriesID)
	if err != nil {
		t.Fatalf("status.seriesId %q: %v", status.SeriesID, err)
	}
	row, err := st.Series(ctx, id)
	if err != nil || row.Name != "default/rain" || row.Schedule != "0 18 * * *" || row.TimeZone != "Europe/Paris" ||
		row.NextInstanceAt == nil || !row.NextInstanceAt.Equal(time.Date(2027, 6, 3, 16, 0, 0, 0, time.UTC)) {
		t.Fatalf("series row %+v, %v", row, err)
	}

	// The Market controller records an instance; the series links its market to itself.
	name := "rain-20270601-1800"
	mk, err := st.CreateMarket(ctx, records.Market{ID: uuid.New(), Name: &name, Question: m.Spec.Question, Category: "weather",
		LabelA: "Yes", LabelB: "No", CreatedAt: time.Now()})
	if err != nil {
		t.Fatal(err)
	}
	m.Status.MarketID = mk.ID.String()
	if err := env.Client.Status().Update(ctx, &m); err != nil {
		t.Fatal(err)
	}
	if !within(10*time.Second, func() bool {
		got, err := st.Market(ctx, mk.ID)
		return err == nil && got.SeriesID != nil && *got.SeriesID == id
	}) {
		t.Fatal("the instance's market was not linked to its series")
	}

	// 18:00: the first closes, the one of 3 June is listed.
	clock.Set(time.Date(2027, 6, 1, 18, 0, 0, 0, paris))
	second := waitInstances(t, env.Client, "rain", "rain-20270601-1800", "rain-20270602-1800", "rain-20270603-1800")

	// A restart (or a new leader): the new operator lists the 4th at its time, and creates none
	// of the others again.
	op.stop()
	op = startSeriesOperator(t, env, st, clock)
	clock.Set(time.Date(2027, 6, 2, 18, 0, 0, 0, paris))
	after := waitInstances(t, env.Client, "rain", "rain-20270601-1800", "rain-20270602-1800", "rain-20270603-1800", "rain-20270604-1800")
	for name, uid := range second {
		if after[name] != uid {
			t.Errorf("%s was made again across the restart: uid %s, then %s", name, uid, after[name])
		}
	}
	if after["rain-20270601-1800"] != first["rain-20270601-1800"] {
		t.Error("the first instance was made again")
	}

	// Down for two days, through the 5th's time to be listed and the 6th's: on its return, after
	// 19:00 on 4 June, the operator lists both.
	op.stop()
	clock.Set(time.Date(2027, 6, 4, 19, 0, 0, 0, paris))
	op = startSeriesOperator(t, env, st, clock)
	waitInstances(t, env.Client, "rain", "rain-20270601-1800", "rain-20270602-1800", "rain-20270603-1800",
		"rain-20270604-1800", "rain-20270605-1800", "rain-20270606-1800")

	// The first settles at 18:00 on 4 June: kept a day, then deleted, and never listed again.
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: "default", Name: "rain-20270601-1800"}, &m); err != nil {
		t.Fatal(err)
	}
	m.Status.Phase = pmxv1.MarketPhaseResolved
	meta.SetStatusCondition(&m.Status.Conditions, metav1.Condition{Type: string(pmxv1.MarketSettled), Status: metav1.ConditionTrue,
		Reason: string(pmxv1.ReasonPaidOut), LastTransitionTime: metav1.NewTime(time.Date(2027, 6, 4, 18, 0, 0, 0, paris))})
	if err := env.Client.Status().Update(ctx, &m); err != nil {
		t.Fatal(err)
	}
	clock.Set(time.Date(2027, 6, 5, 17, 59, 0, 0, paris))
	// Not before its day is up.
	if !within(10*time.Second, func() bool {
		s := getSeries(t, env.Client, "rain").Status
		return s.Instances == 6 && s.LastInstance == "rain-20270606-1800" && s.NextInstance == "rain-20270607-1800"
	}) {
		t.Fatalf("status %+v, want 6 instances (the 1st settled and kept), the last of 6 June", getSeries(t, env.Client, "rain").Status)
	}
	if _, ok := instanceUIDs(t, env.Client, "rain")["rain-20270601-1800"]; !ok {
		t.Fatal("the settled instance went before keepSettledFor")
	}
	clock.Set(time.Date(2027, 6, 5, 18, 0, 0, 0, paris))
	waitInstances(t, env.Client, "rain", "rain-20270602-1800", "rain-20270603-1800", "rain-20270604-1800",
		"rain-20270605-1800", "rain-20270606-1800", "rain-20270607-1800")
	op.stop()
}

// TestSeriesInvalid: a schedule the CRD lets through but cron refuses, and a time zone that does
// not exist, are reported on Ready, and no instance is made.
func TestSeriesInvalid(t *testing.T) {
	env := k8stest.Start(t)
	st := storetest.New(t)
	ctx := context.Background()
	startSeriesOperator(t, env, st, &manualClock{now: time.Date(2027, 6, 1, 12, 0, 0, 0, time.UTC)})
	for name, spec := range map[string]pmxv1.MarketSeriesSpec{
		"hour-25": {Schedule: "0 25 * * *", Market: &pmxv1.SeriesMarketTemplate{Question: "q", Category: "c"}},
		"mars":    {Schedule: "0 18 * * *", TimeZone: "Mars/Olympus", Market: &pmxv1.SeriesMarketTemplate{Question: "q", Category: "c"}},
	} {
		if err := env.Client.Create(ctx, &pmxv1.MarketSeries{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name}, Spec: spec}); err != nil {
			t.Fatal(err)
		}
		var ready *metav1.Condition
		if !within(10*time.Second, func() bool {
			ready = meta.FindStatusCondition(getSeries(t, env.Client, name).Status.Conditions, "Ready")
			return ready != nil
		}) {
			t.Fatalf("%s: no Ready condition", name)
		}
		if ready.Status != metav1.ConditionFalse || ready.Reason != string(pmxv1.ReasonInvalidSpec) {
			t.Errorf("%s: Ready %+v, want False InvalidSpec", name, ready)
		}
		if got := instanceUIDs(t, env.Client, name); len(got) != 0 {
			t.Errorf("%s: instances %v", name, got)
		}
	}
}

// TestSeriesPool: a series' shardPool and placement go into each instance it creates, a Market's
// or an Event's; a change of them applies to the instances listed after it, and those listed
// already keep theirs.
func TestSeriesPool(t *testing.T) {
	env := k8stest.Start(t)
	st := storetest.New(t)
	ctx := context.Background()
	clock := &manualClock{now: time.Date(2027, 6, 1, 12, 0, 0, 0, time.UTC)}
	startSeriesOperator(t, env, st, clock)

	// Each lists one instance ahead: at noon, today's of 18:00.
	rain := &pmxv1.MarketSeries{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "rain"},
		Spec: pmxv1.MarketSeriesSpec{Schedule: "0 18 * * *", ClosesAfter: &metav1.Duration{Duration: time.Hour},
			ShardPool: "hot", Placement: pmxv1.PlacementDedicated,
			Market: &pmxv1.SeriesMarketTemplate{Question: "Will it rain on {date}?", Category: "weather"}}}
	which := &pmxv1.MarketSeries{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "which"},
		Spec: pmxv1.MarketSeriesSpec{Schedule: "0 18 * * *", ShardPool: "hot", Placement: pmxv1.PlacementDedicated,
			Event: &pmxv1.SeriesEventTemplate{Question: "Which range on {date}?", Category: "finance",
				Outcomes: []pmxv1.EventOutcome{{Key: "low", Label: "Low"}, {Key: "high", Label: "High"}}}}}
	for _, ms := range []*pmxv1.MarketSeries{rain, which} {
		if err := env.Client.Create(ctx, ms); err != nil {
			t.Fatal(err)
		}
	}
	market := func(name string) pmxv1.MarketSpec {
		t.Helper()
		var m pmxv1.Market
		if err := env.Client.Get(ctx, client.ObjectKey{Namespace: "default", Name: name}, &m); err != nil {
			t.Fatal(err)
		}
		return m.Spec
	}

	waitInstances(t, env.Client, "rain", "rain-20270601-1800")
	if s := market("rain-20270601-1800"); s.ShardPool != "hot" || s.Placement != pmxv1.PlacementDedicated {
		t.Errorf("the Market instance's pool %q, placement %q; want hot, Dedicated", s.ShardPool, s.Placement)
	}
	var ev pmxv1.Event
	if !within(10*time.Second, func() bool {
		return env.Client.Get(ctx, client.ObjectKey{Namespace: "default", Name: "which-20270601-1800"}, &ev) == nil
	}) {
		t.Fatal("no Event instance which-20270601-1800")
	}
	if ev.Spec.ShardPool != "hot" || ev.Spec.Placement != pmxv1.PlacementDedicated {
		t.Errorf("the Event instance's pool %q, placement %q; want hot, Dedicated", ev.Spec.ShardPool, ev.Spec.Placement)
	}

	// Back to the default pool, shared: the instance listed next, at 18:00 (tomorrow's), takes
	// that; today's, listed already and open until 19:00, keeps hot.
	got := getSeries(t, env.Client, "rain")
	got.Spec.ShardPool, got.Spec.Placement = "", ""
	if err := env.Client.Update(ctx, &got); err != nil {
		t.Fatal(err)
	}
	// Once the operator has seen the change (its cache holds it), the clock moves on.
	if !within(10*time.Second, func() bool { return getSeries(t, env.Client, "rain").Status.ObservedGeneration == got.Generation }) {
		t.Fatalf("the operator did not observe generation %d of the series", got.Generation)
	}
	clock.Set(time.Date(2027, 6, 1, 18, 0, 0, 0, time.UTC))
	waitInstances(t, env.Client, "rain", "rain-20270601-1800", "rain-20270602-1800")
	if s := market("rain-20270602-1800"); s.ShardPool != "" || s.Placement != "" {
		t.Errorf("the instance listed after the change: pool %q, placement %q; want neither", s.ShardPool, s.Placement)
	}
	if s := market("rain-20270601-1800"); s.ShardPool != "hot" || s.Placement != pmxv1.PlacementDedicated {
		t.Errorf("the instance listed before the change: pool %q, placement %q; want hot, Dedicated as it was", s.ShardPool, s.Placement)
	}
}
