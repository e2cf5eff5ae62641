// Package devbench holds the tests of the scripts that take the 16-core figures (steps.sh and the
// scripts that source it); the scripts themselves are bash.
package devbench

import (
	"archive/tar"
	"context"
	"encoding/json"
	"errors"
	"io"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestCeilingCountsEachBenchOnce runs steps.sh's ceiling with one real pair (pmxtools bench on a
// real pmx dev and Postgres, for two seconds) and checks that the sum it reports is that bench's
// orders/s, as its JSON gives them: once, not twice. Before, the sum was of every "ordersPerSec"
// in the JSON, where each run's appears in its loadgen report too, and the 16-core sittings'
// ceilings were double what the pairs made. It checks summary, each step's line in steps.txt, on
// that real table too.
func TestCeilingCountsEachBenchOnce(t *testing.T) {
	if _, err := exec.LookPath("taskset"); err != nil {
		t.Fatal("no taskset: install util-linux")
	}
	dir := t.TempDir()
	for _, cmd := range []string{"pmx", "pmxtools"} {
		// Without symbols the (large) binaries link in half the time.
		out, err := exec.Command("go", "build", "-ldflags=-s -w", "-o", filepath.Join(dir, cmd),
			"github.com/pmx-dev/pmx/cmd/"+cmd).CombinedOutput()
		if err != nil {
			t.Fatalf("go build %s: %v\n%s", cmd, err, out)
		}
	}
	// The pack's runner puts the pack on PATH and runs its arguments; this one, the binaries just
	// built (and this machine's Postgres, which pmxtools bench finds as it does everywhere).
	runner := filepath.Join(dir, "run")
	if err := os.WriteFile(runner, []byte("#!/usr/bin/env bash\nPATH="+dir+":$PATH exec \"$@\"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "out") // unpack makes it in a script's measure
	if err := os.Mkdir(out, 0o755); err != nil {
		t.Fatal(err)
	}
	script := `set -euo pipefail
name=ceilingtest budget=600
source steps.sh
ceiling ceiling 2s 8 2
summary "$work/ceiling-0.txt" >"$OUT/summary.txt"
`
	// The bench stops cleanly on an interrupt (its pmx dev and Postgres with it): past the
	// deadline, the whole process group gets one, and a kill 30s later.
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "-c", script)
	cmd.Env = append(os.Environ(), "PMXBENCH_RUN="+runner, "OUT="+out, "PAIRS=1")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGINT) }
	cmd.WaitDelay = 30 * time.Second
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("ceiling: %v\n%s", err, b)
	}

	steps, err := os.ReadFile(filepath.Join(out, "steps.txt"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`ceiling: rc=0, \d+s, 1 pairs, sum (\d+) orders/s`).FindSubmatch(steps)
	if m == nil {
		t.Fatalf("steps.txt has no ceiling line of one pair and a sum:\n%s", steps)
	}
	sum, _ := strconv.Atoi(string(m[1]))

	var report struct {
		Runs []struct {
			OrdersPerSec float64 `json:"ordersPerSec"`
		} `json:"runs"`
	}
	if err := json.Unmarshal(untar(t, filepath.Join(out, "ceilingtest.tar"), "./ceiling-0.json"), &report); err != nil {
		t.Fatal(err)
	}
	if len(report.Runs) != 1 || report.Runs[0].OrdersPerSec <= 0 {
		t.Fatalf("the pair's JSON has runs %+v; want one, with orders", report.Runs)
	}
	// The table rounds to a tenth, the sum to a whole order.
	if want := report.Runs[0].OrdersPerSec; math.Abs(float64(sum)-want) > 1 {
		t.Errorf("the ceiling's sum is %d orders/s; the one pair made %.1f", sum, want)
	}

	// The result's row, its row-lock waits, what the backends did most (one to three), then the
	// p99s pmx timed itself: its batches', their commits' and its placements'.
	line, err := os.ReadFile(filepath.Join(out, "summary.txt"))
	if err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`^closed loop [\d,.]+ .* [\d.]+ backends waiting on row locks \(backends: (none|[\d.]+ [^,]+(, [\d.]+ [^,]+){0,2})\)` +
		` \(server: p99 of the shards' [\d,]+ batches (at most|over) [\d.]+[µm]?s, of their [\d,]+ commits (at most|over) [\d.]+[µm]?s;` +
		` of the [\d,]+ POST /order pmx answered (at most|over) [\d.]+[µm]?s\)\n$`).Match(line) {
		t.Errorf("summary of the pair's table: %q; want its closed-loop row, row-lock waits, backends and the server's p99s", line)
	}
}

// TestSumOrders checks sum_orders on the tables it is meant for: each file's closed-loop row once,
// and "?" as soon as a file has none (a bench that failed, or a file that is not there).
func TestSumOrders(t *testing.T) {
	dir := t.TempDir()
	table := func(name, orders string) string {
		p := filepath.Join(dir, name)
		text := "load             orders/s      p50      p99\n" +
			"closed loop       " + orders + "   23.4ms   66.2ms\n\n" +
			"    24s  orders 44,727  1,975.0 orders/s  p99 66.4ms\n"
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	a, b := table("a.txt", "1,857.4"), table("b.txt", "12,000.2")
	failed := filepath.Join(dir, "failed.txt")
	if err := os.WriteFile(failed, []byte("pmxtools bench: pmx dev did not start\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		files []string
		want  string
	}{
		{[]string{a}, "1857"},
		{[]string{a, b}, "13858"},
		{[]string{a, failed}, "?"},
		{[]string{failed, a}, "?"},
		{[]string{a, filepath.Join(dir, "missing.txt")}, "?"},
	} {
		args := append([]string{"-c", `source steps.sh; sum_orders "$@"`, "sum"}, c.files...)
		got, err := exec.Command("bash", args...).Output()
		if err != nil {
			t.Fatalf("sum_orders %v: %v", c.files, err)
		}
		if s := strings.TrimSpace(string(got)); s != c.want {
			t.Errorf("sum_orders %v = %q; want %q", names(c.files), s, c.want)
		}
	}
}

func names(files []string) []string {
	var n []string
	for _, f := range files {
		n = append(n, filepath.Base(f))
	}
	return n
}

// untar returns the file name of the tar archive at path.
func untar(t *testing.T, path, name string) []byte {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	r := tar.NewReader(f)
	for {
		h, err := r.Next()
		if errors.Is(err, io.EOF) {
			t.Fatalf("%s holds no %s", path, name)
		}
		if err != nil {
			t.Fatal(err)
		}
		if h.Name == name {
			b, err := io.ReadAll(r)
			if err != nil {
				t.Fatal(err)
			}
			return b
		}
	}
}
