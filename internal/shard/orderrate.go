package shard

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
)

// The load a shard process reports with its heartbeat (store.ReportLoad), for the operator's
// rebalancing (docs/architecture.md §6): the orders placed in each market per second over the last
// loadWindow. Counted where a placement enters the shard, before its batch, so that the report
// costs the order path one atomic add.

// loadWindow is how far back a reported rate looks; loadEvery is how many heartbeats apart the
// reports are.
const (
	loadWindow = time.Minute
	loadEvery  = 5
)

// orderCounts counts the placements each market has taken since the process started.
type orderCounts struct{ m sync.Map } // uuid.UUID → *atomic.Int64

func (c *orderCounts) add(market uuid.UUID) {
	n, ok := c.m.Load(market)
	if !ok {
		n, _ = c.m.LoadOrStore(market, new(atomic.Int64))
	}
	n.(*atomic.Int64).Add(1)
}

// addTo adds the counts to totals.
func (c *orderCounts) addTo(totals map[uuid.UUID]int64) {
	c.m.Range(func(k, v any) bool {
		totals[k.(uuid.UUID)] += v.(*atomic.Int64).Load()
		return true
	})
}

// orderRates turns running totals, observed now and then, into orders per second over the window.
type orderRates struct {
	samples []rateSample // oldest first, spanning at most the window
}

type rateSample struct {
	at     time.Time
	totals map[uuid.UUID]int64
}

// observe records the totals at a moment and returns each market's rate since the oldest sample
// within the window: none on the first observation, which has nothing to compare with.
func (r *orderRates) observe(at time.Time, totals map[uuid.UUID]int64) map[uuid.UUID]float64 {
	for len(r.samples) > 1 && at.Sub(r.samples[1].at) >= loadWindow {
		r.samples = r.samples[1:] // keep the newest sample at least a window old
	}
	r.samples = append(r.samples, rateSample{at: at, totals: totals})
	oldest := r.samples[0]
	span := at.Sub(oldest.at).Seconds()
	if span <= 0 {
		return nil
	}
	rates := make(map[uuid.UUID]float64, len(totals))
	for id, n := range totals {
		rates[id] = float64(n-oldest.totals[id]) / span
	}
	return rates
}
