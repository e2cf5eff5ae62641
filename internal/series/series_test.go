package series

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/pmx-dev/pmx/api/v1alpha1"
)

func daily(zone string, keep int32, closesAfter time.Duration) v1alpha1.MarketSeriesSpec {
	return v1alpha1.MarketSeriesSpec{Schedule: "0 18 * * *", TimeZone: zone, KeepListed: &keep,
		ClosesAfter:   &metav1.Duration{Duration: closesAfter},
		ResolvesAfter: &metav1.Duration{Duration: closesAfter + 2*time.Hour},
		Market:        &v1alpha1.SeriesMarketTemplate{Question: "Will it rain in Paris on {date}?", Category: "weather"}}
}

func names(p Plan) []string {
	var out []string
	for _, in := range p.Due {
		out = append(out, in.Name)
	}
	return out
}

func TestPlan(t *testing.T) {
	s, err := New("rain", daily("Europe/Paris", 2, 0))
	if err != nil {
		t.Fatal(err)
	}
	paris := s.Location()
	now := time.Date(2027, 6, 1, 12, 0, 0, 0, paris)
	p, err := s.Plan(now)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := names(p), []string{"rain-20270601-1800", "rain-20270602-1800"}; !slices.Equal(got, want) {
		t.Fatalf("due %v, want %v", got, want)
	}
	if p.Next.Name != "rain-20270603-1800" || !p.NextDueAt.Equal(time.Date(2027, 6, 1, 18, 0, 0, 0, paris)) {
		t.Fatalf("next %s due at %s", p.Next.Name, p.NextDueAt)
	}
	first := p.Due[0]
	if !first.ClosesAt.Equal(time.Date(2027, 6, 1, 16, 0, 0, 0, time.UTC)) || !first.ResolvesAt.Equal(first.ClosesAt.Add(2*time.Hour)) {
		t.Fatalf("first closes %s resolves %s", first.ClosesAt, first.ResolvesAt)
	}
	if q := s.MarketSpec(first).Question; q != "Will it rain in Paris on 2027-06-01?" {
		t.Fatalf("question %q", q)
	}
	// At its time an instance closes (closesAfter 0): it is no longer due, the window moves on.
	p, _ = s.Plan(time.Date(2027, 6, 1, 18, 0, 0, 0, paris))
	if got, want := names(p), []string{"rain-20270602-1800", "rain-20270603-1800"}; !slices.Equal(got, want) {
		t.Fatalf("at 18:00 due %v, want %v", got, want)
	}
}

