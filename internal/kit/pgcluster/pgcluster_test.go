package pgcluster

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/pmx-dev/pmx/internal/poll"
)

// helperEnv makes the test binary act as a pmx process that starts a cluster and waits to be
// killed; see TestKilledParentTakesPostgresDown.
const helperEnv = "PGCLUSTER_TEST_HELPER_DATADIR"

func TestMain(m *testing.M) {
	if dir := os.Getenv(helperEnv); dir != "" {
		runHelper(dir)
		return
	}
	os.Exit(m.Run())
}

func runHelper(dir string) {
	opts := Options{DataDir: dir, Ephemeral: true, Logger: slog.New(slog.NewTextHandler(os.Stderr, nil))}
	if os.Geteuid() == 0 {
		opts.RunAsUser = "nobody" // the user that exists everywhere; the other tests use "postgres"
	}
	c, err := Start(context.Background(), opts)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Printf("READY %d %s\n", c.Pid(), c.URL())
	select {} // until killed
}

func testLogger(t testing.TB) *slog.Logger {
	return slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

type testWriter struct{ t testing.TB }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSuffix(string(p), "\n"))
	return len(p), nil
}

// clusterDir returns a directory for a cluster, deleted after the test. Not t.TempDir: as root, the
// server's user could not enter its 0700 parent (which is what TestRootNeedsTraversableParents
// checks). It is searchable by others, as TestLifecycle places the data dir below it.
func clusterDir(t *testing.T) string {
	dir, err := os.MkdirTemp("", "pgcluster-test-")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o711); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

func psql(t *testing.T, c *Cluster, url, query string) string {
	t.Helper()
	out, err := exec.Command(filepath.Join(c.BinDir(), "psql"), "-X", "-v", "ON_ERROR_STOP=1", "-d", url, "-Atc", query).CombinedOutput()
	if err != nil {
		t.Fatalf("psql %q: %v: %s", query, err, out)
	}
	return strings.TrimSpace(string(out))
}

func stop(t *testing.T, c *Cluster) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := c.Stop(ctx); err != nil {
		t.Fatalf("Stop: %v", err)
	}
}

func TestLifecycle(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	// Long enough that the socket cannot live under it, which exercises the temp socket dir.
	dataDir := filepath.Join(clusterDir(t), strings.Repeat("long-directory-name-", 5), "data")
	opts := Options{DataDir: dataDir, Ephemeral: true, Logger: testLogger(t)}

	began := time.Now()
	c, err := Start(ctx, opts)
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(func() {
		if c != nil { // nil when a restart below failed
			c.Stop(context.Background())
		}
	})
	t.Logf("first start (initdb included): %v", time.Since(began))

	if strings.HasPrefix(c.SocketDir(), dataDir) {
		t.Errorf("socket dir %s is under the long data dir", c.SocketDir())
	}
	wantURL := "postgres://postgres@/pmx?host=" + c.SocketDir() + "&port=5432&sslmode=disable"
	if c.URL() != wantURL {
		t.Errorf("URL() = %q, want %q", c.URL(), wantURL)
	}
	if got := psql(t, c, c.URL(), "select current_database() || ' ' || current_setting('server_encoding') || ' ' || current_setting('fsync')"); got != "pmx UTF8 off" {
		t.Errorf("database, encoding, fsync = %q", got)
	}
	psql(t, c, c.URL(), "create table survivors(name text); insert into survivors values ('alice'), ('bob')")

	if err := c.CreateDatabase(ctx, "Other DB"); err != nil {
		t.Fatalf("CreateDatabase: %v", err)
	}
	if got := psql(t, c, c.URLFor("Other DB"), "select current_database()"); got != "Other DB" {
		t.Errorf("URLFor(%q) connected to %q", "Other DB", got)
	}
	if err := c.CreateDatabase(ctx, "Other DB"); err == nil || !strings.Contains(err.Error(), "already exists") {
		t.Errorf("CreateDatabase of an existing database: err = %v, want 'already exists'", err)
	}
	if err := c.DropDatabase(ctx, "Other DB"); err != nil {
		t.Errorf("DropDatabase: %v", err)
	}

	// A second user of the same data dir is refused, clearly and without harming the first.
	if c2, err := Start(ctx, opts); err == nil {
		c2.Stop(ctx)
		t.Fatal("second Start on a running data dir succeeded")
	} else {
		if !errors.Is(err, ErrAlreadyRunning) || !strings.Contains(err.Error(), strconv.Itoa(c.Pid())) {
			t.Errorf("second Start: err = %v, want ErrAlreadyRunning naming pid %d", err, c.Pid())
		}
		t.Logf("second Start: %v", err)
	}
	psql(t, c, c.URL(), "select 1")

	pid := c.Pid()
	stop(t, c)
	stop(t, c) // idempotent
	if !processGone(pid) {
		t.Errorf("postgres pid %d still running after Stop", pid)
	}
	if _, err := os.Stat(c.SocketDir()); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("temporary socket dir not removed: %v", err)
	}
	select {
	case <-c.Done():
	default:
		t.Error("Done not closed after Stop")
	}

	// A server that fails to start explains itself with the log's tail.
	bad := opts
	bad.Settings = map[string]string{"shared_buffers": "lots"}
	if _, err := Start(ctx, bad); err == nil || !strings.Contains(err.Error(), `invalid value for parameter "shared_buffers"`) {
		t.Errorf("Start with a bad setting: err = %v, want the log line about shared_buffers", err)
	} else {
		t.Logf("Start with a bad setting: %v", err)
	}

	// Stale postmaster.pid files, as left by a killed server: one whose process is gone, then one
	// whose PID now belongs to another program (a container restart), must not block the start.
	for _, stalePID := range []int{deadPID(t), os.Getpid()} {
		pidFile := filepath.Join(dataDir, "pgdata", "postmaster.pid")
		content := fmt.Sprintf("%d\n%s\n1700000000\n5432\n/tmp\n\n  1234 5678\nready   \n", stalePID, filepath.Join(dataDir, "pgdata"))
		if err := os.WriteFile(pidFile, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		began = time.Now()
		c, err = Start(ctx, opts)
		if err != nil {
			t.Fatalf("Start over a stale postmaster.pid (pid %d): %v", stalePID, err)
		}
		t.Logf("restart: %v", time.Since(began))
		if got := psql(t, c, c.URL(), "select string_agg(name, ',' order by name) from survivors"); got != "alice,bob" {
			t.Errorf("after restart, survivors = %q, want alice,bob", got)
		}
		stop(t, c)
	}
}

