package auth

import (
	"errors"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestScopeAllows(t *testing.T) {
	// Each row: a key's scope and the scopes of the requests it may make, in Scopes order.
	for _, tc := range []struct {
		have Scope
		want []bool // allows read, cancel, trade, keys
	}{
		{ScopeRead, []bool{true, false, false, false}},
		{ScopeCancel, []bool{true, true, false, false}},
		{ScopeTrade, []bool{true, true, true, false}},
		{ScopeKeys, []bool{true, true, true, true}},
		{Scope("admin"), []bool{false, false, false, false}},
		{Scope(""), []bool{false, false, false, false}},
	} {
		for i, need := range Scopes {
			if got := tc.have.Allows(need); got != tc.want[i] {
				t.Errorf("%q.Allows(%q) = %v, want %v", tc.have, need, got, tc.want[i])
			}
		}
		if tc.have.Allows("write") {
			t.Errorf("%q allows an unknown scope", tc.have)
		}
	}
}

func TestParseScope(t *testing.T) {
	for in, want := range map[string]Scope{"": ScopeTrade, "read": ScopeRead, "cancel": ScopeCancel, "trade": ScopeTrade, "keys": ScopeKeys} {
		if got, err := ParseScope(in); got != want || err != nil {
			t.Errorf("ParseScope(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, in := range []string{"READ", "write", "admin", " read"} {
		if _, err := ParseScope(in); err == nil || !strings.Contains(err.Error(), "read, cancel, trade or keys") {
			t.Errorf("ParseScope(%q): %v, want a refusal naming the scopes", in, err)
		}
	}
}

func TestExpiry(t *testing.T) {
	now := time.Date(2026, 2, 28, 12, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name    string
		expires time.Time
		problem string // "" when allowed
	}{
		{"in a minute", now.Add(time.Minute), ""},
		{"exactly a year", now.AddDate(1, 0, 0), ""},
		{"a year and a microsecond", now.AddDate(1, 0, 0).Add(time.Microsecond), "more than a year away"},
		{"ten years", now.AddDate(10, 0, 0), "more than a year away"},
		{"now", now, "not in the future"},
		{"yesterday", now.AddDate(0, 0, -1), "not in the future"},
		{"a year ahead in another zone", now.AddDate(1, 0, 0).In(time.FixedZone("x", -5*3600)), ""},
	} {
		err := CheckExpiry(tc.expires, now)
		if tc.problem == "" && err != nil || tc.problem != "" && (err == nil || !strings.Contains(err.Error(), tc.problem)) {
			t.Errorf("%s: %v, want %q", tc.name, err, tc.problem)
		}
	}
	expires := now.Add(time.Hour)
	for _, tc := range []struct {
		at      time.Time
		expires *time.Time
		want    bool
	}{
		{now, nil, false},
		{now.AddDate(100, 0, 0), nil, false},
		{expires.Add(-time.Microsecond), &expires, false},
		{expires, &expires, true},
		{expires.Add(time.Second), &expires, true},
	} {
		if got := Expired(tc.expires, tc.at); got != tc.want {
			t.Errorf("Expired(%v, %v) = %v, want %v", tc.expires, tc.at, got, tc.want)
		}
	}
}

func TestParseAllowlist(t *testing.T) {
	for _, tc := range []struct {
		in      []string
		want    []string // as FormatAllowlist shows it
		problem string
	}{
		{nil, []string{}, ""},
		{[]string{"203.0.113.0/24", " 2001:db8::/48 "}, []string{"203.0.113.0/24", "2001:db8::/48"}, ""},
		{[]string{"203.0.113.7", "2001:db8::1"}, []string{"203.0.113.7/32", "2001:db8::1/128"}, ""},
		{[]string{"::ffff:203.0.113.0/120"}, []string{"203.0.113.0/24"}, ""},
		{[]string{"::ffff:203.0.113.7"}, []string{"203.0.113.7/32"}, ""},
		{[]string{"0.0.0.0/0", "::/0"}, []string{"0.0.0.0/0", "::/0"}, ""},
		{[]string{"10.0.0.1/8"}, nil, "write 10.0.0.0/8"},
		{[]string{"2001:db8::1/48"}, nil, "write 2001:db8::/48"},
		{[]string{"::ffff:0:0/96"}, []string{"0.0.0.0/0"}, ""},
		{[]string{"10.0.0.0/33"}, nil, "not a CIDR range"},
		{[]string{"10.0.0/8"}, nil, "not a CIDR range"},
		{[]string{"example.com"}, nil, "not an address"},
		{[]string{""}, nil, "not an address"},
		{[]string{"fe80::1%eth0"}, nil, "not an address"},
		{[]string{"fe80::%eth0/64"}, nil, "not a CIDR range"},
		{slices.Repeat([]string{"10.0.0.0/8"}, MaxAllowlist+1), nil, "takes 32 at most"},
	} {
		got, err := ParseAllowlist(tc.in)
		if tc.problem != "" {
			if err == nil || !strings.Contains(err.Error(), tc.problem) {
				t.Errorf("ParseAllowlist(%q): %v, want %q", tc.in, err, tc.problem)
			}
			continue
		}
		if err != nil || !slices.Equal(FormatAllowlist(got), tc.want) {
			t.Errorf("ParseAllowlist(%q) = %v, %v; want %v", tc.in, got, err, tc.want)
		}
	}
	if list, _ := ParseAllowlist(slices.Repeat([]string{"10.0.0.0/8"}, MaxAllowlist)); len(list) != MaxAllowlist {
		t.Errorf("%d entries kept of a full allowlist", len(list))
	}
}

func TestAllowed(t *testing.T) {
	list, err := ParseAllowlist([]string{"203.0.113.0/24", "2001:db8:1::/48", "198.51.100.7"})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		addr string
		want bool
	}{
		{"203.0.113.0", true},
		{"203.0.113.255", true},
		{"203.0.114.0", false},
		{"198.51.100.7", true},
		{"198.51.100.8", false},
		{"::ffff:203.0.113.9", true}, // an IPv4 client on a dual-stack listener
		{"::ffff:198.51.100.8", false},
		{"2001:db8:1:ffff::1", true},
		{"2001:db8:2::1", false},
		{"2001:db8:1::1%eth0", true},
		{"::203.0.113.9", false}, // IPv4-compatible, long deprecated, is not IPv4
		{"", false},              // no address known
	} {
		a, _ := netip.ParseAddr(tc.addr)
		if got := Allowed(list, a); got != tc.want {
			t.Errorf("Allowed(%s) = %v, want %v", tc.addr, got, tc.want)
		}
	}
	if !Allowed(nil, netip.Addr{}) || !Allowed(nil, netip.MustParseAddr("192.0.2.1")) {
		t.Error("an empty allowlist refused an address")
	}
}

// BenchmarkAllowed is the allowlist's cost per request at its largest: a client outside all 32
// ranges, checked against each.
func BenchmarkAllowed(b *testing.B) {
	var entries []string
	for i := range MaxAllowlist {
		entries = append(entries, netip.AddrFrom4([4]byte{10, byte(i), 0, 0}).String()+"/16")
	}
	list, err := ParseAllowlist(entries)
	if err != nil {
		b.Fatal(err)
	}
	client := netip.MustParseAddr("::ffff:203.0.113.9")
	for b.Loop() {
		if Allowed(list, client) {
			b.Fatal("allowed")
		}
	}
}

// TestMaxExpiryWithinTheStoredBound: the database allows a key 366 days (migration 023); the
// year the rule allows is never longer, leap days included.
func TestMaxExpiryWithinTheStoredBound(t *testing.T) {
	for _, created := range []time.Time{
		time.Date(2028, 2, 29, 12, 0, 0, 0, time.UTC), time.Date(2027, 3, 1, 0, 0, 0, 0, time.UTC),
		time.Date(2027, 12, 31, 23, 59, 59, 999999000, time.UTC), time.Date(2026, 11, 26, 18, 0, 0, 0, time.UTC),
	} {
		if d := MaxExpiry(created).Sub(created); d > 366*24*time.Hour || d < 365*24*time.Hour {
			t.Errorf("a key made %v may live %v", created, d)
		}
	}
}

// TestConfine checks that a key made with a key can do no more than its maker: what it asks
// beyond the maker is refused on the field at fault, and what it leaves out it inherits.
func TestConfine(t *testing.T) {
	soon := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	later, sooner := soon.Add(time.Second), soon.Add(-time.Hour)
	office := []netip.Prefix{netip.MustParsePrefix("203.0.113.0/24"), netip.MustParsePrefix("2001:db8::/48")}
	fenced := Maker{Scope: ScopeKeys, ExpiresAt: &soon, Allowlist: office}
	for _, tc := range []struct {
		name  string
		maker Maker
		spec  KeySpec
		field string // "" when allowed
	}{
		{"anything of an unfenced keys key", Maker{Scope: ScopeKeys}, KeySpec{Scope: ScopeKeys}, ""},
		{"trade by default", Maker{Scope: ScopeTrade}, KeySpec{}, ""},
		{"keys from a trade key", Maker{Scope: ScopeTrade}, KeySpec{Scope: ScopeKeys}, "scope"},
		{"trade from a cancel key", Maker{Scope: ScopeCancel}, KeySpec{}, "scope"},
		{"an unknown maker's scope", Maker{Scope: "admin"}, KeySpec{Scope: ScopeRead}, "scope"},
		{"expiring sooner", fenced, KeySpec{Scope: ScopeRead, ExpiresAt: &sooner}, ""},
		{"expiring with it", fenced, KeySpec{Scope: ScopeRead, ExpiresAt: &soon}, ""},
		{"outliving it", fenced, KeySpec{Scope: ScopeRead, ExpiresAt: &later}, "expiresAt"},
		{"a narrower range", fenced, KeySpec{Allowlist: []netip.Prefix{netip.MustParsePrefix("203.0.113.7/32")}}, ""},
		{"a wider range", fenced, KeySpec{Allowlist: []netip.Prefix{netip.MustParsePrefix("203.0.112.0/23")}}, "ipAllowlist"},
		{"a range of the other family", fenced, KeySpec{Allowlist: []netip.Prefix{netip.MustParsePrefix("2001:db9::/48")}}, "ipAllowlist"},
		{"anywhere", fenced, KeySpec{Allowlist: []netip.Prefix{netip.MustParsePrefix("0.0.0.0/0")}}, "ipAllowlist"},
	} {
		spec := tc.spec
		err := Confine(&spec, tc.maker)
		var ke *KeyError
		if tc.field == "" && err != nil || tc.field != "" && (!errors.As(err, &ke) || ke.Field != tc.field || !errors.Is(err, ErrBeyondMaker)) {
			t.Errorf("%s: %v, want a refusal on %q", tc.name, err, tc.field)
		}
	}
	// What the spec leaves out, it inherits from a fenced maker; a spec's own choices stay.
	var spec KeySpec
	if err := Confine(&spec, fenced); err != nil || spec.ExpiresAt == nil || !spec.ExpiresAt.Equal(soon) || !slices.Equal(spec.Allowlist, office) {
		t.Errorf("an empty spec under a fenced maker: %+v (%v), want its expiry and allowlist", spec, err)
	}
	spec = KeySpec{ExpiresAt: &sooner}
	if err := Confine(&spec, fenced); err != nil || !spec.ExpiresAt.Equal(sooner) {
		t.Errorf("a spec's own expiry: %+v (%v)", spec, err)
	}
}

func TestCheckLabel(t *testing.T) {
	for label, problem := range map[string]string{"": "", "desk bot #2 — é": "", strings.Repeat("é", MaxLabelLen): "",
		strings.Repeat("x", MaxLabelLen+1): "too long", "two\nlines": "one line", "bad \xff": "one line"} {
		err := CheckLabel(label)
		if problem == "" && err != nil || problem != "" && (err == nil || !strings.Contains(err.Error(), problem)) {
			t.Errorf("CheckLabel(%q): %v, want %q", label, err, problem)
		}
	}
}
