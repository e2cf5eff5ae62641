package k8stest

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/pmx-dev/pmx/internal/poll"
)

// helperEnv makes TestHelperKilledControlPlane run, in a child test process.
const helperEnv = "PMX_K8STEST_HELPER"

// A test process that is killed while its control plane runs takes kube-apiserver and etcd with it.
func TestKilledTestLeavesNoProcesses(t *testing.T) {
	Assets(t)
	cmd := exec.CommandContext(t.Context(), os.Args[0], "-test.run=^TestHelperKilledControlPlane$", "-test.v")
	// The killed test cannot remove its temporary files (not the control plane's doing): its own
	// and those envtest makes in the temporary folder (the webhooks' serving certificates). They
	// all go into a folder of this test's, removed once the helper is gone.
	cmd.Env = append(os.Environ(), helperEnv+"=1", "TMPDIR="+t.TempDir())
	cmd.Stderr = os.Stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })

	var pids []int
	var output strings.Builder
	sc := bufio.NewScanner(stdout)
	for sc.Scan() {
		output.WriteString(sc.Text() + "\n")
		if rest, ok := strings.CutPrefix(sc.Text(), "CONTROL PLANE PIDS"); ok {
			for _, f := range strings.Fields(rest) {
				pid, err := strconv.Atoi(f)
				if err != nil {
					t.Fatal(err)
				}
				pids = append(pids, pid)
			}
			break
		}
	}
	if len(pids) != 2 {
		t.Fatalf("the helper test reported control plane pids %v, want 2:\n%s", pids, output.String())
	}
	for _, pid := range pids {
		if !alive(pid) {
			t.Fatalf("control plane process %d is not running before the kill", pid)
		}
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	allGone := func(context.Context) (bool, error) {
		for _, pid := range pids {
			if alive(pid) {
				return false, nil
			}
		}
		return true, nil
	}
	if err := poll.Until(t.Context(), 10*time.Second, allGone); err != nil {
		for _, pid := range pids {
			if alive(pid) {
				t.Errorf("%s (pid %d) still runs 10s after its test process was killed", comm(pid), pid)
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
		}
		t.FailNow()
	}
}

// TestHelperKilledControlPlane starts a control plane, prints the pids of kube-apiserver and etcd and
// waits to be killed. It runs only under TestKilledTestLeavesNoProcesses.
func TestHelperKilledControlPlane(t *testing.T) {
	if os.Getenv(helperEnv) != "1" {
		t.Skip("run by TestKilledTestLeavesNoProcesses")
	}
	Start(t)
	var pids []string
	for _, pid := range children(t) {
		if c := comm(pid); c == "kube-apiserver" || c == "etcd" {
			pids = append(pids, strconv.Itoa(pid))
		}
	}
	fmt.Println("CONTROL PLANE PIDS", strings.Join(pids, " "))
	select {} // killed by the parent test
}

// children returns the pids of this process's children.
func children(t *testing.T) []int {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if ppid, _, ok := stat(pid); ok && ppid == os.Getpid() {
			pids = append(pids, pid)
		}
	}
	return pids
}

// alive reports whether process pid exists and is not a zombie.
func alive(pid int) bool {
	_, state, ok := stat(pid)
	return ok && state != "Z" && state != "X"
}

// stat returns the parent pid and state of process pid from /proc/<pid>/stat.
func stat(pid int) (ppid int, state string, ok bool) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, "", false
	}
	// pid (comm) state ppid ...; comm may hold spaces and parentheses.
	i := strings.LastIndexByte(string(data), ')')
	if i < 0 {
		return 0, "", false
	}
	f := strings.Fields(string(data[i+1:]))
	if len(f) < 2 {
		return 0, "", false
	}
	ppid, err = strconv.Atoi(f[1])
	return ppid, f[0], err == nil
}

func comm(pid int) string {
	data, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
	return strings.TrimSpace(string(data))
}
