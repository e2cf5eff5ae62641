package settings

import (
	"crypto/tls"
	"net/http"
	"testing"
)

func TestDollars(t *testing.T) {
	for cents, want := range map[int64]string{
		0: "$0.00", 5: "$0.05", 100: "$1.00", 99_999: "$999.99", 100_000: "$1,000.00",
		1_000_000: "$10,000.00", 123_456_789: "$1,234,567.89", -250: "-$2.50",
	} {
		if got := dollars(cents); got != want {
			t.Errorf("dollars(%d) = %q, want %q", cents, got, want)
		}
	}
}

func TestIsSecure(t *testing.T) {
	for _, tc := range []struct {
		tls   bool
		proto string
		want  bool
	}{
		{false, "", false},
		{true, "", true},
		{false, "https", true},
		{false, "HTTPS", true},
		{false, "https, http", true},
		{false, "http", false},
		{true, "http", true}, // the header can only make it stricter
	} {
		r := &http.Request{Header: http.Header{}}
		if tc.tls {
			r.TLS = &tls.ConnectionState{}
		}
		if tc.proto != "" {
			r.Header.Set("X-Forwarded-Proto", tc.proto)
		}
		if got := isSecure(r); got != tc.want {
			t.Errorf("isSecure(tls=%v, X-Forwarded-Proto=%q) = %v, want %v", tc.tls, tc.proto, got, tc.want)
		}
	}
}

func TestLabelProblem(t *testing.T) {
	for label, bad := range map[string]bool{"": false, "market maker": false, "ünï ✓": false,
		"a\tb": true, "a\x00": true, "\xff": true} {
		if got := labelProblem(label) != ""; got != bad {
			t.Errorf("labelProblem(%q) = %v, want %v", label, got, bad)
		}
	}
}
