package auth

import (
	"crypto/ed25519"
	"fmt"
	"net/netip"
	"strings"
	"time"
)

// The rules a key's expiry and address allowlist follow, for every place a key is made (the
// settings pages, the admin API) and every place one is used (the front's authentication).

// MaxAllowlist is how many address ranges one key's allowlist may hold: enough for a firm's
// offices and hosts, few enough that checking them all costs nothing per request.
const MaxAllowlist = 32

// MaxExpiry is how far after its creation a key may expire: a year (AddDate(1, 0, 0)).
func MaxExpiry(created time.Time) time.Time { return created.AddDate(1, 0, 0) }

// CheckExpiry checks a new key's expiry: after now and at most a year after it (MaxExpiry).
func CheckExpiry(expires, now time.Time) error {
	if !expires.After(now) {
		return fmt.Errorf("the expiry %s is not in the future: choose a time after %s", expires.UTC().Format(time.RFC3339), now.UTC().Format(time.RFC3339))
	}
	if limit := MaxExpiry(now); expires.After(limit) {
		return fmt.Errorf("the expiry %s is more than a year away: a key may live until %s at the latest; make a new key before then",
			expires.UTC().Format(time.RFC3339), limit.UTC().Format(time.RFC3339))
	}
	return nil
}

// Expired says whether a key with this expiry (nil: none) has expired at now.
func Expired(expires *time.Time, now time.Time) bool {
	return expires != nil && !now.Before(*expires)
}

// ParseAllowlist reads a key's allowlist: address ranges in CIDR notation, IPv4 or IPv6
// (203.0.113.0/24, 2001:db8::/48), or single addresses (a /32 or /128). A range with bits set
// past its length (10.0.0.1/8) is refused rather than widened or narrowed, since either guess
// could be wrong; an IPv4-mapped IPv6 range is read as the IPv4 range it maps, since clients'
// addresses are compared unmapped (Allowed). No entries: the key is usable from anywhere (nil).
func ParseAllowlist(entries []string) ([]netip.Prefix, error) {
	if len(entries) > MaxAllowlist {
		return nil, fmt.Errorf("the allowlist has %d entries: a key takes %d at most; list wider ranges instead", len(entries), MaxAllowlist)
	}
	var list []netip.Prefix
	for _, e := range entries {
		p, err := parseRange(strings.TrimSpace(e))
		if err != nil {
			return nil, err
		}
		list = append(list, p)
	}
	return list, nil
}

func parseRange(s string) (netip.Prefix, error) {
	if !strings.Contains(s, "/") {
		a, err := netip.ParseAddr(s)
		if err != nil || a.Zone() != "" {
			return netip.Prefix{}, fmt.Errorf("%q is not an address or a CIDR range: write one like 203.0.113.0/24 or 2001:db8::/48", s)
		}
		a = a.Unmap()
		return netip.PrefixFrom(a, a.BitLen()), nil
	}
	p, err := netip.ParsePrefix(s)
	if err != nil {
		return p, fmt.Errorf("%q is not a CIDR range: write one like 203.0.113.0/24 or 2001:db8::/48", s)
	}
	if p.Masked() != p {
		return p, fmt.Errorf("%q has bits set past its length %d: write %s for the whole range, or the address alone for just it",
			s, p.Bits(), p.Masked())
	}
	// A masked range with a mapped address is /96 or longer: all of it maps IPv4.
	if a := p.Addr(); a.Is4In6() {
		p = netip.PrefixFrom(a.Unmap(), p.Bits()-96)
	}
	return p, nil
}

// Allowed says whether a request from addr may use a key with this allowlist: any address when
// the list is empty, else one in a listed range. An IPv4 client seen as an IPv4-mapped IPv6
// address (a dual-stack listener's ::ffff:203.0.113.7) is compared as the IPv4 address it is; an
// invalid address (no client address known) is in no range.
func Allowed(list []netip.Prefix, addr netip.Addr) bool {
	if len(list) == 0 {
		return true
	}
	addr = addr.Unmap().WithZone("")
	for _, p := range list {
		if p.Contains(addr) {
			return true
		}
	}
	return false
}

// FormatAllowlist is an allowlist as the API and pages show it.
func FormatAllowlist(list []netip.Prefix) []string {
	out := make([]string, len(list))
	for i, p := range list {
		out[i] = p.String()
	}
	return out
}

// KeySpec is what whoever makes a key chooses for it.
type KeySpec struct {
	Label     string
	Scope     Scope             // "" is not a scope: ParseScope("") gives trade
	ExpiresAt *time.Time        // nil: never
	Allowlist []netip.Prefix    // nil: any address
	PublicKey ed25519.PublicKey // nil: the key does not sign its requests (signing.go)
}
