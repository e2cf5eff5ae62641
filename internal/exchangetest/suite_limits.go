package exchangetest

import (
	"encoding/json"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pmx-dev/pmx/apiserver"
	"github.com/pmx-dev/pmx/internal/kit/ratelimit"
)

// The suite's rate limits, in both modes: reads low enough for a test to exceed them, writes
// high enough for the trading tests never to meet them.
var (
	SuiteReadLimit  = ratelimit.Limit{Rate: 200, Burst: 400}
	SuiteWriteLimit = ratelimit.Limit{Rate: 2000, Burst: 4000}
)

// SuiteLimits sets the suite's rate limits on a standalone exchange (StartDev's option).
func SuiteLimits(c *apiserver.Config) { c.ReadLimit, c.WriteLimit = SuiteReadLimit, SuiteWriteLimit }

// SuiteLimitFlags are the suite's rate limits as pmx api's flags.
func SuiteLimitFlags() []string {
	f := func(v float64) string { return strconv.FormatFloat(v, 'f', -1, 64) }
	return []string{"--read-rate", f(SuiteReadLimit.Rate), "--read-burst", f(SuiteReadLimit.Burst),
		"--write-rate", f(SuiteWriteLimit.Rate), "--write-burst", f(SuiteWriteLimit.Burst)}
}

// limitsView is GET /account/limits's answer.
type limitsView struct {
	Reads, Writes struct {
		Limited                                   bool
		PerSecond, Burst, Remaining, ResetSeconds float64
	}
}

// testRateLimits checks GET /account/limits, the headers, that a batch counts each of its orders,
// and the 429 of a spent bucket: its shape, Retry-After, and that it changes nothing.
func testRateLimits(t *testing.T, tg *Target) {
	a := tg.NewAccount(t, "limits")
	// One connection, so that one front answers the whole check when several sit behind one
	// address (a Service): each front spends the shared buckets in leases, so another front's
	// Remaining differs by what it holds.
	a.T = tg.over(&http.Client{Timeout: time.Minute, Transport: &http.Transport{MaxConnsPerHost: 1}})
	var before limitsView
	resp, raw := a.DoResponse(t, "GET", "/account/limits", nil)
	if resp.StatusCode != http.StatusOK || json.Unmarshal(raw, &before) != nil {
		t.Fatalf("GET /account/limits: %d %s", resp.StatusCode, raw)
	}
	r, w := before.Reads, before.Writes
	if !r.Limited || r.PerSecond != SuiteReadLimit.Rate || r.Burst != SuiteReadLimit.Burst ||
		!w.Limited || w.PerSecond != SuiteWriteLimit.Rate || w.Burst != SuiteWriteLimit.Burst {
		t.Fatalf("limits %s, want reads %+v and writes %+v", raw, SuiteReadLimit, SuiteWriteLimit)
	}
	if h := resp.Header.Get("RateLimit-Limit"); h != strconv.Itoa(int(SuiteReadLimit.Burst)) {
		t.Errorf("RateLimit-Limit %q on a read, want the read burst", h)
	}
	for _, h := range []string{"RateLimit-Remaining", "RateLimit-Reset"} {
		if _, err := strconv.Atoi(resp.Header.Get(h)); err != nil {
			t.Errorf("%s %q", h, resp.Header.Get(h))
		}
	}

	// A batch of 10 IOC orders (which never rest) spends 10 writes.
	m := tg.NewMarket(t, nil)
	orders := make([]any, 10)
	for i := range orders {
		o := OrderBody(m.ID, "BUY", "YES", 1, 1)
		o["timeInForce"] = "IOC"
		orders[i] = o
	}
	start := time.Now()
	a.Expect(t, "POST", "/orders/batch", map[string]any{"orders": orders}, http.StatusCreated, nil)
	var after limitsView
	a.Expect(t, "GET", "/account/limits", nil, http.StatusOK, &after)
	// (The suite's write bucket refills too fast to see the batch's 10 here:
	// TestRateLimitCountsBatchOrders counts them.)
	if spent := before.Writes.Remaining - after.Writes.Remaining; spent > 10+1 {
		t.Errorf("a batch of 10 orders spent %.1f writes, want at most 10 (%.1fs later)", spent, time.Since(start).Seconds())
	}

	// Reads, as fast as 8 clients go, until refused: the 429 says why and when to come back.
	var refusal atomic.Pointer[http.Response]
	var body atomic.Pointer[[]byte]
	var wg sync.WaitGroup
	deadline := time.Now().Add(30 * time.Second)
	for range 8 {
		wg.Go(func() {
			for refusal.Load() == nil && time.Now().Before(deadline) {
				resp, raw := a.DoResponse(t, "GET", "/account", nil)
				if resp.StatusCode == http.StatusTooManyRequests {
					refusal.CompareAndSwap(nil, resp)
					body.Store(&raw)
				} else if resp.StatusCode != http.StatusOK {
					t.Errorf("GET /account: %d %s", resp.StatusCode, raw)
					return
				}
			}
		})
	}
	wg.Wait()
	resp = refusal.Load()
	if resp == nil {
		t.Fatal("30 s of reads from 8 clients were never refused")
	}
	var e ErrorBody
	if err := json.Unmarshal(*body.Load(), &e); err != nil || e.Details.Code != "rate_limited" || e.Error == "" {
		t.Errorf("the 429's body %s", *body.Load())
	}
	if s, err := strconv.Atoi(resp.Header.Get("Retry-After")); err != nil || s < 1 || s > 2 {
		t.Errorf("Retry-After %q", resp.Header.Get("Retry-After"))
	}
	if resp.Header.Get("RateLimit-Remaining") != "0" {
		t.Errorf("RateLimit-Remaining %q on a refusal", resp.Header.Get("RateLimit-Remaining"))
	}
	// Writes are a bucket of their own, and a refused read changed nothing.
	a.Expect(t, "POST", "/heartbeat", map[string]any{"timeoutSeconds": 0}, http.StatusOK, nil)
}

