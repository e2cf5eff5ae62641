package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pmx-dev/pmx/internal/tools/bench"
)

// TestMain lets a test run this test binary as the pmxtools command, for commands that start it as a
// child process (bench http its server): with PMXTEST_MAIN=1 in its environment, the binary is pmxtools.
func TestMain(m *testing.M) {
	if os.Getenv("PMXTEST_MAIN") == "1" {
		main()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// TestBenchHTTP runs the HTTP floor measurement briefly against its real server process.
func TestBenchHTTP(t *testing.T) {
	t.Setenv("PMXTEST_MAIN", "1")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	res, err := bench.Floor(ctx, bench.FloorOptions{Server: os.Args[0], Bots: 4, Duration: 500 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if res.Requests == 0 || res.RequestsPerSec <= 0 || res.ClientCPU <= 0 || res.ServerCPU <= 0 || res.Cores <= 0 {
		t.Errorf("implausible result: %+v", res)
	}
	var out bytes.Buffer
	if err := res.WriteText(&out); err != nil || !strings.Contains(out.String(), "requests/s") {
		t.Errorf("WriteText: %v\n%s", err, out.String())
	}
}

// TestBenchJSONFile runs pmxtools bench http with --json-file: the table still goes to the output, and
// the file holds the same result as JSON. A file in a folder that does not exist fails the command
// before it runs, naming the flag.
func TestBenchJSONFile(t *testing.T) {
	t.Setenv("PMXTEST_MAIN", "1") // bench http starts this binary as its server
	path := filepath.Join(t.TempDir(), "floor.json")
	var out bytes.Buffer
	cmd := newRootCommand()
	cmd.SetOut(&out)
	cmd.SetArgs([]string{"bench", "http", "--bots", "2", "--duration", "300ms", "--json-file", path})
	if err := cmd.Execute(); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "requests/s") {
		t.Errorf("the table is missing from the output:\n%s", out.String())
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var res bench.FloorResult
	if err := json.Unmarshal(raw, &res); err != nil {
		t.Fatalf("%s is not a result: %v\n%s", path, err, raw)
	}
	// The table gives the bots and the run's measured length, to the millisecond.
	printed := fmt.Sprintf("HTTP floor: %d bots, closed loop, %s,", res.Bots, res.Duration.Round(time.Millisecond))
	if res.Bots != 2 || res.Requests == 0 || !strings.Contains(out.String(), printed) {
		t.Errorf("the file's result is not the run printed (%q): %+v\n%s", printed, res, out.String())
	}

	for _, args := range [][]string{{"bench"}, {"bench", "http"}, {"bench", "commit"}} {
		cmd = newRootCommand()
		out.Reset()
		cmd.SetOut(&out)
		cmd.SetErr(io.Discard)
		cmd.SetArgs(append(args, "--json-file", filepath.Join(t.TempDir(), "missing", "result.json")))
		err := cmd.Execute()
		if err == nil || !strings.Contains(err.Error(), "--json-file: no folder") {
			t.Errorf("%v into a missing folder: %v, want the flag refused before the run", args, err)
		}
		if out.Len() > 0 {
			t.Errorf("%v into a missing folder printed a result:\n%s", args, out.String())
		}
	}
}

// TestFindPMX checks where bench looks for the pmx it starts when --pmx is not given: beside
// pmxtools first (make build puts both in bin/), then on $PATH, and otherwise it says how to get one.
func TestFindPMX(t *testing.T) {
	bin, path := t.TempDir(), t.TempDir()
	self := filepath.Join(bin, "pmxtools")
	onPath := filepath.Join(path, "pmx")
	if err := os.WriteFile(onPath, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", path)
	if got, err := findPMX(self); err != nil || got != onPath {
		t.Errorf("nothing beside pmxtools: %q (%v), want %s from $PATH", got, err, onPath)
	}
	// A pmx beside that cannot be run is passed over.
	beside := filepath.Join(bin, "pmx")
	if err := os.WriteFile(beside, []byte("#!/bin/sh\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got, err := findPMX(self); err != nil || got != onPath {
		t.Errorf("a pmx beside that is not executable: %q (%v), want %s from $PATH", got, err, onPath)
	}
	if err := os.Chmod(beside, 0o755); err != nil {
		t.Fatal(err)
	}
	if got, err := findPMX(self); err != nil || got != beside {
		t.Errorf("a pmx beside pmxtools: %q (%v), want it", got, err)
	}
	t.Setenv("PATH", t.TempDir())
	if got, err := findPMX(""); err == nil || !strings.Contains(err.Error(), "--pmx") {
		t.Errorf("no pmx anywhere: %q (%v), want an error naming --pmx", got, err)
	}
}

// TestBenchRefusesFlags checks that bench refuses pmx dev's shards and the database latency given
// wrong before anything runs.
func TestBenchRefusesFlags(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--shards", "0"}, "--shards 0: pmx dev needs at least one shard"},
		{[]string{"--shards", "2", "--dev-arg=--shards=3"}, "given twice"},
		{[]string{"--shards", "2", "--dev-arg", "--shards"}, "given twice"},
		{[]string{"--db-latency", "-1ms"}, "--db-latency must not be negative"},
		{[]string{"--fees", "700"}, "TAKER,MAKER"},
		{[]string{"--fees", "700,x"}, "TAKER,MAKER"},
		{[]string{"--fees", "700,-701"}, "from minus the taker's to the taker's"},
		{[]string{"--fees", "10001,0"}, "0 to 10000"},
	} {
		cmd := newRootCommand()
		var out bytes.Buffer
		cmd.SetOut(&out)
		cmd.SetErr(io.Discard)
		cmd.SetArgs(append([]string{"bench", "--pmx", filepath.Join(t.TempDir(), "no-pmx")}, c.args...))
		if err := cmd.Execute(); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: %v, want an error saying %q", c.args, err, c.want)
		}
		if out.Len() > 0 {
			t.Errorf("%v printed a result:\n%s", c.args, out.String())
		}
	}
}
