package loadgen

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	hdrhistogram "github.com/HdrHistogram/hdrhistogram-go"
)

func testReport(t *testing.T) *Report {
	t.Helper()
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	a, b := newRecorder(), newRecorder()
	ok := func(status int, us int64) *result {
		return &result{status: status, end: t0.Add(time.Duration(us) * time.Microsecond)}
	}
	// 100 placements on a: 1ms each, one 250ms outlier, 3 rejected for funds.
	for i := range 100 {
		us := int64(1000)
		if i == 99 {
			us = 250_000
		}
		res := ok(201, us)
		if i < 3 {
			res = ok(400, 900)
			res.code = "insufficient_funds"
		} else {
			a.placed(stepPlace, &orderResp{FilledQuantity: 2, Trades: []tradeResp{{Quantity: 2}}})
		}
		a.record(stepPlace, t0, res)
	}
	// On b: cancels, one not open any more; a 500; a refused connection; an unreadable answer.
	for range 10 {
		b.record(stepCancel, t0, ok(200, 800))
	}
	notOpen := ok(400, 700)
	notOpen.code = "order_not_open"
	b.record(stepCancel, t0, notOpen)
	b.record(stepPositions, t0, ok(500, 3000))
	b.record(stepBook, t0, &result{transport: true, code: "connection_refused", err: errors.New("refused")})
	bad := ok(200, 400)
	bad.code = "bad_response"
	b.record(stepTrades, t0, bad)

	r := &Report{URL: "http://127.0.0.1:8080", StartedAt: t0, Seconds: 2, Bots: 2, Markets: 3,
		Mode: "closed", Seed: 42, StopReason: "duration", Setup: SetupStats{Accounts: 2, Seconds: 0.25}}
	r.build([]*recorder{a, b}, mixSpecs[MixBasic].kinds)
	return r
}

func TestReportTotals(t *testing.T) {
	r := testReport(t)
	if r.Orders != 97 || r.OrdersPerSec != 48.5 || r.Fills != 97 || r.FilledQuantity != 194 {
		t.Errorf("orders %d (%.1f/s), fills %d, filled %d; want 97 (48.5/s), 97, 194",
			r.Orders, r.OrdersPerSec, r.Fills, r.FilledQuantity)
	}
	if r.Rejected != 4 || r.Failed != 3 {
		t.Errorf("rejected %d failed %d, want 4 and 3", r.Rejected, r.Failed)
	}
	place := r.Requests[stepPlace]
	if place.Kind != "place" || place.Count != 100 || place.OK != 97 || place.Rejected != 3 || place.PerSec != 50 {
		t.Errorf("place stats %+v", place)
	}
	if place.P50Us != 1000 || place.P99Us != 1000 || place.MaxUs < 249_000 || place.MaxUs > 251_000 {
		t.Errorf("place latencies p50 %d p99 %d max %d", place.P50Us, place.P99Us, place.MaxUs)
	}
	book := r.Requests[stepBook]
	if book.Count != 1 || book.Failed != 1 || book.MaxUs != 0 {
		t.Errorf("a transport error is counted but not timed: %+v", book)
	}
	if r.Total.Count != 114 || r.Total.OK != 107 {
		t.Errorf("total %+v", r.Total)
	}
	want := []ErrorCount{
		{"failed", "order-book", false, 0, "connection_refused", 1},
		{"failed", "positions", false, 500, "", 1},
		{"failed", "trades", false, 200, "bad_response", 1},
		{"rejected", "place", false, 400, "insufficient_funds", 3},
		{"rejected", "cancel", false, 400, "order_not_open", 1},
	}
	if !reflect.DeepEqual(r.Errors, want) {
		t.Errorf("errors\n got %+v\nwant %+v", r.Errors, want)
	}
}

