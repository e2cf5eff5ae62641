package auth

import (
	"crypto/ed25519"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
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

// MaxKeys is how many active keys (neither revoked nor expired) an account may hold, however
// they are made: enough for a key per bot, desk and host of a firm; few enough that a key that
// makes keys (ScopeKeys) cannot fill the exchange's key table. A key revoked or expired no longer
// counts.
const MaxKeys = 100

// MaxLabelLen is how long a key's label may be, in characters.
const MaxLabelLen = 64

// CheckLabel checks a new key's label: plain text on one line, at most MaxLabelLen characters;
// empty is allowed.
func CheckLabel(label string) error {
	if !utf8.ValidString(label) || strings.IndexFunc(label, unicode.IsControl) >= 0 {
		return errors.New("the label must be plain text on one line")
	}
	if n := utf8.RuneCountInString(label); n > MaxLabelLen {
		return fmt.Errorf("the label is too long: keep it to %d characters or fewer", MaxLabelLen)
	}
	return nil
}

// Maker is the key that makes a new key through the API (POST /api/v1/account/keys), as far as
// the new key's rights go.
type Maker struct {
	Scope     Scope
	ExpiresAt *time.Time     // nil: never
	Allowlist []netip.Prefix // nil: any address
}

// ErrBeyondMaker refuses a key that would be able to do more than the key that makes it
// (Confine); the *KeyError says which field.
var ErrBeyondMaker = errors.New("a key may not make a key that can do more than itself")

// KeyError is a refusal of one field of a key's spec.
type KeyError struct {
	Field string // the API's name: scope, expiresAt or ipAllowlist
	Err   error
}

func (e *KeyError) Error() string { return e.Err.Error() }
func (e *KeyError) Unwrap() error { return e.Err }

// Confine makes spec, a key to be made by the key m, no more than m: a key made with a key can
// never do more, for longer or from more places than the key that made it, so no key, however
// it came by the scope keys, can widen its own rights by making another. What spec leaves out it
// inherits from m: a key made by a key that expires expires with it, and one made by a key bound
// to addresses is bound to the same. What spec asks beyond m is refused (a *KeyError wrapping
// ErrBeyondMaker), never narrowed in silence: the scope must be one m allows, the expiry no later
// than m's, and each range of the allowlist within one of m's. A public key (signing) takes
// nothing from m: it narrows how a key is used, never what it may do.
func Confine(spec *KeySpec, m Maker) error {
	scope := spec.Scope
	if scope == "" {
		scope = ScopeTrade // as ParseScope reads it
	}
	if !m.Scope.Allows(scope) {
		return &KeyError{"scope", fmt.Errorf("%w: this key's scope is %s, so the key it makes may be %s at most, not %s",
			ErrBeyondMaker, m.Scope, m.Scope, scope)}
	}
	if m.ExpiresAt != nil {
		switch {
		case spec.ExpiresAt == nil:
			t := *m.ExpiresAt
			spec.ExpiresAt = &t
		case spec.ExpiresAt.After(*m.ExpiresAt):
			return &KeyError{"expiresAt", fmt.Errorf("%w: this key expires at %s, and the key it makes may not outlive it; choose an expiry no later, or leave expiresAt out to expire with it",
				ErrBeyondMaker, m.ExpiresAt.UTC().Format(time.RFC3339))}
		}
	}
	if len(m.Allowlist) > 0 {
		if len(spec.Allowlist) == 0 {
			spec.Allowlist = slices.Clone(m.Allowlist)
			return nil
		}
		for _, p := range spec.Allowlist {
			if !slices.ContainsFunc(m.Allowlist, func(q netip.Prefix) bool { return q.Bits() <= p.Bits() && q.Contains(p.Addr()) }) {
				return &KeyError{"ipAllowlist", fmt.Errorf("%w: %s is not within this key's allowlist (%s); list ranges within it, or leave ipAllowlist out to take the same",
					ErrBeyondMaker, p, strings.Join(FormatAllowlist(m.Allowlist), ", "))}
			}
		}
	}
	return nil
}

// KeySpec is what whoever makes a key chooses for it.
type KeySpec struct {
	Label     string
	Scope     Scope             // "" is not a scope: ParseScope("") gives trade
	ExpiresAt *time.Time        // nil: never
	Allowlist []netip.Prefix    // nil: any address
	PublicKey ed25519.PublicKey // nil: the key does not sign its requests (signing.go)
}
