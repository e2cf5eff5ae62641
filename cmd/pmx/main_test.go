package main

import (
	"bytes"
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/pmx-dev/pmx/bench"
)

// TestMain lets a test run this test binary as the pmx command, for commands that start pmx as a
// child process: with PMXTEST_MAIN=1 in its environment, the binary is pmx.
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
	res, err := bench.Floor(ctx, bench.FloorOptions{PMX: os.Args[0], Bots: 4, Duration: 500 * time.Millisecond})
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
