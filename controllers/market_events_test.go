package controllers

import (
	"regexp"
	"testing"

	"github.com/pmx-dev/pmx/internal/domain"
)

func TestEventReasons(t *testing.T) {
	transitions := []struct {
		action domain.MarketAction
		want   eventReason
	}{
		{domain.CloseMarket, eventClosed},
		{domain.ReopenMarket, eventReopened},
		{domain.ResolveYes, eventResolved},
		{domain.ResolveNo, eventResolved},
		{domain.CancelMarket, eventCanceled},
	}
	for _, tt := range transitions {
		if got := transitionReason(tt.action); got != tt.want {
			t.Errorf("transitionReason(%s) = %s, want %s", tt.action, got, tt.want)
		}
	}

	// Every reason is one CamelCase word, and no two are alike.
	camel := regexp.MustCompile(`^[A-Z][A-Za-z]*$`)
	seen := map[eventReason]bool{}
	for _, r := range []eventReason{eventRecorded, eventClosed, eventReopened, eventResolved, eventCanceled,
		eventVoided, eventScheduled, eventShardLost} {
		if !camel.MatchString(string(r)) || seen[r] {
			t.Errorf("event reason %q is not one CamelCase word, or is used twice", r)
		}
		seen[r] = true
	}
}