func TestPlanOpenInstancesAndNone(t *testing.T) {
	// closesAfter a day: the instance of 18:00 yesterday is still open at noon today.
	s, err := New("rain", daily("UTC", 0, 24*time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	now := time.Date(2027, 6, 1, 12, 0, 0, 0, time.UTC)
	p, _ := s.Plan(now)
	if got, want := names(p), []string{"rain-20270531-1800"}; !slices.Equal(got, want) {
		t.Fatalf("due %v, want %v", got, want)
	}
	if p.Next.Name != "rain-20270601-1800" || !p.NextDueAt.Equal(time.Date(2027, 6, 1, 18, 0, 0, 0, time.UTC)) {
		t.Fatalf("next %s at %s", p.Next.Name, p.NextDueAt)
	}
}

// Each time the clock goes back repeats an hour of local time: the instance of that name is one.
func TestPlanDaylightSaving(t *testing.T) {
	spec := daily("Europe/Paris", 3, 0)
	spec.Schedule = "30 2 * * *" // 02:30 is skipped on 2027-03-28 in Paris
	s, err := New("night", spec)
	if err != nil {
		t.Fatal(err)
	}
	p, _ := s.Plan(time.Date(2027, 3, 26, 12, 0, 0, 0, s.Location()))
	for i, in := range p.Due {
		if i > 0 && !in.Time.After(p.Due[i-1].Time) {
			t.Fatalf("due not in order: %v", names(p))
		}
	}
	if n := len(p.Due); n != 3 {
		t.Fatalf("due %v", names(p))
	}
}

func TestPlanTooMany(t *testing.T) {
	spec := daily("UTC", 1, 30*24*time.Hour)
	spec.Schedule = "* * * * *"
	spec.ResolvesAfter = nil
	s, err := New("minute", spec)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Plan(time.Now()); !errors.Is(err, ErrTooMany) {
		t.Fatalf("plan of 43,200 open instances: %v", err)
	}
}

func TestExpired(t *testing.T) {
	week := 7 * 24 * time.Hour
	keep := daily("UTC", 1, time.Hour)
	keep.KeepSettledFor = &metav1.Duration{Duration: week}
	s, err := New("rain", keep)
	if err != nil {
		t.Fatal(err)
	}
	at := time.Date(2027, 6, 1, 18, 0, 0, 0, time.UTC)
	settled := at.Add(3 * time.Hour)
	for _, c := range []struct {
		now  time.Time
		want bool
	}{
		{settled.Add(week - time.Second), false},
		{settled.Add(week), true},
	} {
		if got := s.Expired(at, settled, c.now); got != c.want {
			t.Errorf("Expired at %s = %v", c.now, got)
		}
	}
	// Settled early (resolved before it closed): kept while due, so the plan never lists it again.
	zero := daily("UTC", 1, 24*time.Hour)
	zero.KeepSettledFor = &metav1.Duration{}
	s, _ = New("rain", zero)
	if s.Expired(at, at, at.Add(time.Hour)) {
		t.Fatal("an instance still due expired")
	}
}

func TestNewRefuses(t *testing.T) {
	neg := int32(-1)
	for _, c := range []struct {
		field string
		edit  func(*v1alpha1.MarketSeriesSpec)
	}{
		{"schedule", func(s *v1alpha1.MarketSeriesSpec) { s.Schedule = "0 25 * * *" }},
		{"schedule", func(s *v1alpha1.MarketSeriesSpec) { s.Schedule = "@every 1h" }},
		{"schedule", func(s *v1alpha1.MarketSeriesSpec) { s.Schedule = "CRON_TZ=UTC 0 18 * * *" }},
		{"schedule", func(s *v1alpha1.MarketSeriesSpec) { s.Schedule = "0 0 30 2 *" }},
		{"timeZone", func(s *v1alpha1.MarketSeriesSpec) { s.TimeZone = "Mars/Olympus" }},
		{"resolvesAfter", func(s *v1alpha1.MarketSeriesSpec) { s.ResolvesAfter = &metav1.Duration{} }},
		{"keepListed", func(s *v1alpha1.MarketSeriesSpec) { s.KeepListed = &neg }},
		{"market", func(s *v1alpha1.MarketSeriesSpec) {
			s.Event = &v1alpha1.SeriesEventTemplate{Question: "q", Category: "c"}
		}},
		{"market", func(s *v1alpha1.MarketSeriesSpec) { s.Market.Question = strings.Repeat("x", 501) }},
		{"shardPool", func(s *v1alpha1.MarketSeriesSpec) { s.ShardPool = "Hot_Pool" }},
		{"shardPool", func(s *v1alpha1.MarketSeriesSpec) { s.ShardPool = strings.Repeat("p", 47) }},
		{"placement", func(s *v1alpha1.MarketSeriesSpec) { s.Placement = "alone" }},
	} {
		spec := daily("UTC", 1, 0)
		c.edit(&spec)
		_, err := New("rain", spec)
		var serr *Error
		if !errors.As(err, &serr) || serr.Field != c.field {
			t.Errorf("%+v: error %v, want one on %s", spec, err, c.field)
		}
	}
}

// TestInstanceFees: an instance carries its template's fee schedule, a copy of its own (a later
// change of the template leaves the instances made before as they are), and none without one.
func TestInstanceFees(t *testing.T) {
	spec := daily("UTC", 1, 0)
	spec.Market.Fees = &v1alpha1.FeeSchedule{TakerBps: 700, MakerBps: -175}
	s, err := New("rain", spec)
	if err != nil {
		t.Fatal(err)
	}
	p, _ := s.Plan(time.Date(2027, 6, 1, 12, 0, 0, 0, time.UTC))
	m := s.MarketSpec(p.Due[0])
	if m.Fees == nil || *m.Fees != (v1alpha1.FeeSchedule{TakerBps: 700, MakerBps: -175}) || m.Fees == spec.Market.Fees {
		t.Fatalf("a market instance's fees: %+v, want a copy of 700/-175", m.Fees)
	}
	spec.Market.Fees.TakerBps = 1
	if m.Fees.TakerBps != 700 {
		t.Fatal("changing the template changed an instance made before")
	}

	ev := daily("UTC", 1, 0)
	ev.Market = nil
	ev.Event = &v1alpha1.SeriesEventTemplate{Question: "Which on {date}?", Category: "c",
		Outcomes: []v1alpha1.EventOutcome{{Key: "a", Label: "A"}, {Key: "b", Label: "B"}},
		Fees:     &v1alpha1.FeeSchedule{TakerBps: 100}}
	s, err = New("which", ev)
	if err != nil {
		t.Fatal(err)
	}
	p, _ = s.Plan(time.Date(2027, 6, 1, 12, 0, 0, 0, time.UTC))
	if e := s.EventSpec(p.Due[0]); e.Fees == nil || e.Fees.TakerBps != 100 {
		t.Fatalf("an event instance's fees: %+v", e.Fees)
	}
	ev.Event.Fees = nil
	s, _ = New("which", ev)
	if e := s.EventSpec(p.Due[0]); e.Fees != nil {
		t.Fatalf("an instance of a template without fees: %+v", e.Fees)
	}
}

// TestInstancePool: every instance, of markets or of events, carries the series' shardPool and
// placement; without them, neither.
func TestInstancePool(t *testing.T) {
	at := time.Date(2027, 6, 1, 12, 0, 0, 0, time.UTC)
	spec := daily("UTC", 1, 0)
	spec.ShardPool, spec.Placement = "hot", v1alpha1.PlacementDedicated
	s, err := New("rain", spec)
	if err != nil {
		t.Fatal(err)
	}
	p, _ := s.Plan(at)
	if m := s.MarketSpec(p.Due[0]); m.ShardPool != "hot" || m.Placement != v1alpha1.PlacementDedicated {
		t.Errorf("a market instance's pool %q, placement %q; want hot, Dedicated", m.ShardPool, m.Placement)
	}

	ev := spec
	ev.Market = nil
	ev.Event = &v1alpha1.SeriesEventTemplate{Question: "Which on {date}?", Category: "c",
		Outcomes: []v1alpha1.EventOutcome{{Key: "a", Label: "A"}, {Key: "b", Label: "B"}}}
	if s, err = New("which", ev); err != nil {
		t.Fatal(err)
	}
	p, _ = s.Plan(at)
	if e := s.EventSpec(p.Due[0]); e.ShardPool != "hot" || e.Placement != v1alpha1.PlacementDedicated {
		t.Errorf("an event instance's pool %q, placement %q; want hot, Dedicated", e.ShardPool, e.Placement)
	}

	s, _ = New("rain", daily("UTC", 1, 0))
	p, _ = s.Plan(at)
	if m := s.MarketSpec(p.Due[0]); m.ShardPool != "" || m.Placement != "" {
		t.Errorf("an instance of a series without a pool: pool %q, placement %q", m.ShardPool, m.Placement)
	}
}
