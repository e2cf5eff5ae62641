package main

import (
	"bytes"
	"context"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/pmx-dev/pmx/client"
	"github.com/pmx-dev/pmx/internal/exchangetest"
	"github.com/pmx-dev/pmx/internal/pgtest"
	"github.com/pmx-dev/pmx/internal/poll"
)

// lockedBuffer is the demo's output, written by its processes and read by the test.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// TestDemo runs `make demo`'s script, hack/demo.sh, as a newcomer would: the market maker quotes
// the first open market and the noise traders trade with it, a hundred trades without the maker's
// order group (sized to the demo's flow) triggering; a second demo beside it is refused, its
// address taken, as is one whose data dir another pmx dev holds; Ctrl-C (SIGINT to the script)
// stops every process, the market maker cancelling its quotes before pmx stops.
func TestDemo(t *testing.T) {
	bin := t.TempDir() // pmx and the two bots, removed with the test
	for name, pkg := range map[string]string{"pmx": "../../cmd/pmx", "marketmaker": "../marketmaker", "noisetrader": "../noisetrader"} {
		build := exec.Command("go", "build", "-o", filepath.Join(bin, name), pkg)
		if out, err := build.CombinedOutput(); err != nil {
			t.Fatalf("%v: %v\n%s", build, err, out)
		}
	}
	addr := freeAddr(t)
	const token = "demo-test-admin-token-0123456789abcdef"
	data := t.TempDir()
	env := func(addr string) []string {
		return append(os.Environ(), "BIN="+bin, "DEMO_ADDR="+addr, "DEMO_METRICS_ADDR=127.0.0.1:0",
			"DEMO_DATA_DIR="+data, "PMX_ADMIN_TOKEN="+token,
			"DEMO_PMX_FLAGS=--database-url "+pgtest.NewDatabase(t, pgtest.Shared(t))+" --log-level warn")
	}
	script := exec.Command("bash", "../../hack/demo.sh")
	script.Env = env(addr)
	out := &lockedBuffer{}
	script.Stdout, script.Stderr = out, out
	if err := script.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- script.Wait() }()
	stopped := false
	t.Cleanup(func() {
		if !stopped {
			script.Process.Signal(syscall.SIGINT)
			<-exited
		}
	})

	poll.Wait(t, 60*time.Second, "the demo running", func() bool { return strings.Contains(out.String(), "The demo is running") })
	tg := &exchangetest.Target{URL: "http://" + addr, AdminToken: token, HTTP: &http.Client{Timeout: 10 * time.Second}}
	watcher, err := client.New(tg.URL+"/api/v1", tg.NewAccount(t, "watcher").Key)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	market, err := client.ChooseMarket(ctx, watcher, "")
	if err != nil {
		t.Fatal(err)
	}
	poll.Wait(t, 60*time.Second, "trades in the demo's market", func() bool {
		trades, err := watcher.Trades(ctx, market, 10)
		return err == nil && len(trades) >= 3
	})

	// The maker's order group, sized to the demo's flow, never stops it: judged over the demo's
	// own progress (a hundred trades in its market), not over a stretch of time, which a busy
	// machine would fill with fewer orders.
	poll.Wait(t, 3*time.Minute, "a hundred trades in the demo's market", func() bool {
		trades, err := watcher.Trades(ctx, market, 100)
		return err == nil && len(trades) >= 100
	})
	if strings.Contains(out.String(), "order group triggered") {
		t.Errorf("the maker's order group triggered during the demo:\n%s", out)
	}

	// A second demo beside the first: its address is taken.
	refused := func(addr, why string) {
		t.Helper()
		again := exec.Command("bash", "../../hack/demo.sh")
		again.Env = env(addr)
		got, err := again.CombinedOutput()
		if err == nil || !strings.Contains(string(got), why) || !strings.Contains(string(got), "DEMO_DATA_DIR=") ||
			strings.Contains(string(got), "The demo is running") {
			t.Errorf("a second demo on %s: %v, want a refusal saying %q and what to set:\n%s", addr, err, why, got)
		}
	}
	refused(addr, "already listens on "+addr)
	// ...and, on an address of its own, its data dir held by another pmx dev's Postgres.
	lockPath := filepath.Join(data, "postgres", "pgcluster.lock")
	if err := os.MkdirAll(filepath.Dir(lockPath), 0o755); err != nil {
		t.Fatal(err)
	}
	lock, err := os.OpenFile(lockPath, os.O_RDONLY|os.O_CREATE, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		t.Fatal(err)
	}
	refused(freeAddr(t), "another pmx dev holds the data dir")
	lock.Close()

	if err := script.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-exited:
		stopped = true
		if err != nil {
			t.Fatalf("the demo ended with %v:\n%s", err, out)
		}
	case <-time.After(60 * time.Second):
		t.Fatalf("the demo did not stop within a minute of Ctrl-C:\n%s", out)
	}
	log := out.String()
	if !strings.Contains(log, "msg=stopped cancelled=") {
		t.Errorf("the market maker did not say it cancelled its quotes:\n%s", log)
	}
	if _, err := http.Get(tg.URL + "/readyz"); err == nil {
		t.Errorf("pmx still answers after the demo stopped")
	}
}
