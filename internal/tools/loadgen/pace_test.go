package loadgen

import (
	"sync"
	"testing"
	"time"
)

// TestPacerReleasesEachStepWhenDue runs a pacer for three bots, one of which falls behind for a
// while, and checks that every step a bot waits for is released, never before it is due, in
// order, and that the pacer ends at the end of the run.
func TestPacerReleasesEachStepWhenDue(t *testing.T) {
	start := time.Now()
	// 1,000 steps/s among 3 bots: each bot every 3ms, the bots 1ms apart; 60ms in all.
	p := newPacer(start, 700, 70, 3)
	end := start.Add(60 * time.Millisecond)
	stop := make(chan struct{})
	pacerDone := make(chan struct{})
	go func() {
		defer close(pacerDone)
		p.run(stop, end)
	}()
	var wg sync.WaitGroup
	steps := make([]int, 3)
	for idx := range 3 {
		wg.Go(func() {
			for n := int64(0); ; n++ {
				at := p.due(idx, n)
				if !start.Add(at).Before(end) {
					return
				}
				if idx == 1 && n == 3 {
					time.Sleep(10 * time.Millisecond) // behind: the next steps are due already
				}
				if time.Now().Before(start.Add(at)) && !p.wait(idx, at, stop, nil) {
					t.Errorf("bot %d: step %d was never released", idx, n)
					return
				}
				if early := time.Until(start.Add(at)); early > 0 {
					t.Errorf("bot %d: step %d released %v before it was due", idx, n, early)
				}
				steps[idx]++
			}
		})
	}
	wg.Wait()
	<-pacerDone // it stops by itself at the end
	for idx, n := range steps {
		if n != 20 {
			t.Errorf("bot %d took %d steps, want 20 (every 3ms for 60ms)", idx, n)
		}
	}
}

// TestPacerWaitEndsWithTheRun checks that a bot waiting for a step that will not come (the pacer
// is stopped) returns false when the run stops or its context ends.
func TestPacerWaitEndsWithTheRun(t *testing.T) {
	p := newPacer(time.Now(), 1, 70, 1) // a step every 70s
	stop, done := make(chan struct{}), make(chan struct{})
	got := make(chan bool, 2)
	go func() { got <- p.wait(0, p.due(0, 1), stop, nil) }()
	close(stop)
	go func() { got <- p.wait(0, p.due(0, 1), nil, done) }()
	close(done)
	for range 2 {
		if <-got {
			t.Error("wait reported a release that never happened")
		}
	}
}
