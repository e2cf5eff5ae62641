package serve

import (
	"strings"
	"testing"

	"github.com/pmx-dev/pmx/internal/kit/ratelimit"
)

// TestTrustedProxiesFlag: --trusted-proxies is read with the other serving flags, and a value
// that is not a list of ranges stops the server from starting, saying what to write.
func TestTrustedProxiesFlag(t *testing.T) {
	for _, tc := range []struct {
		flag, want, problem string
	}{
		{"", "", ""},
		{"10.0.0.0/8, fd00::/8", "10.0.0.0/8,fd00::/8", ""},
		{"192.0.2.1", "192.0.2.1/32", ""},
		{"10.0.0.0/8;10.1.0.0/16", "", "--trusted-proxies: "},
		{"ingress-nginx", "", "10.0.0.0/8 or 2001:db8::1"},
	} {
		o := Options{Read: ratelimit.DefaultRead, Write: ratelimit.DefaultWrite, trustedProxies: tc.flag}
		err := o.Check()
		if tc.problem != "" {
			if err == nil || !strings.Contains(err.Error(), tc.problem) {
				t.Errorf("--trusted-proxies=%q: %v, want a refusal with %q", tc.flag, err, tc.problem)
			}
			continue
		}
		if err != nil || o.Proxies.String() != tc.want {
			t.Errorf("--trusted-proxies=%q: %q, %v; want %q", tc.flag, o.Proxies.String(), err, tc.want)
		}
	}
}
