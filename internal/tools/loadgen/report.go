package loadgen

import (
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	hdrhistogram "github.com/HdrHistogram/hdrhistogram-go"
)

// Report is the outcome of a run. Latencies are in microseconds; rates are per second of the
// measured run (from the bots' start, or the end of the warm-up, to the last response), which
// StartedAt and Seconds give.
type Report struct {
	URL         string    `json:"url"`
	StartedAt   time.Time `json:"startedAt"`
	Seconds     float64   `json:"seconds"`
	Bots        int       `json:"bots"`
	Markets     int       `json:"markets"`
	Mix         Mix       `json:"mix"`                  // the bots' choice of steps (see Mixes)
	Mode        string    `json:"mode"`                 // "closed" or "open" loop
	TargetRate  float64   `json:"targetRate,omitempty"` // open loop: placements/s asked for
	Seed        uint64    `json:"seed"`
	StopReason  string    `json:"stopReason"` // "duration", "orders" or "interrupted"
	Interrupted bool      `json:"interrupted"`

	// Requests has one entry per request kind of the mix, in a fixed order; Total sums them.
	Requests []KindStats `json:"requests"`
	Total    KindStats   `json:"total"`

	// Orders counts the placements acknowledged (2xx), alone or in batches: a batch counts each
	// of its placements, as many orders as it placed.
	Orders         int64   `json:"orders"`
	OrdersPerSec   float64 `json:"ordersPerSec"` // Orders / Seconds
	Fills          int64   `json:"fills"`        // trades reported in placement and amend responses
	FilledQuantity int64   `json:"filledQuantity"`
	// Rejected counts 4xx business rejections: of requests, and of the placements and cancels
	// refused inside an answered batch, each on its own. Failed counts 5xx answers, transport
	// errors and unreadable responses, with the placements of a batch that failed on their own.
	Rejected int64        `json:"rejected"`
	Failed   int64        `json:"failed"`
	Errors   []ErrorCount `json:"errors"`

	Setup SetupStats `json:"setup"`
	// Warmup, with Config.Warmup, is what the warm-up before the measured run did.
	Warmup *WarmupStats `json:"warmup,omitempty"`

	// SendLag (open loop only) is how late the requests left after they were due, as the load
	// generator kept its schedule; every latency above is timed from when its request was due.
	SendLag *LagStats `json:"sendLag,omitempty"`
}

// LagStats describe how well an open loop kept its schedule. Each bot sends one request at a
// time, so a request comes due either while its bot is idle, and then leaves when the pacer wakes
// the bot (OnTime, with the quantiles of how late it left: the load generator's own delay), or
// while the bot still waits for its last answer, and then leaves when that answer comes (Behind:
// the exchange fell behind the offered rate, and the latency of such a request counts the wait).
type LagStats struct {
	OnTime int64 `json:"onTime"`
	P50Us  int64 `json:"p50Us"`
	P99Us  int64 `json:"p99Us"`
	MaxUs  int64 `json:"maxUs"`
	Behind int64 `json:"behind"`
}

// KindStats are the counts and latencies of one kind of request.
type KindStats struct {
	Kind     string  `json:"kind"`
	Count    int64   `json:"count"` // requests sent (those aborted by an interrupt excluded)
	OK       int64   `json:"ok"`
	Rejected int64   `json:"rejected"`
	Failed   int64   `json:"failed"`
	PerSec   float64 `json:"perSec"`
	// For requests that carry several placements or cancels (place-batch, cancel-batch,
	// cancel-market): how many the answered ones carried, and how each was answered on its own
	// (done, refused by the exchange's rules, failed). Zero for the other kinds.
	Items         int64   `json:"items,omitempty"`
	ItemsOK       int64   `json:"itemsOk,omitempty"`
	ItemsRejected int64   `json:"itemsRejected,omitempty"`
	ItemsFailed   int64   `json:"itemsFailed,omitempty"`
	MeanUs        float64 `json:"meanUs"`
	P50Us         int64   `json:"p50Us"`
	P99Us         int64   `json:"p99Us"`
	P999Us        int64   `json:"p999Us"`
	MaxUs         int64   `json:"maxUs"`
}

// ErrorCount counts the requests of one kind that ended with one status and code. Class is
// "rejected" for 4xx answers, "failed" for 5xx answers, transport errors (status 0, code the
// kind of transport error) and 2xx answers that could not be read (code bad_response). Item marks
// the placements or cancels inside answered batch requests of the kind, refused or failed on their
// own: a refused placement's status and code, or a refused cancel's code (status 0: a batch
// cancel's refusals carry none).
type ErrorCount struct {
	Class  string `json:"class"`
	Kind   string `json:"kind"`
	Item   bool   `json:"item,omitempty"`
	Status int    `json:"status"`
	Code   string `json:"code"`
	Count  int64  `json:"count"`
}

