package loadgen

import (
	"sync/atomic"
	"time"

	"github.com/pmx-dev/pmx/internal/clock"
)

// Open loop sends each request when it is due and times it from then, so a request sent late is
// charged its lateness as latency. Go's timers wake up to a millisecond late on Linux (package
// clock says why): with a timer per bot, at 100 placements/s on the 2-core machine, the open
// loop's p50 was 0.5–0.8 ms higher than with the pacer. So a pacer releases the bots instead: one
// goroutine walks their merged schedule, sleeps on a clock.Sleeper until each step is due, and
// wakes the step's bot. Report.SendLag says how well the schedule was kept all the same.

// maxPacerSleep bounds one sleep of the pacer, so that it sees the run stop.
const maxPacerSleep = 100 * time.Millisecond

// pacer releases the bots of an open-loop run at their due times.
type pacer struct {
	start    time.Time
	interval time.Duration   // between two steps of one bot
	first    []time.Duration // each bot's first due time, from start
	released []atomic.Int64  // each bot's latest due time released, from start, in ns (-1: none)
	wake     []chan struct{} // each bot's wake-up call; capacity 1, the bot rereads released
}

// newPacer lays out the schedule of bots making rate order placements per second in all. A
// hundred steps make per100 placements on average (the mix's placementsPer100), so the bots
// together take rate*100/per100 steps per second; their schedules are interleaved evenly.
func newPacer(start time.Time, rate, per100 float64, bots int) *pacer {
	stepsPerSec := rate * 100 / per100
	interval := max(1, time.Duration(float64(bots)/stepsPerSec*float64(time.Second)))
	p := &pacer{start: start, interval: interval, first: make([]time.Duration, bots),
		released: make([]atomic.Int64, bots), wake: make([]chan struct{}, bots)}
	for i := range bots {
		p.first[i] = time.Duration(float64(interval) * float64(i) / float64(bots))
		p.released[i].Store(-1)
		p.wake[i] = make(chan struct{}, 1)
	}
	return p
}

// due is when bot idx's step n is due, from start.
func (p *pacer) due(idx int, n int64) time.Duration {
	return p.first[idx] + time.Duration(n)*p.interval
}

// run releases every bot's steps in the order they are due, sleeping until each, until stop is
// closed or the next step is at or past end (zero: no end).
func (p *pacer) run(stop <-chan struct{}, end time.Time) {
	s := clock.NewSleeper()
	defer s.Close()
	for n := int64(0); ; n++ {
		for idx := range p.first {
			at := p.due(idx, n)
			if !end.IsZero() && !p.start.Add(at).Before(end) {
				return
			}
			for {
				select {
				case <-stop:
					return
				default:
				}
				d := time.Until(p.start.Add(at))
				if d <= 0 {
					break
				}
				s.Sleep(min(d, maxPacerSleep))
			}
			p.released[idx].Store(int64(at))
			select {
			case p.wake[idx] <- struct{}{}:
			default: // a call is already waiting; the bot reads released when it takes it
			}
		}
	}
}

// wait blocks bot idx until its step due at at (from start) is released, and reports whether it
// was; false when stop or done closed first.
func (p *pacer) wait(idx int, at time.Duration, stop, done <-chan struct{}) bool {
	for p.released[idx].Load() < int64(at) {
		select {
		case <-p.wake[idx]:
		case <-stop:
			return false
		case <-done:
			return false
		}
	}
	return true
}
