// Package ratelimit owns the rate limits of the public API: a token bucket per account and kind
// of request (reads, writes), shared by every front replica through Postgres.
//
// The bucket itself lives in Postgres (store.RateTake: refilled at Rate tokens a second up to
// Burst). A front does not ask Postgres per request: it takes tokens in leases of Lease tokens
// and spends them locally, so Postgres sees one call per lease. Nothing is ever granted twice —
// every token a request spends was taken from the shared bucket — so replicas together never
// exceed the limit; what a front has leased but not spent is lost to the others, at most one
// lease per front (the error bound: Lease × replicas tokens, below the rate by that much over a
// run, never above). A refused request costs Postgres nothing until the bucket can have refilled
// enough: the front remembers when that is.
package ratelimit

import (
	"context"
	"math"
	"sync"
	"time"

	"github.com/pmx-dev/pmx/internal/kit/boundedmap"
)

// Kinds of request.
const (
	Read  = "read"
	Write = "write"
)

// Limit is one kind's bucket: Rate tokens a second, at most Burst at once. A zero Rate lifts the
// limit.
type Limit struct {
	Rate  float64
	Burst float64
}

// Defaults: what a market maker needs with room to spare (a quote refresh of 10 orders on each
// of 5 markets every second is 50 writes; a batch counts each of its orders), well above the
// basic tiers of Kalshi (10 writes/s) and a fraction of what one front replica can serve.
var (
	DefaultRead  = Limit{Rate: 100, Burst: 200}
	DefaultWrite = Limit{Rate: 50, Burst: 100}
)

// On says whether the limit applies.
func (l Limit) On() bool { return l.Rate > 0 }

// lease is how many tokens a front takes from Postgres at once: a tenth of a second of the rate,
// at least one, at most a tenth of the burst.
func (l Limit) lease() float64 {
	return math.Max(1, math.Min(l.Rate/10, l.Burst/10))
}

// Store takes tokens from the shared buckets (store.Store.RateTake).
type Store interface {
	RateTake(ctx context.Context, account int64, kind string, rate, burst, need, want float64) (taken, remaining float64, err error)
}

// Limiter applies the limits of one front replica.
type Limiter struct {
	store  Store
	limits map[string]Limit
	now    func() time.Time

	mu      sync.Mutex
	buckets *boundedmap.Map[key, *local] // the accounts seen last; one forgotten loses its lease
}

// remembered bounds how many accounts' shares a front keeps (about 100 bytes each).
const remembered = 1 << 17

type key struct {
	account int64
	kind    string
}

// local is a front's share of one bucket.
type local struct {
	mu      sync.Mutex
	leased  float64   // taken from Postgres, not yet spent
	left    float64   // what Postgres said was left at the last lease
	at      time.Time // when
	blocked time.Time // refused until then: the bucket cannot hold enough before
}

// New returns a limiter with the read and write limits.
func New(st Store, read, write Limit) *Limiter {
	return &Limiter{store: st, limits: map[string]Limit{Read: read, Write: write}, now: time.Now,
		buckets: boundedmap.New[key, *local](remembered)}
}

// Limit returns a kind's limit.
func (l *Limiter) Limit(kind string) Limit { return l.limits[kind] }

// bucket returns the front's share of a bucket.
func (l *Limiter) bucket(k key) *local {
	l.mu.Lock()
	defer l.mu.Unlock()
	b, ok := l.buckets.Get(k)
	if !ok {
		b = &local{}
		l.buckets.Put(k, b)
	}
	return b
}

// Decision is the outcome of Take, with what the RateLimit headers say.
type Decision struct {
	Allowed bool
	Limit   Limit
	// Remaining is about how many tokens the account has left (exact at each lease; between
	// leases, and across replicas, an estimate).
	Remaining float64
	// Reset is how long until the bucket is full again; RetryAfter, when refused, how long until
	// it holds what the request needs.
	Reset, RetryAfter time.Duration
}

