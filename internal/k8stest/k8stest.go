// Package k8stest runs a real Kubernetes control plane for tests: a kube-apiserver and etcd started
// by controller-runtime's envtest, with pmx's CRDs (config/crd/bases) installed, a controller-runtime
// client that knows pmx's types, and a real kubectl pointed at it.
//
// The binaries are not downloaded: `make k8s-bins` (a prerequisite of `make test`) builds them from
// source through the Go module proxy into bin/k8s/<KubernetesVersion>/, pinned by the build modules
// hack/k8s and hack/etcd. KUBEBUILDER_ASSETS, when set, names another folder holding them.
//
//	env := k8stest.Start(t)
//	env.Kubectl(t, "apply", "--server-side", "-f", "market.yaml")
//	var m v1alpha1.Market
//	err := env.Client.Get(ctx, client.ObjectKey{Namespace: "default", Name: "m"}, &m)
//
// Each Start runs its own control plane on ports envtest picks at run time, and stops it in
// t.Cleanup. On Linux the kube-apiserver and etcd also die with the test process when it is killed
// (a timeout, Ctrl-C, SIGKILL), so that no run leaves them behind; see wrap_linux.go.
package k8stest

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/pmx-dev/pmx/api/v1alpha1"
)

// KubernetesVersion is the release of the kube-apiserver and kubectl that `make k8s-bins` builds
// (hack/k8s/go.mod pins it; a test checks that the two agree), and the name of their folder under
// bin/k8s/.
const KubernetesVersion = "v1.37.1"

// module is the path of pmx's Go module, whose go.mod marks the repository's root.
const module = "github.com/pmx-dev/pmx"

// binaries are the programs Assets provides.
var binaries = []string{"kube-apiserver", "etcd", "kubectl"}

// Env is a running control plane: a kube-apiserver and its etcd with pmx's CRDs installed.
type Env struct {
	// Config connects to the kube-apiserver as an administrator (group system:masters).
	Config *rest.Config
	// Scheme holds client-go's built-in types and pmx's v1alpha1 types.
	Scheme *runtime.Scheme
	// Client is a controller-runtime client (no cache) for Config and Scheme.
	Client client.Client
	// Kubeconfig is the path of a kubeconfig file for Config, for kubectl and other tools.
	Kubeconfig string
	// KubectlPath is the path of the kubectl binary (the method Kubectl runs it).
	KubectlPath string

	// kubectlCache is kubectl's discovery and HTTP cache, private to this Env.
	kubectlCache string
}

// Assets returns the folder that holds the kube-apiserver, etcd and kubectl binaries:
// $KUBEBUILDER_ASSETS if set, else bin/k8s/<KubernetesVersion> in the repository. It fails the test
// when one of them is missing.
func Assets(t testing.TB) string {
	t.Helper()
	dir, err := assets()
	if err != nil {
		t.Fatal(err)
	}
	return dir
}

func assets() (string, error) {
	dir, ok := os.LookupEnv("KUBEBUILDER_ASSETS")
	if !ok || dir == "" {
		root, err := repoRoot()
		if err != nil {
			return "", err
		}
		dir = filepath.Join(root, "bin", "k8s", KubernetesVersion)
	}
	var missing []string
	for _, name := range binaries {
		if fi, err := os.Stat(filepath.Join(dir, name)); err != nil || fi.IsDir() || fi.Mode()&0o111 == 0 {
			missing = append(missing, name)
		}
	}
	if len(missing) > 0 {
		return "", fmt.Errorf("k8stest: %s not found in %s: run make k8s-bins (or make test) to build them",
			strings.Join(missing, ", "), dir)
	}
	return dir, nil
}

// RepoRoot returns the root of the pmx repository: the closest folder, from the working directory
// up, whose go.mod declares module github.com/pmx-dev/pmx.
func RepoRoot(t testing.TB) string {
	t.Helper()
	root, err := repoRoot()
	if err != nil {
		t.Fatal(err)
	}
	return root
}

func repoRoot() (string, error) {
	wd, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for dir := wd; ; dir = filepath.Dir(dir) {
		if modulePath(filepath.Join(dir, "go.mod")) == module {
			return dir, nil
		}
		if filepath.Dir(dir) == dir {
			return "", fmt.Errorf("k8stest: no go.mod of module %s in %s or above", module, wd)
		}
	}
}

// modulePath returns the module path that the go.mod file at path declares, or "".
func modulePath(path string) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(strings.TrimSpace(sc.Text()), "module "); ok {
			return strings.Trim(strings.TrimSpace(rest), `"`)
		}
	}
	return ""
}

// NewScheme returns a scheme with client-go's built-in types and pmx's v1alpha1 types.
func NewScheme() *runtime.Scheme {
	s := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(s); err != nil {
		panic(err)
	}
	if err := v1alpha1.AddToScheme(s); err != nil {
		panic(err)
	}
	return s
}

