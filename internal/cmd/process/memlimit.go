package process

import (
	"errors"
	"fmt"
	"os"

	"github.com/KimMachineGun/automemlimit/memlimit"
)

// memoryRatio is the share of the container's memory limit the Go memory limit gets.
const memoryRatio = 0.75

// LimitMemory sets the Go memory limit (GOMEMLIMIT) to 75% of the container's cgroup memory
// limit, unless GOMEMLIMIT is set. The servers run with GOGC=400 (serve.go), which lets the heap
// grow to five times the live heap before a collection; with a few 64 MiB argon2id hashes live
// (the settings pages) that is past the api pod's 512 MiB, and the kernel kills the pod. With the
// limit, the collector runs harder as the heap nears the pod's limit instead. Outside a cgroup
// with a limit (a laptop) there is nothing to fit and nothing changes. main passes
// memlimit.FromCgroup; tests pass a fixed limit.
//
// Why 75%: the Go limit covers only the memory the runtime maps, not the binary's own pages, which
// for pmx (it carries the Kubernetes client libraries) add some 50 MiB of resident memory. With 90%
// the abuse suite's sign-up flood held pmx at 509 MiB, a breath from the api pod's 512 MiB; with
// 75% it holds about 440 MiB.
func LimitMemory(limit memlimit.Provider) {
	_, err := memlimit.Set(memlimit.WithProvider(limit), memlimit.WithRatio(memoryRatio))
	if err != nil && !errors.Is(err, memlimit.ErrNoCgroup) && !errors.Is(err, memlimit.ErrCgroupsNotSupported) {
		fmt.Fprintln(os.Stderr, "pmx: could not set the Go memory limit from the cgroup:", err)
	}
}
