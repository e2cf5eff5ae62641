package loadgen

import (
	"slices"
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
	item   bool // one placement or cancel of a batch request, not the request
}

type kindCounts struct {
	hist                        *hdrhistogram.Histogram
	count, ok, rejected, failed int64
	// The placements or cancels that the kind's answered batch requests carried, by outcome.
	itemsOK, itemsRejected, itemsFailed int64
	acknowledge                         int64 // placements acknowledged, in requests of this kind
	fills, filledQty                    int64 // trades in its answers (placements and amends)
}

// recorder gathers one bot's measurements. Only its bot writes to it; the progress reporter
// reads it once a second, hence the (uncontended) lock.
type recorder struct {
	mu    sync.Mutex
	kinds [numStepKinds]kindCounts
	errs  map[errKey]int64
	// Open loop: how late each request whose bot was idle when it came due left, and how many
	// came due while their bot still waited for its last answer.
	lag       *hdrhistogram.Histogram
	lagBehind int64
}

func newRecorder() *recorder {
	r := &recorder{errs: make(map[errKey]int64), lag: newHist()}
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

// lagged records how late an open-loop request left after it was due, its bot having been idle.
func (r *recorder) lagged(d time.Duration) {
	r.mu.Lock()
	recordLatency(r.lag, d)
	r.mu.Unlock()
}

// behind counts an open-loop request that came due while its bot still waited for its last answer.
func (r *recorder) behind() {
	r.mu.Lock()
	r.lagBehind++
	r.mu.Unlock()
}

// placed counts an acknowledged placement, alone (stepPlace) or in a batch (stepPlaceBatch), and
// the fills it reported.
func (r *recorder) placed(k stepKind, resp *orderResp) {
	r.mu.Lock()
	kc := &r.kinds[k]
	kc.acknowledge++
	kc.fills += int64(len(resp.Trades))
	kc.filledQty += resp.FilledQuantity
	r.mu.Unlock()
}

// amended counts the fills of an accepted amend whose new price crossed.
func (r *recorder) amended(resp *orderResp) {
	var qty int64
	for _, t := range resp.Trades {
		qty += t.Quantity
	}
	r.mu.Lock()
	kc := &r.kinds[stepAmend]
	kc.fills += int64(len(resp.Trades))
	kc.filledQty += qty
	r.mu.Unlock()
}

// item counts one placement or cancel of an answered batch request of kind k by its own answer:
// done (ok), refused by the exchange's rules (a 4xx of its own, or a cancel's refusal) or failed
// (a 5xx of its own). A refusal or failure is also counted by status and code, as the requests'
// errors are, so that none is lost inside a 2xx answer.
func (r *recorder) item(k stepKind, ok, rejected bool, status int, code string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	kc := &r.kinds[k]
	switch {
	case ok:
		kc.itemsOK++
	case rejected:
		kc.itemsRejected++
		r.errs[errKey{class: "rejected", kind: k, status: status, code: code, item: true}]++
	default:
		kc.itemsFailed++
		r.errs[errKey{class: "failed", kind: k, status: status, code: code, item: true}]++
	}
}

// sinceQuantile is the q-th percentile of the latencies recorded between two exports of one
// cumulative histogram, before (nil: none) and now; 0 when none was recorded in between.
func sinceQuantile(now, before *hdrhistogram.Snapshot, q float64) time.Duration {
	d := *now
	d.Counts = slices.Clone(now.Counts)
	if before != nil {
		for i := range min(len(d.Counts), len(before.Counts)) {
			d.Counts[i] -= before.Counts[i]
		}
	}
	h := hdrhistogram.Import(&d)
	if h.TotalCount() == 0 {
		return 0
	}
	return time.Duration(h.ValueAtQuantile(q)) * time.Microsecond
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
			kc := &r.kinds[k]
			s.rejected += kc.rejected + kc.itemsRejected
			s.failed += kc.failed + kc.itemsFailed
			s.placed += kc.acknowledge
		}
		scratch.Merge(r.kinds[stepPlace].hist)
		r.mu.Unlock()
	}
	s.p99 = time.Duration(scratch.ValueAtQuantile(99)) * time.Microsecond
	return s
}
