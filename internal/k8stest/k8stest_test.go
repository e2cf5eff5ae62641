package k8stest

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
)

// The version Assets looks for is the one hack/k8s/go.mod pins, which the Makefile builds.
func TestKubernetesVersionMatchesBuildModule(t *testing.T) {
	data, err := os.ReadFile(filepath.Join(RepoRoot(t), "hack", "k8s", "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	var pinned string
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		if f := strings.Fields(sc.Text()); len(f) >= 2 && f[0] == "k8s.io/kubernetes" {
			pinned = f[1]
		}
	}
	if pinned != KubernetesVersion {
		t.Fatalf("hack/k8s/go.mod requires k8s.io/kubernetes %q, KubernetesVersion is %q", pinned, KubernetesVersion)
	}
}

func TestRepoRoot(t *testing.T) {
	root := RepoRoot(t)
	if modulePath(filepath.Join(root, "go.mod")) != module {
		t.Fatalf("RepoRoot = %s, whose go.mod is not module %s", root, module)
	}
	if _, err := os.Stat(filepath.Join(root, "config", "crd", "bases")); err != nil {
		t.Fatal(err)
	}
}

func TestAssetsHonoursKubebuilderAssets(t *testing.T) {
	dir := t.TempDir()
	for _, name := range binaries {
		if err := os.WriteFile(filepath.Join(dir, name), []byte("#!/bin/sh\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv("KUBEBUILDER_ASSETS", dir)
	if got := Assets(t); got != dir {
		t.Fatalf("Assets = %s, want $KUBEBUILDER_ASSETS %s", got, dir)
	}
}

func TestAssetsMissingSaysHowToBuild(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "etcd"), []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("KUBEBUILDER_ASSETS", dir)
	msg, failed := fatalOf(func(tb testing.TB) { Assets(tb) })
	if !failed {
		t.Fatal("Assets did not fail the test without kube-apiserver and kubectl")
	}
	for _, want := range []string{"kube-apiserver, kubectl not found in " + dir, "run make k8s-bins (or make test)"} {
		if !strings.Contains(msg, want) {
			t.Errorf("Assets failed with %q, want it to contain %q", msg, want)
		}
	}
}

// recorder is a testing.TB that records a Fatal instead of failing the test.
type recorder struct {
	testing.TB
	msg string
}

func (r *recorder) Helper() {}

func (r *recorder) Fatal(args ...any) {
	r.msg = strings.TrimSuffix(fmt.Sprintln(args...), "\n")
	runtime.Goexit()
}

func (r *recorder) Fatalf(format string, args ...any) { r.Fatal(fmt.Sprintf(format, args...)) }

// fatalOf runs f with a recorder and reports whether, and with what message, f failed.
func fatalOf(f func(testing.TB)) (msg string, failed bool) {
	r := &recorder{}
	var wg sync.WaitGroup
	done := false
	wg.Go(func() {
		f(r)
		done = true
	})
	wg.Wait()
	return r.msg, !done
}
