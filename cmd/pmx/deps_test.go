package main

import (
	"os/exec"
	"strings"
	"testing"
)

// TestProductionDependencies checks that pmx links only what its processes run: not the tools
// (internal/tools, cmd/pmxtools' packages), and not controller-runtime's envtest or its testing
// internals, whose package init makes a folder under /tmp as any process linking them starts,
// which the chart's read-only root refuses (docs/architecture.md §1). The image test
// (make test-image) proves the same of the built image: pmx api and pmx shard start there with
// no writable /tmp. The subcommands' code lives in packages of their own (internal/cmd/...),
// which pmx links and this test therefore checks with it: each must be among pmx's dependencies.
func TestProductionDependencies(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "-f", "{{.ImportPath}}", ".").Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	// Each a package and everything under it.
	forbidden := []string{
		"github.com/pmx-dev/pmx/internal/tools/",
		"sigs.k8s.io/controller-runtime/pkg/envtest/",
		"sigs.k8s.io/controller-runtime/pkg/internal/testing/",
	}
	deps := strings.Fields(string(out))
	if len(deps) < 100 {
		t.Fatalf("go list -deps listed %d packages, too few to be pmx's: %q", len(deps), deps)
	}
	subcommands := map[string]bool{}
	for _, name := range []string{"api", "dev", "migrate", "operator", "process", "serve", "shard"} {
		subcommands["github.com/pmx-dev/pmx/internal/cmd/"+name] = false
	}
	for _, dep := range deps {
		if _, ok := subcommands[dep]; ok {
			subcommands[dep] = true
		}
	}
	for pkg, linked := range subcommands {
		if !linked {
			t.Errorf("pmx does not link %s: this test no longer checks a subcommand's dependencies", pkg)
		}
	}
	for _, dep := range deps {
		for _, f := range forbidden {
			if strings.HasPrefix(dep+"/", f) {
				t.Errorf("pmx links %s: production must not carry it; keep it in cmd/pmxtools", dep)
			}
		}
	}
}
