package market

import (
	"errors"
	"testing"
	"time"

	"github.com/pmx-dev/pmx/internal/domain"
)

func TestTransition(t *testing.T) {
	tests := []struct {
		from   domain.MarketStatus
		action domain.MarketAction
		want   Plan
		err    bool
	}{
		{"OPEN", domain.CloseMarket, Plan{To: "CLOSED", CancelOrders: true}, false},
		{"CLOSED", domain.CloseMarket, Plan{}, true},
		{"CLOSED", domain.ReopenMarket, Plan{To: "OPEN"}, false},
		{"OPEN", domain.ReopenMarket, Plan{}, true},
		{"OPEN", domain.ResolveYes, Plan{To: "RESOLVED", CancelOrders: true, Settle: true, Outcome: "YES"}, false},
		{"CLOSED", domain.ResolveNo, Plan{To: "RESOLVED", Settle: true, Outcome: "NO"}, false},
		{"OPEN", domain.CancelMarket, Plan{To: "CANCELED", CancelOrders: true, Settle: true}, false},
		{"CLOSED", domain.CancelMarket, Plan{To: "CANCELED", Settle: true}, false},
		{"RESOLVED", domain.CancelMarket, Plan{}, true},
		{"RESOLVED", domain.ResolveYes, Plan{}, true},
		{"RESOLVED", domain.ReopenMarket, Plan{}, true},
		{"CANCELED", domain.ResolveNo, Plan{}, true},
		{"CANCELED", domain.CloseMarket, Plan{}, true},
	}
	for _, tt := range tests {
		got, err := Transition(tt.from, tt.action)
		if tt.err != errors.Is(err, ErrIllegalTransition) || got != tt.want {
			t.Errorf("Transition(%s, %s) = %+v, %v; want %+v, error %v", tt.from, tt.action, got, err, tt.want, tt.err)
		}
	}
	if _, err := Resolve("MAYBE"); err == nil {
		t.Error("Resolve(MAYBE) accepted")
	}
}

func TestIntentNext(t *testing.T) {
	now := time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC)
	past, future := now.Add(-time.Minute), now.Add(time.Minute)
	tests := []struct {
		name   string
		in     Intent
		status domain.MarketStatus
		want   domain.MarketAction
	}{
		{"open stays open", Intent{}, "OPEN", ""},
		{"close on request", Intent{Closed: true}, "OPEN", domain.CloseMarket},
		{"close when due", Intent{ClosesAt: &past}, "OPEN", domain.CloseMarket},
		{"not yet due", Intent{ClosesAt: &future}, "OPEN", ""},
		{"reopen on request", Intent{ClosesAt: &future}, "CLOSED", domain.ReopenMarket},
		{"no reopen after closesAt", Intent{ClosesAt: &past}, "CLOSED", ""},
		{"stay closed", Intent{Closed: true}, "CLOSED", ""},
		{"resolve YES from open", Intent{Resolution: "YES"}, "OPEN", domain.ResolveYes},
		{"resolve NO from closed", Intent{Resolution: "NO"}, "CLOSED", domain.ResolveNo},
		{"cancel", Intent{Resolution: "CANCELED"}, "OPEN", domain.CancelMarket},
		{"resolved is final", Intent{Resolution: "YES"}, "RESOLVED", ""},
		{"canceled is final", Intent{Resolution: "YES"}, "CANCELED", ""},
		{"settled ignores closed", Intent{}, "RESOLVED", ""},
	}
	for _, tt := range tests {
		got, ok := tt.in.Next(tt.status, now)
		if got != tt.want || ok != (tt.want != "") {
			t.Errorf("%s: Next(%s) = %q, %v; want %q", tt.name, tt.status, got, ok, tt.want)
		}
	}
}
