package market

import (
	"errors"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/pmx-dev/pmx/api/v1alpha1"
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

func TestValidate(t *testing.T) {
	t0 := metav1.NewTime(time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC))
	t1 := metav1.NewTime(t0.Add(time.Hour))
	tests := []struct {
		name  string
		spec  v1alpha1.MarketSpec
		field string
	}{
		{"minimal", v1alpha1.MarketSpec{Question: "Will it rain?", Category: "weather"}, ""},
		{"schedule in order", v1alpha1.MarketSpec{Question: "q", Category: "c", ClosesAt: &t0, ResolvesAt: &t1}, ""},
		{"no question", v1alpha1.MarketSpec{Category: "c"}, "question"},
		{"no category", v1alpha1.MarketSpec{Question: "q"}, "category"},
		{"bad url", v1alpha1.MarketSpec{Question: "q", Category: "c", URL: "ftp://x"}, "url"},
		{"resolves before it closes", v1alpha1.MarketSpec{Question: "q", Category: "c", ClosesAt: &t1, ResolvesAt: &t0}, "resolvesAt"},
		// What Postgres text cannot hold is refused here, not by the database.
		{"NUL in the question", v1alpha1.MarketSpec{Question: "q\x00", Category: "c"}, "question"},
		{"NUL in the description", v1alpha1.MarketSpec{Question: "q", Description: "\x00", Category: "c"}, "description"},
		{"NUL in the category", v1alpha1.MarketSpec{Question: "q", Category: "c\x00c"}, "category"},
		{"NUL in the url", v1alpha1.MarketSpec{Question: "q", Category: "c", URL: "https://x/\x00"}, "url"},
		{"NUL in labelA", v1alpha1.MarketSpec{Question: "q", Category: "c", LabelA: "\x00"}, "labelA"},
		{"NUL in labelB", v1alpha1.MarketSpec{Question: "q", Category: "c", LabelB: "N\x00"}, "labelB"},
		{"invalid UTF-8 in the question", v1alpha1.MarketSpec{Question: "q\xff", Category: "c"}, "question"},
		{"invalid UTF-8 in the description", v1alpha1.MarketSpec{Question: "q", Description: "\xc3", Category: "c"}, "description"},
		{"invalid UTF-8 in the category", v1alpha1.MarketSpec{Question: "q", Category: "\xed\xa0\x80"}, "category"},
		{"invalid UTF-8 in the url", v1alpha1.MarketSpec{Question: "q", Category: "c", URL: "https://x/\xff"}, "url"},
		{"invalid UTF-8 in labelA", v1alpha1.MarketSpec{Question: "q", Category: "c", LabelA: "\xfe"}, "labelA"},
		{"invalid UTF-8 in labelB", v1alpha1.MarketSpec{Question: "q", Category: "c", LabelB: "\x80"}, "labelB"},
		{"other control characters are text", v1alpha1.MarketSpec{Question: "q\x01\t\u2028", Category: "c\u00e9"}, ""},
	}
	for _, tt := range tests {
		err := Validate(&tt.spec)
		var se *SpecError
		if (tt.field == "") != (err == nil) || (err != nil && (!errors.As(err, &se) || se.Field != tt.field)) {
			t.Errorf("%s: Validate() = %v (%+v), want an error on %q", tt.name, err, se, tt.field)
		}
		if err == nil && (tt.spec.LabelA != "Yes" || tt.spec.LabelB != "No") {
			t.Errorf("%s: labels not defaulted: %+v", tt.name, tt.spec)
		}
	}
}
