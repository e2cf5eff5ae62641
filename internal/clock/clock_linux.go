package clock

import (
	"os"
	"time"

	"golang.org/x/sys/unix"
)

// fine sleeps on a Linux timerfd, read through the runtime's poller.
type fine struct {
	fd  int
	f   *os.File
	buf [8]byte
}

// newFine returns a timerfd sleeper, or nil if the system refuses a timerfd.
func newFine() *fine {
	fd, err := unix.TimerfdCreate(unix.CLOCK_MONOTONIC, unix.TFD_NONBLOCK|unix.TFD_CLOEXEC)
	if err != nil {
		return nil
	}
	return &fine{fd: fd, f: os.NewFile(uintptr(fd), "clock-timerfd")}
}

// sleep arms the timer for d and reads it (the count of expirations; only the wake-up matters).
// It reports false, having not slept, if the timer could not be armed or read.
func (s *fine) sleep(d time.Duration) bool {
	spec := unix.ItimerSpec{Value: unix.NsecToTimespec(d.Nanoseconds())}
	if err := unix.TimerfdSettime(s.fd, 0, &spec, nil); err != nil {
		return false
	}
	_, err := s.f.Read(s.buf[:])
	return err == nil
}

func (s *fine) close() { _ = s.f.Close() }