// Take spends cost tokens of the account's bucket of a kind, or refuses (spending none).
func (l *Limiter) Take(ctx context.Context, account int64, kind string, cost float64) (Decision, error) {
	lim := l.limits[kind]
	if !lim.On() {
		return Decision{Allowed: true, Limit: lim}, nil
	}
	b := l.bucket(key{account, kind})

	b.mu.Lock()
	defer b.mu.Unlock()
	now := l.now()
	if b.leased < cost {
		if now.Before(b.blocked) {
			return b.decision(lim, now, false, b.blocked.Sub(now)), nil
		}
		need := cost - b.leased
		if need > lim.Burst {
			// More than the bucket ever holds: refused for good, at any rate.
			return b.decision(lim, now, false, time.Duration(lim.Burst/lim.Rate*float64(time.Second))), nil
		}
		taken, left, err := l.store.RateTake(ctx, account, kind, lim.Rate, lim.Burst, need, need+lim.lease())
		if err != nil {
			return Decision{}, err
		}
		b.leased += taken
		b.left, b.at = left, now
		if taken == 0 {
			wait := refillTime(need-left, lim.Rate)
			b.blocked = now.Add(wait)
			return b.decision(lim, now, false, wait), nil
		}
	}
	b.leased -= cost
	return b.decision(lim, now, true, 0), nil
}

// refillTime is how long a bucket takes to refill missing tokens at rate a second, rounded up: a
// refusal always names a wait, however little is missing (truncated, a shortfall of a
// billionth of a token made a Retry-After of 0).
func refillTime(missing, rate float64) time.Duration {
	return time.Duration(math.Ceil(missing / rate * float64(time.Second)))
}

// decision says what the account has left, as this front knows it.
func (b *local) decision(lim Limit, now time.Time, allowed bool, retry time.Duration) Decision {
	remaining := b.leased + b.left + lim.Rate*now.Sub(b.at).Seconds()
	remaining = math.Max(0, math.Min(lim.Burst, remaining))
	reset := time.Duration((lim.Burst - remaining) / lim.Rate * float64(time.Second))
	return Decision{Allowed: allowed, Limit: lim, Remaining: remaining, Reset: reset, RetryAfter: retry}
}

// Known says what the account has left of a kind as this front last knew it, without spending
// and without asking Postgres: for the RateLimit headers of an answer that must cost the exchange
// nothing, such as a scope refusal (which a key could otherwise repeat to make the front read
// Postgres at will). A bucket this front has not seen, or has forgotten, is reported full: the
// headers are an estimate across replicas anyway, and the next request that spends corrects them.
func (l *Limiter) Known(account int64, kind string) Decision {
	lim := l.limits[kind]
	if !lim.On() {
		return Decision{Allowed: true, Limit: lim}
	}
	l.mu.Lock()
	b, ok := l.buckets.Get(key{account, kind})
	l.mu.Unlock()
	if !ok {
		return Decision{Allowed: true, Limit: lim, Remaining: lim.Burst}
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.decision(lim, l.now(), true, 0)
}

// Peek says what the account has left of a kind without spending (for GET /account/limits): it
// takes nothing but refreshes the front's knowledge from Postgres.
func (l *Limiter) Peek(ctx context.Context, account int64, kind string) (Decision, error) {
	lim := l.limits[kind]
	if !lim.On() {
		return Decision{Allowed: true, Limit: lim}, nil
	}
	b := l.bucket(key{account, kind})
	b.mu.Lock()
	defer b.mu.Unlock()
	// need = want = 0: refills and reads, takes nothing.
	_, left, err := l.store.RateTake(ctx, account, kind, lim.Rate, lim.Burst, 0, 0)
	if err != nil {
		return Decision{}, err
	}
	now := l.now()
	b.left, b.at = left, now
	return b.decision(lim, now, true, 0), nil
}
