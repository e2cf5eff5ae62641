// Package clock sleeps precisely, for the load generator's open loop and the benches that time
// what follows a pause.
//
// Go's timers wake up to a millisecond late on Linux: while a process is idle, the runtime waits
// for its next timer in epoll_wait, whose timeout is in whole milliseconds, so a timer due in
// 0.3 ms fires after 1 ms. On the 2-core development machine a timer fired 0.59 ms late at the
// median and 1.09 ms at p99. A Sleeper on Linux sleeps on a timerfd instead: a kernel
// high-resolution timer that the runtime's poller watches, so the sleep holds no thread and ends
// within tens of microseconds of its deadline (44 µs late at the median on the same machine).
package clock

import "time"

// A Sleeper sleeps, waking as close to the end of each sleep as the system allows. It is not safe
// for concurrent use: give each sleeping goroutine its own.
type Sleeper struct {
	fine  *fine       // Linux's timerfd, or nil
	timer *time.Timer // the fallback: Go's timer
}

// NewSleeper returns a Sleeper: a fine one where the system has a precise clock to sleep on, else
// one on Go's timers. Close it when done.
func NewSleeper() *Sleeper {
	if f := newFine(); f != nil {
		return &Sleeper{fine: f}
	}
	return &Sleeper{timer: time.NewTimer(time.Hour)}
}

// Fine reports whether the sleeper sleeps on a precise clock rather than on Go's timers.
func (s *Sleeper) Fine() bool { return s.fine != nil }

// Sleep sleeps for d (not at all when d <= 0).
func (s *Sleeper) Sleep(d time.Duration) {
	if d <= 0 {
		return
	}
	if s.fine != nil && s.fine.sleep(d) {
		return
	}
	if s.timer == nil {
		s.timer = time.NewTimer(d)
	} else {
		s.timer.Reset(d)
	}
	<-s.timer.C
}

// Close releases what the sleeper holds.
func (s *Sleeper) Close() {
	if s.fine != nil {
		s.fine.close()
	}
	if s.timer != nil {
		s.timer.Stop()
	}
}
