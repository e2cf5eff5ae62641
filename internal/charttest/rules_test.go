package charttest

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/pmx-dev/pmx/internal/k8stest"
)

// promRuleAPI is what the chart looks for to render its PrometheusRule by itself.
const promRuleAPI = "monitoring.coreos.com/v1/PrometheusRule"

var (
	promtoolOnce, prometheusOnce sync.Once
	promtoolPath, prometheusPath string
	promtoolErr, prometheusErr   error
)

// promtoolBinary returns Prometheus's promtool at the Makefile's PROMTOOL_VERSION,
// bin/promtool-<version> (make test installs it first), installing it there when a plain `go test`
// runs without it.
func promtoolBinary(t testing.TB) string {
	t.Helper()
	root := k8stest.RepoRoot(t)
	promtoolOnce.Do(func() { promtoolPath, promtoolErr = installPrometheusCommand(t, root, "promtool") })
	if promtoolErr != nil {
		t.Fatal(promtoolErr)
	}
	return promtoolPath
}

// prometheusBinary returns the Prometheus server of the same release and build tags,
// bin/prometheus-<version>, installing it as promtoolBinary does promtool. Its web UI's assets are
// not in the Go module (they are built with npm for a release), so it serves its HTTP API and no UI:
// the dashboard test needs only the API.
func prometheusBinary(t testing.TB) string {
	t.Helper()
	root := k8stest.RepoRoot(t)
	prometheusOnce.Do(func() { prometheusPath, prometheusErr = installPrometheusCommand(t, root, "prometheus") })
	if prometheusErr != nil {
		t.Fatal(prometheusErr)
	}
	return prometheusPath
}

// installPrometheusCommand installs github.com/prometheus/prometheus/cmd/<name> at the Makefile's
// PROMTOOL_VERSION and PROMTOOL_TAGS as bin/<name>-<version>, unless it is there.
func installPrometheusCommand(t testing.TB, root, name string) (string, error) {
	makefile, err := os.ReadFile(filepath.Join(root, "Makefile"))
	if err != nil {
		return "", err
	}
	m := regexp.MustCompile(`(?m)^PROMTOOL_VERSION\s*:?=\s*(v\S+)\s*$`).FindSubmatch(makefile)
	if m == nil {
		return "", errors.New("Makefile: no PROMTOOL_VERSION := v<version> line")
	}
	version := string(m[1])
	// The Makefile's build tags (its PROMTOOL_TAGS line), which leave out what the tests never run.
	tags := ""
	if m := regexp.MustCompile(`(?m)^PROMTOOL_TAGS\s*:?=[ \t]*(\S*)\s*$`).FindSubmatch(makefile); m != nil {
		tags = string(m[1])
	}
	bin := filepath.Join(root, "bin")
	binary := filepath.Join(bin, name+"-"+version)
	if _, err := os.Stat(binary); err == nil {
		return binary, nil
	}
	if err := os.MkdirAll(bin, 0o755); err != nil {
		return "", err
	}
	gobin, err := os.MkdirTemp(bin, "."+name+"-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(gobin)
	t.Logf("installing %s %s into %s (minutes the first time)", name, version, bin)
	pkg := "github.com/prometheus/prometheus/cmd/" + name + "@" + version
	cmd := exec.Command("go", "install", "-tags="+tags, pkg)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "GOBIN="+gobin)
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go install %s: %v\n%s", pkg, err, out)
	}
	if err := os.Rename(filepath.Join(gobin, name), binary); err != nil {
		return "", err
	}
	return binary, nil
}

// ruleGroups are the groups of a rendered PrometheusRule, as a Prometheus rules file has them.
type ruleGroups struct {
	Groups []struct {
		Name  string `json:"name"`
		Rules []struct {
			Alert       string            `json:"alert"`
			Expr        string            `json:"expr"`
			For         string            `json:"for"`
			Labels      map[string]string `json:"labels"`
			Annotations map[string]string `json:"annotations"`
		} `json:"rules"`
	} `json:"groups"`
}