func TestReportText(t *testing.T) {
	var out bytes.Buffer
	if err := testReport(t).WriteText(&out); err != nil {
		t.Fatal(err)
	}
	text := out.String()
	for _, want := range []string{
		"pmxtools loadgen  http://127.0.0.1:8080  2 bots  3 markets  basic mix  closed loop  2.0s  seed 42  stopped by duration",
		"request            count     rate/s         ok  rejected  failed       p50       p99     p99.9       max",
		"place                100       50.0         97         3       0    1.00ms    1.00ms     250ms     250ms",
		"order-book             1        0.5          0         0       1         -         -         -         -",
		"all                  114       57.0        107         4       3",
		"orders/s         48.5  (placements acknowledged: 97)\n",
		"fills seen       97 trades, 194 shares",
		"rejected         4  (4xx business rejections)\n",
		"failed           3  (5xx, transport errors, unreadable responses)",
		"  failed    order-book               -  connection_refused                1",
		"  failed    positions              500  -                                 1",
		"  rejected  place                  400  insufficient_funds                3",
		"latency: from send to last response byte; setup: 2 accounts in 0.2s",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("report lacks %q:\n%s", want, text)
		}
	}
	if strings.Contains(text, "in batches") || strings.Contains(text, "place-batch") {
		t.Errorf("a report of the basic mix speaks of batches:\n%s", text)
	}
}

func TestReportJSON(t *testing.T) {
	r := testReport(t)
	var out bytes.Buffer
	if err := r.WriteJSON(&out); err != nil {
		t.Fatal(err)
	}
	var back Report
	if err := json.Unmarshal(out.Bytes(), &back); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	if !reflect.DeepEqual(&back, r) {
		t.Errorf("JSON round trip differs:\n%s", out.String())
	}
	for _, key := range []string{`"ordersPerSec": 48.5`, `"p99Us": 1000`, `"kind": "cancel-all"`, `"stopReason": "duration"`} {
		if !strings.Contains(out.String(), key) {
			t.Errorf("JSON lacks %s:\n%s", key, out.String())
		}
	}
}

func TestOpenLoopReportSaysHowLatencyIsMeasured(t *testing.T) {
	r := testReport(t)
	r.Mode, r.TargetRate = "open", 2500
	var out bytes.Buffer
	if err := r.WriteText(&out); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"open loop at 2500 orders/s", "intended send time", "coordinated omission"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("report lacks %q:\n%s", want, out.String())
		}
	}
}

func TestLatencyIsClampedIntoTheHistogram(t *testing.T) {
	h := newHist()
	recordLatency(h, 0)
	recordLatency(h, 2*time.Minute)
	if h.TotalCount() != 2 || h.Min() != histMinUs || !h.ValuesAreEquivalent(h.Max(), histMaxUs) {
		t.Errorf("count %d min %d max %d", h.TotalCount(), h.Min(), h.Max())
	}
}

func TestSnapshot(t *testing.T) {
	a, b := newRecorder(), newRecorder()
	t0 := time.Now()
	for i := range 200 {
		rec := a
		if i%2 == 1 {
			rec = b
		}
		res := &result{status: 201, end: t0.Add(time.Duration(i+1) * time.Millisecond)}
		rec.record(stepPlace, t0, res)
		rec.placed(stepPlace, &orderResp{})
	}
	b.record(stepCancel, t0, &result{status: 400, code: "order_not_open", end: t0})
	s := takeSnapshot([]*recorder{a, b}, hdrhistogram.New(histMinUs, histMaxUs, histSig))
	if s.placed != 200 || s.rejected != 1 || s.failed != 0 {
		t.Errorf("snapshot %+v", s)
	}
	if s.p99 < 197*time.Millisecond || s.p99 > 199*time.Millisecond {
		t.Errorf("p99 %v, want ~198ms", s.p99)
	}
}

// TestSinceQuantile takes the p99 of what a cumulative histogram recorded between two exports,
// as the progress line's "this second" does: not the run's so far.
func TestSinceQuantile(t *testing.T) {
	h := newHist()
	for i := range 100 {
		recordLatency(h, time.Duration(i+1)*time.Millisecond)
	}
	first := h.Export()
	for range 100 {
		recordLatency(h, 200*time.Millisecond)
	}
	second := h.Export()
	near := func(d, want time.Duration) bool { return d > want*99/100 && d < want*101/100 }
	if d := sinceQuantile(first, nil, 99); !near(d, 99*time.Millisecond) {
		t.Errorf("from the start: p99 %v, want ~99ms", d)
	}
	if d := sinceQuantile(second, first, 99); !near(d, 200*time.Millisecond) {
		t.Errorf("since the first export: p99 %v, want ~200ms", d)
	}
	if d := sinceQuantile(second, first, 0); !near(d, 200*time.Millisecond) {
		t.Errorf("since the first export: min %v, want ~200ms (none of the first's)", d)
	}
	if d := sinceQuantile(second, second, 99); d != 0 {
		t.Errorf("nothing recorded in between: %v, want 0", d)
	}
	if d := sinceQuantile(first, nil, 50); !near(d, 50*time.Millisecond) || !near(sinceQuantile(first, nil, 99), 99*time.Millisecond) {
		t.Errorf("an export was changed by a quantile taken from it: p50 %v", d)
	}
}

