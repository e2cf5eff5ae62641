//go:build !linux

package clock

import "time"

// fine is Linux's timerfd; elsewhere a Sleeper sleeps on Go's timers.
type fine struct{}

func newFine() *fine                     { return nil }
func (*fine) sleep(d time.Duration) bool { return false }
func (*fine) close()                     {}
