package addrlimit

import (
	"net/http"
	"strconv"
	"testing"
	"time"
)

func TestKey(t *testing.T) {
	for addr, want := range map[string]string{
		"192.0.2.7:4321":              "192.0.2.7",
		"[::ffff:192.0.2.7]:4321":     "192.0.2.7",
		"[2001:db8:1:2:3:4:5:6]:443":  "2001:db8:1:2::/64",
		"[2001:db8:1:2:ff::1%eth0]:1": "2001:db8:1:2::/64",
		"[fe80::1%eth0]:80":           "fe80::/64",
		"not an address":              "not an address",
		"192.0.2.7":                   "192.0.2.7",
	} {
		if got := Key(&http.Request{RemoteAddr: addr}); got != want {
			t.Errorf("Key(%q) = %q, want %q", addr, got, want)
		}
	}
}

func TestAllow(t *testing.T) {
	l := New(2, 3) // 2 a second, bursts of 3
	now := time.Unix(1_000_000, 0)
	for i := range 3 {
		if ok, _ := l.Allow("a", 1, now); !ok {
			t.Fatalf("token %d of a burst of 3 refused", i+1)
		}
	}
	ok, wait := l.Allow("a", 1, now)
	if ok || wait != 500*time.Millisecond {
		t.Fatalf("a fourth token at once: %v, wait %v; want refused, 500ms", ok, wait)
	}
	if ok, _ := l.Allow("b", 1, now); !ok {
		t.Fatal("another address was refused: its bucket is its own")
	}
	if ok, _ := l.Allow("a", 1, now.Add(500*time.Millisecond)); !ok {
		t.Fatal("refused after the wait it was told")
	}
	if ok, wait := l.Allow("a", 2, now.Add(500*time.Millisecond)); ok || wait != time.Second {
		t.Fatalf("two tokens from an empty bucket: %v, wait %v; want refused, 1s", ok, wait)
	}
	if got := RetryAfter(1); got != 1 {
		t.Errorf("RetryAfter(1ns) = %d, want 1", got)
	}
	if got := RetryAfter(1500 * time.Millisecond); got != 2 {
		t.Errorf("RetryAfter(1.5s) = %d, want 2", got)
	}
}

// Ready and Spend count failures only: an address is let in while it has not failed too often,
// and its failures cost another address nothing.
func TestReadySpend(t *testing.T) {
	l := New(1, 2) // a failure a second, bursts of 2
	now := time.Unix(1_000_000, 0)
	for range 10 {
		if ok, _ := l.Ready("owner", now); !ok {
			t.Fatal("an address that never failed was refused")
		}
	}
	for i := range 2 {
		if ok, _ := l.Ready("guesser", now); !ok {
			t.Fatalf("failure %d of a burst of 2 refused", i+1)
		}
		l.Spend("guesser", now)
	}
	if ok, wait := l.Ready("guesser", now); ok || wait != time.Second {
		t.Fatalf("after 2 failures: %v, wait %v; want refused, 1s", ok, wait)
	}
	if ok, _ := l.Ready("owner", now); !ok {
		t.Fatal("the owner's address was refused for another's failures")
	}
	// Failures past the limit (requests already let in when it was reached) are counted, up to
	// a burst's worth of debt.
	for range 10 {
		l.Spend("guesser", now)
	}
	if ok, wait := l.Ready("guesser", now); ok || wait != 3*time.Second {
		t.Fatalf("after 12 failures: %v, wait %v; want refused, 3s (at most a burst of debt)", ok, wait)
	}
	if ok, _ := l.Ready("guesser", now.Add(3*time.Second)); !ok {
		t.Fatal("refused after the wait it was told")
	}
}

// A limiter forgets the oldest addresses past Remembered, and stays that size.
func TestRemembered(t *testing.T) {
	l := New(1, 1)
	now := time.Unix(1_000_000, 0)
	l.Allow("first", 1, now)
	for i := range Remembered {
		l.Allow(strconv.Itoa(i), 1, now)
	}
	if n := l.buckets.Len(); n != Remembered {
		t.Fatalf("%d buckets, want %d", n, Remembered)
	}
	if ok, _ := l.Allow("first", 1, now); !ok {
		t.Fatal("the oldest address was not forgotten")
	}
}
