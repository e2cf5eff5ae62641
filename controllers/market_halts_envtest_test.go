package controllers

import (
	"context"
	"net/http"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"

	pmxv1 "github.com/pmx-dev/pmx/api/v1alpha1"
)

// TestOperatorPauses: spec.paused halts a Market's trading without closing it (placements refused
// with 409 market_halted, its phase OPEN), the Halted condition says by what — its pause, then the
// exchange's halt — and clearing both lets it trade again.
func TestOperatorPauses(t *testing.T) {
	w := newWorld(t)
	alice, _ := w.account("alice")
	m := w.eventually(w.market("paused", nil), "scheduled", scheduled)
	halted := func(status bool, reason pmxv1.MarketConditionReason) func(*pmxv1.Market) bool {
		return func(m *pmxv1.Market) bool {
			c := meta.FindStatusCondition(m.Status.Conditions, string(pmxv1.MarketHalted))
			return c != nil && (c.Status == "True") == status && c.Reason == string(reason)
		}
	}
	m = w.eventually(m, "Halted False", halted(false, pmxv1.ReasonTrading))
	w.call(alice, "POST", "/api/v1/order", order(m.Status.MarketID, "BUY", "YES", 40, 1), http.StatusCreated, nil)

	setPaused := func(paused bool) {
		t.Helper()
		patch := client.MergeFrom(m.DeepCopy())
		m.Spec.Paused = paused
		if err := w.k8s.Patch(context.Background(), m, patch); err != nil {
			t.Fatal(err)
		}
	}
	setPaused(true)
	m = w.eventually(m, "Halted by its pause", halted(true, pmxv1.ReasonPaused))
	w.call(alice, "POST", "/api/v1/order", order(m.Status.MarketID, "BUY", "YES", 41, 1), http.StatusConflict, nil)
	if m.Status.Phase != pmxv1.MarketPhaseOpen {
		t.Fatalf("a paused market's phase is %s, want OPEN", m.Status.Phase)
	}

	if _, err := w.st.SetExchangeHalted(context.Background(), true, time.Now()); err != nil {
		t.Fatal(err)
	}
	m = w.eventually(m, "Halted by the exchange", halted(true, pmxv1.ReasonExchangeHalted))
	setPaused(false)
	if _, err := w.st.SetExchangeHalted(context.Background(), false, time.Now()); err != nil {
		t.Fatal(err)
	}
	m = w.eventually(m, "trading again", halted(false, pmxv1.ReasonTrading))
	w.call(alice, "POST", "/api/v1/order", order(m.Status.MarketID, "BUY", "YES", 42, 1), http.StatusCreated, nil)
}
