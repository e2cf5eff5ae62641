package clientaddr

import (
	"net/http"
	"net/netip"
	"strings"
	"testing"
)

func TestResolve(t *testing.T) {
	proxies, err := ParseProxies("10.0.0.0/8, 2001:db8:ff::/48,192.0.2.1")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name    string
		proxies Proxies
		peer    string
		xff     []string // X-Forwarded-For headers, in order
		want    string   // "" for no address
	}{
		{"no proxies: the peer", Proxies{}, "198.51.100.7:5000", nil, "198.51.100.7"},
		{"no proxies: the header is ignored", Proxies{}, "198.51.100.7:5000", []string{"203.0.113.9"}, "198.51.100.7"},
		{"untrusted peer: a spoofed header is ignored", proxies, "198.51.100.7:5000", []string{"10.1.1.1, 203.0.113.9"}, "198.51.100.7"},
		{"trusted peer: the client it forwarded", proxies, "10.1.2.3:80", []string{"203.0.113.9"}, "203.0.113.9"},
		{"trusted peer: what the client wrote left of it is ignored", proxies, "10.1.2.3:80", []string{"1.2.3.4, 203.0.113.9"}, "203.0.113.9"},
		{"a chain of trusted proxies", proxies, "10.1.2.3:80", []string{"203.0.113.9, 192.0.2.1", "10.9.9.9"}, "203.0.113.9"},
		{"a client that names a trusted proxy is still the first untrusted hop", proxies, "10.1.2.3:80", []string{"10.0.0.1, 203.0.113.9, 10.5.5.5"}, "203.0.113.9"},
		{"only trusted hops: the farthest", proxies, "10.1.2.3:80", []string{"10.0.0.1, 10.0.0.2"}, "10.0.0.1"},
		{"trusted peer without the header", proxies, "10.1.2.3:80", nil, "10.1.2.3"},
		{"a malformed hop: the proxy that passed it", proxies, "10.1.2.3:80", []string{"203.0.113.9, junk, 10.0.0.2"}, "10.0.0.2"},
		{"a malformed last hop: the peer", proxies, "10.1.2.3:80", []string{"203.0.113.9, "}, "10.1.2.3"},
		{"hops with ports", proxies, "10.1.2.3:80", []string{"[2001:db8::7]:443, 10.0.0.2:8080"}, "2001:db8::7"},
		{"IPv6 proxy, IPv6 client", proxies, "[2001:db8:ff::1]:443", []string{"2001:db8:1::5"}, "2001:db8:1::5"},
		{"IPv4-mapped peer is the IPv4 proxy", proxies, "[::ffff:10.1.2.3]:80", []string{"::ffff:203.0.113.9"}, "203.0.113.9"},
		{"a zone is dropped", Proxies{}, "[fe80::1%eth0]:80", nil, "fe80::1"},
		{"a peer that is not an address", proxies, "@unix", []string{"203.0.113.9"}, ""},
	} {
		r := &http.Request{RemoteAddr: tc.peer, Header: http.Header{}}
		for _, h := range tc.xff {
			r.Header.Add("X-Forwarded-For", h)
		}
		got := tc.proxies.Resolve(r)
		if want, _ := netip.ParseAddr(tc.want); got != want {
			t.Errorf("%s: %v, want %v", tc.name, got, want)
		}
		if got := Of(tc.proxies.With(r)); got != tc.proxies.Resolve(r) {
			t.Errorf("%s: Of after With = %v", tc.name, got)
		}
	}
	r := &http.Request{RemoteAddr: "10.1.2.3:80", Header: http.Header{"X-Forwarded-For": {"203.0.113.9"}}}
	if got := Of(r); got != netip.MustParseAddr("10.1.2.3") {
		t.Errorf("Of a request that did not pass through With: %v, want its peer", got)
	}
}

func TestParseProxies(t *testing.T) {
	for in, want := range map[string]string{
		"":                                  "",
		" , ":                               "",
		"10.0.0.0/8":                        "10.0.0.0/8",
		"10.1.2.3/8, 192.0.2.1":             "10.0.0.0/8,192.0.2.1/32",
		"2001:db8::/32,::ffff:10.0.0.0/104": "2001:db8::/32,10.0.0.0/8",
	} {
		p, err := ParseProxies(in)
		if err != nil || p.String() != want {
			t.Errorf("ParseProxies(%q) = %q, %v; want %q", in, p.String(), err, want)
		}
	}
	for _, in := range []string{"10.0.0.0/33", "proxy.internal", "10.0.0.0/8;10.1.0.0/16"} {
		if _, err := ParseProxies(in); err == nil || !strings.Contains(err.Error(), "10.0.0.0/8 or 2001:db8::1") {
			t.Errorf("ParseProxies(%q): %v, want a refusal that shows the form", in, err)
		}
	}
}
