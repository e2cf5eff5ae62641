package pgcluster

import (
	"os"
	"strconv"
	"strings"
	"syscall"
)

// SetParentDeathSignal makes the kernel send sig to the child when the Go process dies, however it
// dies (SIGKILL, panic, go test -timeout). Go applies it after switching credentials, so it survives
// the setuid done for root. Caveat: the kernel ties it to the forking OS thread, and the Go runtime
// only retires threads whose goroutine exited while locked with runtime.LockOSThread; nothing in
// pmx does that.
func SetParentDeathSignal(attr *syscall.SysProcAttr, sig syscall.Signal) {
	attr.Pdeathsig = sig
}

// processIsPostgres reports whether pid is a PostgreSQL process. known is false when that cannot be
// told (no /proc), in which case callers must assume it is one.
func processIsPostgres(pid int) (isPostgres, known bool) {
	comm, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/comm")
	if err != nil {
		return false, false
	}
	name := strings.TrimSpace(string(comm))
	return name == "postgres" || name == "postmaster", true
}

// processGone reports whether pid no longer runs. Zombies count as gone: after its parent was
// killed, postgres is reparented to PID 1, which in a container may never reap it.
func processGone(pid int) bool {
	if err := syscall.Kill(pid, 0); err == syscall.ESRCH {
		return true
	}
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return os.IsNotExist(err)
	}
	// The state follows the parenthesised command name, which may itself contain ")".
	if i := strings.LastIndexByte(string(stat), ')'); i >= 0 && i+2 < len(stat) {
		return stat[i+2] == 'Z' || stat[i+2] == 'X'
	}
	return false
}
