package doctest

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
)

// TestGoProgramsCompile builds every Go block of README.md and docs/*.md marked
// <!-- test: compile --> — a whole program — against this module, so that a program the docs
// show compiles with the SDK as it is.
func TestGoProgramsCompile(t *testing.T) {
	root := repoRoot(t)
	n := 0
	for _, doc := range docFiles(t, root) {
		for _, b := range blocks(parse(readDoc(t, root, doc))) {
			if b.mark != "compile" {
				continue
			}
			n++
			if b.info != "go" {
				t.Errorf("%s:%d: a block marked to compile is %q, not go", doc, b.start, b.info)
				continue
			}
			dir := t.TempDir()
			file := filepath.Join(dir, "main.go")
			if err := os.WriteFile(file, []byte(b.body), 0o644); err != nil {
				t.Fatal(err)
			}
			build := exec.Command("go", "build", "-o", filepath.Join(dir, "program"), file)
			build.Dir = root // the module the program imports
			if out, err := build.CombinedOutput(); err != nil {
				t.Errorf("%s:%d: the Go program does not compile: %v\n%s", doc, b.start, err, out)
			}
		}
	}
	if n == 0 {
		t.Fatal("no Go block is marked <!-- test: compile -->: docs/sdks.md has one")
	}
	t.Logf("%s Go programs compiled", strconv.Itoa(n))
}
