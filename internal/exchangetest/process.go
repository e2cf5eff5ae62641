package exchangetest

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/pmx-dev/pmx/internal/kit/pgcluster"
	"github.com/pmx-dev/pmx/internal/poll"
)

var (
	buildOnce sync.Once
	buildDir  string
	buildErr  error
)

// BuildPMX builds the pmx binary once per test binary and returns its path.
func BuildPMX(t testing.TB) string {
	t.Helper()
	buildOnce.Do(func() {
		buildDir, buildErr = os.MkdirTemp("", "pmx-bin")
		if buildErr != nil {
			return
		}
		out, err := exec.Command("go", "build", "-o", filepath.Join(buildDir, "pmx"), "github.com/pmx-dev/pmx/cmd/pmx").CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return filepath.Join(buildDir, "pmx")
}

// removeBuild deletes what BuildPMX and BuildPrevious built; TestMain calls it once every test
// has run.
func removeBuild() {
	for _, dir := range []string{buildDir, previousDir} {
		if dir != "" {
			os.RemoveAll(dir)
		}
	}
}

// Process is a pmx process started by a test; it cannot outlive the test.
type Process struct {
	t      testing.TB
	cmd    *exec.Cmd
	done   chan struct{}
	mu     sync.Mutex
	output []string // stdout and stderr lines, for failure reports
}

// StartProcess runs bin with args and waits until a line of its output matches ready, returning
// the process and the line's last submatch.
func StartProcess(t testing.TB, ready *regexp.Regexp, bin string, args ...string) (*Process, string) {
	t.Helper()
	return StartProcessEnv(t, ready, nil, bin, args...)
}

// StartProcessEnv is StartProcess with extra environment variables (NAME=value).
func StartProcessEnv(t testing.TB, ready *regexp.Regexp, env []string, bin string, args ...string) (*Process, string) {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{}
	pgcluster.SetParentDeathSignal(cmd.SysProcAttr, syscall.SIGKILL)
	cmd.Env = append(append(os.Environ(), "PMX_ADMIN_TOKEN=", "PMX_DATABASE_URL=", "PMX_INTERNAL_TOKEN="), env...)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = cmd.Stdout
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &Process{t: t, cmd: cmd, done: make(chan struct{})}
	found := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			line := sc.Text()
			p.mu.Lock()
			p.output = append(p.output, line)
			p.mu.Unlock()
			if m := ready.FindStringSubmatch(line); m != nil {
				select {
				case found <- m[len(m)-1]:
				default:
				}
			}
		}
		_, _ = io.Copy(io.Discard, stdout)
	}()
	go func() {
		_ = cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(func() { p.Kill() })
	select {
	case m := <-found:
		return p, m
	case <-p.done:
		t.Fatalf("%s exited before it was ready:\n%s", filepath.Base(bin), p.Output())
	case <-time.After(2 * time.Minute):
		t.Fatalf("%s not ready after 2 minutes:\n%s", filepath.Base(bin), p.Output())
	}
	return nil, ""
}

// Line waits up to a minute for a line of the process's output that matches re, and returns the
// line's last submatch: what StartProcess does for its ready line, for a line that may come after
// it (such as the banner's Metrics line after its API line).
func (p *Process) Line(re *regexp.Regexp) string {
	p.t.Helper()
	var found string
	match := func(context.Context) (bool, error) {
		p.mu.Lock()
		defer p.mu.Unlock()
		for _, line := range p.output {
			if m := re.FindStringSubmatch(line); m != nil {
				found = m[len(m)-1]
				return true, nil
			}
		}
		return false, nil
	}
	if err := poll.Until(context.Background(), time.Minute, match); err != nil {
		p.t.Fatalf("no line matching %s: %v\n%s", re, err, p.Output())
	}
	return found
}

// Output is what the process printed.
func (p *Process) Output() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return strings.Join(p.output, "\n")
}

// Kill kills the process with SIGKILL and waits for it.
func (p *Process) Kill() {
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.done
}

// Stop asks the process to stop with SIGTERM and waits, failing the test if it takes longer than a
// minute or exits with an error.
func (p *Process) Stop() {
	p.t.Helper()
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(time.Minute):
		p.t.Fatalf("process did not stop within a minute of SIGTERM:\n%s", p.Output())
	}
	if !p.cmd.ProcessState.Success() {
		p.t.Errorf("process exited with %v:\n%s", p.cmd.ProcessState, p.Output())
	}
}

// WaitReady polls url until it answers 200. Each poll opens a new connection: one kept alive
// would go on asking whatever answered first, even after the route to url has changed (a
// Kubernetes Service's address before kube-proxy's rules take it leads out of the machine, to
// whatever answers there).
func WaitReady(t testing.TB, url string) {
	t.Helper()
	client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	last := "no answer yet"
	ready := func(ctx context.Context) (bool, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return false, err
		}
		resp, err := client.Do(req)
		if err != nil {
			last = err.Error()
			return false, nil
		}
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 200))
		resp.Body.Close()
		last = fmt.Sprintf("%s %q", resp.Status, body)
		return resp.StatusCode == http.StatusOK, nil
	}
	if err := poll.Until(context.Background(), time.Minute, ready); err != nil {
		t.Fatalf("%s not ready: %v; its last answer: %s", url, err, last)
	}
}

