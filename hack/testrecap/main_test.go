package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// failing is a throwaway package's tests: a parent whose one subtest fails after many lines, with
// a cleanup that logs a report after the failure; a subtest that passes; and a test that fails
// on its own.
const failing = `package demo

import "testing"

func TestCluster(t *testing.T) {
	t.Cleanup(func() {
		if t.Failed() {
			t.Log("after the failure: the cluster's report")
			t.Log("kubelet: noise")
		}
	})
	t.Run("Suite", func(t *testing.T) { t.Log("suite fine") })
	t.Run("Scale", func(t *testing.T) {
		for i := range 50 {
			t.Logf("load line %d", i)
		}
		t.Errorf("violated: the ledger %s", "ünïcödé-and-a-long-tail-that-is-cut-here")
	})
}

func TestAlone(t *testing.T) { t.Fatal("alone failed") }

func TestFine(t *testing.T) {}
`

// goTestJSON runs `go test -json` on a throwaway module of one test file, as test.sh runs it
// (stderr with stdout), and returns what it printed; the file's tests must fail.
func goTestJSON(t *testing.T, testFile string) []byte {
	t.Helper()
	dir := t.TempDir()
	for name, text := range map[string]string{"go.mod": "module demo\n\ngo 1.26\n", "demo_test.go": testFile} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cmd := exec.Command("go", "test", "-json", "-count=1", ".")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOFLAGS=", "GOWORK=off")
	stream, err := cmd.CombinedOutput()
	if err == nil {
		t.Fatalf("the throwaway package's tests passed:\n%s", stream)
	}
	return stream
}

// TestRecapOfARealRun runs go test -json on the throwaway package and checks what testrecap
// passes through and what it recaps: the failed subtest's last lines (its error among them), the
// failed test with no subtest, not the parent that failed only through its subtest, nor what its
// cleanup logged after the failure, nor the tests that passed.
func TestRecapOfARealRun(t *testing.T) {
	stream := goTestJSON(t, failing)

	r := recap{lines: 5, cut: "after the failure:"}
	var out bytes.Buffer
	if err := r.copy(bytes.NewReader(stream), &out); err != nil {
		t.Fatal(err)
	}
	// Lines cut in the middle of the ö ("ünïc" is 6 bytes): the cut keeps whole characters.
	for _, l := range r.output[key{"demo", "TestCluster/Scale"}] {
		if i := strings.Index(l, "ü"); i >= 0 {
			r.width = i + 7
		}
	}
	// The pass-through is go test -v's text: every line, framing included.
	for _, want := range []string{"=== RUN   TestCluster/Scale\n", "load line 0\n", "after the failure: the cluster's report\n",
		"--- FAIL: TestAlone", "--- PASS: TestFine"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("the output lacks %q:\n%s", want, out.String())
		}
	}

	got := r.String()
	want := []string{
		"--- FAIL: TestCluster/Scale (its last 5 lines of 51)",
		"load line 46",
		"load line 47",
		"load line 48",
		"load line 49",
		"violated: the ledger ünïc [...]",
		"--- FAIL: TestAlone",
		"alone failed",
	}
	lines := strings.Split(strings.TrimSuffix(got, "\n"), "\n")
	if len(lines) != len(want) {
		t.Fatalf("the recap is\n%s\nwant %d lines of\n%s", got, len(want), strings.Join(want, "\n"))
	}
	for i := range want {
		if !strings.Contains(lines[i], want[i]) {
			t.Errorf("line %d of the recap is %q, want it to hold %q; the recap:\n%s", i+1, lines[i], want[i], got)
		}
	}
}

// TestRecapOfAFailedBuild: a package that does not build has no test that failed; the recap
// gives the package's own lines, the compiler's error among them.
func TestRecapOfAFailedBuild(t *testing.T) {
	stream := goTestJSON(t, "package demo\n\nfunc broken() int { return \"x\" }\n")
	r := recap{lines: 40, width: 400}
	var out bytes.Buffer
	if err := r.copy(bytes.NewReader(stream), &out); err != nil {
		t.Fatal(err)
	}
	if got := r.String(); !strings.Contains(got, "--- FAIL: package demo") || !strings.Contains(got, "demo_test.go:3") {
		t.Errorf("the recap of a package that does not build:\n%s\nthe stream:\n%s", got, stream)
	}
}

// TestNoFailureNoRecap: a run that passes leaves the recap empty.
func TestNoFailureNoRecap(t *testing.T) {
	stream := `{"Action":"start","Package":"demo"}
{"Action":"run","Package":"demo","Test":"TestFine"}
{"Action":"output","Package":"demo","Test":"TestFine","Output":"=== RUN   TestFine\n"}
{"Action":"output","Package":"demo","Test":"TestFine","Output":"--- PASS: TestFine (0.00s)\n"}
{"Action":"pass","Package":"demo","Test":"TestFine"}
{"Action":"output","Package":"demo","Output":"ok  \tdemo\t0.003s\n"}
{"Action":"pass","Package":"demo"}
`
	r := recap{lines: 40, width: 400}
	var out bytes.Buffer
	if err := r.copy(strings.NewReader(stream), &out); err != nil {
		t.Fatal(err)
	}
	if got := r.String(); got != "" {
		t.Errorf("a passing run's recap: %q", got)
	}
	if want := "=== RUN   TestFine\n--- PASS: TestFine (0.00s)\nok  \tdemo\t0.003s\n"; out.String() != want {
		t.Errorf("passed through %q, want %q", out.String(), want)
	}
}
