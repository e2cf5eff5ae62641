package charttest

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/pmx-dev/pmx/internal/k8stest"
)

// The chart's crds/ is a copy of config/crd/bases, which controller-gen writes (`make manifests`
// copies it). Helm installs crds/ before the templates, so a stale copy would install an old CRD.
func TestChartCRDsAreConfigCRDs(t *testing.T) {
	t.Parallel()
	root := k8stest.RepoRoot(t)
	config := filepath.Join(root, "config", "crd", "bases")
	chart := filepath.Join(root, "charts", "pmx", "crds")
	want := yamlFiles(t, config)
	have := yamlFiles(t, chart)
	if len(want) == 0 {
		t.Fatalf("no CRDs in %s", config)
	}
	for _, name := range want {
		exp, err := os.ReadFile(filepath.Join(config, name))
		if err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(filepath.Join(chart, name))
		if os.IsNotExist(err) {
			t.Errorf("charts/pmx/crds/%s is missing: run make manifests", name)
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, exp) {
			t.Errorf("charts/pmx/crds/%s differs from config/crd/bases/%s: run make manifests", name, name)
		}
	}
	for _, name := range have {
		if !slices.Contains(want, name) {
			t.Errorf("charts/pmx/crds/%s is not in config/crd/bases: delete it", name)
		}
	}
}

func yamlFiles(t *testing.T, dir string) []string {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, p := range paths {
		names = append(names, filepath.Base(p))
	}
	return names
}
