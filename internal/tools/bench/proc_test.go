package bench

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// statLine builds a /proc/<pid>/stat line as Linux 6.x writes it (52 fields).
func statLine(pid, ppid int, comm string, utime, stime, cutime, cstime uint64) string {
	return fmt.Sprintf("%d (%s) S %d %d %d 0 -1 4194560 1063 0 0 0 %d %d %d %d 20 0 1 0 4351 226254848 3577 "+
		"18446744073709551615 1 1 0 0 0 0 0 20975616 536897095 0 0 0 17 1 0 0 0 0 0 0 0 0 0 0 0 0 0",
		pid, comm, ppid, pid, pid, utime, stime, cutime, cstime)
}

func TestParseStat(t *testing.T) {
	real := "25666 (compile) R 5929 5928 5928 0 -1 4194304 74937 0 0 0 188 27 0 0 20 0 4 0 360117 " +
		"1181491200 101455 18446744073709551615 4194304 10532813 140723938658960 0 0 0 0 0 2143420671 0 0 0 17 0 0 0 0 0 0 " +
		"16879616 17203136 40689664 140723938663525 140723938664455 140723938664455 140723938664423 0\n"
	tests := []struct {
		name string
		in   string
		want procStat
	}{
		{"real line", real, procStat{pid: 25666, ppid: 5929, comm: "compile", state: 'R', utime: 188, stime: 27}},
		{"reaped children", statLine(7, 1, "postgres", 10, 5, 300, 40),
			procStat{pid: 7, ppid: 1, comm: "postgres", state: 'S', utime: 10, stime: 5, cutime: 300, cstime: 40}},
		{"name with spaces and parentheses", statLine(42, 7, "a) b (c) 9 9", 1, 2, 3, 4),
			procStat{pid: 42, ppid: 7, comm: "a) b (c) 9 9", state: 'S', utime: 1, stime: 2, cutime: 3, cstime: 4}},
		{"empty name", statLine(3, 2, "", 0, 0, 0, 0), procStat{pid: 3, ppid: 2, state: 'S'}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseStat([]byte(tt.in))
			if err != nil {
				t.Fatal(err)
			}
			if got != tt.want {
				t.Fatalf("parseStat:\n got %+v\nwant %+v", got, tt.want)
			}
		})
	}
}

func TestParseStatRejectsMalformed(t *testing.T) {
	for _, in := range []string{
		"",
		"12 postgres S 1",
		"x (postgres) S 1 1 1 0 -1 0 0 0 0 0 1 2 3 4",
		"12 (postgres) S 1 1 1 0 -1 0 0 0 0 0 1 2", // truncated before cutime
		"12 (postgres) S 1 1 1 0 -1 0 0 0 0 0 1 two 3 4 20",
		"12 (postgres) S 1 1 1 0 -1 0 0 0 0 0 -1 2 3 4 20",
		"12 (postgres) SS 1 1 1 0 -1 0 0 0 0 0 1 2 3 4 20",
	} {
		if s, err := parseStat([]byte(in)); err == nil {
			t.Errorf("parseStat(%q) = %+v, want an error", in, s)
		}
	}
}

