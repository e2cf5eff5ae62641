package exchangetest

import (
	"bytes"
	"context"
	"errors"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/pmx-dev/pmx/internal/tools/loadgen"
)

// runLoadgen drives a fresh standalone exchange with two markets with the load generator's mix
// for a bounded run of 600 placements, logs the report and checks that no request failed, that
// trades happened and that the invariants hold; the books in memory are compared with a rebuild
// from Postgres.
func runLoadgen(t *testing.T, mix loadgen.Mix) *loadgen.Report {
	return runLoadgenAt(t, mix, 0)
}

// runLoadgenAt is runLoadgen in open loop at rate placements per second (0: closed loop).
func runLoadgenAt(t *testing.T, mix loadgen.Mix, rate float64) *loadgen.Report {
	t.Helper()
	tg := StartDev(t)
	tg.NewMarket(t, nil)
	tg.NewMarket(t, nil)
	var progress bytes.Buffer
	rep, err := loadgen.Run(context.Background(), loadgen.Config{URL: tg.URL, AdminToken: tg.AdminToken, Bots: 6,
		Orders: 600, Duration: time.Minute, Seed: 7, Mix: mix, Rate: rate}, &progress)
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := rep.WriteText(&out); err != nil {
		t.Fatal(err)
	}
	t.Log("\n" + out.String())
	if rep.Mix != mix || rep.Failed != 0 || rep.Fills == 0 || rep.Markets != 2 {
		t.Fatalf("report: mix %s, %d failed, %d fills, %d markets", rep.Mix, rep.Failed, rep.Fills, rep.Markets)
	}
	if !strings.Contains(out.String(), "p99") {
		t.Fatalf("the report shows no latency percentiles:\n%s", out.String())
	}
	CheckInvariants(t, tg)
	return rep
}

// placementsRefused counts the placements refused with code, alone or in batches.
func placementsRefused(rep *loadgen.Report, code string) int64 {
	var n int64
	for _, e := range rep.Errors {
		if (e.Kind == "place" || e.Kind == "place-batch") && e.Code == code {
			n += e.Count
		}
	}
	return n
}

// TestLoadgen drives the standalone exchange with the basic mix for a bounded run and checks that
// every request it made succeeded or was a business rejection, and that the invariants hold.
//
// Its exchange allows only SuiteMaxOpenOrders open orders per account and market, and the basic
// mix's bots forget their orders beyond their most recent ones (until a cancel-everything), so some
// placements meet the limit: the report must count each of them, so that every placement sent is
// either acknowledged or a rejection it shows.
func TestLoadgen(t *testing.T) {
	rep := runLoadgen(t, loadgen.MixBasic)
	limited := placementsRefused(rep, "too_many_open_orders")
	if rep.Orders+limited < 600 || rep.Requests[0].Kind != "place" || rep.Requests[0].Count != 600 {
		t.Fatalf("%d placements sent, %d acknowledged and %d refused at the limit of open orders: some unaccounted for",
			rep.Requests[0].Count, rep.Orders, limited)
	}
	if rep.SendLag != nil {
		t.Errorf("a closed-loop report gives a send lag: %+v", rep.SendLag)
	}
}

// TestLoadgenOpenLoop drives the standalone exchange in open loop, the bots released on their
// schedule by the pacer, and checks that every placement of the budget was sent and answered, and
// that the report gives how late the requests left.
func TestLoadgenOpenLoop(t *testing.T) {
	rep := runLoadgenAt(t, loadgen.MixBasic, 1000)
	limited := placementsRefused(rep, "too_many_open_orders")
	if rep.Mode != "open" || rep.TargetRate != 1000 || rep.Requests[0].Count != 600 || rep.Orders+limited < 600 {
		t.Fatalf("mode %s at %v/s: %d placements sent, %d acknowledged, %d refused at the limit",
			rep.Mode, rep.TargetRate, rep.Requests[0].Count, rep.Orders, limited)
	}
	if l := rep.SendLag; l == nil || l.OnTime+l.Behind != rep.Total.Count || l.P50Us > l.P99Us || l.P99Us > l.MaxUs {
		t.Errorf("send lag %+v of %d requests", l, rep.Total.Count)
	}
}

