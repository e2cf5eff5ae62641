package v1alpha1

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// TestGeneratedFilesAreCurrent regenerates the deepcopy methods and the CRD manifests with the
// controller-gen version pinned in the Makefile and fails when the committed files differ, so a
// change to the types cannot land without `make manifests generate`.
func TestGeneratedFilesAreCurrent(t *testing.T) {
	root := repoRoot(t)
	controllerGen := controllerGenBinary(t, root)
	out := t.TempDir()

	// The same generators and inputs as `make generate` and `make manifests`, written elsewhere:
	// the deepcopy file of each API package into its own directory, the CRDs into one.
	packages, err := filepath.Glob(filepath.Join(root, "api", "*", "groupversion_info.go"))
	if err != nil || len(packages) == 0 {
		t.Fatalf("no API packages under api/ (%v)", err)
	}
	for _, p := range packages {
		pkg := filepath.Base(filepath.Dir(p))
		run(t, root, controllerGen, "object", "paths=./api/"+pkg, "output:object:dir="+filepath.Join(out, pkg))
		compareDirs(t, filepath.Join(out, pkg), filepath.Join(root, "api", pkg), "zz_generated.*.go")
	}
	run(t, root, controllerGen, "crd", "paths=./api/...", "output:crd:dir="+filepath.Join(out, "crd"))
	compareDirs(t, filepath.Join(out, "crd"), filepath.Join(root, "config", "crd", "bases"), "*.yaml")
	run(t, root, controllerGen, "rbac:roleName=pmx-operator", "paths=./controllers/...", "output:rbac:dir="+filepath.Join(out, "rbac"))
	compareDirs(t, filepath.Join(out, "rbac"), filepath.Join(root, "config", "rbac"), "role.yaml")
}

// compareDirs fails for every file matching pattern that is in one directory and not the other, or
// whose contents differ.
func compareDirs(t *testing.T, generated, committed, pattern string) {
	t.Helper()
	want := globNames(t, generated, pattern)
	have := globNames(t, committed, pattern)
	if len(want) == 0 {
		t.Fatalf("controller-gen wrote no %s into %s", pattern, generated)
	}
	for _, name := range want {
		rel := relToRoot(t, filepath.Join(committed, name))
		got, err := os.ReadFile(filepath.Join(committed, name))
		if os.IsNotExist(err) {
			t.Errorf("%s is missing: run make manifests generate", rel)
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		exp, err := os.ReadFile(filepath.Join(generated, name))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, exp) {
			t.Errorf("%s is stale (%s): run make manifests generate", rel, firstDifference(exp, got))
		}
	}
	for _, name := range have {
		if !slices.Contains(want, name) {
			t.Errorf("%s is no longer generated: delete it, then run make manifests generate", relToRoot(t, filepath.Join(committed, name)))
		}
	}
}

func globNames(t *testing.T, dir, pattern string) []string {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join(dir, pattern))
	if err != nil {
		t.Fatal(err)
	}
	names := make([]string, len(paths))
	for i, p := range paths {
		names[i] = filepath.Base(p)
	}
	return names
}

// firstDifference describes the first line where the committed file leaves the generated one.
func firstDifference(generated, committed []byte) string {
	g := strings.Split(string(generated), "\n")
	c := strings.Split(string(committed), "\n")
	for i := 0; i < len(g) || i < len(c); i++ {
		var gl, cl string
		if i < len(g) {
			gl = g[i]
		}
		if i < len(c) {
			cl = c[i]
		}
		if gl != cl {
			return fmt.Sprintf("line %d: generated %q, committed %q", i+1, gl, cl)
		}
	}
	return "same lines, different bytes"
}

// controllerGenBinary returns the pinned controller-gen, bin/controller-gen-<version> as the
// Makefile names it, installing it there first if a fresh clone lacks it. The version comes from
// the Makefile, so the test and `make manifests` cannot disagree.
func controllerGenBinary(t *testing.T, root string) string {
	t.Helper()
	makefile, err := os.ReadFile(filepath.Join(root, "Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^CONTROLLER_GEN_VERSION\s*:?=\s*(\S+)\s*$`).FindSubmatch(makefile)
	if m == nil {
		t.Fatal("Makefile: no CONTROLLER_GEN_VERSION := ... line")
	}
	version := string(m[1])
	bin := filepath.Join(root, "bin")
	binary := filepath.Join(bin, "controller-gen-"+version)
	if _, err := os.Stat(binary); err == nil {
		return binary
	}

	// Install into a private directory, then rename: a concurrent `make manifests` or test run
	// sees either no binary or a complete one.
	if err := os.MkdirAll(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	gobin, err := os.MkdirTemp(bin, ".controller-gen-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(gobin)
	t.Logf("installing controller-gen %s into %s", version, bin)
	cmd := exec.Command("go", "install", "sigs.k8s.io/controller-tools/cmd/controller-gen@"+version)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "GOBIN="+gobin)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go install controller-gen@%s: %v\n%s", version, err, out)
	}
	if err := os.Rename(filepath.Join(gobin, "controller-gen"), binary); err != nil {
		t.Fatal(err)
	}
	return binary
}

func run(t *testing.T, dir, name string, args ...string) {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%s %s: %v\n%s", filepath.Base(name), strings.Join(args, " "), err, out)
	}
}

// repoRoot is the directory of the go.mod above this package.
func repoRoot(t *testing.T) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("no go.mod above the test's directory")
		}
		dir = parent
	}
}

func relToRoot(t *testing.T, path string) string {
	t.Helper()
	rel, err := filepath.Rel(repoRoot(t), path)
	if err != nil {
		return path
	}
	return rel
}
