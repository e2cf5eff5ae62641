package ratelimit

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pmx-dev/pmx/internal/pgtest"
	"github.com/pmx-dev/pmx/internal/store"
	"github.com/pmx-dev/pmx/internal/storetest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// counting is the real store, counting the calls that reach Postgres.
type counting struct {
	*store.Store
	calls atomic.Int64
}

func (c *counting) RateTake(ctx context.Context, account int64, kind string, rate, burst, need, want float64) (float64, float64, error) {
	c.calls.Add(1)
	return c.Store.RateTake(ctx, account, kind, rate, burst, need, want)
}

func newAccount(t *testing.T, st *store.Store) int64 {
	t.Helper()
	a, err := st.CreateAccount(context.Background(), "limits-"+time.Now().Format("150405.000000000"), 1000, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	return a.ID
}

// TestBucketAcrossFronts has two limiters — two front replicas — spend one account's bucket in
// turn as fast as they can: together they never grant more than the bucket holds (its burst plus
// what it refilled in the measured time), nor much less (at most a lease each), and refused
// requests do not reach Postgres each.
func TestBucketAcrossFronts(t *testing.T) {
	st := &counting{Store: storetest.New(t)}
	account := newAccount(t, st.Store)
	lim := Limit{Rate: 40, Burst: 20}
	fronts := []*Limiter{New(st, DefaultRead, lim), New(st, DefaultRead, lim)}
	ctx := context.Background()
	start := time.Now()
	allowed, refused := 0, 0
	for i := 0; time.Since(start) < 500*time.Millisecond; i++ {
		d, err := fronts[i%2].Take(ctx, account, Write, 1)
		if err != nil {
			t.Fatal(err)
		}
		if d.Allowed {
			allowed++
		} else {
			refused++
			if d.RetryAfter <= 0 {
				t.Fatalf("a refusal with Retry-After %v", d.RetryAfter)
			}
		}
		if d.Limit != lim || d.Remaining < 0 || d.Remaining > lim.Burst {
			t.Fatalf("decision %+v", d)
		}
	}
	elapsed := time.Since(start).Seconds()
	most := lim.Burst + lim.Rate*elapsed
	least := most - 2*lim.lease() - lim.Rate*0.05 // a lease lost on each front, and the clocks' slack
	if float64(allowed) > most || float64(allowed) < least {
		t.Errorf("granted %d in %.3fs, want between %.1f and %.1f", allowed, elapsed, least, most)
	}
	if refused == 0 {
		t.Fatal("nothing was refused")
	}
	if calls := st.calls.Load(); calls > 2*int64(allowed)+10 { // not one per refusal
		t.Errorf("%d calls to Postgres for %d grants and %d refusals", calls, allowed, refused)
	}
	t.Logf("%d granted, %d refused in %.3fs (bucket allows %.1f); %d calls to Postgres", allowed, refused, elapsed, most, st.calls.Load())
}

func TestRules(t *testing.T) {
	st := storetest.New(t)
	ctx := context.Background()
	account := newAccount(t, st)
	l := New(st, Limit{}, Limit{Rate: 1, Burst: 5})

	// No limit: everything passes, without headers' figures.
	if d, err := l.Take(ctx, account, Read, 1_000_000); err != nil || !d.Allowed || d.Limit.On() {
		t.Fatalf("an unlimited kind: %+v %v", d, err)
	}
	// More than the burst at once can never pass.
	if d, err := l.Take(ctx, account, Write, 6); err != nil || d.Allowed || d.RetryAfter <= 0 {
		t.Fatalf("a cost above the burst: %+v %v", d, err)
	}
	// The burst passes at once, whole; the next is refused until a token refills.
	if d, err := l.Take(ctx, account, Write, 5); err != nil || !d.Allowed || d.Remaining >= 1 {
		t.Fatalf("the whole burst: %+v %v", d, err)
	}
	d, err := l.Take(ctx, account, Write, 1)
	if err != nil || d.Allowed || d.RetryAfter <= 0 || d.RetryAfter > time.Second || d.Reset < 4*time.Second {
		t.Fatalf("past the burst: %+v %v", d, err)
	}
	// Peek takes nothing.
	p, err := l.Peek(ctx, account, Write)
	if err != nil || p.Remaining >= 1 || p.Limit.Burst != 5 {
		t.Fatalf("peek: %+v %v", p, err)
	}
}

// TestRefillTime: the wait a refusal names is rounded up, never 0 for a shortfall above 0.
func TestRefillTime(t *testing.T) {
	tests := []struct {
		missing, rate float64
		want          time.Duration
	}{
		{1, 40, 25 * time.Millisecond},
		{0.5, 1, 500 * time.Millisecond},
		{1e-12, 40, 1}, // less than a nanosecond: one
		{1e-9, 0.5, 2}, // two nanoseconds exactly
	}
	for _, tt := range tests {
		if got := refillTime(tt.missing, tt.rate); got != tt.want {
			t.Errorf("refillTime(%g, %g) = %v, want %v", tt.missing, tt.rate, got, tt.want)
		}
	}
}
