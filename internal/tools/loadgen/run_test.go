package loadgen

import (
	"context"
	"net"
	"strings"
	"testing"
	"time"
)

func TestRunRejectsAnUnboundedRun(t *testing.T) {
	_, err := Run(context.Background(), Config{AdminToken: "t"}, nil)
	if err == nil || !strings.Contains(err.Error(), "bound") {
		t.Fatalf("err = %v, want a complaint about the missing bound", err)
	}
}

func TestRunNamesAnUnreachableServer(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close() // nothing listens there any more
	_, err = Run(context.Background(), Config{URL: "http://" + addr, AdminToken: "t", Bots: 2, Duration: time.Second}, nil)
	if err == nil || !strings.Contains(err.Error(), "cannot reach pmx at http://"+addr) {
		t.Fatalf("err = %v, want it to name %s", err, addr)
	}
}

func TestOpenLoopScheduleMatchesTheRate(t *testing.T) {
	// 4 bots at 700 placements/s: 1000 steps/s in all (70% placements), each bot one every 4ms,
	// the bots' schedules interleaved 1ms apart.
	p := newPacer(time.Unix(100, 0), 700, mixSpecs[MixBasic].placementsPer100, 4)
	for i := range 4 {
		for n := range int64(3) {
			if got, want := p.due(i, n), time.Duration(i+4*int(n))*time.Millisecond; got != want {
				t.Errorf("bot %d step %d: due at +%v, want +%v", i, n, got, want)
			}
		}
	}
	if p := newPacer(time.Unix(100, 0), 1e12, 70, 1); p.interval <= 0 {
		t.Errorf("interval %v at an absurd rate, want positive", p.interval)
	}
}

func TestOrderBudgetTrimsTheLastBatch(t *testing.T) {
	r := &runner{cfg: Config{Orders: 10}, stopCh: make(chan struct{})}
	for i, c := range []struct{ ask, got int }{{4, 4}, {1, 1}, {4, 4}, {3, 1}, {2, 0}, {1, 0}} {
		if got := r.reserve(c.ask); got != c.got {
			t.Errorf("reservation %d of %d placements got %d, want %d", i, c.ask, got, c.got)
		}
	}
	if r.stopReason != "orders" {
		t.Errorf("stop reason %q, want orders", r.stopReason)
	}
	unlimited := &runner{stopCh: make(chan struct{})}
	if got := unlimited.reserve(5); got != 5 {
		t.Errorf("without a budget 5 placements got %d", got)
	}
}

func TestOpenLoopScheduleOfTheMarketMakerMix(t *testing.T) {
	// 2 bots at 1,025 placements/s: 102.5 placements per hundred steps, so 1,000 steps/s in all.
	if p := newPacer(time.Unix(0, 0), 1025, mixSpecs[MixMarketMaker].placementsPer100, 2); p.interval != 2*time.Millisecond {
		t.Errorf("interval %v, want 2ms", p.interval)
	}
}
