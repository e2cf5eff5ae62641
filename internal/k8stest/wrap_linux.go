package k8stest

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// envtest starts kube-apiserver and etcd in process groups of their own (so that a Ctrl-C meant for
// the test does not reach them before envtest stops them) and stops them only when the test calls
// Stop. A test process that is killed (go test's -timeout, Ctrl-C, SIGKILL, a crash) never does, and
// would leave both running, holding ports and temporary files.
//
// So on Linux Start does not hand envtest the binaries themselves but symbolic links named
// kube-apiserver and etcd to the test binary, next to a file naming the real folder and the test
// process. Started under those names, the test binary (the init function below: only package
// initialisation runs before it, no test code) asks the kernel to kill it when its parent dies
// (PR_SET_PDEATHSIG, which survives execve), and replaces itself with the real program: same pid,
// same arguments, so envtest sees no difference. The parent is the test process; strictly the OS thread that started the child, which
// the Go runtime only retires when a goroutine exits while locked to its thread
// (runtime.LockOSThread), which nothing here does.

// wrapperInfo is the file, next to the links, that names the folder of the real binaries and the
// pid of the test process.
const wrapperInfo = "pmx-k8stest-wrapper"

func init() {
	name := filepath.Base(os.Args[0])
	if name != "kube-apiserver" && name != "etcd" {
		return
	}
	data, err := os.ReadFile(filepath.Join(filepath.Dir(os.Args[0]), wrapperInfo))
	if err != nil {
		return // not started by Start
	}
	pidText, dir, ok := strings.Cut(string(data), "\n")
	parent, err := strconv.Atoi(pidText)
	if !ok || err != nil {
		fmt.Fprintf(os.Stderr, "k8stest: malformed %s\n", wrapperInfo)
		os.Exit(2)
	}
	if err := unix.Prctl(unix.PR_SET_PDEATHSIG, uintptr(unix.SIGKILL), 0, 0, 0); err != nil {
		fmt.Fprintf(os.Stderr, "k8stest: prctl(PR_SET_PDEATHSIG): %v\n", err)
		os.Exit(2)
	}
	// The test process may have died before the prctl: then nothing would kill this one.
	if os.Getppid() != parent {
		os.Exit(2)
	}
	path := filepath.Join(dir, name)
	err = syscall.Exec(path, append([]string{path}, os.Args[1:]...), os.Environ())
	fmt.Fprintf(os.Stderr, "k8stest: exec %s: %v\n", path, err)
	os.Exit(2)
}

// wrapBinaries makes, in dir, the links through which kube-apiserver and etcd from the folder bins
// are started so that they die with this process, and returns their paths.
func wrapBinaries(dir, bins string) (apiserver, etcd string, err error) {
	self, err := os.Executable()
	if err != nil {
		return "", "", err
	}
	if strings.Contains(bins, "\n") {
		return "", "", fmt.Errorf("k8stest: folder name %q has a newline", bins)
	}
	wrapDir := filepath.Join(dir, "bin")
	if err := os.Mkdir(wrapDir, 0o700); err != nil {
		return "", "", err
	}
	info := strconv.Itoa(os.Getpid()) + "\n" + bins
	if err := os.WriteFile(filepath.Join(wrapDir, wrapperInfo), []byte(info), 0o600); err != nil {
		return "", "", err
	}
	for _, name := range []string{"kube-apiserver", "etcd"} {
		if err := os.Symlink(self, filepath.Join(wrapDir, name)); err != nil {
			return "", "", err
		}
	}
	return filepath.Join(wrapDir, "kube-apiserver"), filepath.Join(wrapDir, "etcd"), nil
}
