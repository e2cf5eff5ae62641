package bench

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// procStat is what the bench reads from /proc/<pid>/stat (proc(5)); times are in clock ticks.
type procStat struct {
	pid, ppid      int
	comm           string
	state          byte
	utime, stime   uint64 // this process, all its threads, live and exited
	cutime, cstime uint64 // its children that exited and were waited for
}

// total is the CPU time of the process and of its children that it has reaped.
func (s procStat) total() uint64 { return s.utime + s.stime + s.cutime + s.cstime }

// parseStat parses the content of /proc/<pid>/stat. The command name is in parentheses and may
// itself contain spaces and parentheses, so the fields are counted from the last ")".
func parseStat(b []byte) (procStat, error) {
	var s procStat
	open, end := bytes.IndexByte(b, '('), bytes.LastIndexByte(b, ')')
	if open < 1 || end < open {
		return s, fmt.Errorf("malformed stat %.40q", b)
	}
	pid, err := strconv.Atoi(string(bytes.TrimSpace(b[:open])))
	if err != nil {
		return s, fmt.Errorf("malformed stat pid %.40q", b)
	}
	s.pid, s.comm = pid, string(b[open+1:end])
	// Fields from 3 (state) on; utime is field 14, cstime field 17.
	f := strings.Fields(string(b[end+1:]))
	if len(f) < 15 || len(f[0]) != 1 {
		return s, fmt.Errorf("stat of pid %d has %d fields after the name, want at least 15", pid, len(f))
	}
	s.state = f[0][0]
	nums := [5]uint64{}
	for i, idx := range [5]int{1, 11, 12, 13, 14} { // ppid, utime, stime, cutime, cstime
		v, err := strconv.ParseInt(f[idx], 10, 64)
		if err != nil || v < 0 {
			return s, fmt.Errorf("stat of pid %d: field %d is %q", pid, idx+3, f[idx])
		}
		nums[i] = uint64(v)
	}
	s.ppid = int(nums[0])
	s.utime, s.stime, s.cutime, s.cstime = nums[1], nums[2], nums[3], nums[4]
	return s, nil
}

// procFS reads process CPU times from a proc file system (root, normally /proc).
type procFS struct {
	root string
	tick time.Duration // one clock tick (1/CLK_TCK)
}

func newProcFS() procFS {
	return procFS{root: "/proc", tick: time.Second / time.Duration(clockTicks())}
}

// clockTicks is the kernel's USER_HZ, the unit of the times in /proc/<pid>/stat: getconf's
// answer, else 100, which it is on every Linux architecture in use.
func clockTicks() int {
	out, err := exec.Command("getconf", "CLK_TCK").Output()
	if err == nil {
		if n, err := strconv.Atoi(strings.TrimSpace(string(out))); err == nil && n > 0 {
			return n
		}
	}
	return 100
}

func (p procFS) stat(pid int) (procStat, error) {
	b, err := os.ReadFile(filepath.Join(p.root, strconv.Itoa(pid), "stat"))
	if err != nil {
		return procStat{}, err
	}
	return parseStat(b)
}

// processCPU is the CPU time of one process, its own and its reaped children's.
func (p procFS) processCPU(pid int) (time.Duration, error) {
	s, err := p.stat(pid)
	if err != nil {
		return 0, fmt.Errorf("while reading the CPU time of pid %d: %w", pid, err)
	}
	return time.Duration(s.total()) * p.tick, nil
}

// ownCPU is the CPU time of one process alone (user + system), without its children.
func (p procFS) ownCPU(pid int) (time.Duration, error) {
	s, err := p.stat(pid)
	if err != nil {
		return 0, fmt.Errorf("while reading the CPU time of pid %d: %w", pid, err)
	}
	return time.Duration(s.utime+s.stime) * p.tick, nil
}

// treeCPU is the CPU time used so far by process root and all its descendants, including those
// that have exited: every live process of the tree counts its own time plus that of the children
// it has reaped (which the kernel adds to cutime/cstime when they are waited for), so a backend
// that exits between two samples moves from the live sum into its parent's and is neither lost
// nor counted twice. It is the postmaster's view: it reaps every backend and helper it forks.
func (p procFS) treeCPU(root int) (time.Duration, error) {
	rs, err := p.stat(root)
	if err != nil {
		return 0, fmt.Errorf("while reading the CPU time of pid %d: %w", root, err)
	}
	entries, err := os.ReadDir(p.root)
	if err != nil {
		return 0, err
	}
	children := make(map[int][]procStat)
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == root {
			continue
		}
		s, err := p.stat(pid)
		if err != nil {
			if gone(err) {
				continue // exited meanwhile, or not ours to read
			}
			return 0, err
		}
		children[s.ppid] = append(children[s.ppid], s)
	}
	ticks := rs.total()
	queue := []int{root}
	for len(queue) > 0 {
		pid := queue[0]
		queue = queue[1:]
		for _, c := range children[pid] {
			ticks += c.total()
			queue = append(queue, c.pid)
		}
	}
	return time.Duration(ticks) * p.tick, nil
}

