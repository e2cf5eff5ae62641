package standalone

import (
	"context"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/pmx-dev/pmx/api/v1alpha1"
	"github.com/pmx-dev/pmx/config"
	"github.com/pmx-dev/pmx/engine"
	"github.com/pmx-dev/pmx/internal/pgtest"
	"github.com/pmx-dev/pmx/internal/records"
	"github.com/pmx-dev/pmx/internal/storetest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// TestSync: the instances due are recorded once, under their names, linked to their series, also
// by a second lister (a restarted pmx dev); a later sync lists the next; the sample series loads.
func TestSync(t *testing.T) {
	ctx := context.Background()
	st := storetest.New(t)
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	keep := int32(1)
	ms := v1alpha1.MarketSeries{Spec: v1alpha1.MarketSeriesSpec{Schedule: "0 12 * * *", KeepListed: &keep,
		ClosesAfter: &metav1.Duration{}, Market: &v1alpha1.SeriesMarketTemplate{Question: "Sunny at noon on {date}?", Category: "weather",
			Fees: &v1alpha1.FeeSchedule{TakerBps: 700, MakerBps: -175}}}}
	ms.Name = "sun"
	l, err := New(st, []v1alpha1.MarketSeries{ms}, log)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Date(2027, 6, 1, 9, 0, 0, 0, time.UTC)
	next, ids, err := l.Sync(ctx, now)
	if err != nil {
		t.Fatal(err)
	}
	if !next.Equal(time.Date(2027, 6, 1, 12, 0, 0, 0, time.UTC)) {
		t.Errorf("next due at %s", next)
	}
	m, err := st.MarketByName(ctx, "sun-20270601-1200")
	if err != nil || m.SeriesID == nil || *m.SeriesID != ids["sun"] || m.Question != "Sunny at noon on 2027-06-01?" {
		t.Fatalf("instance %+v, %v; want it linked to %s", m, err, ids["sun"])
	}
	if !m.OwnFees || m.Fees != (engine.Fees{Taker: 700, Maker: -175}) {
		t.Errorf("instance's fees %+v (own %v), want the template's 700/-175", m.Fees, m.OwnFees)
	}

	again, err := New(st, []v1alpha1.MarketSeries{ms}, log)
	if err != nil {
		t.Fatal(err)
	}
	if _, ids2, err := again.Sync(ctx, now); err != nil || ids2["sun"] != ids["sun"] {
		t.Fatalf("second lister: %v, %v", ids2, err)
	}
	if m2, err := st.MarketByName(ctx, "sun-20270601-1200"); err != nil || m2.ID != m.ID {
		t.Fatalf("instance after a second sync: %s, %v; want %s", m2.ID, err, m.ID)
	}
	if _, _, err := again.Sync(ctx, next); err != nil {
		t.Fatal(err)
	}
	if _, err := st.MarketByName(ctx, "sun-20270602-1200"); err != nil {
		t.Fatalf("the next instance at noon: %v", err)
	}

	samples, err := v1alpha1.LoadSeriesFS(config.SampleSeries(), "built in")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := New(st, samples, log); err != nil {
		t.Fatalf("the sample series: %v", err)
	}
}

// TestPoolIgnored: pmx dev serves every market itself, so a series' shardPool and placement are
// checked, logged as the operator's and otherwise ignored, as a Market's and an Event's are: the
// instance is in the default pool, shared.
func TestPoolIgnored(t *testing.T) {
	ctx := context.Background()
	st := storetest.New(t)
	var logged strings.Builder
	log := slog.New(slog.NewTextHandler(&logged, nil))
	ms := v1alpha1.MarketSeries{Spec: v1alpha1.MarketSeriesSpec{Schedule: "0 12 * * *", ShardPool: "hot", Placement: v1alpha1.PlacementDedicated,
		Market: &v1alpha1.SeriesMarketTemplate{Question: "Sunny at noon on {date}?", Category: "weather"}}}
	ms.Name = "sun"
	l, err := New(st, []v1alpha1.MarketSeries{ms}, log)
	if err != nil {
		t.Fatal(err)
	}
	if out := logged.String(); !strings.Contains(out, "spec.shardPool and spec.placement are the operator's") ||
		!strings.Contains(out, "series=sun shardPool=hot placement=Dedicated") {
		t.Errorf("log %q, want that the series' shardPool and placement are the operator's", out)
	}
	if _, _, err := l.Sync(ctx, time.Date(2027, 6, 1, 9, 0, 0, 0, time.UTC)); err != nil {
		t.Fatal(err)
	}
	m, err := st.MarketByName(ctx, "sun-20270601-1200")
	if err != nil || m.Pool != "default" || m.Dedicated {
		t.Fatalf("instance %+v, %v; want it in the default pool, shared", m, err)
	}

	bad := ms
	bad.Spec.ShardPool = "Hot_Pool"
	if _, err := New(st, []v1alpha1.MarketSeries{bad}, log); err == nil || !strings.Contains(err.Error(), "spec.shardPool") {
		t.Fatalf("a pool that is no DNS label: %v, want refused naming spec.shardPool", err)
	}
}

// TestSyncEvents: a series of events lists each instance due as an event with its outcomes'
// markets, once, with the template's fee schedule, the event and its markets linked to the
// series; a template whose outcomes an event cannot have is refused.
func TestSyncEvents(t *testing.T) {
	ctx := context.Background()
	st := storetest.New(t)
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	keep := int32(1)
	ms := v1alpha1.MarketSeries{Spec: v1alpha1.MarketSeriesSpec{Schedule: "0 12 * * *", KeepListed: &keep,
		Event: &v1alpha1.SeriesEventTemplate{Question: "Noon weather in Paris on {date}?", Category: "weather",
			Outcomes: []v1alpha1.EventOutcome{{Key: "sun", Label: "Sun"}, {Key: "rain", Label: "Rain"}, {Key: "other", Label: "Other"}},
			Fees:     &v1alpha1.FeeSchedule{TakerBps: 500, MakerBps: -100}}}}
	ms.Name = "noon"
	now := time.Date(2027, 6, 1, 9, 0, 0, 0, time.UTC)
	var first records.Event
	for run := range 2 { // the second, a restarted pmx dev, finds the instance listed
		l, err := New(st, []v1alpha1.MarketSeries{ms}, log)
		if err != nil {
			t.Fatal(err)
		}
		_, ids, err := l.Sync(ctx, now)
		if err != nil {
			t.Fatal(err)
		}
		e, err := st.EventByName(ctx, "noon-20270601-1200")
		if err != nil || e.SeriesID == nil || *e.SeriesID != ids["noon"] || e.Question != "Noon weather in Paris on 2027-06-01?" ||
			len(e.Outcomes) != 3 || e.Fees != (engine.Fees{Taker: 500, Maker: -100}) {
			t.Fatalf("run %d: instance %+v, %v; want it linked to %s with the template's fees", run, e, err, ids["noon"])
		}
		if run == 0 {
			first = e
		} else if e.ID != first.ID {
			t.Fatalf("run %d: instance %s, want %s again", run, e.ID, first.ID)
		}
		markets, err := st.EventMarkets(ctx, e)
		if err != nil || len(markets) != 3 {
			t.Fatalf("run %d: the instance's markets %+v, %v", run, markets, err)
		}
		for _, m := range markets {
			if m.SeriesID == nil || *m.SeriesID != ids["noon"] || m.OwnFees || m.Fees != e.Fees {
				t.Errorf("run %d: outcome market %s: series %v, fees %+v (own %v); want the series' and the event's fees", run, m.ID, m.SeriesID, m.Fees, m.OwnFees)
			}
		}
		row, err := st.Series(ctx, ids["noon"])
		if err != nil || row.Kind != records.SeriesOfEvents {
			t.Fatalf("run %d: the series' row %+v, %v; want a series of events", run, row, err)
		}
		instances, err := st.SeriesInstances(ctx, row)
		if err != nil || len(instances) != 1 || instances[0].ID != e.ID {
			t.Fatalf("run %d: the series' instances %+v, %v; want the event %s", run, instances, err, e.ID)
		}
	}

	bad := ms
	bad.Spec.Event = bad.Spec.Event.DeepCopy()
	bad.Spec.Event.Outcomes[2].Key = "sun"
	if _, err := New(st, []v1alpha1.MarketSeries{bad}, log); err == nil || !strings.Contains(err.Error(), "spec.event") {
		t.Fatalf("a template of two outcomes keyed sun: %v, want refused naming spec.event", err)
	}
	bad.Spec.Event = ms.Spec.Event.DeepCopy()
	bad.Spec.Event.Fees = &v1alpha1.FeeSchedule{TakerBps: 100, MakerBps: 200}
	if _, err := New(st, []v1alpha1.MarketSeries{bad}, log); err == nil || !strings.Contains(err.Error(), "spec.event.fees") {
		t.Fatalf("a maker fee above the taker's: %v, want refused naming spec.event.fees", err)
	}
}