// CheckRateAcrossReplicas has one account read as fast as 16 clients can, spread over every front
// replica, for a few seconds: the reads granted must be the documented rate — the burst plus the
// rate over the measured time — within 10%, whatever replica served them.
func CheckRateAcrossReplicas(t *testing.T, replicas []*Target) {
	a := replicas[0].NewAccount(t, "spread")
	hc := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 16}}
	var granted, refused atomic.Int64
	var wg sync.WaitGroup
	const run = 3 * time.Second
	start := time.Now()
	for i := range 16 {
		wg.Go(func() {
			base := replicas[i%len(replicas)].URL
			for time.Since(start) < run {
				req, _ := http.NewRequest("GET", base+"/api/v1/account", nil)
				req.Header.Set("Authorization", "Bearer "+a.Key)
				resp, err := hc.Do(req)
				if err != nil {
					t.Error(err)
					return
				}
				resp.Body.Close()
				switch resp.StatusCode {
				case http.StatusOK:
					granted.Add(1)
				case http.StatusTooManyRequests:
					refused.Add(1)
				default:
					t.Errorf("GET /account: %d", resp.StatusCode)
					return
				}
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start).Seconds()
	allowance := SuiteReadLimit.Burst + SuiteReadLimit.Rate*elapsed
	got := float64(granted.Load())
	t.Logf("%d replicas: %.0f reads granted, %d refused in %.2fs; the limit allows %.0f (%+.1f%%)",
		len(replicas), got, refused.Load(), elapsed, allowance, 100*(got-allowance)/allowance)
	if refused.Load() == 0 {
		t.Fatal("nothing was refused: the clients never reached the limit, so the test shows nothing")
	}
	if got > allowance*1.1 || got < allowance*0.9 {
		t.Errorf("granted %.0f reads, want %.0f ± 10%%", got, allowance)
	}
}
