package charttest

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/pmx-dev/pmx/internal/k8stest"
)

// TestDashboardsConfigMap renders the ConfigMap of Grafana dashboards: none by default; with
// dashboards.enabled, every committed dashboard as it is in charts/pmx/dashboards, under the
// sidecar's label, in the namespace asked for.
func TestDashboardsConfigMap(t *testing.T) {
	t.Parallel()
	if r := renderChart(t, "pmx", "pmx"); r.find("ConfigMap", "pmx-dashboards") != nil {
		t.Error("the dashboards' ConfigMap is rendered by default")
	}
	r := renderChart(t, "pmx", "pmx", "--set", "dashboards.enabled=true", "--set", "dashboards.namespace=monitoring",
		"--set-string", "dashboards.annotations.grafana_folder=pmx")
	cm := decode[corev1.ConfigMap](t, r, "ConfigMap", "pmx-dashboards")
	if cm.Namespace != "monitoring" || cm.Labels["grafana_dashboard"] != "1" || cm.Annotations["grafana_folder"] != "pmx" {
		t.Errorf("ConfigMap in %q, labels %v, annotations %v; want monitoring, grafana_dashboard=1, grafana_folder=pmx",
			cm.Namespace, cm.Labels, cm.Annotations)
	}
	files, err := filepath.Glob(filepath.Join(k8stest.RepoRoot(t), chartDir, "dashboards", "*.json"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no dashboards under %s/dashboards: %v", chartDir, err)
	}
	if len(cm.Data) != len(files) {
		t.Errorf("ConfigMap keys %d, want one per dashboard, %d", len(cm.Data), len(files))
	}
	for _, f := range files {
		want, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		got := cm.Data[filepath.Base(f)]
		var d struct{ UID string }
		if err := json.Unmarshal([]byte(got), &d); err != nil || d.UID == "" {
			t.Errorf("%s in the ConfigMap is not a dashboard with a uid: %v", filepath.Base(f), err)
		}
		if got+"\n" != string(want) {
			t.Errorf("%s in the ConfigMap differs from the committed file", filepath.Base(f))
		}
	}
}
