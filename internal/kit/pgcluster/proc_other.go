//go:build !linux

package pgcluster

import "syscall"

// SetParentDeathSignal is a no-op: only Linux can tie a child's life to its parent's. Elsewhere a
// killed pmx leaves postgres running; the next Start finds it through postmaster.pid and reports it.
func SetParentDeathSignal(*syscall.SysProcAttr, syscall.Signal) {}

func processIsPostgres(int) (isPostgres, known bool) { return false, false }

func processGone(pid int) bool { return syscall.Kill(pid, 0) == syscall.ESRCH }