// fakeProc writes stat files under a temporary proc root.
func fakeProc(t *testing.T, lines map[int]string) procFS {
	t.Helper()
	root := t.TempDir()
	for pid, line := range lines {
		dir := filepath.Join(root, fmt.Sprint(pid))
		if err := os.Mkdir(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "stat"), []byte(line+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// Entries that are not processes, as in the real /proc.
	for _, name := range []string{"self", "cpuinfo"} {
		if err := os.Mkdir(filepath.Join(root, name), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return procFS{root: root, tick: 10 * time.Millisecond}
}

func TestTreeCPU(t *testing.T) {
	p := fakeProc(t, map[int]string{
		1:   statLine(1, 0, "init", 5000, 5000, 9000, 9000),
		100: statLine(100, 1, "postgres", 10, 5, 100, 50), // postmaster: 165 with its reaped children
		101: statLine(101, 100, "postgres", 1, 2, 0, 0),   // checkpointer
		102: statLine(102, 100, "postgres", 3, 4, 5, 6),   // a backend that reaped a child of its own
		103: statLine(103, 102, "postgres", 1, 1, 0, 0),   // its live child
		200: statLine(200, 1, "pmx", 700, 70, 0, 0),       // not in the tree
		300: statLine(300, 101, "x", 0, 0, 0, 0)[:20],     // malformed: fails the sample
	})
	if _, err := p.treeCPU(100); err == nil {
		t.Fatal("treeCPU accepted a malformed stat")
	}
	if err := os.RemoveAll(filepath.Join(p.root, "300")); err != nil { // "exited"
		t.Fatal(err)
	}
	got, err := p.treeCPU(100)
	if err != nil {
		t.Fatal(err)
	}
	if want := time.Duration(165+3+18+2) * 10 * time.Millisecond; got != want {
		t.Fatalf("treeCPU = %v, want %v", got, want)
	}
	if got, err := p.processCPU(200); err != nil || got != 7700*time.Millisecond {
		t.Fatalf("processCPU = %v, %v; want 7.7s", got, err)
	}
	if got, err := p.ownCPU(100); err != nil || got != 150*time.Millisecond {
		t.Fatalf("ownCPU = %v, %v; want 150ms", got, err)
	}
	if _, err := p.treeCPU(999); err == nil {
		t.Fatal("treeCPU of a missing process did not fail")
	}
}

// TestGone: a scan of every process leaves out one that exited after /proc was listed, whichever
// error its stat's read gave (a 16-core bench once failed on ESRCH, a process being reaped), and
// one it may not read; any other error fails the sample.
func TestGone(t *testing.T) {
	read := func(errno syscall.Errno) error {
		return &fs.PathError{Op: "read", Path: "/proc/1477/stat", Err: errno}
	}
	for _, c := range []struct {
		err  error
		want bool
	}{
		{&fs.PathError{Op: "open", Path: "/proc/1477/stat", Err: syscall.ENOENT}, true},
		{read(syscall.ESRCH), true},
		{read(syscall.EACCES), true},
		{fmt.Errorf("while scanning: %w", read(syscall.ESRCH)), true},
		{read(syscall.EIO), false},
		{errors.New("malformed stat line"), false},
	} {
		if got := gone(c.err); got != c.want {
			t.Errorf("gone(%v) = %v, want %v", c.err, got, c.want)
		}
	}
}

// TestTreeCPUReapedChildMovesToParent checks that a child's time is counted once whether it is
// alive or has been reaped into its parent's cutime/cstime.
func TestTreeCPUReapedChildMovesToParent(t *testing.T) {
	alive := fakeProc(t, map[int]string{
		100: statLine(100, 1, "postgres", 10, 10, 0, 0),
		101: statLine(101, 100, "postgres", 30, 20, 0, 0),
	})
	reaped := fakeProc(t, map[int]string{
		100: statLine(100, 1, "postgres", 10, 10, 30, 20),
	})
	a, err1 := alive.treeCPU(100)
	r, err2 := reaped.treeCPU(100)
	if err1 != nil || err2 != nil || a != r || a != 700*time.Millisecond {
		t.Fatalf("alive %v (%v), reaped %v (%v); want 700ms both", a, err1, r, err2)
	}
}

func TestParseMachineBusy(t *testing.T) {
	stat := "cpu  100 20 30 5000 70 8 9 3 40 0\ncpu0 50 10 15 2500 35 4 4 1 20 0\nintr 1\n"
	got, err := parseMachineBusy([]byte(stat), 10*time.Millisecond)
	if want := time.Duration(100+20+30+8+9+3) * 10 * time.Millisecond; err != nil || got != want {
		t.Fatalf("parseMachineBusy = %v, %v; want %v", got, err, want)
	}
	for _, bad := range []string{"", "cpu0 1 2 3 4 5 6 7 8\n", "cpu 1 2 3 4 5 6 7\n", "cpu 1 2 x 4 5 6 7 8\n"} {
		if got, err := parseMachineBusy([]byte(bad), time.Millisecond); err == nil {
			t.Errorf("parseMachineBusy(%q) = %v, want an error", bad, got)
		}
	}
}

func TestProcFSOnThisMachine(t *testing.T) {
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		t.Skip("no /proc")
	}
	p := newProcFS()
	if p.tick <= 0 || p.tick > time.Second {
		t.Fatalf("clock tick %v", p.tick)
	}
	s, err := p.sample([]pmxProcess{{"pmx dev", os.Getpid()}}, os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if s.pmx < 0 || s.postgres < s.pmx || s.loadgen < 0 || s.machine <= 0 || len(s.pmxBy) != 1 || s.pmxBy["pmx dev"] != s.pmx {
		t.Fatalf("sample of this process: %+v", s)
	}
	// Two processes of each of two kinds (the same two, as the bench never watches): pmx is all
	// four, each kind its two.
	two := []pmxProcess{{"pmx shard", os.Getpid()}, {"pmx api", os.Getppid()}, {"pmx shard", os.Getpid()}, {"pmx api", os.Getppid()}}
	s, err = p.sample(two, os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if len(s.pmxBy) != 2 || s.pmxBy["pmx shard"]+s.pmxBy["pmx api"] != s.pmx {
		t.Fatalf("sample of two kinds of process: %+v", s)
	}
	b, _ := os.ReadFile("/proc/self/stat")
	if st, err := parseStat(b); err != nil || st.pid != os.Getpid() || !strings.Contains(string(b), st.comm) {
		t.Fatalf("parseStat(/proc/self/stat) = %+v, %v", st, err)
	}
}
