// Command testrecap reads `go test -json` on its standard input and writes the tests' output to
// its standard output, as `go test -v` prints it; then, into the file -o names, what each failed
// test printed last. `make test-cluster` (hack/cluster/test.sh) prints that file at its very end,
// after the cluster's report and its teardown, so that the lines which say why a test failed are
// in the last screen of a long run — a CI log cut to its tail included — and not only minutes of
// output above it.
//
// A failed test is recapped when none of its subtests failed (a parent that failed only through
// its subtests adds nothing), each with its last -lines lines (framing lines such as "=== RUN"
// left out, each line cut to -width bytes), stopping short of the first line holding -cut: the
// cluster tests' cleanup, which logs the cluster's whole state after a failure, begins with it. A
// package that failed with no test failed (a build error, a panic outside tests, a timeout) is
// recapped with its own last lines. Lines that are not JSON (go's own errors) are copied as they
// come. With no failure, the file is left empty.
package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"unicode/utf8"
)

func main() {
	out := flag.String("o", "", "the file to write the failed tests' recap to (required)")
	lines := flag.Int("lines", 40, "the most lines recapped of each failed test")
	width := flag.Int("width", 400, "the most bytes kept of each recapped line")
	cut := flag.String("cut", "after the failure:", "recap a test's output only up to the first line holding this")
	flag.Parse()
	if *out == "" || flag.NArg() > 0 {
		fmt.Fprintln(os.Stderr, "usage: go test -json ... | testrecap -o FILE [-lines N] [-width N] [-cut TEXT]")
		os.Exit(2)
	}
	r := recap{lines: *lines, width: *width, cut: *cut}
	if err := r.copy(os.Stdin, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "testrecap:", err)
		os.Exit(1)
	}
	if err := os.WriteFile(*out, []byte(r.String()), 0o644); err != nil {
		fmt.Fprintln(os.Stderr, "testrecap:", err)
		os.Exit(1)
	}
}

// event is a line of `go test -json` (cmd/test2json's TestEvent), as far as testrecap reads it.
type event struct {
	Action  string
	Package string
	Test    string
	Output  string
}

// key names a test in a package; Test is empty for the package's own output.
type key struct{ pkg, test string }

type recap struct {
	lines, width int
	cut          string

	output map[key][]string // each test's output lines, framing lines left out
	failed []key            // in the order they failed
}

// copy writes each test's output to w as it comes, keeping it for the recap.
func (r *recap) copy(in io.Reader, w io.Writer) error {
	r.output = map[key][]string{}
	bw := bufio.NewWriter(w)
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 0, 64*1024), 16*1024*1024)
	for sc.Scan() {
		line := sc.Bytes()
		var e event
		if len(line) == 0 || line[0] != '{' || json.Unmarshal(line, &e) != nil {
			bw.Write(line)
			bw.WriteByte('\n')
			bw.Flush()
			continue
		}
		k := key{e.Package, e.Test}
		switch e.Action {
		case "output", "build-output":
			bw.WriteString(e.Output)
			if strings.HasSuffix(e.Output, "\n") {
				bw.Flush()
			}
			if !framing(e.Output) {
				r.output[k] = append(r.output[k], strings.TrimRight(e.Output, "\n"))
			}
		case "fail", "build-fail":
			r.failed = append(r.failed, k)
		}
	}
	if err := bw.Flush(); err != nil {
		return err
	}
	return sc.Err()
}

// framing says whether a line is go test's own: a test's start, pause, continuation or result, or
// the package's verdict.
func framing(line string) bool {
	s := strings.TrimLeft(line, " ")
	for _, p := range []string{"=== RUN", "=== PAUSE", "=== CONT", "=== NAME", "--- FAIL", "--- PASS", "--- SKIP"} {
		if strings.HasPrefix(s, p) {
			return true
		}
	}
	return s == "FAIL\n" || s == "PASS\n" || strings.HasPrefix(s, "FAIL\t") || strings.HasPrefix(s, "ok  \t")
}

// String is the recap: each failed test that has no failed subtest, with its last lines; a failed
// package with no failed test, with its own.
func (r *recap) String() string {
	var b strings.Builder
	tests := map[string]bool{} // packages with a failed test
	for _, k := range r.failed {
		if k.test != "" {
			tests[k.pkg] = true
		}
	}
	for _, k := range r.failed {
		if k.test == "" && tests[k.pkg] || r.hasFailedSubtest(k) {
			continue
		}
		name := k.test
		if name == "" {
			name = "package " + k.pkg
		}
		lines := r.output[k]
		for i, l := range lines {
			if r.cut != "" && strings.Contains(l, r.cut) {
				lines = lines[:i]
				break
			}
		}
		fmt.Fprintf(&b, "--- FAIL: %s", name)
		if len(lines) > r.lines {
			fmt.Fprintf(&b, " (its last %d lines of %d)", r.lines, len(lines))
			lines = lines[len(lines)-r.lines:]
		}
		b.WriteString("\n")
		for _, l := range lines {
			if len(l) > r.width {
				w := r.width
				for w > 0 && !utf8.RuneStart(l[w]) {
					w--
				}
				l = l[:w] + " [...]"
			}
			b.WriteString(l + "\n")
		}
	}
	return b.String()
}

func (r *recap) hasFailedSubtest(k key) bool {
	if k.test == "" {
		return false
	}
	for _, f := range r.failed {
		if f.pkg == k.pkg && strings.HasPrefix(f.test, k.test+"/") {
			return true
		}
	}
	return false
}
