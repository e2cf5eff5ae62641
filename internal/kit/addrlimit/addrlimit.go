// Package addrlimit limits what one client address may do where there is no account to count it
// against: public feed subscriptions and resumes, the public market pages, failed
// authentications. Each address has a token bucket (golang.org/x/time/rate, the Go team's
// maintained token bucket) in this process's memory: a limit per replica, so a client that
// reaches N replicas gets N times it, which is what an unauthenticated limit can promise without
// a Postgres call per request (the cost these limits exist to bound).
//
// The address is package clientaddr's: the TCP peer's, or behind a configured trusted proxy the
// address it forwarded; never an X-Forwarded-For the client wrote itself, since a limit keyed on
// that could be dodged by sending a new value each time. An IPv6 client is counted by its /64,
// which one host usually controls whole.
package addrlimit

import (
	"math"
	"net"
	"net/http"
	"net/netip"
	"sync"
	"time"

	"golang.org/x/time/rate"

	"github.com/pmx-dev/pmx/internal/kit/boundedmap"
	"github.com/pmx-dev/pmx/internal/kit/clientaddr"
)

// Key is the address a request is counted against: its client's IP (clientaddr.Of), or its /64
// for IPv6.
func Key(r *http.Request) string {
	if a := clientaddr.Of(r); a.IsValid() {
		return addrKey(a)
	}
	return AddrKey(r.RemoteAddr)
}

// AddrKey is Key for an address as net.Conn and http.Request give it (host:port, or a host).
func AddrKey(remote string) string {
	host, _, err := net.SplitHostPort(remote)
	if err != nil {
		host = remote
	}
	addr, err := netip.ParseAddr(host)
	if err != nil {
		return host
	}
	return addrKey(addr)
}

func addrKey(addr netip.Addr) string {
	addr = addr.Unmap().WithZone("")
	if addr.Is6() {
		return netip.PrefixFrom(addr, 64).Masked().String()
	}
	return addr.String()
}

// Remembered is how many addresses a Limiter keeps a bucket for. One forgotten (the oldest
// first) starts again with a full bucket, so an attacker would need this many addresses of its
// own to reset its own: more than a flood from one host has.
const Remembered = 1 << 16

// Limiter is a token bucket per client address. It is safe for concurrent use.
type Limiter struct {
	rate  rate.Limit
	burst int

	mu      sync.Mutex
	buckets *boundedmap.Map[string, *rate.Limiter]
}

// New returns a limiter that lets each address spend perSecond tokens a second, in bursts of up
// to burst.
func New(perSecond float64, burst int) *Limiter {
	return &Limiter{rate: rate.Limit(perSecond), burst: burst, buckets: boundedmap.New[string, *rate.Limiter](Remembered)}
}

func (l *Limiter) bucket(key string) *rate.Limiter {
	b, ok := l.buckets.Get(key)
	if !ok {
		b = rate.NewLimiter(l.rate, l.burst)
		l.buckets.Put(key, b)
	}
	return b
}

// Allow spends n tokens of key's bucket if it holds them. When it does not, nothing is spent and
// wait is how long until it will.
func (l *Limiter) Allow(key string, n int, now time.Time) (ok bool, wait time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	b := l.bucket(key)
	if b.AllowN(now, n) {
		return true, 0
	}
	return false, l.waitFor(b, n, now)
}

// Ready says whether key's bucket holds a token, spending nothing; when it does not, wait is how
// long until it will. With Spend, it limits failures only: a request is let in while the bucket
// holds a token, and each failure spends one.
func (l *Limiter) Ready(key string, now time.Time) (ok bool, wait time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	b, known := l.buckets.Get(key)
	if !known || b.TokensAt(now) >= 1 {
		return true, 0
	}
	return false, l.waitFor(b, 1, now)
}

// Spend takes a token from key's bucket, which may go below empty (down to one burst's worth of
// debt): a failure that Ready let in is always counted.
func (l *Limiter) Spend(key string, now time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	b := l.bucket(key)
	if b.TokensAt(now) > -float64(l.burst) {
		b.ReserveN(now, 1)
	}
}

// waitFor is how long until b holds n tokens. Under l.mu.
func (l *Limiter) waitFor(b *rate.Limiter, n int, now time.Time) time.Duration {
	if l.rate <= 0 {
		return time.Duration(math.MaxInt64)
	}
	missing := float64(n) - b.TokensAt(now)
	return time.Duration(math.Ceil(missing / float64(l.rate) * float64(time.Second)))
}

// RetryAfter is a wait as a Retry-After header's whole seconds: at least 1.
func RetryAfter(wait time.Duration) int {
	return max(1, int(math.Ceil(wait.Seconds())))
}