// TestProgressClosingLine: a phase that closes with a line (the warm-up) shows even when it ends
// before the first second's line; one that does not writes nothing then. done is closed before
// the call, so no tick can come first.
func TestProgressClosingLine(t *testing.T) {
	rec := newRecorder()
	t0 := time.Now()
	rec.record(stepPlace, t0, &result{status: 201, end: t0.Add(3 * time.Millisecond)})
	rec.placed(stepPlace, &orderResp{})
	done := make(chan struct{})
	close(done)
	var closing, plain bytes.Buffer
	reportProgress(&closing, "warm-up ", true, []*recorder{rec}, t0, done)
	reportProgress(&plain, "", false, []*recorder{rec}, t0, done)
	if got := closing.String(); !strings.HasPrefix(got, "warm-up      0s  orders 1  ") || !strings.Contains(got, "(this second 3.00ms)") ||
		strings.Count(got, "\n") != 1 {
		t.Errorf("the closing line: %q", got)
	}
	if plain.Len() != 0 {
		t.Errorf("a phase without a closing line wrote %q", plain.String())
	}
}

func TestFormatting(t *testing.T) {
	for _, c := range []struct {
		got, want string
	}{
		{FormatInt(0), "0"},
		{FormatInt(999), "999"},
		{FormatInt(1000), "1,000"},
		{FormatInt(-1234567), "-1,234,567"},
		{FormatRate(1234.96), "1,235.0"},
		{FormatRate(0.25), "0.3"},
		{FormatLatency(850 * time.Microsecond), "850µs"},
		{FormatLatency(4123 * time.Microsecond), "4.12ms"},
		{FormatLatency(41234 * time.Microsecond), "41.2ms"},
		{FormatLatency(412345 * time.Microsecond), "412ms"},
		{FormatLatency(1500 * time.Millisecond), "1.50s"},
	} {
		if c.got != c.want {
			t.Errorf("got %q, want %q", c.got, c.want)
		}
	}
}

// testBatchReport is a report of the market-maker mix: batches whose placements and cancels are
// answered each on its own, some refused inside a 201 or 200, and amends that traded.
func testBatchReport(t *testing.T) *Report {
	t.Helper()
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	rec := newRecorder()
	at := func(status int, us int64) *result {
		return &result{status: status, end: t0.Add(time.Duration(us) * time.Microsecond)}
	}
	// 10 batches of 4 placements: 37 placed (each with one fill of 2), 2 at the limit of open
	// orders, 1 failed on its own; then one batch refused as a whole.
	n := 0
	for range 10 {
		rec.record(stepPlaceBatch, t0, at(201, 2000))
		for range 4 {
			n++
			switch n {
			case 5, 17:
				rec.item(stepPlaceBatch, false, true, 400, "too_many_open_orders")
			case 30:
				rec.item(stepPlaceBatch, false, false, 503, "unavailable")
			default:
				rec.placed(stepPlaceBatch, &orderResp{FilledQuantity: 2, Trades: []tradeResp{{Quantity: 2}}})
				rec.item(stepPlaceBatch, true, false, 201, "")
			}
		}
	}
	whole := at(400, 500)
	whole.code = "out_of_range"
	rec.record(stepPlaceBatch, t0, whole)
	// 3 single placements; 5 amends, one of which traded 3 shares in two fills, one refused.
	for range 3 {
		rec.record(stepPlace, t0, at(201, 1000))
		rec.placed(stepPlace, &orderResp{})
	}
	for i := range 5 {
		if i == 4 {
			notOpen := at(400, 700)
			notOpen.code = "order_not_open"
			rec.record(stepAmend, t0, notOpen)
			continue
		}
		rec.record(stepAmend, t0, at(200, 1500))
		if i == 0 {
			rec.amended(&orderResp{Trades: []tradeResp{{Quantity: 1}, {Quantity: 2}}})
		}
	}
	// 2 batch cancels of 3: 5 cancelled, 1 no longer open; a market's cancel of 4.
	for i := range 6 {
		if i == 0 {
			rec.record(stepCancelBatch, t0, at(200, 900))
		}
		if i == 3 {
			rec.record(stepCancelBatch, t0, at(200, 900))
		}
		rec.item(stepCancelBatch, i != 4, i == 4, 0, map[bool]string{true: "order_not_open"}[i == 4])
	}
	rec.record(stepCancelMarket, t0, at(200, 1100))
	for range 4 {
		rec.item(stepCancelMarket, true, false, 0, "")
	}
	r := &Report{URL: "http://127.0.0.1:8080", StartedAt: t0, Seconds: 2, Bots: 1, Markets: 2, Mix: MixMarketMaker,
		Mode: "closed", Seed: 3, StopReason: "duration", Setup: SetupStats{Accounts: 1, Seconds: 0.1}}
	r.build([]*recorder{rec}, mixSpecs[MixMarketMaker].kinds)
	return r
}

