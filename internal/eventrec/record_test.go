package eventrec

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/pmx-dev/pmx/api/v1alpha1"
	"github.com/pmx-dev/pmx/engine"
	"github.com/pmx-dev/pmx/internal/domain"
	"github.com/pmx-dev/pmx/internal/event"
	"github.com/pmx-dev/pmx/internal/pgtest"
	"github.com/pmx-dev/pmx/internal/storetest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

func TestRecord(t *testing.T) {
	ctx := context.Background()
	st := storetest.New(t)
	now := time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC)
	spec := Spec{Question: "Who wins the cup", Category: "sports", Outcomes: []event.Outcome{
		{Key: "red", Label: "Red"}, {Key: "blue", Label: "Blue"}, {Key: "green", Label: "Green"}}}

	e, created, err := Record(ctx, st, uuid.Nil, "default/cup", spec, now)
	if err != nil || !created || e.Status != domain.MarketOpen || len(e.Outcomes) != 3 {
		t.Fatalf("Record(new) = %+v, created %v, %v", e, created, err)
	}
	markets, err := st.EventMarkets(ctx, e)
	if err != nil {
		t.Fatal(err)
	}
	for i, m := range markets {
		o := e.Outcomes[i]
		if m.ID != o.MarketID || m.EventID == nil || *m.EventID != e.ID || *m.OutcomeKey != o.Key ||
			*m.Name != MarketName("default/cup", o.Key) || m.Status != domain.MarketOpen {
			t.Errorf("outcome %q's market %+v", o.Key, m)
		}
	}

	// The same name updates text and labels, in the event and its markets, and keeps the ids.
	spec.Outcomes[1].Label = "Navy"
	spec.Question = "Who takes the cup"
	again, created, err := Record(ctx, st, uuid.Nil, "default/cup", spec, now.Add(time.Minute))
	if err != nil || created || again.ID != e.ID || again.Outcomes[1].Label != "Navy" ||
		again.Outcomes[1].MarketID != e.Outcomes[1].MarketID || again.Question != "Who takes the cup" {
		t.Fatalf("Record(update) = %+v, created %v, %v", again, created, err)
	}
	m, err := st.Market(ctx, e.Outcomes[1].MarketID)
	if err != nil || m.Question != "Who takes the cup — Navy" {
		t.Fatalf("the outcome's market after the update: %q, %v", m.Question, err)
	}

	// Keys are fixed; invalid outcomes change nothing.
	for _, outcomes := range [][]event.Outcome{
		{{Key: "red", Label: "Red"}, {Key: "blue", Label: "Blue"}},
		{{Key: "red", Label: "Red"}, {Key: "teal", Label: "Navy"}, {Key: "green", Label: "Green"}},
	} {
		s := spec
		s.Outcomes = outcomes
		if _, _, err := Record(ctx, st, e.ID, "default/cup", s, now); !errors.Is(err, ErrOutcomesChanged) {
			t.Errorf("outcomes %v: %v, want ErrOutcomesChanged", outcomes, err)
		}
	}
	s := spec
	s.Outcomes = []event.Outcome{{Key: "only", Label: "Only"}}
	var refusal *domain.Error
	if _, _, err := Record(ctx, st, uuid.Nil, "default/one", s, now); !errors.As(err, &refusal) || refusal.Code != "invalid_outcomes" {
		t.Errorf("one outcome: %v, want invalid_outcomes", err)
	}
	if _, err := st.EventByName(ctx, "default/one"); err == nil {
		t.Error("a refused event was stored")
	}
}

