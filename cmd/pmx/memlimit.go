package main

import (
	"errors"
	"fmt"
	"os"

	"github.com/KimMachineGun/automemlimit/memlimit"
)

// limitMemory sets the Go memory limit (GOMEMLIMIT) to 90% of the container's cgroup memory
// limit, unless GOMEMLIMIT is set. The servers run with GOGC=400 (serve.go), which lets the heap
// grow to five times the live heap before a collection; with a few 64 MiB argon2id hashes live
// (the settings pages) that is past the api pod's 512 MiB, and the kernel kills the pod. With the
// limit, the collector runs harder as the heap nears the pod's limit instead. Outside a cgroup
// with a limit (a laptop) there is nothing to fit and nothing changes. main passes
// memlimit.FromCgroup; tests pass a fixed limit.
func limitMemory(limit memlimit.Provider) {
	_, err := memlimit.Set(memlimit.WithProvider(limit), memlimit.WithRatio(0.9))
	if err != nil && !errors.Is(err, memlimit.ErrNoCgroup) && !errors.Is(err, memlimit.ErrCgroupsNotSupported) {
		fmt.Fprintln(os.Stderr, "pmx: could not set the Go memory limit from the cgroup:", err)
	}
}