func TestReportCountsBatchesByItem(t *testing.T) {
	r := testBatchReport(t)
	var kinds []string
	for _, k := range r.Requests {
		kinds = append(kinds, k.Kind)
	}
	if want := []string{"place", "place-batch", "amend", "cancel-batch", "cancel-market", "order-book", "trades", "positions"}; !reflect.DeepEqual(kinds, want) {
		t.Fatalf("kinds %v, want the market-maker mix's %v", kinds, want)
	}
	// A batch counts its placements in orders/s; the amend's trades are fills.
	if r.Orders != 40 || r.OrdersPerSec != 20 || r.Fills != 37+2 || r.FilledQuantity != 74+3 {
		t.Errorf("orders %d (%.1f/s), fills %d, filled %d; want 40 (20/s), 39, 77", r.Orders, r.OrdersPerSec, r.Fills, r.FilledQuantity)
	}
	batch := r.Requests[1]
	if batch.Count != 11 || batch.OK != 10 || batch.Rejected != 1 || batch.Items != 40 || batch.ItemsOK != 37 ||
		batch.ItemsRejected != 2 || batch.ItemsFailed != 1 {
		t.Errorf("place-batch %+v", batch)
	}
	if c := r.Requests[3]; c.Count != 2 || c.Items != 6 || c.ItemsOK != 5 || c.ItemsRejected != 1 {
		t.Errorf("cancel-batch %+v", c)
	}
	if c := r.Requests[4]; c.Count != 1 || c.Items != 4 || c.ItemsOK != 4 {
		t.Errorf("cancel-market %+v", c)
	}
	// Rejected: the whole batch, the amend, and the three refused inside answered batches.
	if r.Rejected != 1+1+3 || r.Failed != 1 || r.Total.Items != 50 {
		t.Errorf("rejected %d, failed %d, items %d; want 5, 1, 50", r.Rejected, r.Failed, r.Total.Items)
	}
	want := []ErrorCount{
		{"failed", "place-batch", true, 503, "unavailable", 1},
		{"rejected", "place-batch", true, 400, "too_many_open_orders", 2},
		{"rejected", "amend", false, 400, "order_not_open", 1},
		{"rejected", "cancel-batch", true, 0, "order_not_open", 1},
		{"rejected", "place-batch", false, 400, "out_of_range", 1},
	}
	if !reflect.DeepEqual(r.Errors, want) {
		t.Errorf("errors\n got %+v\nwant %+v", r.Errors, want)
	}

	var out bytes.Buffer
	if err := r.WriteText(&out); err != nil {
		t.Fatal(err)
	}
	text := out.String()
	for _, want := range []string{
		"1 bots  2 markets  market-maker mix  closed loop",
		"place-batch           11        5.5         10         1       0    2.00ms    2.00ms    2.00ms    2.00ms",
		"cancel-market          1        0.5          1         0       0",
		"in batches      answered      items         ok  rejected  failed",
		"place-batch           10         40         37         2       1",
		"cancel-batch           2          6          5         1       0",
		"cancel-market          1          4          4         0       0",
		"orders/s         20.0  (placements acknowledged: 40, 37 of them in batches)",
		"rejected         5  (4xx business rejections; each refused placement or cancel of a batch counts)",
		"  failed    place-batch (item)     503  unavailable                       1",
		"  rejected  place-batch (item)     400  too_many_open_orders              2",
		"  rejected  cancel-batch (item)      -  order_not_open                    1",
		"  rejected  place-batch            400  out_of_range                      1",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("report lacks %q:\n%s", want, text)
		}
	}

	out.Reset()
	if err := r.WriteJSON(&out); err != nil {
		t.Fatal(err)
	}
	var back Report
	if err := json.Unmarshal(out.Bytes(), &back); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(&back, r) {
		t.Errorf("JSON round trip differs:\n%s", out.String())
	}
	for _, key := range []string{`"mix": "market-maker"`, `"kind": "place-batch"`, `"itemsRejected": 2`, `"item": true`} {
		if !strings.Contains(out.String(), key) {
			t.Errorf("JSON lacks %s:\n%s", key, out.String())
		}
	}
}

