package bench

import (
	"maps"
	"math"
	"slices"

	dto "github.com/prometheus/client_model/go"
)

// orderRoute is the public API's placement, as the HTTP metrics label it (httpkit.HTTPMetrics).
const orderRoute, orderMethod = "/api/v1/order", "POST"

// ServerTimes are the 99th percentiles of three latency histograms that the exchange's own
// processes keep, over the same time as the shards' counters: how long a shard's batch took, from
// its first command to its commit (pmx_shard_batch_seconds); how long its writes and commit took,
// the one round trip to Postgres once it was built (pmx_shard_commit_seconds); and how long pmx
// took to answer a single placement (not those of POST /orders/batch), from its route matched to
// its answer written (pmx_http_request_duration_seconds of POST /api/v1/order: on a front, the
// shard's answer included). Set beside the bots' p99, they tell a tail that pmx's handlers and
// batches make from one made outside them: the kernel's queues, the network, the load generator,
// a CPU not free to run either; and the commits' beside the batches', a tail made in Postgres from
// one made in the shard.
type ServerTimes struct {
	Batches   int64     `json:"batches"` // the batches, commits and single placements the histograms counted
	Commits   int64     `json:"commits,omitempty"`
	Orders    int64     `json:"orders"`
	BatchP99  Quantile  `json:"batchP99Seconds"`
	CommitP99 *Quantile `json:"commitP99Seconds,omitempty"` // nil from a pmx without the histogram
	OrderP99  Quantile  `json:"orderP99Seconds"`
}

// Quantile is where a quantile of a histogram lies: in its bucket (Over, AtMost], AtMost 0 past
// the largest bound, both 0 for a histogram that counted nothing. The histograms' bounds double from
// 100µs, so it is known to a factor of two.
type Quantile struct {
	Over   float64 `json:"over"`
	AtMost float64 `json:"atMost,omitempty"`
}

// histogram is a Prometheus histogram's cumulative counts by upper bound (+Inf the total), summed
// over every series and process read.
type histogram map[float64]float64

// add adds the histograms of family f (if any) whose series carry every label of match.
func (h histogram) add(f *dto.MetricFamily, match map[string]string) {
	if f == nil {
		return
	}
	for _, m := range f.GetMetric() {
		if !hasLabels(m, match) || m.GetHistogram() == nil {
			continue
		}
		hg := m.GetHistogram()
		for _, b := range hg.GetBucket() {
			if le := b.GetUpperBound(); !math.IsInf(le, 1) { // the text format's +Inf bucket is the count
				h[le] += float64(b.GetCumulativeCount())
			}
		}
		h[math.Inf(1)] += float64(hg.GetSampleCount())
	}
}

func hasLabels(m *dto.Metric, match map[string]string) bool {
	n := 0
	for _, l := range m.GetLabel() {
		if v, ok := match[l.GetName()]; ok && v == l.GetValue() {
			n++
		}
	}
	return n == len(match)
}

// sub is what h counted since base, bound by bound.
func (h histogram) sub(base histogram) histogram {
	d := make(histogram, len(h))
	for le, n := range h {
		d[le] = n - base[le]
	}
	return d
}

// count is how many observations h holds.
func (h histogram) count() int64 { return int64(h[math.Inf(1)]) }

// quantile is the bucket holding the q-quantile of h's observations (the zero Quantile when h
// holds none).
func (h histogram) quantile(q float64) Quantile {
	total := h[math.Inf(1)]
	if total <= 0 {
		return Quantile{}
	}
	bounds := slices.Sorted(maps.Keys(h))
	over := 0.0
	for _, le := range bounds {
		if h[le] >= q*total {
			if math.IsInf(le, 1) {
				return Quantile{Over: over}
			}
			return Quantile{Over: over, AtMost: le}
		}
		over = le
	}
	return Quantile{Over: over}
}

// serverHistograms are the three histograms of ServerTimes, as read from the processes' /metrics.
type serverHistograms struct{ batch, commit, order histogram }

func newServerHistograms() serverHistograms {
	return serverHistograms{batch: histogram{}, commit: histogram{}, order: histogram{}}
}

func (s serverHistograms) add(families map[string]*dto.MetricFamily) {
	s.batch.add(families["pmx_shard_batch_seconds"], nil)
	s.commit.add(families["pmx_shard_commit_seconds"], nil)
	s.order.add(families["pmx_http_request_duration_seconds"], map[string]string{"route": orderRoute, "method": orderMethod})
}

// times is ServerTimes over what the histograms counted since base; nil when they counted no
// batch and no placement (a pmx build without them).
func (s serverHistograms) times(base serverHistograms) *ServerTimes {
	batch, commit, order := s.batch.sub(base.batch), s.commit.sub(base.commit), s.order.sub(base.order)
	if batch.count() <= 0 && order.count() <= 0 {
		return nil
	}
	t := &ServerTimes{Batches: batch.count(), Orders: order.count(), BatchP99: batch.quantile(0.99), OrderP99: order.quantile(0.99)}
	if n := commit.count(); n > 0 {
		q := commit.quantile(0.99)
		t.Commits, t.CommitP99 = n, &q
	}
	return t
}

// String says where the quantile lies: "at most 6.40ms" (over half that), or "over 3.28s".
func (q Quantile) String() string {
	if q.AtMost == 0 {
		if q.Over == 0 {
			return "-"
		}
		return "over " + formatUs(int64(math.Round(q.Over*1e6)))
	}
	return "at most " + formatUs(int64(math.Round(q.AtMost*1e6)))
}
