package controllers

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/google/uuid"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	pmxv1 "github.com/pmx-dev/pmx/api/v1alpha1"
	"github.com/pmx-dev/pmx/apiserver"
	"github.com/pmx-dev/pmx/engine"
	"github.com/pmx-dev/pmx/internal/poll"
	"github.com/pmx-dev/pmx/internal/records"
)

// TestOperatorFees: a Market's spec.fees becomes its own schedule in Postgres (OwnFees), which the
// API shows and its fills pay; changing spec.fees changes it, removing it takes it away. An
// Event's spec.fees reaches every outcome's market, except one whose Market has a schedule of its
// own, which the Event leaves as it is; removing the Event's leaves its markets none.
func TestOperatorFees(t *testing.T) {
	w := newWorld(t)
	alice, aliceID := w.account("alice")
	bob, bobID := w.account("bob")

	m := w.market("fees", func(s *pmxv1.MarketSpec) { s.Fees = &pmxv1.FeeSchedule{TakerBps: 700, MakerBps: -175} })
	m = w.eventually(m, "scheduled", scheduled)
	id := uuid.MustParse(m.Status.MarketID)
	w.marketFees(id, "its own schedule 700/-175", true, engine.Fees{Taker: 700, Maker: -175})
	w.waitForEvent(m.Name, string(reasonFeesSet))
	var got apiserver.Market
	w.call(alice, "GET", "/api/v1/market?marketId="+id.String(), "", http.StatusCreated, &got) // the contract answers 201
	if got.Fees != (apiserver.Fees{TakerBps: 700, MakerBps: -175}) {
		t.Errorf("GET /api/v1/market shows fees %+v, want takerBps 700, makerBps -175", got.Fees)
	}

	// Alice's bid rests (the maker); Bob's NO at 50 meets it (the taker): 10 shares at 50, a taker
	// fee of ⌈700 × 10 × 50 × 50 / 10⁶⌉ = 18 cents and a rebate of ⌊175 × 10 × 50 × 50 / 10⁶⌋ = 4.
	aliceBefore, bobBefore := w.cash(aliceID), w.cash(bobID)
	w.call(alice, "POST", "/api/v1/order", order(id.String(), "BUY", "YES", 50, 10), http.StatusCreated, nil)
	w.call(bob, "POST", "/api/v1/order", order(id.String(), "BUY", "NO", 50, 10), http.StatusCreated, nil)
	if a, b := aliceBefore-w.cash(aliceID), bobBefore-w.cash(bobID); a != 500-4 || b != 500+18 {
		t.Errorf("the trade cost Alice (maker) %d and Bob (taker) %d cents, want 496 (500 less a rebate of 4) and 518 (500 and a fee of 18)", a, b)
	}

	setMarketFees := func(fees *pmxv1.FeeSchedule) {
		t.Helper()
		var cur pmxv1.Market
		if err := w.k8s.Get(context.Background(), client.ObjectKeyFromObject(m), &cur); err != nil {
			t.Fatal(err)
		}
		patch := client.MergeFrom(cur.DeepCopy())
		cur.Spec.Fees = fees
		if err := w.k8s.Patch(context.Background(), &cur, patch); err != nil {
			t.Fatal(err)
		}
	}
	setMarketFees(&pmxv1.FeeSchedule{TakerBps: 300, MakerBps: 0})
	w.marketFees(id, "its own schedule 300/0", true, engine.Fees{Taker: 300})
	setMarketFees(nil)
	w.marketFees(id, "without a schedule", false, engine.Fees{})
	w.call(alice, "GET", "/api/v1/market?marketId="+id.String(), "", http.StatusCreated, &got) // the contract answers 201
	if got.Fees != (apiserver.Fees{}) {
		t.Errorf("GET /api/v1/market shows fees %+v once spec.fees is removed, want both rates 0", got.Fees)
	}

	// An Event created with a schedule gives it to each outcome's market.
	ev := &pmxv1.Event{ObjectMeta: metav1.ObjectMeta{Name: "fees-ev", Namespace: "default"},
		Spec: pmxv1.EventSpec{Question: "Who wins fees-ev?", Category: "test", Fees: &pmxv1.FeeSchedule{TakerBps: 500, MakerBps: -100},
			Outcomes: []pmxv1.EventOutcome{{Key: "a", Label: "A"}, {Key: "b", Label: "B"}, {Key: "c", Label: "C"}}}}
	if err := w.k8s.Create(context.Background(), ev); err != nil {
		t.Fatal(err)
	}
	ms := w.eventMarkets(ev)
	ids := make([]uuid.UUID, len(ms))
	for i, om := range ms {
		ids[i] = uuid.MustParse(om.Status.MarketID)
		w.marketFees(ids[i], "its event's schedule 500/-100", false, engine.Fees{Taker: 500, Maker: -100})
	}
	w.waitForEvent(ev.Name, string(reasonFeesSet))
	var gotEvent apiserver.Event
	ev = w.eventuallyEvent(ev, "recorded", func(e *pmxv1.Event) bool { return e.Status.EventID != "" })
	w.call(alice, "GET", "/api/v1/event?eventId="+ev.Status.EventID, "", http.StatusOK, &gotEvent)
	if gotEvent.Fees == nil || *gotEvent.Fees != (apiserver.Fees{TakerBps: 500, MakerBps: -100}) {
		t.Errorf("GET /api/v1/event shows fees %+v, want takerBps 500, makerBps -100", gotEvent.Fees)
	}

	// Outcome a's Market gets a schedule of its own; the Event's next change leaves it there.
	own := &pmxv1.FeeSchedule{TakerBps: 100, MakerBps: 0}
	var ma pmxv1.Market
	if err := w.k8s.Get(context.Background(), client.ObjectKeyFromObject(ms[0]), &ma); err != nil {
		t.Fatal(err)
	}
	patch := client.MergeFrom(ma.DeepCopy())
	ma.Spec.Fees = own
	if err := w.k8s.Patch(context.Background(), &ma, patch); err != nil {
		t.Fatal(err)
	}
	w.marketFees(ids[0], "its own schedule 100/0", true, engine.Fees{Taker: 100})
	setEventFees := func(fees *pmxv1.FeeSchedule) {
		t.Helper()
		var cur pmxv1.Event
		if err := w.k8s.Get(context.Background(), client.ObjectKeyFromObject(ev), &cur); err != nil {
			t.Fatal(err)
		}
		patch := client.MergeFrom(cur.DeepCopy())
		cur.Spec.Fees = fees
		if err := w.k8s.Patch(context.Background(), &cur, patch); err != nil {
			t.Fatal(err)
		}
	}
	setEventFees(&pmxv1.FeeSchedule{TakerBps: 800, MakerBps: -200})
	for _, i := range []int{1, 2} {
		w.marketFees(ids[i], "its event's new schedule 800/-200", false, engine.Fees{Taker: 800, Maker: -200})
	}
	// The Event reconciled its Markets after the change (Ready with its generation); outcome a's
	// own schedule stands, in its spec and in Postgres.
	ev = w.eventuallyEvent(ev, "the change observed", func(e *pmxv1.Event) bool { return e.Status.ObservedGeneration == e.Generation })
	if err := w.k8s.Get(context.Background(), client.ObjectKeyFromObject(ms[0]), &ma); err != nil {
		t.Fatal(err)
	}
	if ma.Spec.Fees == nil || *ma.Spec.Fees != *own {
		t.Errorf("outcome a's Market has spec.fees %+v after its Event's change, want its own %+v", ma.Spec.Fees, *own)
	}
	w.marketFees(ids[0], "still its own schedule 100/0", true, engine.Fees{Taker: 100})

	// Removing the Event's schedule leaves its other markets none.
	setEventFees(nil)
	for _, i := range []int{1, 2} {
		w.marketFees(ids[i], "without a schedule", false, engine.Fees{})
	}
	if e, err := w.st.Event(context.Background(), uuid.MustParse(ev.Status.EventID)); err != nil || e.Fees != (engine.Fees{}) {
		t.Errorf("the event's row after spec.fees was removed: fees %+v (%v), want none", e.Fees, err)
	}
	w.marketFees(ids[0], "still its own schedule 100/0", true, engine.Fees{Taker: 100})
}

// marketFees waits until the market's row in Postgres carries the schedule want, its own or not.
func (w *world) marketFees(id uuid.UUID, what string, own bool, want engine.Fees) records.Market {
	w.t.Helper()
	var m records.Market
	var err error
	if poll.Until(w.t.Context(), 20*time.Second, func(ctx context.Context) (bool, error) {
		m, err = w.st.Market(ctx, id)
		return err == nil && m.OwnFees == own && m.Fees == want, nil
	}) != nil {
		w.t.Fatalf("market %s: timed out waiting until %s; last: fees %+v, own %v (%v)", id, what, m.Fees, m.OwnFees, err)
	}
	return m
}
