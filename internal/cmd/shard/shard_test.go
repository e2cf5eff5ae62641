package shard

import "testing"

// TestAdvertised: the address a shard registers, from --advertise-address (the chart gives a pod's
// IP alone), the address it listens on, and the machine's name.
func TestAdvertised(t *testing.T) {
	for _, tc := range []struct{ flag, addr, listening, want string }{
		{"shard-0.pmx-shard.pmx.svc:8090", ":8090", "[::]:8090", "shard-0.pmx-shard.pmx.svc:8090"},
		{"10.244.0.21", ":8090", "[::]:8090", "10.244.0.21:8090"},
		{"fd00:10:244::15", ":8090", "[::]:8090", "[fd00:10:244::15]:8090"},
		{"[fd00:10:244::15]", ":8090", "[::]:8090", "[fd00:10:244::15]:8090"},
		{"", ":0", "[::]:41234", "node-a:41234"},
		{"", "127.0.0.1:0", "127.0.0.1:41234", "127.0.0.1:41234"},
	} {
		if got := advertised(tc.flag, tc.addr, tc.listening, "node-a"); got != tc.want {
			t.Errorf("advertised(%q, %q, %q): %q, want %q", tc.flag, tc.addr, tc.listening, got, tc.want)
		}
	}
}