// deadPID returns a PID that no process has. On Linux it is the kernel's pid_max, which no
// process can get (PIDs go up to one less): the PID of a process that has exited, the other way,
// was once given to another test's postgres before the restart looked at it, and the restart then
// rightly refused to start over a running postgres.
func deadPID(t *testing.T) int {
	if raw, err := os.ReadFile("/proc/sys/kernel/pid_max"); err == nil {
		if pidMax, err := strconv.Atoi(strings.TrimSpace(string(raw))); err == nil {
			return pidMax
		}
	}
	cmd := exec.Command("true")
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	return cmd.Process.Pid
}

func TestKilledParentTakesPostgresDown(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("parent-death signals are Linux-only")
	}
	t.Parallel()
	dataDir := clusterDir(t)
	helper := exec.Command(os.Args[0], "-test.run=^$")
	helper.Env = append(os.Environ(), helperEnv+"="+dataDir)
	var stderr strings.Builder
	helper.Stderr = &stderr
	stdout, err := helper.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := helper.Start(); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(stdout).ReadString('\n')
	var pgPID int
	var url string
	if _, scanErr := fmt.Sscanf(line, "READY %d %s", &pgPID, &url); err != nil || scanErr != nil {
		helper.Process.Kill()
		helper.Wait()
		t.Fatalf("helper did not report a running cluster (%v, %q): %s", err, line, stderr.String())
	}
	psqlPath := filepath.Join(mustFindBinaries(t), "psql")
	if out, err := exec.Command(psqlPath, "-X", "-d", url, "-Atc", "create table t(x int)").CombinedOutput(); err != nil {
		t.Fatalf("psql: %v: %s", err, out)
	}

	helper.Process.Signal(syscall.SIGKILL)
	helper.Wait()
	// Waiting for another process to exit: nothing to be notified by.
	gone := func(context.Context) (bool, error) { return processGone(pgPID), nil }
	if err := poll.Until(t.Context(), 20*time.Second, gone); err != nil {
		syscall.Kill(pgPID, syscall.SIGKILL)
		t.Fatalf("postgres (pid %d) survived its parent by 20s", pgPID)
	}

	// The data dir is immediately reusable: the lock died with the helper and postgres shut down cleanly.
	opts := Options{DataDir: dataDir, Ephemeral: true, Logger: testLogger(t)}
	if os.Geteuid() == 0 {
		opts.RunAsUser = "nobody"
	}
	c, err := Start(context.Background(), opts)
	if err != nil {
		t.Fatalf("Start after the previous owner was killed: %v", err)
	}
	t.Cleanup(func() { c.Stop(context.Background()) })
	if got := psql(t, c, c.URL(), "select count(*) from t"); got != "0" {
		t.Errorf("count = %q", got)
	}
	if os.Geteuid() == 0 {
		if got := psql(t, c, c.URL(), "select 1"); got != "1" {
			t.Errorf("select 1 = %q", got)
		}
		fi, err := os.Stat(filepath.Join(dataDir, "pgdata"))
		if err != nil {
			t.Fatal(err)
		}
		if uid := fi.Sys().(*syscall.Stat_t).Uid; uid != 65534 {
			t.Errorf("pgdata owned by uid %d, want nobody (65534)", uid)
		}
	}

	// A server that dies under pmx is noticed through Done and reported by Stop.
	if err := syscall.Kill(c.Pid(), syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	select {
	case <-c.Done():
	case <-time.After(20 * time.Second):
		t.Fatal("Done not closed after postgres died")
	}
	if err := c.Stop(context.Background()); err == nil || !strings.Contains(err.Error(), "already exited") {
		t.Errorf("Stop after postgres died: err = %v, want 'already exited'", err)
	}
}