// TestOutcomeQuestion: an outcome market's question is its event's question and the outcome's
// label, which reads naturally ("…? — Green", not "…?: Green?"), and the longest question and
// label an Event allows still make a market question the Market CRD accepts.
func TestOutcomeQuestion(t *testing.T) {
	spec := Spec{Question: "Who wins the 2027 cup?", Category: "sports",
		Outcomes: []event.Outcome{{Key: "green", Label: "Green"}, {Key: "red", Label: "Red"}}}
	if got := MarketSpec(spec, spec.Outcomes[0]).Question; got != "Who wins the 2027 cup? — Green" {
		t.Errorf("the outcome market's question %q, want %q", got, "Who wins the 2027 cup? — Green")
	}
	spec.Question = strings.Repeat("q", 444) + "?"
	spec.Outcomes[0].Label = strings.Repeat("é", 50)
	if err := Validate(spec); err != nil {
		t.Errorf("a 445-character question with a 50-character label: %v", err)
	}
}

// TestPauseAndFees: Pause and SetFees make an event's pause and fee schedule what its spec says,
// and say whether they changed it; a schedule of two zero rates is none, as the event's row shows
// it.
func TestPauseAndFees(t *testing.T) {
	ctx := context.Background()
	st := storetest.New(t)
	now := time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC)
	e, _, err := Record(ctx, st, uuid.Nil, "default/halts", Spec{Question: "Who wins", Category: "sports",
		Outcomes: []event.Outcome{{Key: "red", Label: "Red"}, {Key: "blue", Label: "Blue"}}}, now)
	if err != nil {
		t.Fatal(err)
	}
	for _, step := range []struct {
		name    string
		paused  bool
		changed bool
	}{{"paused", true, true}, {"paused again", true, false}, {"resumed", false, true}, {"resumed again", false, false}} {
		var changed bool
		if e, changed, err = Pause(ctx, st, e, step.paused, now); err != nil {
			t.Fatalf("%s: %v", step.name, err)
		}
		stored, err := st.Event(ctx, e.ID)
		if err != nil || changed != step.changed || e.Paused != step.paused || stored.Paused != step.paused {
			t.Errorf("%s: changed %v, returned paused %v, stored %v (%v); want changed %v, paused %v",
				step.name, changed, e.Paused, stored.Paused, err, step.changed, step.paused)
		}
	}
	for _, step := range []struct {
		name    string
		fees    *v1alpha1.FeeSchedule
		changed bool
		want    engine.Fees
	}{
		{"set", &v1alpha1.FeeSchedule{TakerBps: 700, MakerBps: -175}, true, engine.Fees{Taker: 700, Maker: -175}},
		{"same again", &v1alpha1.FeeSchedule{TakerBps: 700, MakerBps: -175}, false, engine.Fees{Taker: 700, Maker: -175}},
		{"changed", &v1alpha1.FeeSchedule{TakerBps: 300}, true, engine.Fees{Taker: 300}},
		{"removed", nil, true, engine.Fees{}},
		{"zero rates, as none", &v1alpha1.FeeSchedule{}, false, engine.Fees{}},
	} {
		var changed bool
		if e, changed, err = SetFees(ctx, st, e, step.fees, now); err != nil {
			t.Fatalf("%s: %v", step.name, err)
		}
		stored, err := st.Event(ctx, e.ID)
		if err != nil || changed != step.changed || e.Fees != step.want || stored.Fees != step.want {
			t.Errorf("%s: changed %v, returned %+v, stored %+v (%v); want changed %v, %+v",
				step.name, changed, e.Fees, stored.Fees, err, step.changed, step.want)
		}
	}
	// Out of the CRD's bounds: refused, nothing changed.
	if _, changed, err := SetFees(ctx, st, e, &v1alpha1.FeeSchedule{TakerBps: 700, MakerBps: -800}, now); err == nil || changed ||
		!strings.Contains(err.Error(), "spec.fees") {
		t.Errorf("a maker rebate above the taker's fee: changed %v, %v; want refused naming spec.fees", changed, err)
	}
	if stored, err := st.Event(ctx, e.ID); err != nil || stored.Fees != (engine.Fees{}) {
		t.Errorf("after the refusal the event has fees %+v (%v), want none", stored.Fees, err)
	}
}
