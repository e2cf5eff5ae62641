package controllers

import (
	"regexp"
	"testing"

	"github.com/pmx-dev/pmx/internal/domain"
)

func TestRecordReasons(t *testing.T) {
	transitions := []struct {
		action domain.MarketAction
		want   recordReason
	}{
		{domain.CloseMarket, reasonClosed},
		{domain.ReopenMarket, reasonReopened},
		{domain.ResolveYes, reasonResolved},
		{domain.ResolveNo, reasonResolved},
		{domain.CancelMarket, reasonCanceled},
	}
	for _, tt := range transitions {
		if got := transitionReason(tt.action); got != tt.want {
			t.Errorf("transitionReason(%s) = %s, want %s", tt.action, got, tt.want)
		}
	}

	// Every reason is one CamelCase word, and no two are alike.
	camel := regexp.MustCompile(`^[A-Z][A-Za-z]*$`)
	seen := map[recordReason]bool{}
	for _, r := range []recordReason{reasonRecorded, reasonClosed, reasonReopened, reasonResolved, reasonCanceled,
		reasonVoided, reasonScheduled, reasonShardLost, reasonPaused, reasonResumed, reasonFeesSet} {
		if !camel.MatchString(string(r)) || seen[r] {
			t.Errorf("event reason %q is not one CamelCase word, or is used twice", r)
		}
		seen[r] = true
	}
}