// renderRules renders the chart's PrometheusRule, release pmx in namespace pmx as
// testdata/rules_test.yaml expects, and returns its spec as a rules file.
func renderRules(t *testing.T, args ...string) []byte {
	t.Helper()
	r := renderChart(t, "pmx", "pmx", args...)
	m := r.find("PrometheusRule", "pmx")
	if m == nil {
		t.Fatalf("no PrometheusRule pmx rendered with %v", args)
	}
	spec, ok := m.obj.Object["spec"]
	if !ok {
		t.Fatal("the PrometheusRule has no spec")
	}
	out, err := yaml.Marshal(spec)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestPrometheusRuleRendered checks when the chart renders its PrometheusRule: by itself where
// the cluster serves the API, never where it does not (its CRD is not there), and as the value
// forces it either way.
func TestPrometheusRuleRendered(t *testing.T) {
	t.Parallel()
	tests := []struct {
		args []string
		want bool
	}{
		{nil, false},
		{[]string{"--api-versions", promRuleAPI}, true},
		{[]string{"--set", "prometheusRule.enabled=true"}, true},
		{[]string{"--api-versions", promRuleAPI, "--set", "prometheusRule.enabled=false"}, false},
	}
	for _, tt := range tests {
		r := renderChart(t, "pmx", "pmx", tt.args...)
		if got := r.find("PrometheusRule", "pmx") != nil; got != tt.want {
			t.Errorf("helm template %v: PrometheusRule rendered %v, want %v", tt.args, got, tt.want)
		}
	}
	if res := runHelm(t, "", "template", "pmx", chartDir, "--set", "prometheusRule.enabled=sometimes"); res.err == nil ||
		!strings.Contains(res.stderr, "/prometheusRule/enabled") {
		t.Errorf("prometheusRule.enabled=sometimes: want a schema error naming the value, got %v\n%s", res.err, res.stderr)
	}
}

// TestPrometheusRules runs Prometheus's own unit tests of the rendered alerts, `promtool test
// rules testdata/rules_test.yaml`, on synthetic series: each alert fires when it should and not
// when it should not, with the labels and annotations expected. It also checks that every alert
// has a case there and a runbook section in docs/operations.md that its runbook_url points to.
func TestPrometheusRules(t *testing.T) {
	t.Parallel()
	promtool := promtoolBinary(t)
	root := k8stest.RepoRoot(t)
	dir := t.TempDir()
	rules := renderRules(t, "--api-versions", promRuleAPI)
	if err := os.WriteFile(filepath.Join(dir, "rules.yaml"), rules, 0o644); err != nil {
		t.Fatal(err)
	}
	tests, err := os.ReadFile(filepath.Join(root, "internal/charttest/testdata/rules_test.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "rules_test.yaml"), tests, 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	for _, args := range [][]string{{"check", "rules", "rules.yaml"}, {"test", "rules", "rules_test.yaml"}} {
		cmd := exec.CommandContext(ctx, promtool, args...)
		cmd.Dir = dir
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("promtool %s: %v\n%s\nrules.yaml:\n%s", strings.Join(args, " "), err, out, rules)
		}
	}

	var groups ruleGroups
	if err := yaml.Unmarshal(rules, &groups); err != nil {
		t.Fatal(err)
	}
	var tested struct {
		Tests []struct {
			AlertRuleTest []struct {
				Alertname string `json:"alertname"`
			} `json:"alert_rule_test"`
		} `json:"tests"`
	}
	if err := yaml.Unmarshal(tests, &tested); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tc := range tested.Tests {
		for _, a := range tc.AlertRuleTest {
			names = append(names, a.Alertname)
		}
	}
	anchors := runbookAnchors(t, filepath.Join(root, "docs/operations.md"))
	alerts := 0
	for _, g := range groups.Groups {
		for _, r := range g.Rules {
			if r.Alert == "" {
				continue
			}
			alerts++
			if !slices.Contains(names, r.Alert) {
				t.Errorf("alert %s has no case in testdata/rules_test.yaml", r.Alert)
			}
			if s := r.Labels["severity"]; s != "critical" && s != "warning" {
				t.Errorf("alert %s: severity %q, want critical or warning", r.Alert, s)
			}
			u, err := url.Parse(r.Annotations["runbook_url"])
			if err != nil || !strings.HasSuffix(u.Path, "/docs/operations.md") || !anchors[u.Fragment] || u.Fragment != strings.ToLower(r.Alert) {
				t.Errorf("alert %s: runbook_url %q, want docs/operations.md#%s, a heading there", r.Alert, r.Annotations["runbook_url"], strings.ToLower(r.Alert))
			}
		}
	}
	if alerts < 9 {
		t.Errorf("%d alerts rendered; want the 9 of docs/operations.md at least", alerts)
	}
}

// runbookAnchors are the anchors GitHub gives the headings of a Markdown file: lower case, spaces
// as hyphens, other punctuation dropped.
func runbookAnchors(t *testing.T, path string) map[string]bool {
	t.Helper()
	doc, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	anchors := map[string]bool{}
	for _, m := range regexp.MustCompile(`(?m)^#+ (.+)$`).FindAllStringSubmatch(string(doc), -1) {
		a := strings.ReplaceAll(strings.ToLower(strings.TrimSpace(m[1])), " ", "-")
		anchors[regexp.MustCompile(`[^a-z0-9_-]`).ReplaceAllString(a, "")] = true
	}
	return anchors
}
