package standalone

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/pmx-dev/pmx/api/v1alpha1"
	"github.com/pmx-dev/pmx/config"
	"github.com/pmx-dev/pmx/engine"
	"github.com/pmx-dev/pmx/internal/pgtest"
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
	events := ms
	events.Spec.Market, events.Spec.Event = nil, &v1alpha1.SeriesEventTemplate{Question: "q", Category: "c",
		Outcomes: []v1alpha1.EventOutcome{{Key: "a", Label: "A"}, {Key: "b", Label: "B"}}}
	if _, err := New(st, []v1alpha1.MarketSeries{events}, log); err == nil {
		t.Fatal("a series of events was taken")
	}
}
