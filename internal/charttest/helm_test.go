package charttest

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"

	"github.com/pmx-dev/pmx/internal/k8stest"
)

// chartDir is the chart under test, relative to the repository's root.
const chartDir = "charts/pmx"

var (
	helmOnce sync.Once
	helmPath string
	helmErr  error
)

// helmBinary returns the pinned helm, bin/helm-<HELM_VERSION> as the Makefile names it (make test
// installs it first), installing it there when a plain `go test` runs without it. The version
// comes from the Makefile, so the tests and `make helm-lint` cannot disagree.
func helmBinary(t testing.TB) string {
	t.Helper()
	root := k8stest.RepoRoot(t)
	helmOnce.Do(func() { helmPath, helmErr = installHelm(t, root) })
	if helmErr != nil {
		t.Fatal(helmErr)
	}
	return helmPath
}

func installHelm(t testing.TB, root string) (string, error) {
	makefile, err := os.ReadFile(filepath.Join(root, "Makefile"))
	if err != nil {
		return "", err
	}
	m := regexp.MustCompile(`(?m)^HELM_VERSION\s*:?=\s*(v(\d+)\.\S+)\s*$`).FindSubmatch(makefile)
	if m == nil {
		return "", errors.New("Makefile: no HELM_VERSION := v<major>.<minor>.<patch> line")
	}
	version, major := string(m[1]), string(m[2])
	bin := filepath.Join(root, "bin")
	binary := filepath.Join(bin, "helm-"+version)
	if _, err := os.Stat(binary); err == nil {
		return binary, nil
	}
	// Install into a private directory, then rename: a concurrent `make helm` or test run sees
	// either no binary or a complete one.
	if err := os.MkdirAll(bin, 0o755); err != nil {
		return "", err
	}
	gobin, err := os.MkdirTemp(bin, ".helm-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(gobin)
	t.Logf("installing helm %s into %s (a few minutes the first time)", version, bin)
	module := "helm.sh/helm/v" + major
	cmd := exec.Command("go", "install", "-ldflags", "-s -w -X "+module+"/internal/version.version="+version,
		module+"/cmd/helm@"+version)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "GOBIN="+gobin)
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go install %s/cmd/helm@%s: %v\n%s", module, version, err, out)
	}
	if err := os.Rename(filepath.Join(gobin, "helm"), binary); err != nil {
		return "", err
	}
	return binary, nil
}

// helmResult is what one helm command printed.
type helmResult struct {
	stdout, stderr string
	err            error
}

// runHelm runs helm with args from the repository's root, with its own empty configuration, cache
// and data folders (no repositories or plugins of the user's), and kubeconfig as $KUBECONFIG (none
// when empty: helm template and lint need no cluster).
func runHelm(t testing.TB, kubeconfig string, args ...string) helmResult {
	t.Helper()
	// The binary first: installing it takes minutes the first time, which are not helm's to spend.
	helm := helmBinary(t)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	home := t.TempDir()
	cmd := exec.CommandContext(ctx, helm, args...)
	cmd.Dir = k8stest.RepoRoot(t)
	cmd.Env = append(os.Environ(),
		"HELM_CONFIG_HOME="+filepath.Join(home, "config"),
		"HELM_CACHE_HOME="+filepath.Join(home, "cache"),
		"HELM_DATA_HOME="+filepath.Join(home, "data"),
		"KUBECONFIG="+orDefault(kubeconfig, filepath.Join(home, "no-kubeconfig")),
	)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	if ctx.Err() != nil {
		err = fmt.Errorf("%w (timed out)", err)
	}
	return helmResult{stdout.String(), stderr.String(), err}
}

// mustHelm runs helm and returns its standard output; it fails the test when helm fails.
func mustHelm(t testing.TB, kubeconfig string, args ...string) string {
	t.Helper()
	r := runHelm(t, kubeconfig, args...)
	if r.err != nil {
		t.Fatalf("helm %s: %v\n%s%s", strings.Join(args, " "), r.err, r.stdout, r.stderr)
	}
	return r.stdout
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// manifest is one object of a render.
type manifest struct {
	source string // the template, from helm's "# Source:" comment
	raw    []byte
	obj    *unstructured.Unstructured
}

func (m manifest) String() string {
	return fmt.Sprintf("%s %s (%s)", m.obj.GetKind(), m.obj.GetName(), m.source)
}

// render is a helm template of the chart: its objects, and its text for kubectl.
type render struct {
	release, namespace string
	text               string
	objects            []manifest
}

// renderChart runs `helm template release chart --namespace namespace args...` and decodes what it
// prints, failing the test when helm fails or prints something that is not a Kubernetes object.
func renderChart(t testing.TB, release, namespace string, args ...string) *render {
	t.Helper()
	out := mustHelm(t, "", append([]string{"template", release, chartDir, "--namespace", namespace}, args...)...)
	r := &render{release: release, namespace: namespace, text: out}
	reader := utilyaml.NewYAMLReader(bufio.NewReader(strings.NewReader(out)))
	for {
		doc, err := reader.Read()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		source := ""
		if m := regexp.MustCompile(`(?m)^# Source: (\S+)`).FindSubmatch(doc); m != nil {
			source = string(m[1])
		}
		var obj map[string]any
		if err := yaml.Unmarshal(doc, &obj); err != nil {
			t.Fatalf("%s: %v\n%s", source, err, doc)
		}
		if obj == nil {
			continue // a template that rendered nothing
		}
		u := &unstructured.Unstructured{Object: obj}
		if u.GetAPIVersion() == "" || u.GetKind() == "" || u.GetName() == "" {
			t.Fatalf("%s rendered an object without apiVersion, kind or name:\n%s", source, doc)
		}
		r.objects = append(r.objects, manifest{source: source, raw: doc, obj: u})
	}
	if len(r.objects) == 0 {
		t.Fatalf("helm template %s rendered no objects", strings.Join(args, " "))
	}
	return r
}

// find returns the rendered object of kind and name, or nil.
func (r *render) find(kind, name string) *manifest {
	for i := range r.objects {
		if r.objects[i].obj.GetKind() == kind && r.objects[i].obj.GetName() == name {
			return &r.objects[i]
		}
	}
	return nil
}

// ofKind returns the rendered objects of kind.
func (r *render) ofKind(kind string) []manifest {
	var out []manifest
	for _, m := range r.objects {
		if m.obj.GetKind() == kind {
			out = append(out, m)
		}
	}
	return out
}

// decode decodes the rendered object of kind and name into a typed object, strictly (a field the
// type does not have fails the test), and fails the test when there is no such object.
func decode[T any](t testing.TB, r *render, kind, name string) *T {
	t.Helper()
	m := r.find(kind, name)
	if m == nil {
		t.Fatalf("no %s %s rendered; rendered: %v", kind, name, r.objects)
	}
	var obj T
	if err := yaml.UnmarshalStrict(m.raw, &obj); err != nil {
		t.Fatalf("%s: %v", m, err)
	}
	return &obj
}

// valuesFile is a file of testdata/ for helm's -f, relative to the repository's root.
func valuesFile(name string) string {
	return filepath.Join("internal", "charttest", "testdata", name)
}