func mustFindBinaries(t *testing.T) string {
	dir, err := FindBinaries()
	if err != nil {
		t.Fatal(err)
	}
	return dir
}

func TestRootNeedsTraversableParents(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("only root switches users")
	}
	parent := t.TempDir() // created 0700 by root, like every t.TempDir parent
	if err := os.Chmod(parent, 0o700); err != nil {
		t.Fatal(err)
	}
	_, err := Start(context.Background(), Options{DataDir: filepath.Join(parent, "data"), Logger: testLogger(t)})
	if err == nil || !strings.Contains(err.Error(), "cannot enter "+parent) || !strings.Contains(err.Error(), "chmod o+x") {
		t.Fatalf("err = %v, want one naming %s and the fix", err, parent)
	}
	t.Log(err)
	// The failed Start released the data dir.
	if _, err := os.Stat(filepath.Join(parent, "data", "pgdata")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("pgdata created despite the error: %v", err)
	}
}

func TestFindBinariesNotFound(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "nonexistent", "*", "bin")
	_, err := findBinaries("", []string{missing}, "")
	if !errors.Is(err, ErrBinariesNotFound) {
		t.Fatalf("err = %v, want ErrBinariesNotFound", err)
	}
	want := "PostgreSQL server binaries not found (looked on PATH and in " + missing + "); install them with: "
	if !strings.HasPrefix(err.Error(), want) {
		t.Errorf("err = %q, want prefix %q", err, want)
	}
	if runtime.GOOS == "linux" && !strings.HasSuffix(err.Error(), "sudo apt-get install -y postgresql") {
		t.Errorf("err = %q, want the apt-get command", err)
	}
}

func TestFindBinariesOrder(t *testing.T) {
	root := t.TempDir()
	mk := func(dir string) string {
		dir = filepath.Join(root, dir)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		for _, name := range requiredBinaries {
			if err := os.WriteFile(filepath.Join(dir, name), []byte("#!/bin/sh\n"), 0o755); err != nil {
				t.Fatal(err)
			}
		}
		return dir
	}
	v96, v15, v16 := mk("lib/9.6/bin"), mk("lib/15/bin"), mk("lib/16/bin")
	unversioned := mk("local/bin")
	incomplete := filepath.Join(root, "lib/17/bin")
	os.MkdirAll(incomplete, 0o755) // no programs: ignored
	onPath := mk("path")
	globs := []string{filepath.Join(root, "lib/*/bin"), filepath.Join(root, "local/bin")}

	for _, tc := range []struct {
		name, path, prefer, want string
	}{
		{"highest version", "", "", v16},
		{"numeric not lexical", "", "", v16},
		{"PATH first", "/nonexistent" + string(os.PathListSeparator) + onPath, "", onPath},
		{"existing cluster's version", onPath, "15", v15},
		{"old dotted version", "", "9.6", v96},
		{"unknown version falls back", "", "42", v16},
	} {
		got, err := findBinaries(tc.path, globs, tc.prefer)
		if err != nil || got != tc.want {
			t.Errorf("%s: findBinaries = %q, %v; want %q", tc.name, got, err, tc.want)
		}
	}
	if got, _ := findBinaries("", globs[1:], ""); got != unversioned {
		t.Errorf("unversioned dir: got %q, want %q", got, unversioned)
	}
}

func TestFindBinariesOnThisMachine(t *testing.T) {
	dir, err := FindBinaries()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("using %s", dir)
}

func TestURLEncoding(t *testing.T) {
	c := &Cluster{socketDir: "/tmp/a dir&x/run", database: "pmx"}
	want := "postgres://postgres@/my%20db%2Fx?host=/tmp/a%20dir%26x/run&port=5432&sslmode=disable"
	if got := c.URLFor("my db/x"); got != want {
		t.Errorf("URLFor = %q, want %q", got, want)
	}
}
