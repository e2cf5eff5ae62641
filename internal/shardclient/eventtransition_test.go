package shardclient

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/pmx-dev/pmx/internal/domain"
	"github.com/pmx-dev/pmx/internal/event"
	"github.com/pmx-dev/pmx/internal/eventrec"
	"github.com/pmx-dev/pmx/internal/exchange"
)

// TestEventTransitionOnOwner moves an event through the operator's router: refused while one of its
// markets is another shard's (nothing moves), carried out once the shard owns them all, every
// market with it; a lone market of the event refuses with market_in_event.
func TestEventTransitionOnOwner(t *testing.T) {
	ctx := context.Background()
	r := newNamedInternalRig(t, "shard-1")
	rt := &Router{Store: r.st, Token: validateToken, Lifecycle: true}
	e, _, err := eventrec.Record(ctx, r.st, uuid.Nil, "test/ev", eventrec.Spec{Question: "Which", Category: "test",
		Outcomes: []event.Outcome{{Key: "a", Label: "A"}, {Key: "b", Label: "B"}, {Key: "c", Label: "C"}}}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.st.Register(ctx, "shard-1", strings.TrimPrefix(r.url, "http://"), ""); err != nil {
		t.Fatal(err)
	}
	for _, o := range e.Outcomes[:2] {
		if _, err := r.st.Assign(ctx, o.MarketID, "shard-1"); err != nil {
			t.Fatal(err)
		}
	}
	closeEvent := domain.EventAction{Action: domain.CloseMarket}
	if err := rt.TransitionEvent(ctx, e.ID, closeEvent); !errors.Is(err, exchange.ErrNotOwner) {
		t.Fatalf("an event whose markets are split: %v, want not_owner", err)
	}
	if _, err := r.st.Assign(ctx, e.Outcomes[2].MarketID, "shard-1"); err != nil {
		t.Fatal(err)
	}
	if err := rt.Transition(ctx, e.Outcomes[0].MarketID, domain.CloseMarket); !errors.Is(err, domain.ErrMarketInEvent) {
		t.Fatalf("a lone market of the event: %v, want market_in_event", err)
	}
	if err := rt.TransitionEvent(ctx, uuid.New(), closeEvent); !errors.Is(err, domain.ErrEventNotFound) {
		t.Fatalf("an unknown event: %v", err)
	}
	for _, a := range []domain.EventAction{closeEvent, {Action: domain.ResolveYes, Outcome: "b"}} {
		if err := rt.TransitionEvent(ctx, e.ID, a); err != nil {
			t.Fatalf("%s: %v", a, err)
		}
	}
	after, err := r.st.Event(ctx, e.ID)
	if err != nil || after.Status != domain.MarketResolved || after.Resolution == nil || *after.Resolution != "b" {
		t.Fatalf("event afterwards: %+v, %v", after, err)
	}
	ms, err := r.st.EventMarkets(ctx, after)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range ms {
		want := map[bool]string{true: "YES", false: "NO"}[*m.OutcomeKey == "b"]
		if m.Status != domain.MarketResolved || m.Outcome == nil || *m.Outcome != want {
			t.Errorf("market %q: %s %v, want RESOLVED %s", *m.OutcomeKey, m.Status, m.Outcome, want)
		}
	}
}
