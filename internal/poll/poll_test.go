package poll

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"
)

func TestUntilReturnsOnceTheConditionHolds(t *testing.T) {
	var calls atomic.Int32
	err := Until(t.Context(), time.Minute, func(context.Context) (bool, error) { return calls.Add(1) == 5, nil })
	if err != nil || calls.Load() != 5 {
		t.Fatalf("Until = %v after %d calls, want nil after 5", err, calls.Load())
	}
}

func TestUntilReturnsTheConditionsError(t *testing.T) {
	boom := errors.New("boom")
	var calls int
	err := Until(t.Context(), time.Minute, func(context.Context) (bool, error) { calls++; return false, boom })
	if err != boom || calls != 1 {
		t.Fatalf("Until = %v after %d calls, want boom after 1", err, calls)
	}
}

func TestUntilGivesUpAtTheTimeout(t *testing.T) {
	start := time.Now()
	var deadline time.Time
	err := Until(t.Context(), 50*time.Millisecond, func(ctx context.Context) (bool, error) {
		deadline, _ = ctx.Deadline()
		return false, nil
	})
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Until = %v, want a DeadlineExceeded", err)
	}
	if took := time.Since(start); took < 50*time.Millisecond || took > 10*time.Second {
		t.Errorf("gave up after %v, want 50ms", took)
	}
	if deadline.IsZero() || deadline.Sub(start) > 50*time.Millisecond+time.Second {
		t.Errorf("cond's context ends at %v, want the timeout's end", deadline.Sub(start))
	}
}

func TestUntilStopsWithItsContext(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	var calls int
	err := Until(ctx, time.Minute, func(context.Context) (bool, error) {
		if calls++; calls == 3 {
			cancel()
		}
		return false, nil
	})
	if !errors.Is(err, context.Canceled) || calls != 3 {
		t.Fatalf("Until = %v after %d calls, want Canceled after 3", err, calls)
	}
}

// fakeT records what Wait reports instead of ending the test.
type fakeT struct {
	testing.TB
	failed string
}

func (f *fakeT) Helper()                           {}
func (f *fakeT) Context() context.Context          { return context.Background() }
func (f *fakeT) Fatalf(format string, args ...any) { f.failed = fmt.Sprintf(format, args...) }

func TestWait(t *testing.T) {
	var calls int
	Wait(t, time.Minute, "the third call", func() bool { calls++; return calls == 3 })
	if calls != 3 {
		t.Errorf("Wait returned after %d calls, want 3", calls)
	}
	f := &fakeT{}
	Wait(f, 20*time.Millisecond, "never", func() bool { return false })
	if want := "timed out after 20ms waiting for never"; f.failed != want {
		t.Errorf("Wait failed the test with %q, want %q", f.failed, want)
	}
}
