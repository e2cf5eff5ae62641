package depcheck

import (
	"os/exec"
	"strings"
	"testing"
)

const module = "github.com/pmx-dev/pmx/"

// listed is one package as go list reports it: its path and the module packages it links.
type listed struct {
	path string
	deps []string
}

// list runs go list -deps over patterns, keeping the module's own packages, with what each links.
// Test files are left out: a kit's test may start a real store to test against (ratelimit's does),
// which no production binary links.
func list(t *testing.T, patterns ...string) []listed {
	t.Helper()
	args := append([]string{"list", "-f", `{{.ImportPath}}{{range .Deps}} {{.}}{{end}}`}, patterns...)
	out, err := exec.Command("go", args...).Output()
	if err != nil {
		var stderr []byte
		if exit, ok := err.(*exec.ExitError); ok {
			stderr = exit.Stderr
		}
		t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, stderr)
	}
	var pkgs []listed
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Fields(line)
		pkgs = append(pkgs, listed{path: f[0], deps: f[1:]})
	}
	return pkgs
}

// under reports whether pkg is the package prefix or one below it.
func under(pkg, prefix string) bool { return pkg == prefix || strings.HasPrefix(pkg, prefix+"/") }

// No import goes upward: the kits are general-purpose pieces any layer may use, and the plain
// rows (records) are what the store reads and writes, so neither may link the store, whose SQL
// and driver would come with them to every package that uses them. A row type a kit needs
// belongs in records.
func TestNoUpwardImports(t *testing.T) {
	pkgs := list(t, module+"internal/kit/...", module+"internal/records/...")
	if len(pkgs) < 5 {
		t.Fatalf("go list found %d packages under internal/kit and internal/records, too few: %v", len(pkgs), pkgs)
	}
	for _, p := range pkgs {
		for _, dep := range p.deps {
			if under(dep, module+"internal/store") {
				t.Errorf("%s links %s: a kit or the rows must not depend on the store; move the type it needs into internal/records", p.path, dep)
			}
		}
	}
}

// The store's concerns (internal/store/accounts, feedlog, bookkeeping, ...) link only its shared
// plumbing (internal/store/db), never one another nor the aggregate: what two concerns share
// belongs in db, and the aggregate package store is the one place they meet.
func TestStoreConcernsApart(t *testing.T) {
	pkgs := list(t, module+"internal/store/...")
	concerns := 0
	for _, p := range pkgs {
		if p.path == module+"internal/store" || under(p.path, module+"internal/store/db") {
			continue
		}
		concerns++
		for _, dep := range p.deps {
			if under(dep, module+"internal/store") && !under(dep, module+"internal/store/db") {
				t.Errorf("%s links %s: a concern of the store links only internal/store/db; move what they share there", p.path, dep)
			}
		}
	}
	if concerns < 3 {
		t.Fatalf("go list found %d concerns under internal/store, too few: %v", concerns, pkgs)
	}
}
