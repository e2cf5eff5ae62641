package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/pmx-dev/pmx/engine"
	"github.com/pmx-dev/pmx/internal/kit/pgcluster"
)

const (
	// devStartTimeout bounds pmx dev's start: migrations and rebuilding the books of earlier runs.
	devStartTimeout = 2 * time.Minute
	// devStopTimeout bounds its clean shutdown before it is killed.
	devStopTimeout = 30 * time.Second
)

// apiLine is the line of pmx dev's banner that says where it listens; with --addr 127.0.0.1:0 it
// is the only way to learn the port the kernel chose, and it leaves no window for another program
// to take a port picked in advance.
var apiLine = regexp.MustCompile(`^\s*API:\s+(https?://\S+)/api/v1\s*$`)

// metricsBanner is the line of a pmx process's banner that says where its metrics are served
// (read for the shards' counters, shardstats.go).
var metricsBanner = regexp.MustCompile(`^\s*Metrics:\s+(http://\S+/metrics)\s*$`)

// devProcess is a pmx child process: `pmx dev`, or in a distributed bench `pmx operator`,
// `pmx shard` or `pmx api`.
type devProcess struct {
	name    string // what it runs, for messages: "pmx dev", "pmx shard", ...
	cmd     *exec.Cmd
	url     string // base address, e.g. http://127.0.0.1:41234 (none for the operator)
	log     *os.File
	logPath string
	done    chan struct{} // closed when the process has exited
	waitErr error         // set before done is closed

	mu         sync.Mutex
	metricsURL string // from its banner (metricsBanner), once printed
}

// metrics is the address of the process's /metrics, "" if its banner has not named one.
func (d *devProcess) metrics() string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.metricsURL
}

// startDev starts `pmx dev` on a free loopback port against databaseURL, with no sample markets
// and admin token token, and returns once its /readyz answers 200.
func startDev(ctx context.Context, pmx, databaseURL, dataDir, token string, extra []string, logPath string) (*devProcess, error) {
	args := append([]string{"dev", "--addr", "127.0.0.1:0", "--data-dir", dataDir,
		"--database-url", databaseURL, "--markets", ""}, extra...)
	return startChild(ctx, "pmx dev", pmx, args, []string{"PMX_ADMIN_TOKEN=" + token}, logPath, apiLine, "")
}

// startChild starts pmx with args and waits for the first line of its output that ready
// matches; the line's first group, if any, is its base address (with scheme, or prefixed with
// scheme when it has none), and then it also waits for /readyz there to answer 200. The child
// runs in its own process group, so a Ctrl-C on the terminal reaches only the bench, which then
// stops it cleanly; if the bench dies, the kernel sends it SIGTERM.
func startChild(ctx context.Context, name, pmx string, args, env []string, logPath string, ready *regexp.Regexp, scheme string) (*devProcess, error) {
	logFile, err := os.OpenFile(logPath, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	d := &devProcess{name: name, cmd: exec.Command(pmx, args...), log: logFile, logPath: logPath, done: make(chan struct{})}
	// Secrets go through the environment, not the command line that ps shows.
	// The load generator is one client with many connections: lift the per-client limit (an
	// environment variable, which a build from before the limit ignores). The metrics listener
	// takes a free port, as the API does, so that it never collides with another program's
	// (its address is in the log's banner; again a variable that older builds ignore). The rate
	// limits are lifted for measurement (variables too), and the report says so.
	d.cmd.Env = append(append(cleanEnv(), "PMX_MAX_CONNS_PER_CLIENT=-1", "PMX_METRICS_ADDR=127.0.0.1:0",
		"PMX_READ_RATE=0", "PMX_WRITE_RATE=0"), env...)
	d.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	pgcluster.SetParentDeathSignal(d.cmd.SysProcAttr, syscall.SIGTERM)
	found := make(chan string, 1)
	watch := &lineWatcher{w: logFile, match: func(line string) {
		if m := metricsBanner.FindStringSubmatch(line); m != nil {
			d.mu.Lock()
			d.metricsURL = m[1]
			d.mu.Unlock()
		}
		if m := ready.FindStringSubmatch(line); m != nil {
			addr := ""
			if len(m) > 1 {
				addr = scheme + m[1]
			}
			select {
			case found <- addr:
			default:
			}
		}
	}}
	d.cmd.Stdout, d.cmd.Stderr = watch, watch
	if err := d.cmd.Start(); err != nil {
		logFile.Close()
		return nil, fmt.Errorf("while starting %s: %w", name, err)
	}
	go func() {
		d.waitErr = d.cmd.Wait()
		close(d.done)
	}()

	ctx, cancel := context.WithTimeout(ctx, devStartTimeout)
	defer cancel()
	fail := func(err error) (*devProcess, error) {
		_ = d.stop()
		return nil, fmt.Errorf("%s did not start: %w%s", name, err, logTail(logPath))
	}
	select {
	case d.url = <-found:
	case <-d.done:
		return fail(fmt.Errorf("it exited (%v)", d.waitErr))
	case <-ctx.Done():
		return fail(fmt.Errorf("it never printed a line matching %s: %w", ready, ctx.Err()))
	}
	if d.url != "" {
		if err := d.waitReady(ctx); err != nil {
			return fail(err)
		}
	}
	return d, nil
}

// waitReady polls /readyz, backing off from 5ms to 200ms, until it answers 200.
func (d *devProcess) waitReady(ctx context.Context) error {
	client := &http.Client{Timeout: 5 * time.Second}
	for delay := 5 * time.Millisecond; ; delay = min(2*delay, 200*time.Millisecond) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, d.url+"/readyz", nil)
		if err != nil {
			return err
		}
		if res, err := client.Do(req); err == nil {
			_, _ = io.Copy(io.Discard, res.Body)
			res.Body.Close()
			if res.StatusCode == http.StatusOK {
				return nil
			}
		}
		t := time.NewTimer(delay)
		select {
		case <-d.done:
			t.Stop()
			return fmt.Errorf("it exited (%v)", d.waitErr)
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("%s/readyz never answered 200: %w", d.url, ctx.Err())
		case <-t.C:
		}
	}
}

