package loadgen

import (
	"sync"
	"time"

	hdrhistogram "github.com/HdrHistogram/hdrhistogram-go"
)

// Latency histograms record microseconds from 1µs to 60s with 3 significant digits; longer
// latencies are recorded as 60s.
const (
	histMinUs = 1
	histMaxUs = 60_000_000
	histSig   = 3
)

func newHist() *hdrhistogram.Histogram { return hdrhistogram.New(histMinUs, histMaxUs, histSig) }

func recordLatency(h *hdrhistogram.Histogram, d time.Duration) {
	us := max(histMinUs, min(histMaxUs, d.Microseconds()))
	_ = h.RecordValue(us) // in range by construction
}

// errKey identifies a class of error in the report.
type errKey struct {
	class  string // "rejected" (4xx) or "failed" (5xx, transport, bad response)
	kind   stepKind
	status int
	code   string
}

type kindCounts struct {
	hist                          *hdrhistogram.Histogram
	count, ok, rejected, failed   int64
	fills, filledQty, acknowledge int64 // placements only
}

// recorder gathers one bot's measurements. Only its bot writes to it; the progress reporter
// reads it once a second, hence the (uncontended) lock.
type recorder struct {
	mu    sync.Mutex
	kinds [numStepKinds]kindCounts
	errs  map[errKey]int64
}

func newRecorder() *recorder {
	r := &recorder{errs: make(map[errKey]int64)}
	for i := range r.kinds {
		r.kinds[i].hist = newHist()
	}
	return r
}

// record counts one request of kind k that started at start (the intended send time in open
// loop) and ended as res says. Latency is recorded for every request that got a response.
func (r *recorder) record(k stepKind, start time.Time, res *result) {
	r.mu.Lock()
	defer r.mu.Unlock()
	kc := &r.kinds[k]
	kc.count++
	if !res.transport {
		recordLatency(kc.hist, res.end.Sub(start))
	}
	switch {
	case res.ok() && res.code == "":
		kc.ok++
		return
	case res.rejected():
		kc.rejected++
		r.errs[errKey{class: "rejected", kind: k, status: res.status, code: res.code}]++
	default:
		kc.failed++
		r.errs[errKey{class: "failed", kind: k, status: res.status, code: res.code}]++
	}
}

// placed counts an acknowledged placement and the fills it reported.
func (r *recorder) placed(resp *orderResp) {
	r.mu.Lock()
	kc := &r.kinds[stepPlace]
	kc.acknowledge++
	kc.fills += int64(len(resp.Trades))
	kc.filledQty += resp.FilledQuantity
	r.mu.Unlock()
}

// snapshot is the progress reporter's view of all bots.
type snapshot struct {
	placed, rejected, failed int64
	p99                      time.Duration
}

// takeSnapshot sums the recorders, merging their placement latencies into scratch.
func takeSnapshot(recs []*recorder, scratch *hdrhistogram.Histogram) snapshot {
	var s snapshot
	scratch.Reset()
	for _, r := range recs {
		r.mu.Lock()
		for k := range r.kinds {
			s.rejected += r.kinds[k].rejected
			s.failed += r.kinds[k].failed
		}
		s.placed += r.kinds[stepPlace].acknowledge
		scratch.Merge(r.kinds[stepPlace].hist)
		r.mu.Unlock()
	}
	s.p99 = time.Duration(scratch.ValueAtQuantile(99)) * time.Microsecond
	return s
}