// SetupStats describes the preparation before the measured run.
type SetupStats struct {
	Accounts int     `json:"accounts"`
	Seconds  float64 `json:"seconds"`
}

// WarmupStats are the warm-up's placements (single, and in batches), acknowledged and refused,
// and the latency of the single ones: on an exchange just started, its cold start.
type WarmupStats struct {
	Seconds      float64 `json:"seconds"`
	Orders       int64   `json:"orders"`
	OrdersPerSec float64 `json:"ordersPerSec"` // Orders / Seconds
	Rejected     int64   `json:"rejected"`
	Failed       int64   `json:"failed"`
	P50Us        int64   `json:"p50Us"`
	P99Us        int64   `json:"p99Us"`
	MaxUs        int64   `json:"maxUs"`
}

// warmupStats sums the warm-up's recorders over its time.
func warmupStats(recs []*recorder, kinds []stepKind, d time.Duration) *WarmupStats {
	r := &Report{Seconds: d.Seconds()}
	r.build(recs, kinds)
	w := &WarmupStats{Seconds: r.Seconds, Orders: r.Orders, OrdersPerSec: r.OrdersPerSec, Rejected: r.Rejected, Failed: r.Failed}
	for _, k := range r.Requests {
		if k.Kind == stepPlace.String() {
			w.P50Us, w.P99Us, w.MaxUs = k.P50Us, k.P99Us, k.MaxUs
		}
	}
	return w
}

// fill computes the kind's statistics from its histogram.
func (k *KindStats) fill(h *hdrhistogram.Histogram, seconds float64) {
	if seconds > 0 {
		k.PerSec = float64(k.Count) / seconds
	}
	if h.TotalCount() == 0 {
		return
	}
	k.MeanUs = h.Mean()
	k.P50Us = h.ValueAtQuantile(50)
	k.P99Us = h.ValueAtQuantile(99)
	k.P999Us = h.ValueAtQuantile(99.9)
	k.MaxUs = h.Max()
}

// build merges the bots' recorders into r, listing the request kinds of the mix in its order (and
// any other kind that was sent, which no mix does).
func (r *Report) build(recs []*recorder, kinds []stepKind) {
	total := newHist()
	r.Total = KindStats{Kind: "all"}
	errs := make(map[errKey]int64)
	listed := [numStepKinds]bool{}
	for _, k := range kinds {
		listed[k] = true
	}
	for _, rec := range recs {
		for k := range numStepKinds {
			if rec.kinds[k].count > 0 && !listed[k] {
				listed[k] = true
				kinds = append(kinds, k)
			}
		}
	}
	for _, k := range kinds {
		h := newHist()
		ks := KindStats{Kind: k.String()}
		for _, rec := range recs {
			c := &rec.kinds[k]
			h.Merge(c.hist)
			ks.Count += c.count
			ks.OK += c.ok
			ks.Rejected += c.rejected
			ks.Failed += c.failed
			ks.ItemsOK += c.itemsOK
			ks.ItemsRejected += c.itemsRejected
			ks.ItemsFailed += c.itemsFailed
			r.Orders += c.acknowledge
			r.Fills += c.fills
			r.FilledQuantity += c.filledQty
		}
		ks.Items = ks.ItemsOK + ks.ItemsRejected + ks.ItemsFailed
		ks.fill(h, r.Seconds)
		r.Requests = append(r.Requests, ks)
		total.Merge(h)
		r.Total.Count += ks.Count
		r.Total.OK += ks.OK
		r.Total.Rejected += ks.Rejected
		r.Total.Failed += ks.Failed
		r.Total.Items += ks.Items
		r.Total.ItemsOK += ks.ItemsOK
		r.Total.ItemsRejected += ks.ItemsRejected
		r.Total.ItemsFailed += ks.ItemsFailed
	}
	r.Total.fill(total, r.Seconds)
	if r.Mode == "open" {
		lag, l := newHist(), &LagStats{}
		for _, rec := range recs {
			lag.Merge(rec.lag)
			l.Behind += rec.lagBehind
		}
		l.OnTime = lag.TotalCount()
		if l.OnTime > 0 {
			l.P50Us, l.P99Us, l.MaxUs = lag.ValueAtQuantile(50), lag.ValueAtQuantile(99), lag.Max()
		}
		if l.OnTime+l.Behind > 0 {
			r.SendLag = l
		}
	}
	r.Rejected = r.Total.Rejected + r.Total.ItemsRejected
	r.Failed = r.Total.Failed + r.Total.ItemsFailed
	if r.Seconds > 0 {
		r.OrdersPerSec = float64(r.Orders) / r.Seconds
	}
	for _, rec := range recs {
		for k, n := range rec.errs {
			errs[k] += n
		}
	}
	r.Errors = make([]ErrorCount, 0, len(errs))
	for k, n := range errs {
		r.Errors = append(r.Errors, ErrorCount{Class: k.class, Kind: k.kind.String(), Item: k.item, Status: k.status, Code: k.code, Count: n})
	}
	sortErrors(r.Errors)
}