// gone reports whether reading a process's stat failed because the process exited after /proc was
// listed (ENOENT once it is reaped, ESRCH while it is being: the file opened, the read found no
// task) or is not ours to read: one to leave out of a scan of every process.
func gone(err error) bool {
	return errors.Is(err, os.ErrNotExist) || errors.Is(err, syscall.ESRCH) || errors.Is(err, os.ErrPermission)
}

// machineBusy is the CPU time all processors of the machine have spent busy since boot, from
// the first line of /proc/stat: user, nice, system, irq, softirq and steal (guest time is
// already in user); idle and iowait are not busy.
func (p procFS) machineBusy() (time.Duration, error) {
	b, err := os.ReadFile(filepath.Join(p.root, "stat"))
	if err != nil {
		return 0, err
	}
	return parseMachineBusy(b, p.tick)
}

func parseMachineBusy(b []byte, tick time.Duration) (time.Duration, error) {
	line, _, _ := bytes.Cut(b, []byte("\n"))
	f := strings.Fields(string(line))
	if len(f) < 9 || f[0] != "cpu" {
		return 0, fmt.Errorf("/proc/stat starts with %.60q, want the cpu line", line)
	}
	var busy uint64
	for _, i := range []int{1, 2, 3, 6, 7, 8} { // user nice system (idle iowait) irq softirq steal
		v, err := strconv.ParseUint(f[i], 10, 64)
		if err != nil {
			return 0, fmt.Errorf("/proc/stat: field %d of the cpu line is %q", i, f[i])
		}
		busy += v
	}
	return time.Duration(busy) * tick, nil
}

// pmxProcess is a pmx process the bench watches: its id, and what it runs ("pmx dev", "pmx
// shard", ...), under which its CPU time is told apart.
type pmxProcess struct {
	name string
	pid  int
}

// cpuSample is the CPU time used so far by the processes the bench watches, and by the machine.
type cpuSample struct {
	pmx      time.Duration            // pmx dev, or every pmx process of the distributed exchange
	pmxBy    map[string]time.Duration // pmx's, by what each process runs (pmxProcess.name)
	postgres time.Duration            // the postmaster and every process it forked
	loadgen  time.Duration            // this process: the load generator (and the bench's bookkeeping)
	machine  time.Duration            // every processor, busy with anything
}

// sample reads the CPU time of the pmx processes (pmx dev, or every pmx process of a distributed
// exchange), of Postgres, of the load generator and of the machine.
func (p procFS) sample(pmx []pmxProcess, postmasterPID int) (cpuSample, error) {
	s := cpuSample{pmxBy: map[string]time.Duration{}}
	errs := make([]error, 0, 3+len(pmx))
	var err error
	s.machine, err = p.machineBusy()
	errs = append(errs, err)
	for _, proc := range pmx {
		cpu, err := p.processCPU(proc.pid)
		s.pmx += cpu
		s.pmxBy[proc.name] += cpu
		errs = append(errs, err)
	}
	s.postgres, err = p.treeCPU(postmasterPID)
	errs = append(errs, err)
	s.loadgen, err = p.ownCPU(os.Getpid())
	errs = append(errs, err)
	return s, errors.Join(errs...)
}

func (s cpuSample) sub(before cpuSample) cpuSample {
	d := cpuSample{pmx: s.pmx - before.pmx, postgres: s.postgres - before.postgres,
		loadgen: s.loadgen - before.loadgen, machine: s.machine - before.machine}
	if len(s.pmxBy) > 0 {
		d.pmxBy = make(map[string]time.Duration, len(s.pmxBy))
		for name, cpu := range s.pmxBy {
			d.pmxBy[name] = cpu - before.pmxBy[name]
		}
	}
	return d
}

// others is the CPU time the rest of the machine used: what disturbed the measurement.
func (s cpuSample) others() time.Duration {
	return max(0, s.machine-s.pmx-s.postgres-s.loadgen)
}
