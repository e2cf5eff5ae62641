package shard

import (
	"testing"
	"time"

	"github.com/google/uuid"
)

// TestOrderRates checks the reported load: orders per second since the oldest observation within
// the window, so that a burst more than a window old no longer counts, and none from a single
// observation.
func TestOrderRates(t *testing.T) {
	a, b := uuid.New(), uuid.New()
	t0 := time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)
	var c orderCounts
	var r orderRates
	observe := func(at time.Duration) map[uuid.UUID]float64 {
		totals := map[uuid.UUID]int64{}
		c.addTo(totals)
		return r.observe(t0.Add(at), totals)
	}
	if got := observe(0); got != nil {
		t.Errorf("first observation: %v, want none", got)
	}
	for range 100 {
		c.add(a)
	}
	c.add(b)
	if got := observe(10 * time.Second); got[a] != 10 || got[b] != 0.1 {
		t.Errorf("after 10 s: %v, want a 10/s and b 0.1/s", got)
	}
	for i := 20; i <= 70; i += 10 {
		observe(time.Duration(i) * time.Second)
	}
	// The burst came between 0 and 10 s; the window now reaches back to the 10 s observation.
	if got := observe(75 * time.Second); got[a] != 0 || got[b] != 0 {
		t.Errorf("a window after the burst: %v, want 0", got)
	}
	if n := len(r.samples); n > 8 {
		t.Errorf("%d samples kept, want those of a window", n)
	}
}
