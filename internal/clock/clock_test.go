package clock

import (
	"runtime"
	"testing"
	"time"
)

// TestSleepNeverWakesEarly sleeps for short and longer spans and checks that no sleep ends before
// its span: waking late is only slow, waking early would send an open loop's requests before they
// are due.
func TestSleepNeverWakesEarly(t *testing.T) {
	s := NewSleeper()
	defer s.Close()
	if runtime.GOOS == "linux" && !s.Fine() {
		t.Error("on Linux the sleeper should sleep on a timerfd")
	}
	for range 20 {
		for _, d := range []time.Duration{time.Microsecond, 50 * time.Microsecond, 300 * time.Microsecond, 2 * time.Millisecond} {
			start := time.Now()
			s.Sleep(d)
			if got := time.Since(start); got < d {
				t.Fatalf("a sleep of %v ended after %v", d, got)
			}
		}
	}
}

// TestSleepOfNothing checks that a sleep of zero or less returns, on both kinds of sleeper.
func TestSleepOfNothing(t *testing.T) {
	coarse := &Sleeper{timer: time.NewTimer(time.Hour)}
	defer coarse.Close()
	fine := NewSleeper()
	defer fine.Close()
	for _, s := range []*Sleeper{coarse, fine} {
		s.Sleep(0)
		s.Sleep(-time.Second)
		start := time.Now()
		s.Sleep(time.Millisecond) // and the sleeper still works after them
		if time.Since(start) < time.Millisecond {
			t.Errorf("fine %v: a sleep of 1ms after sleeps of nothing ended early", s.Fine())
		}
	}
}