// RSS is the process's resident memory, in bytes (Linux: /proc/<pid>/status), or 0 where it cannot
// be read.
func (p *Process) RSS() int64 {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", p.cmd.Process.Pid))
	if err != nil {
		return 0
	}
	for line := range strings.SplitSeq(string(raw), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return kb << 10
		}
	}
	return 0
}

var (
	previousOnce sync.Once
	previousDir  string
	// previousSchema is the last migration the previous release knows.
	previousSchema int
	previousErr    error
)

// BuildPrevious builds pmx as the previous release has it — the commit named in
// testdata/previous-release, taken from the clone with git archive — once per test binary, and
// returns the binary's path. It fails, never skips, when the commit is not in the clone: a
// mixed-version test that does not run is a rolling upgrade nobody tried.
func BuildPrevious(t testing.TB) string {
	t.Helper()
	previousOnce.Do(func() { previousDir, previousErr = buildPrevious() })
	if previousErr != nil {
		t.Fatal(previousErr)
	}
	return filepath.Join(previousDir, "pmx")
}

// PreviousSchema is the last migration the previous release's pmx knows (BuildPrevious reads it
// from the commit's tree).
func PreviousSchema(t testing.TB) int {
	BuildPrevious(t)
	return previousSchema
}

// schemaAt is the number of the last migration in a commit's tree, wherever the migrations lay.
func schemaAt(commit string) (int, error) {
	out, err := exec.Command("git", "ls-tree", "-r", "--full-tree", "--name-only", commit).Output()
	if err != nil {
		return 0, fmt.Errorf("listing the previous release's files (%s): %w", commit, err)
	}
	last := 0
	for name := range strings.SplitSeq(string(out), "\n") {
		if m := migrationFile.FindStringSubmatch(name); m != nil {
			n, _ := strconv.Atoi(m[1])
			last = max(last, n)
		}
	}
	if last == 0 {
		return 0, fmt.Errorf("the previous release's commit %s has no migrations/NNN_*.sql", commit)
	}
	return last, nil
}

var migrationFile = regexp.MustCompile(`(?:^|/)store/(?:db/)?migrations/(\d+)_[^/]*\.sql$`)

func buildPrevious() (dir string, err error) {
	const named = "internal/exchangetest/testdata/previous-release"
	raw, err := os.ReadFile(filepath.Join("testdata", "previous-release"))
	if err != nil {
		return "", err
	}
	commit := ""
	for line := range strings.SplitSeq(string(raw), "\n") {
		if line = strings.TrimSpace(line); line != "" && !strings.HasPrefix(line, "#") {
			commit = line
			break
		}
	}
	if commit == "" {
		return "", fmt.Errorf("%s names no commit", named)
	}
	if out, err := exec.Command("git", "rev-parse", "--verify", "--quiet", commit+"^{commit}").CombinedOutput(); err != nil {
		return "", fmt.Errorf("the previous release's commit %s (%s) is not in this clone (%v %s): fetch it "+
			"(git fetch origin %s, or a deeper history in a shallow checkout), or bump %s to a commit the clone has",
			commit, named, err, out, commit, named)
	}
	if previousSchema, err = schemaAt(commit); err != nil {
		return "", err
	}
	if dir, err = os.MkdirTemp("", "pmx-previous"); err != nil {
		return "", err
	}
	defer func() {
		if err != nil {
			os.RemoveAll(dir)
		}
	}()
	src := filepath.Join(dir, "src")
	if err := os.Mkdir(src, 0o755); err != nil {
		return "", err
	}
	// git archive | tar -x, without a shell: the whole tree as committed (from the top: in a
	// subdirectory, git archive takes that subdirectory alone), nothing of the work tree.
	top, err := exec.Command("git", "rev-parse", "--show-toplevel").Output()
	if err != nil {
		return "", fmt.Errorf("finding the clone's top: %w", err)
	}
	archive := exec.Command("git", "archive", "--format=tar", commit)
	archive.Dir = strings.TrimSpace(string(top))
	extract := exec.Command("tar", "-x", "-C", src)
	pipe, err := archive.StdoutPipe()
	if err != nil {
		return "", err
	}
	extract.Stdin = pipe
	var archiveErr, extractErr strings.Builder
	archive.Stderr, extract.Stderr = &archiveErr, &extractErr
	if err := extract.Start(); err != nil {
		return "", err
	}
	if err := archive.Run(); err != nil {
		_ = extract.Wait()
		return "", fmt.Errorf("git archive %s: %v %s", commit, err, archiveErr.String())
	}
	if err := extract.Wait(); err != nil {
		return "", fmt.Errorf("extracting %s: %v %s", commit, err, extractErr.String())
	}
	build := exec.Command("go", "build", "-o", filepath.Join(dir, "pmx"), "./cmd/pmx")
	build.Dir = src
	if out, err := build.CombinedOutput(); err != nil {
		return "", fmt.Errorf("building pmx at the previous release's commit %s: %v\n%s", commit, err, out)
	}
	if err := os.RemoveAll(src); err != nil {
		return "", err
	}
	return dir, nil
}
