package auth

import (
	"slices"
	"strings"
	"testing"
)

// FuzzParseAllowlist feeds the allowlist parser what a settings form or an admin body may hold:
// it never panics, and what it accepts is canonical (masked, IPv4 as IPv4), admits its own
// ranges' addresses, and reads back as itself from its own listing.
func FuzzParseAllowlist(f *testing.F) {
	for _, s := range []string{"203.0.113.0/24", "2001:db8::/48", "::ffff:203.0.113.0/120", "10.0.0.1/8", "fe80::1%eth0",
		"0.0.0.0/0,::/0", "1.2.3.4", "", "::ffff:1.2.3.4", "1.2.3.4/33"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		list, err := ParseAllowlist(strings.Split(in, ","))
		if err != nil {
			return
		}
		for _, p := range list {
			if p.Masked() != p || p.Addr().Is4In6() || p.Addr().Zone() != "" {
				t.Fatalf("%q: accepted %v, which is not canonical", in, p)
			}
			if !Allowed(list, p.Addr()) {
				t.Fatalf("%q: %v is not allowed by its own range", in, p.Addr())
			}
		}
		again, err := ParseAllowlist(FormatAllowlist(list))
		if err != nil || !slices.Equal(again, list) {
			t.Fatalf("%q: the listing %v reads back as %v (%v)", in, FormatAllowlist(list), again, err)
		}
	})
}
