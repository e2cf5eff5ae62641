package process

import (
	"os"
	"runtime/debug"
	"testing"

	"github.com/KimMachineGun/automemlimit/memlimit"
)

// TestLimitMemory checks that a 512 MiB container gets a Go memory limit of 75% of it, and that
// a GOMEMLIMIT set by the operator wins.
func TestLimitMemory(t *testing.T) {
	for _, env := range []string{"GOMEMLIMIT", "AUTOMEMLIMIT"} {
		if v, ok := os.LookupEnv(env); ok {
			t.Cleanup(func() { os.Setenv(env, v) })
			os.Unsetenv(env)
		}
	}
	before := debug.SetMemoryLimit(-1)
	t.Cleanup(func() { debug.SetMemoryLimit(before) })

	const pod = 512 << 20
	LimitMemory(memlimit.Limit(pod))
	if got, want := debug.SetMemoryLimit(-1), int64(pod*3/4); got < want-1 || got > want+1 {
		t.Fatalf("memory limit %d, want %d (75%% of 512 MiB)", got, want)
	}

	debug.SetMemoryLimit(before)
	t.Setenv("GOMEMLIMIT", "100MiB")
	LimitMemory(memlimit.Limit(pod))
	if got := debug.SetMemoryLimit(-1); got != before {
		t.Fatalf("memory limit %d with GOMEMLIMIT set, want it left at %d", got, before)
	}
}