// TestReportSaysRateLimited checks that a run that met the exchange's rate limits says so, and
// one that did not says nothing of them.
func TestReportSaysRateLimited(t *testing.T) {
	r := testReport(t)
	text := func() string {
		var b strings.Builder
		if err := r.WriteText(&b); err != nil {
			t.Fatal(err)
		}
		return b.String()
	}
	if strings.Contains(text(), "rate limited") {
		t.Fatal("a run without 429s mentions rate limits")
	}
	r.Errors = append(r.Errors, ErrorCount{Class: "rejected", Kind: "place", Status: 429, Code: "rate_limited", Count: 7})
	if got := text(); !strings.Contains(got, "rate limited     7") || !strings.Contains(got, "--read-rate 0 --write-rate 0") {
		t.Fatalf("the report of a rate-limited run:\n%s", got)
	}
}

// TestReportSendLag checks how an open-loop report tells the load generator's own lateness (steps
// due while their bot was idle) from the exchange's (steps due while their bot still awaited an
// answer), and that a closed-loop report gives neither.
func TestReportSendLag(t *testing.T) {
	a, b := newRecorder(), newRecorder()
	for i := range 100 {
		a.lagged(time.Duration(10+i) * time.Microsecond) // 10µs .. 109µs
	}
	b.lagged(5 * time.Millisecond)
	for range 7 {
		b.behind()
	}
	open := &Report{Mode: "open", TargetRate: 1000, Seconds: 1}
	open.build([]*recorder{a, b}, mixSpecs[MixBasic].kinds)
	want := LagStats{OnTime: 101, P50Us: 60, P99Us: 109, MaxUs: 5000, Behind: 7}
	if l := open.SendLag; l == nil || l.OnTime != want.OnTime || l.Behind != want.Behind || l.P50Us != want.P50Us ||
		l.P99Us != want.P99Us || !hdrhistogram.New(histMinUs, histMaxUs, histSig).ValuesAreEquivalent(l.MaxUs, want.MaxUs) {
		t.Fatalf("send lag %+v, want %+v", open.SendLag, want)
	}
	var out bytes.Buffer
	if err := open.WriteText(&out); err != nil {
		t.Fatal(err)
	}
	for _, line := range []string{"send lag         p50 60µs  p99 109µs", "the 101 requests due while their bot was idle",
		"behind           7 requests came due while their bot still awaited its last answer"} {
		if !strings.Contains(out.String(), line) {
			t.Errorf("the report lacks %q:\n%s", line, out.String())
		}
	}

	closed := &Report{Mode: "closed", Seconds: 1}
	closed.build([]*recorder{a, b}, mixSpecs[MixBasic].kinds)
	if closed.SendLag != nil {
		t.Errorf("a closed-loop report gives a send lag: %+v", closed.SendLag)
	}
}