// TestLoadgenMarketMaker drives the standalone exchange with the market-maker mix: batches,
// amends and cancels of several orders, each answered on its own. Its bots keep fewer open orders
// than the suite's limit, which none of their placements may meet. The books are compared with a
// rebuild from Postgres: amends that send orders to the back of their levels must be kept so
// (migration 011).
func TestLoadgenMarketMaker(t *testing.T) {
	rep := runLoadgen(t, loadgen.MixMarketMaker)
	kinds := map[string]loadgen.KindStats{}
	for _, k := range rep.Requests {
		kinds[k.Kind] = k
	}
	for _, k := range []string{"place", "place-batch", "amend", "cancel-batch"} {
		if kinds[k].OK == 0 {
			t.Errorf("no %s answered 2xx: %+v", k, kinds[k])
		}
	}
	if b := kinds["place-batch"]; b.ItemsOK < 2*b.OK || rep.Orders != kinds["place"].OK+b.ItemsOK {
		t.Errorf("orders %d: %d single placements and %d in %d batches", rep.Orders, kinds["place"].OK, b.ItemsOK, b.OK)
	}
	if rep.Orders < 600-rep.Rejected {
		t.Errorf("%d placements acknowledged of 600, with %d rejections", rep.Orders, rep.Rejected)
	}
	if n := placementsRefused(rep, "too_many_open_orders"); n != 0 {
		t.Errorf("%d placements met the limit of open orders (%d)", n, SuiteMaxOpenOrders)
	}
}

// TestLoadgenWarmup runs an open loop with a warm-up: its requests are counted apart from the
// measured run's, Measuring is called once, as the measured run begins, and its error stops the
// run and is Run's. Nothing here is timed against the clock: the checks are counts, and the
// order of events.
func TestLoadgenWarmup(t *testing.T) {
	tg := StartDev(t)
	tg.NewMarket(t, nil)
	cfg := loadgen.Config{URL: tg.URL, AdminToken: tg.AdminToken, Bots: 4, Rate: 200, Warmup: 500 * time.Millisecond,
		Duration: 500 * time.Millisecond, Seed: 7}
	var calls int
	var progress bytes.Buffer
	cfg.Measuring = func() error {
		calls++
		return nil
	}
	rep, err := loadgen.Run(context.Background(), cfg, &progress)
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := rep.WriteText(&out); err != nil {
		t.Fatal(err)
	}
	t.Log("\n" + progress.String() + out.String())
	w := rep.Warmup
	switch {
	case calls != 1:
		t.Errorf("Measuring called %d times, want once", calls)
	case w == nil || w.Orders <= 0 || w.Failed != 0 || w.P99Us <= 0 || w.Seconds != 0.5:
		t.Errorf("warm-up %+v: want its own orders, latency and its 0.5s", w)
	case rep.Orders <= 0 || rep.Failed != 0 || rep.Seconds < 0.4: // its bots stop at their first step due past the end
		t.Errorf("measured run: %d orders, %d failed, %.2fs", rep.Orders, rep.Failed, rep.Seconds)
	case !strings.Contains(out.String(), "warm-up          0.5s before the measured run"):
		t.Errorf("the report does not show the warm-up:\n%s", out.String())
	case !regexp.MustCompile(`(?m)^warm-up +\d+s  orders `).MatchString(progress.String()):
		t.Errorf("no progress line of the warm-up, shorter than a second:\n%s", progress.String())
	}
	// The two are apart: the measured run's placements are not the warm-up's, and both together
	// are what the exchange acknowledged.
	var acked int
	if err := tg.Store.Pool.QueryRow(context.Background(), `SELECT count(*) FROM orders`).Scan(&acked); err != nil {
		t.Fatal(err)
	}
	if int64(acked) < rep.Orders+w.Orders {
		t.Errorf("the exchange holds %d orders, fewer than the warm-up's %d and the run's %d", acked, w.Orders, rep.Orders)
	}

	cfg.Measuring = func() error { return errors.New("the readings failed") }
	if _, err := loadgen.Run(context.Background(), cfg, nil); err == nil || err.Error() != "the readings failed" {
		t.Errorf("a failed Measuring: Run's error %v, want it", err)
	}
}
