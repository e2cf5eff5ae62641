package clientaddr

import (
	"net/http"
	"strings"
	"testing"
)

// FuzzResolve: whatever a client writes in X-Forwarded-For, a peer that is not a trusted proxy is
// its own answer, and a trusted one's answer is the peer or one of the header's addresses.
func FuzzResolve(f *testing.F) {
	f.Add("10.1.2.3:80", "203.0.113.9, 10.0.0.2")
	f.Add("198.51.100.7:1", "10.0.0.1")
	f.Add("[::ffff:10.0.0.1]:80", "[2001:db8::1]:443, junk")
	proxies, err := ParseProxies("10.0.0.0/8")
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, peer, xff string) {
		r := &http.Request{RemoteAddr: peer, Header: http.Header{"X-Forwarded-For": {xff}}}
		got := proxies.Resolve(r)
		direct := Proxies{}.Resolve(r)
		if got == direct {
			return
		}
		if !proxies.trusts(direct) {
			t.Fatalf("peer %q is not trusted, yet the answer is %v, not %v", peer, got, direct)
		}
		for _, h := range strings.Split(xff, ",") {
			if a := parse(strings.TrimSpace(h)); a.IsValid() && a == got {
				return
			}
		}
		t.Fatalf("%v is neither the peer %q nor in %q", got, peer, xff)
	})
}