// sortErrors orders failures before rejections, then by count, descending.
func sortErrors(es []ErrorCount) {
	slices.SortFunc(es, func(a, b ErrorCount) int {
		return cmp.Or(
			cmp.Compare(a.Class, b.Class), // "failed" < "rejected"
			cmp.Compare(b.Count, a.Count),
			cmp.Compare(a.Kind, b.Kind),
			compareBool(a.Item, b.Item),
			cmp.Compare(a.Status, b.Status),
			cmp.Compare(a.Code, b.Code),
		)
	})
}

func compareBool(a, b bool) int {
	switch {
	case a == b:
		return 0
	case a:
		return 1
	}
	return -1
}

// WriteJSON writes the report as an indented JSON object.
func (r *Report) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

// WriteText writes the report as a table for people.
func (r *Report) WriteText(w io.Writer) error {
	var b strings.Builder
	mode := "closed loop"
	if r.Mode == "open" {
		mode = fmt.Sprintf("open loop at %s orders/s", formatFloat(r.TargetRate))
	}
	fmt.Fprintf(&b, "pmxtools loadgen  %s  %d bots  %d markets  %s mix  %s  %.1fs  seed %d  stopped by %s\n\n",
		r.URL, r.Bots, r.Markets, cmp.Or(r.Mix, MixBasic), mode, r.Seconds, r.Seed, r.StopReason)

	const row = "%-13s %10s %10s %10s %9s %7s %9s %9s %9s %9s\n"
	fmt.Fprintf(&b, row, "request", "count", "rate/s", "ok", "rejected", "failed", "p50", "p99", "p99.9", "max")
	line := func(k *KindStats) {
		fmt.Fprintf(&b, row, k.Kind, FormatInt(k.Count), FormatRate(k.PerSec), FormatInt(k.OK),
			FormatInt(k.Rejected), FormatInt(k.Failed),
			formatLatency(k, k.P50Us), formatLatency(k, k.P99Us), formatLatency(k, k.P999Us), formatLatency(k, k.MaxUs))
	}
	for i := range r.Requests {
		line(&r.Requests[i])
	}
	line(&r.Total)

	batched := r.Total.Items > 0
	if batched {
		const irow = "%-13s %10s %10s %10s %9s %7s\n"
		fmt.Fprintf(&b, "\n"+irow, "in batches", "answered", "items", "ok", "rejected", "failed")
		for _, k := range r.Requests {
			if k.Items > 0 {
				fmt.Fprintf(&b, irow, k.Kind, FormatInt(k.OK), FormatInt(k.Items), FormatInt(k.ItemsOK),
					FormatInt(k.ItemsRejected), FormatInt(k.ItemsFailed))
			}
		}
	}

	inBatches := ""
	for _, k := range r.Requests {
		if k.Kind == stepPlaceBatch.String() && k.ItemsOK > 0 {
			inBatches = ", " + FormatInt(k.ItemsOK) + " of them in batches"
		}
	}
	fmt.Fprintf(&b, "\n%-16s %s  (placements acknowledged: %s%s)\n", "orders/s", FormatRate(r.OrdersPerSec), FormatInt(r.Orders), inBatches)
	fmt.Fprintf(&b, "%-16s %s trades, %s shares\n", "fills seen", FormatInt(r.Fills), FormatInt(r.FilledQuantity))
	itemsToo := ""
	if batched {
		itemsToo = "; each refused placement or cancel of a batch counts"
	}
	fmt.Fprintf(&b, "%-16s %s  (4xx business rejections%s)\n", "rejected", FormatInt(r.Rejected), itemsToo)
	fmt.Fprintf(&b, "%-16s %s  (5xx, transport errors, unreadable responses)\n", "failed", FormatInt(r.Failed))
	var limited int64
	for _, e := range r.Errors {
		if e.Status == http.StatusTooManyRequests {
			limited += e.Count
		}
	}
	if limited > 0 {
		fmt.Fprintf(&b, "%-16s %s  (429: the exchange's rate limits were in force and the figures are capped by them;\n%-16s  start pmx dev or pmx api with --read-rate 0 --write-rate 0 to measure capacity)\n",
			"rate limited", FormatInt(limited), "")
	}
	if len(r.Errors) > 0 {
		const erow = "  %-9s %-19s %6s  %-24s %10s\n"
		fmt.Fprintf(&b, "\nerrors\n"+erow, "class", "request", "status", "code", "count")
		for _, e := range r.Errors {
			status, code, kind := strconv.Itoa(e.Status), e.Code, e.Kind
			if e.Status == 0 {
				status = "-"
			}
			if code == "" {
				code = "-"
			}
			if e.Item {
				kind += " (item)"
			}
			fmt.Fprintf(&b, erow, e.Class, kind, status, code, FormatInt(e.Count))
		}
	}
	if l := r.SendLag; l != nil {
		us := func(v int64) string { return FormatLatency(time.Duration(v) * time.Microsecond) }
		if l.OnTime > 0 {
			fmt.Fprintf(&b, "%-16s p50 %s  p99 %s  max %s  (how late the load generator sent the %s requests due while their bot was idle)\n",
				"send lag", us(l.P50Us), us(l.P99Us), us(l.MaxUs), FormatInt(l.OnTime))
		}
		if l.Behind > 0 {
			fmt.Fprintf(&b, "%-16s %s requests came due while their bot still awaited its last answer: the exchange fell behind\n%-16s the offered rate, and their latencies count the wait\n",
				"behind", FormatInt(l.Behind), "")
		}
	}
	if w := r.Warmup; w != nil {
		us := func(v int64) string { return FormatLatency(time.Duration(v) * time.Microsecond) }
		fmt.Fprintf(&b, "%-16s %.1fs before the measured run, not in its figures: %s orders, %s rejected, %s failed; placement p50 %s  p99 %s  max %s\n",
			"warm-up", w.Seconds, FormatInt(w.Orders), FormatInt(w.Rejected), FormatInt(w.Failed), us(w.P50Us), us(w.P99Us), us(w.MaxUs))
	}
	fmt.Fprintf(&b, "\nlatency: %s; setup: %d accounts in %.1fs\n", latencyNote(r.Mode), r.Setup.Accounts, r.Setup.Seconds)
	_, err := io.WriteString(w, b.String())
	return err
}

