package apiserver_test

import (
	"io"
	"net/http"
	"net/netip"
	"strings"
	"testing"

	"github.com/pmx-dev/pmx/apiserver"
	"github.com/pmx-dev/pmx/internal/exchangetest"
	"github.com/pmx-dev/pmx/internal/kit/auth"
	"github.com/pmx-dev/pmx/internal/kit/clientaddr"
)

// TestTrustedProxies checks, over real HTTP, that keys' allowlists and the per-address limit on
// failed authentications see the same client address (package clientaddr): X-Forwarded-For from
// a trusted proxy, and never from a peer that is not one, whatever it writes.
func TestTrustedProxies(t *testing.T) {
	loopback, err := clientaddr.ParseProxies("127.0.0.0/8, ::1")
	if err != nil {
		t.Fatal(err)
	}
	behind := exchangetest.StartDev(t, func(c *apiserver.Config) { c.TrustedProxies = loopback })
	direct := exchangetest.StartDev(t)
	office := []netip.Prefix{netip.MustParsePrefix("203.0.113.0/24")}

	get := func(tg *exchangetest.Target, key, xff string) (int, string) {
		req, _ := http.NewRequest("GET", tg.URL+"/api/v1/account", nil)
		req.Header.Set("Authorization", "Bearer "+key)
		if xff != "" {
			req.Header.Set("X-Forwarded-For", xff)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}
	for _, tc := range []struct {
		name string
		tg   *exchangetest.Target
		xff  string
		want int
	}{
		{"behind a trusted proxy: the client it forwarded", behind, "203.0.113.9", http.StatusOK},
		{"behind a trusted proxy: a client outside the list", behind, "198.51.100.1", http.StatusForbidden},
		{"behind a trusted proxy: what a client wrote left of its own address is not read", behind, "203.0.113.9, 198.51.100.1", http.StatusForbidden},
		{"behind a trusted proxy: no header, the proxy's own address", behind, "", http.StatusForbidden},
		{"no trusted proxies: a spoofed header is ignored", direct, "203.0.113.9", http.StatusForbidden},
	} {
		c := tc.tg.AddKey(t, tc.tg.NewAccount(t, "proxied"), auth.KeySpec{Scope: auth.ScopeRead, Allowlist: office})
		if status, body := get(tc.tg, c.Key, tc.xff); status != tc.want {
			t.Errorf("%s: %d %s, want %d", tc.name, status, body, tc.want)
		} else if status == http.StatusForbidden && !strings.Contains(body, "ip_not_allowed") {
			t.Errorf("%s: %s, want ip_not_allowed", tc.name, body)
		}
	}

	// The failed-authentication limit counts the same address: behind the proxy, one client's
	// failures do not throttle another; without trusted proxies, a new X-Forwarded-For each time
	// does not escape it.
	unknown := "pmx_0123456789abcdef_" + strings.Repeat("A", 32)
	throttle := func(tg *exchangetest.Target, xff string) {
		for range 200 {
			if status, _ := get(tg, unknown, xff); status == http.StatusTooManyRequests {
				return
			}
		}
		t.Fatalf("200 failures from %s were never throttled", xff)
	}
	throttle(behind, "198.51.100.1")
	if status, body := get(behind, unknown, "198.51.100.2"); status != http.StatusUnauthorized {
		t.Errorf("behind the proxy, another client after the first was throttled: %d %s, want 401", status, body)
	}
	throttle(direct, "198.51.100.1")
	if status, body := get(direct, unknown, "198.51.100.2"); status != http.StatusTooManyRequests {
		t.Errorf("without trusted proxies, a new X-Forwarded-For escaped the limit: %d %s, want 429", status, body)
	}
}
