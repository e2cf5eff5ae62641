package controllers

import (
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	pmxv1 "github.com/pmx-dev/pmx/api/v1alpha1"
	"github.com/pmx-dev/pmx/internal/domain"
	"github.com/pmx-dev/pmx/internal/eventrec"
	"github.com/pmx-dev/pmx/internal/market/marketspec"
	"github.com/pmx-dev/pmx/internal/records"
)

func TestLifecycleOf(t *testing.T) {
	ev := &pmxv1.Event{}
	for _, tc := range []struct {
		resolution, key string
		closed          bool
		want            pmxv1.Resolution
	}{
		{"", "a", false, ""},
		{"", "a", true, ""},
		{"a", "a", true, pmxv1.ResolutionYes},
		{"a", "b", false, pmxv1.ResolutionNo},
		{"CANCELED", "a", false, pmxv1.ResolutionCanceled},
	} {
		ev.Spec.Resolution, ev.Spec.Closed = tc.resolution, tc.closed
		closed, res := lifecycleOf(ev, tc.key)
		if closed != tc.closed || res != tc.want {
			t.Errorf("resolution %q, outcome %q: %v %q, want %v %q", tc.resolution, tc.key, closed, res, tc.closed, tc.want)
		}
	}
}

func TestEventNext(t *testing.T) {
	now := time.Date(2027, 1, 1, 12, 0, 0, 0, time.UTC)
	past := metav1.NewTime(now.Add(-time.Minute))
	for _, tc := range []struct {
		name   string
		spec   pmxv1.EventSpec
		status domain.MarketStatus
		want   domain.MarketAction
	}{
		{"open, nothing asked", pmxv1.EventSpec{}, domain.MarketOpen, ""},
		{"close", pmxv1.EventSpec{Closed: true}, domain.MarketOpen, domain.CloseMarket},
		{"closesAt passed", pmxv1.EventSpec{ClosesAt: &past}, domain.MarketOpen, domain.CloseMarket},
		{"reopen", pmxv1.EventSpec{}, domain.MarketClosed, domain.ReopenMarket},
		{"resolve an open event", pmxv1.EventSpec{Resolution: "a"}, domain.MarketOpen, domain.ResolveYes},
		{"resolve a closed event", pmxv1.EventSpec{Resolution: "a", Closed: true}, domain.MarketClosed, domain.ResolveYes},
		{"void", pmxv1.EventSpec{Resolution: "CANCELED"}, domain.MarketClosed, domain.CancelMarket},
		{"resolved stays", pmxv1.EventSpec{Resolution: "a"}, domain.MarketResolved, ""},
		{"voided stays", pmxv1.EventSpec{Resolution: "CANCELED"}, domain.MarketCanceled, ""},
		{"markets not in one phase", pmxv1.EventSpec{Resolution: "a"}, "", ""},
	} {
		got, pending := eventNext(&tc.spec, tc.status, now)
		if got != tc.want || pending != (tc.want != "") {
			t.Errorf("%s: %q %v, want %q", tc.name, got, pending, tc.want)
		}
	}
}

func TestDesiredEventStatus(t *testing.T) {
	shard := "shard-a"
	p30, p55 := 30, 55
	ev := &pmxv1.Event{ObjectMeta: metav1.ObjectMeta{Name: "e", Generation: 2}, Spec: pmxv1.EventSpec{
		Outcomes: []pmxv1.EventOutcome{{Key: "a", Label: "A"}, {Key: "b", Label: "B"}, {Key: "c", Label: "C"}}}}
	markets := []*pmxv1.Market{{ObjectMeta: metav1.ObjectMeta{Name: "e-a"}}, {ObjectMeta: metav1.ObjectMeta{Name: "e-b"}}, {ObjectMeta: metav1.ObjectMeta{Name: "e-c"}}}
	rows := []*records.Market{{ID: uuid.New(), Status: "OPEN", Shard: &shard, LastTradePrice: &p30},
		{ID: uuid.New(), Status: "OPEN", Shard: &shard, LastTradePrice: &p55}, {ID: uuid.New(), Status: "OPEN", Shard: &shard}}
	id := uuid.New()
	st := desiredEventStatus(ev, eventObservation{id: id, markets: markets, rows: rows, phase: "OPEN", shard: shard}, nil)
	if st.Leader != "b" || st.LeaderPrice == nil || *st.LeaderPrice != 55 || st.Shard != shard || st.EventID != id.String() || st.ObservedGeneration != 2 {
		t.Errorf("status %+v", st)
	}
	if len(st.Outcomes) != 3 || st.Outcomes[2].Market != "e-c" || st.Outcomes[2].MarketID != rows[2].ID.String() || st.Outcomes[2].LastTradePrice != nil {
		t.Errorf("outcomes %+v", st.Outcomes)
	}
	if !meta.IsStatusConditionTrue(st.Conditions, string(pmxv1.MarketReady)) || !meta.IsStatusConditionTrue(st.Conditions, string(pmxv1.MarketScheduled)) {
		t.Errorf("conditions %+v", st.Conditions)
	}

	// One outcome not recorded yet: not Ready, not on one shard.
	st = desiredEventStatus(ev, eventObservation{id: id, markets: markets, rows: []*records.Market{rows[0], rows[1], nil}}, nil)
	if c := meta.FindStatusCondition(st.Conditions, string(pmxv1.MarketReady)); c == nil || c.Status != metav1.ConditionFalse || c.Message != "2 of 3 outcome markets recorded" {
		t.Errorf("Ready %+v", c)
	}
	// Taken names are reported.
	st = desiredEventStatus(ev, eventObservation{taken: []string{"e-a"}}, nil)
	if c := meta.FindStatusCondition(st.Conditions, string(pmxv1.MarketReady)); c == nil || c.Reason != string(reasonMarketNameTaken) {
		t.Errorf("Ready %+v", c)
	}
}

// TestMarketSpecFits checks that the longest question and label the Event CRD allows make an
// outcome market the market rules accept, so that no Event the apiserver takes fails to record.
func TestMarketSpecFits(t *testing.T) {
	ev := &pmxv1.Event{Spec: pmxv1.EventSpec{Question: strings.Repeat("é", 445), Category: "c",
		Outcomes: []pmxv1.EventOutcome{{Key: strings.Repeat("k", 63), Label: strings.Repeat("ü", 50)}, {Key: "b", Label: "B"}}}}
	for _, o := range ev.Spec.Outcomes {
		spec := marketSpec(ev, o)
		if err := marketspec.Validate(&spec); err != nil {
			t.Errorf("outcome %s: %v", o.Key, err)
		}
	}
	if err := eventrec.Validate(specOf(ev)); err != nil {
		t.Errorf("eventrec.Validate: %v", err)
	}
}