func latencyNote(mode string) string {
	if mode == "open" {
		return "from each request's intended send time to its last response byte (corrected for coordinated omission)"
	}
	return "from send to last response byte"
}

func formatLatency(k *KindStats, us int64) string {
	if k.MaxUs == 0 { // no response was timed
		return "-"
	}
	return FormatLatency(time.Duration(us) * time.Microsecond)
}

// FormatLatency prints a latency with three significant digits (e.g. 842µs, 4.43ms, 13.9ms, 1.46s).
func FormatLatency(d time.Duration) string {
	us := float64(d) / float64(time.Microsecond)
	switch {
	case us < 1000:
		return strconv.FormatFloat(us, 'f', 0, 64) + "µs"
	case us < 10_000:
		return strconv.FormatFloat(us/1000, 'f', 2, 64) + "ms"
	case us < 100_000:
		return strconv.FormatFloat(us/1000, 'f', 1, 64) + "ms"
	case us < 1_000_000:
		return strconv.FormatFloat(us/1000, 'f', 0, 64) + "ms"
	}
	return strconv.FormatFloat(us/1e6, 'f', 2, 64) + "s"
}

// FormatInt prints n with thousands separators.
func FormatInt(n int64) string {
	s := strconv.FormatInt(n, 10)
	neg := strings.HasPrefix(s, "-")
	if neg {
		s = s[1:]
	}
	var b strings.Builder
	if neg {
		b.WriteByte('-')
	}
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	return b.String()
}

// FormatRate prints a rate with thousands separators and one decimal.
func FormatRate(f float64) string {
	whole := int64(f)
	tenth := int64((f-float64(whole))*10 + 0.5)
	if tenth == 10 {
		whole, tenth = whole+1, 0
	}
	return FormatInt(whole) + "." + strconv.FormatInt(tenth, 10)
}

func formatFloat(f float64) string { return strconv.FormatFloat(f, 'f', -1, 64) }