// Start starts a kube-apiserver and etcd with the binaries of Assets, installs the CRDs of
// config/crd/bases and waits until they are served. The control plane is stopped, and its files
// removed, when the test and its subtests finish. When the test fails, the end of the control plane's
// logs is logged.
func Start(t testing.TB) *Env {
	t.Helper()
	started := time.Now()
	bins := Assets(t)
	root := RepoRoot(t)
	dir := t.TempDir() // removed after the control plane stops: cleanups run last-in, first-out

	etcdDir := filepath.Join(dir, "etcd")
	certDir := filepath.Join(dir, "apiserver")
	for _, d := range []string{etcdDir, certDir} {
		if err := os.Mkdir(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	apiserverPath, etcdPath, err := wrapBinaries(dir, bins)
	if err != nil {
		t.Fatal(err)
	}
	etcdLog := createLog(t, dir, "etcd.log")
	apiserverLog := createLog(t, dir, "kube-apiserver.log")

	scheme := NewScheme()
	te := &envtest.Environment{
		BinaryAssetsDirectory: bins,
		CRDDirectoryPaths:     []string{filepath.Join(root, "config", "crd", "bases")},
		ErrorIfCRDPathMissing: true,
		Scheme:                scheme,
		ControlPlane: envtest.ControlPlane{
			Etcd: &envtest.Etcd{Path: etcdPath, DataDir: etcdDir, Out: etcdLog, Err: etcdLog},
			APIServer: &envtest.APIServer{
				Path: apiserverPath, CertDir: certDir, Out: apiserverLog, Err: apiserverLog,
			},
			KubectlPath: filepath.Join(bins, "kubectl"),
		},
	}
	// Stop whatever started, even when Start fails halfway (envtest leaves the processes running
	// then).
	t.Cleanup(func() {
		if err := te.Stop(); err != nil {
			t.Errorf("k8stest: stopping the control plane: %v", err)
		}
		if t.Failed() {
			LogTail(t, etcdLog.Name(), 20)
			LogTail(t, apiserverLog.Name(), 40)
		}
	})
	cfg, err := te.Start()
	if err != nil {
		t.Fatalf("k8stest: starting kube-apiserver and etcd from %s: %v", bins, err)
	}

	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	kubeconfig := filepath.Join(dir, "kubeconfig")
	if err := os.WriteFile(kubeconfig, te.KubeConfig, 0o600); err != nil {
		t.Fatal(err)
	}
	t.Logf("k8stest: kube-apiserver %s started in %v (kubeconfig %s)",
		cfg.Host, time.Since(started).Round(time.Millisecond), kubeconfig)
	return &Env{
		Config:       cfg,
		Scheme:       scheme,
		Client:       c,
		Kubeconfig:   kubeconfig,
		KubectlPath:  filepath.Join(bins, "kubectl"),
		kubectlCache: filepath.Join(dir, "kubectl-cache"),
	}
}

// Attach connects to a running cluster through kubeconfig — the one-node cluster of hack/cluster,
// where the tests run pmx's chart on real pods — with the kubectl of Assets. Nothing is started
// or installed.
func Attach(t testing.TB, kubeconfig string) *Env {
	t.Helper()
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		t.Fatalf("k8stest: reading %s: %v", kubeconfig, err)
	}
	scheme := NewScheme()
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	return &Env{
		Config:       cfg,
		Scheme:       scheme,
		Client:       c,
		Kubeconfig:   kubeconfig,
		KubectlPath:  filepath.Join(Assets(t), "kubectl"),
		kubectlCache: filepath.Join(t.TempDir(), "kubectl-cache"),
	}
}

func createLog(t testing.TB, dir, name string) *os.File {
	t.Helper()
	f, err := os.Create(filepath.Join(dir, name))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

// LogTail logs the last n lines of the file at path (nothing when it cannot be read or is empty).
func LogTail(t testing.TB, path string, n int) {
	data, err := os.ReadFile(path)
	if err != nil || len(data) == 0 {
		return
	}
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	t.Logf("k8stest: last lines of %s:\n%s", filepath.Base(path), strings.Join(lines, "\n"))
}

// KubectlCmd returns a kubectl command with args that talks to e's kube-apiserver. Neither the
// user's kubeconfig nor ~/.kube (preferences in kuberc, the discovery cache) play a part.
func (e *Env) KubectlCmd(ctx context.Context, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, e.KubectlPath,
		append([]string{"--kubeconfig=" + e.Kubeconfig, "--cache-dir=" + e.kubectlCache}, args...)...)
	cmd.Env = append(os.Environ(), "KUBERC=off", "KUBECONFIG="+e.Kubeconfig)
	cmd.WaitDelay = 5 * time.Second
	return cmd
}

// Kubectl runs kubectl with args against e's kube-apiserver and returns its standard output. It
// fails the test, with kubectl's output, when kubectl fails or runs longer than a minute.
func (e *Env) Kubectl(t testing.TB, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	cmd := e.KubectlCmd(ctx, args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			err = fmt.Errorf("%w (timed out)", err)
		}
		t.Fatalf("kubectl %s: %v\n%s%s", strings.Join(args, " "), err, stdout.String(), stderr.String())
	}
	return stdout.String()
}
