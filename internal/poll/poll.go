// Package poll waits, in tests, for a condition that nothing can announce: another process has
// exited or answers, a row another process writes has appeared. It checks again and again until a
// deadline, at intervals that start at 1ms (a condition that is almost true costs almost nothing)
// and double up to 100ms (one that takes seconds, such as a kubectl call, is not hammered).
//
// It is not for waiting on code the test itself runs: a channel or a WaitGroup says exactly when
// that is done, and a poll only guesses.
package poll

import (
	"context"
	"fmt"
	"testing"
	"time"
)

const (
	firstInterval = time.Millisecond
	maxInterval   = 100 * time.Millisecond
)

// Until calls cond until it reports true or an error, for at most timeout. ctx, bounded by the
// timeout, is what cond should pass to the calls it makes. Until returns nil once cond holds,
// cond's error as it is, or, when time runs out or ctx ends first, an error wrapping ctx's
// (context.DeadlineExceeded for the timeout).
func Until(ctx context.Context, timeout time.Duration, cond func(ctx context.Context) (bool, error)) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for interval := firstInterval; ; interval = min(2*interval, maxInterval) {
		if ok, err := cond(ctx); err != nil || ok {
			return err
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("poll: condition not met within %v: %w", timeout, ctx.Err())
		case <-time.After(interval):
		}
	}
}

// Wait calls cond until it reports true, for at most timeout, and otherwise fails the test with
// "timed out after <timeout> waiting for <what>".
func Wait(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	err := Until(t.Context(), timeout, func(context.Context) (bool, error) { return cond(), nil })
	if err != nil {
		t.Fatalf("timed out after %v waiting for %s", timeout, what)
	}
}
