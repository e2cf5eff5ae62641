package doctest

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/pmx-dev/pmx/internal/kit/pgcluster"
	"github.com/pmx-dev/pmx/internal/pgtest"
)

// The quickstart's address, which the test replaces with its own pmx dev's.
const quickstartPMX = "PMX=http://127.0.0.1:8080"

// TestREADMEQuickstart runs the README's blocks marked <!-- test: run -->, top to bottom, in one
// bash (set -euo pipefail) against a fresh pmx dev on free loopback ports, started from the
// folder whose .pmx/ holds its admin token as make run's does; then checks that the trade
// happened: alice holds 4 YES of the market and bob 4 NO, and her order was cancelled with 4
// filled.
func TestREADMEQuickstart(t *testing.T) {
	for _, tool := range []string{"bash", "curl", "jq"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("the quickstart needs %s (apt-get install %s; make test installs jq)", tool, tool)
		}
	}
	root := repoRoot(t)
	var script []string
	for _, b := range blocks(parse(readDoc(t, root, "README.md"))) {
		if b.mark == "run" {
			if b.info != "sh" && b.info != "bash" {
				t.Fatalf("README.md:%d: a block marked to run is %q, not sh", b.start, b.info)
			}
			script = append(script, b.body)
		}
	}
	if len(script) < 3 {
		t.Fatalf("README.md has %d blocks marked <!-- test: run -->, want the quickstart's", len(script))
	}
	if strings.Count(strings.Join(script, ""), quickstartPMX+"\n") != 1 {
		t.Fatalf("the quickstart should define %s once, in its first block", quickstartPMX)
	}

	dir := t.TempDir()
	bin := filepath.Join(dir, "pmx")
	build := exec.Command("go", "build", "-o", bin, "github.com/pmx-dev/pmx/cmd/pmx")
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	db := pgtest.NewDatabase(t, pgtest.Shared(t))
	base := startDev(t, dir, bin, "dev", "--database-url", db, "--addr", "127.0.0.1:0",
		"--metrics-addr", "127.0.0.1:0", "--data-dir", filepath.Join(dir, ".pmx"), "--log-level", "warn")

	full := "set -euo pipefail\n" + strings.Replace(strings.Join(script, "\n"), quickstartPMX, "PMX="+base, 1) + `
echo "@@alice $(curl -s -H "Authorization: Bearer $ALICE_KEY" $PMX/api/v1/positions)"
echo "@@bob $(curl -s -H "Authorization: Bearer $BOB_KEY" $PMX/api/v1/positions)"
echo "@@order $(curl -s -H "Authorization: Bearer $ALICE_KEY" "$PMX/api/v1/order?orderId=$ORDER")"
echo "@@market $MARKET"
`
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "-c", full)
	cmd.Dir = dir
	cmd.WaitDelay = 5 * time.Second
	cmd.Env = cleanEnv()
	out, err := cmd.CombinedOutput()
	t.Logf("the quickstart's output:\n%s", out)
	if err != nil {
		t.Fatalf("the quickstart failed: %v", err)
	}
	got := map[string]string{}
	for _, l := range strings.Split(string(out), "\n") {
		if k, v, ok := strings.Cut(l, " "); ok && strings.HasPrefix(k, "@@") {
			got[k[2:]] = v
		}
	}
	market := got["market"]
	if len(market) != 36 {
		t.Fatalf("MARKET is %q, not a market's id", market)
	}
	for who, outcome := range map[string]string{"alice": "YES", "bob": "NO"} {
		var p struct {
			Positions []struct {
				MarketID string `json:"marketId"`
				Outcome  string `json:"outcome"`
				Quantity int    `json:"quantity"`
			} `json:"positions"`
		}
		if err := json.Unmarshal([]byte(got[who]), &p); err != nil {
			t.Fatalf("%s's positions %q: %v", who, got[who], err)
		}
		if len(p.Positions) != 1 || p.Positions[0].MarketID != market || p.Positions[0].Outcome != outcome || p.Positions[0].Quantity != 4 {
			t.Errorf("%s's positions are %+v, want 4 %s of %s", who, p.Positions, outcome, market)
		}
	}
	var order struct {
		Status         string `json:"status"`
		FilledQuantity int    `json:"filledQuantity"`
	}
	if err := json.Unmarshal([]byte(got["order"]), &order); err != nil {
		t.Fatalf("alice's order %q: %v", got["order"], err)
	}
	if order.Status != "PARTIALLY_FILLED_CANCELLED" || order.FilledQuantity != 4 {
		t.Errorf("alice's order is %+v, want PARTIALLY_FILLED_CANCELLED with 4 filled", order)
	}
}

// cleanEnv is the test's environment without the variables the docs define, so that the
// quickstart sees only its own.
func cleanEnv() []string {
	var out []string
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		switch name {
		case "PMX", "ADMIN_TOKEN", "ALICE_KEY", "BOB_KEY", "MARKET", "ORDER", "EVENT":
			continue
		}
		out = append(out, kv)
	}
	return out
}

var apiLine = regexp.MustCompile(`API:\s+(http://\S+)/api/v1`)

// startDev runs bin with args in dir until it prints its API's address and answers /readyz, and
// returns its base URL; the process is killed when the test ends, and dies with the test binary.
func startDev(t *testing.T, dir, bin string, args ...string) string {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Dir = dir
	cmd.SysProcAttr = &syscall.SysProcAttr{}
	pgcluster.SetParentDeathSignal(cmd.SysProcAttr, syscall.SIGKILL)
	cmd.Env = append(cleanEnv(), "PMX_ADMIN_TOKEN=", "PMX_DATABASE_URL=")
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = cmd.Stdout
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var output strings.Builder
	found := make(chan string, 1)
	scanned := make(chan struct{})
	go func() {
		defer close(scanned)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			mu.Lock()
			output.WriteString(sc.Text() + "\n")
			mu.Unlock()
			if m := apiLine.FindStringSubmatch(sc.Text()); m != nil {
				select {
				case found <- m[1]:
				default:
				}
			}
		}
		_, _ = io.Copy(io.Discard, stdout)
	}()
	exited := make(chan struct{})
	go func() {
		<-scanned
		_ = cmd.Wait()
		close(exited)
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGINT)
		select {
		case <-exited:
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
	})
	logs := func() string { mu.Lock(); defer mu.Unlock(); return output.String() }
	var base string
	select {
	case base = <-found:
	case <-exited:
		t.Fatalf("pmx dev exited before it served:\n%s", logs())
	case <-time.After(2 * time.Minute):
		t.Fatalf("pmx dev did not serve within 2 minutes:\n%s", logs())
	}
	deadline := time.Now().Add(time.Minute)
	for {
		resp, err := http.Get(base + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return base
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("pmx dev not ready within a minute (%v):\n%s", err, logs())
		}
		time.Sleep(100 * time.Millisecond)
	}
}
