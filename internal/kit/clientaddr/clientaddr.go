// Package clientaddr owns the one answer to "which address did this request come from?", for
// every rule that counts or checks a client by its address: the per-address limits (package
// addrlimit: failed authentications, the public feed and pages, sign-ins and sign-ups) and API
// keys' address allowlists. Two answers would let a client be counted by one address and checked
// by another.
//
// The address is the TCP peer's, unless the peer is one of the configured trusted proxies: then
// X-Forwarded-For is read from its right end, hop by hop, and the client is the first address that
// is not a trusted proxy. Anything left of that is the client's to write and is never read, so a
// client cannot choose its address by sending the header, and with no trusted proxies (the
// default) the header is ignored whole. Only X-Forwarded-For is read: it is what the proxies pmx
// is deployed behind (ingress-nginx, cloud load balancers) write; X-Real-IP and Forwarded are not.
package clientaddr

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strings"
)

// Proxies are the addresses of the proxies whose X-Forwarded-For is believed. The zero value
// trusts none.
type Proxies struct{ list []netip.Prefix }

// ParseProxies reads a comma-separated list of CIDR ranges or addresses, IPv4 or IPv6 (as the
// --trusted-proxies flag takes it); "" trusts none.
func ParseProxies(s string) (Proxies, error) {
	var p Proxies
	for f := range strings.SplitSeq(s, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		r, err := netip.ParsePrefix(f)
		if err != nil {
			a, aerr := netip.ParseAddr(f)
			if aerr != nil || a.Zone() != "" {
				return Proxies{}, fmt.Errorf("trusted proxy %q is not a CIDR range or an address: write it like 10.0.0.0/8 or 2001:db8::1", f)
			}
			a = a.Unmap()
			r = netip.PrefixFrom(a, a.BitLen())
		}
		if a := r.Addr(); a.Is4In6() && r.Bits() >= 96 {
			r = netip.PrefixFrom(a.Unmap(), r.Bits()-96)
		}
		p.list = append(p.list, r.Masked())
	}
	return p, nil
}

// String lists the trusted ranges as ParseProxies reads them.
func (p Proxies) String() string {
	s := make([]string, len(p.list))
	for i, r := range p.list {
		s[i] = r.String()
	}
	return strings.Join(s, ",")
}

func (p Proxies) trusts(a netip.Addr) bool {
	for _, r := range p.list {
		if r.Contains(a) {
			return true
		}
	}
	return false
}

// Resolve is the client address of a request (see the package doc): the TCP peer's, or, from a
// trusted proxy, the nearest untrusted address in X-Forwarded-For. When the nearest trusted hop
// wrote something that is not an address, the answer is that hop: what lies beyond it cannot be
// known. The zero Addr means the peer's address could not be read (a listener that is not TCP).
func (p Proxies) Resolve(r *http.Request) netip.Addr {
	client := parse(r.RemoteAddr)
	if !client.IsValid() || !p.trusts(client) {
		return client
	}
	hops := r.Header.Values("X-Forwarded-For")
	for i := len(hops) - 1; i >= 0; i-- {
		fields := strings.Split(hops[i], ",")
		for j := len(fields) - 1; j >= 0; j-- {
			a := parse(strings.TrimSpace(fields[j]))
			if !a.IsValid() {
				return client
			}
			client = a
			if !p.trusts(a) {
				return client
			}
		}
	}
	return client
}

// parse reads an address as a peer or a proxy writes it: bare, or with a port (host:port,
// [v6]:port); IPv4-mapped IPv6 as the IPv4 address it is, without an IPv6 zone.
func parse(s string) netip.Addr {
	if a, err := netip.ParseAddr(s); err == nil {
		return a.Unmap().WithZone("")
	}
	if host, _, err := net.SplitHostPort(s); err == nil {
		if a, err := netip.ParseAddr(host); err == nil {
			return a.Unmap().WithZone("")
		}
	}
	return netip.Addr{}
}

type ctxKey struct{}

// With returns r carrying its client address as p resolves it, for Of: the front resolves each
// request once, as it arrives, and every rule after reads the same answer.
func (p Proxies) With(r *http.Request) *http.Request {
	return r.WithContext(context.WithValue(r.Context(), ctxKey{}, p.Resolve(r)))
}

// Of is a request's client address: as With left it, or, for a request that did not pass
// through With, its TCP peer's (a zero Proxies' answer).
func Of(r *http.Request) netip.Addr {
	if a, ok := r.Context().Value(ctxKey{}).(netip.Addr); ok {
		return a
	}
	return Proxies{}.Resolve(r)
}