func (d *devProcess) pid() int { return d.cmd.Process.Pid }

// stop asks the process to shut down (SIGINT, as Ctrl-C would), waits for it and kills it if it
// takes longer than devStopTimeout. It fails if the process did not exit cleanly.
func (d *devProcess) stop() error {
	defer d.log.Close()
	select {
	case <-d.done:
	default:
		_ = d.cmd.Process.Signal(syscall.SIGINT)
		select {
		case <-d.done:
		case <-time.After(devStopTimeout):
			_ = d.cmd.Process.Kill()
			<-d.done
			return fmt.Errorf("%s did not stop within %v of SIGINT and was killed%s", d.name, devStopTimeout, logTail(d.logPath))
		}
	}
	if d.waitErr != nil {
		return fmt.Errorf("%s exited with %v%s", d.name, d.waitErr, logTail(d.logPath))
	}
	return nil
}

// createMarkets opens n markets through the admin API and returns their ids.
func createMarkets(ctx context.Context, baseURL, token string, n int, label string) ([]string, error) {
	client := &http.Client{Timeout: 30 * time.Second}
	ids := make([]string, 0, n)
	for i := range n {
		body, _ := json.Marshal(map[string]string{
			"question": fmt.Sprintf("Benchmark market %d of %d (%s)?", i+1, n, label),
			"category": "bench",
		})
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, baseURL+"/admin/v1/markets", bytes.NewReader(body))
		if err != nil {
			return nil, err
		}
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("Content-Type", "application/json")
		res, err := client.Do(req)
		if err != nil {
			return nil, fmt.Errorf("while creating a market: %w", err)
		}
		b, err := io.ReadAll(io.LimitReader(res.Body, 1<<20))
		res.Body.Close()
		if err != nil {
			return nil, fmt.Errorf("while creating a market: %w", err)
		}
		var m struct {
			ID     string `json:"id"`
			Status string `json:"status"`
		}
		if res.StatusCode != http.StatusCreated || json.Unmarshal(b, &m) != nil || m.ID == "" {
			return nil, fmt.Errorf("while creating a market: HTTP %d: %s", res.StatusCode, bytes.TrimSpace(b))
		}
		if m.Status != "OPEN" {
			return nil, fmt.Errorf("market %s was created %s, not OPEN", m.ID, m.Status)
		}
		ids = append(ids, m.ID)
	}
	return ids, nil
}

// FeesOption is the report's record of Options.Fees.
type FeesOption struct {
	TakerBps int `json:"takerBps"`
	MakerBps int `json:"makerBps"`
}

// setFees gives each market the schedule through the admin API.
func setFees(ctx context.Context, baseURL, token string, ids []string, fees engine.Fees) error {
	client := &http.Client{Timeout: 30 * time.Second}
	body, _ := json.Marshal(map[string]int{"takerBps": fees.Taker, "makerBps": fees.Maker})
	for _, id := range ids {
		req, err := http.NewRequestWithContext(ctx, http.MethodPut, baseURL+"/admin/v1/markets/"+id+"/fees", bytes.NewReader(body))
		if err != nil {
			return err
		}
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("Content-Type", "application/json")
		res, err := client.Do(req)
		if err != nil {
			return fmt.Errorf("while setting market %s's fees: %w", id, err)
		}
		b, _ := io.ReadAll(io.LimitReader(res.Body, 1<<20))
		res.Body.Close()
		if res.StatusCode != http.StatusOK {
			return fmt.Errorf("while setting market %s's fees: HTTP %d: %s", id, res.StatusCode, bytes.TrimSpace(b))
		}
	}
	return nil
}

// cleanEnv is the environment without the variables through which pmx and libpq would pick up
// another database or token than the bench's.
func cleanEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "PMX_") && !strings.HasPrefix(kv, "PG") {
			env = append(env, kv)
		}
	}
	return env
}

// lineWatcher copies a process's output to w and calls match on each complete line.
type lineWatcher struct {
	mu      sync.Mutex
	w       io.Writer
	partial []byte
	match   func(line string)
}

func (l *lineWatcher) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	_, _ = l.w.Write(p) // losing log lines must not stop the process
	l.partial = append(l.partial, p...)
	for {
		i := bytes.IndexByte(l.partial, '\n')
		if i < 0 {
			break
		}
		l.match(string(l.partial[:i]))
		l.partial = l.partial[i+1:]
	}
	if len(l.partial) > 64<<10 {
		l.partial = l.partial[:0] // a line this long is not the banner
	}
	return len(p), nil
}

// logTail returns the last lines of the file at path, formatted for an error message.
func logTail(path string) string {
	const maxBytes, maxLines = 8 << 10, 20
	b, err := os.ReadFile(path)
	if err != nil || len(b) == 0 {
		return ""
	}
	if len(b) > maxBytes {
		b = b[len(b)-maxBytes:]
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > maxLines {
		lines = lines[len(lines)-maxLines:]
	}
	return fmt.Sprintf("\nlast lines of %s:\n\t%s", path, strings.Join(lines, "\n\t"))
}
