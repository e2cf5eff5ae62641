package charttest

import (
	"bytes"
	"context"
	"encoding/base64"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	pmxv1 "github.com/pmx-dev/pmx/api/v1alpha1"
	"github.com/pmx-dev/pmx/internal/k8stest"
	"github.com/pmx-dev/pmx/internal/poll"
)

// TestChartOnAPIServer hands what the chart renders to a real kube-apiserver (k8stest: the Market
// CRD installed from config/crd/bases, and here the Prometheus Operator's ServiceMonitor CRD from
// testdata/crds), so that the apiserver itself validates every object: first a server-side dry run
// of each values set, in namespaces that enforce the "restricted" Pod Security Standard; then a
// real helm install and upgrades, which show that generated secrets survive upgrades.
func TestChartOnAPIServer(t *testing.T) {
	t.Parallel()
	env := k8stest.Start(t)
	root := k8stest.RepoRoot(t)
	env.Kubectl(t, "apply", "--server-side", "-f", filepath.Join(root, "internal", "charttest", "testdata", "crds"))
	// Until the apiserver has set the CRD's conditions at all, kubectl wait fails at once instead of
	// waiting ("<nil> is of the type <nil>"): poll for Established instead.
	err := poll.Until(t.Context(), time.Minute, func(ctx context.Context) (bool, error) {
		out, err := env.KubectlCmd(ctx, "get", "crd/servicemonitors.monitoring.coreos.com",
			"-o", `jsonpath={.status.conditions[?(@.type=="Established")].status}`).Output()
		return err == nil && strings.TrimSpace(string(out)) == "True", nil
	})
	if err != nil {
		t.Fatalf("the ServiceMonitor CRD was not established: %v", err)
	}

	t.Run("server dry run", func(t *testing.T) {
		cases := []struct {
			name, release, namespace string
			args                     []string
		}{
			{"default values", "pmx", "exchange", nil},
			{"values-production.yaml", "ex", "trading", []string{"-f", valuesFile("values-production.yaml")}},
			{"values-external-url.yaml", "exchange", "markets", []string{"-f", valuesFile("values-external-url.yaml")}},
			{"a pool with dedicated shards and monitors", "pmx", "pools", []string{"--set", "shardPool.maxDedicatedShards=2",
				"--set", "serviceMonitor.enabled=true", "--set", "shard.podLabels.team=markets"}},
			{"the chart's own shard StatefulSet", "pmx", "statefulset", []string{"--set", "shardPool.enabled=false",
				"--set", "serviceMonitor.enabled=true"}},
		}
		for _, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				t.Parallel()
				createNamespace(t, env, c.namespace)
				r := renderChart(t, c.release, c.namespace, c.args...)
				out := dryRun(t, env, r)
				if strings.Contains(out.stderr, "Warning") {
					t.Errorf("the apiserver warned:\n%s", out.stderr)
				}
			})
		}
	})

	// The namespaces above enforce the restricted Pod Security Standard; this shows that the
	// apiserver does check the pod templates there, so that their silence above means something.
	t.Run("pod security is checked", func(t *testing.T) {
		createNamespace(t, env, "checked")
		r := renderChart(t, "pmx", "checked", "--set", "securityContext.allowPrivilegeEscalation=true")
		out := dryRun(t, env, r)
		if !strings.Contains(out.stderr, `would violate PodSecurity "restricted:latest": allowPrivilegeEscalation != false`) {
			t.Errorf("no Pod Security warning for allowPrivilegeEscalation=true:\n%s", out.stderr)
		}
	})

	// The README's sample markets, applied as it says, are Markets that kubectl get mkt lists.
	t.Run("sample markets", func(t *testing.T) {
		samples, err := filepath.Glob(filepath.Join(root, "config", "samples", "*.yaml"))
		if err != nil || len(samples) == 0 {
			t.Fatalf("no samples in config/samples (%v)", err)
		}
		env.Kubectl(t, "apply", "-f", filepath.Join(root, "config", "samples")+"/")
		out := env.Kubectl(t, "get", "mkt", "--no-headers", "-o", "name")
		if n := len(strings.Fields(out)); n != len(samples) {
			t.Errorf("kubectl get mkt lists %d markets, want the %d samples:\n%s", n, len(samples), out)
		}
	})

	t.Run("install and upgrades keep generated secrets", func(t *testing.T) {
		const ns = "pmx" // as in the README
		createNamespace(t, env, ns)
		helm := func(args ...string) string {
			t.Helper()
			r := runHelm(t, env.Kubeconfig, append(args, "--namespace", ns)...)
			if r.err != nil {
				t.Fatalf("helm %s: %v\n%s%s", strings.Join(args, " "), r.err, r.stdout, r.stderr)
			}
			if strings.Contains(r.stderr, "PodSecurity") {
				t.Errorf("helm %s: the apiserver warned:\n%s", strings.Join(args, " "), r.stderr)
			}
			return r.stdout
		}

		helm("install", "pmx", chartDir)
		tokens := secret(t, env, ns, "pmx-tokens")
		postgres := secret(t, env, ns, "pmx-postgres")
		if len(tokens["admin-token"]) != 32 || len(tokens["internal-token"]) != 32 || len(postgres["password"]) != 32 {
			t.Fatalf("generated secrets: tokens %d and %d characters, password %d; want 32",
				len(tokens["admin-token"]), len(tokens["internal-token"]), len(postgres["password"]))
		}

		// The README's and NOTES.txt's way to read the admin token.
		out := env.Kubectl(t, "-n", ns, "get", "secret", "pmx-tokens", "-o", "jsonpath={.data.admin-token}")
		if got, err := base64.StdEncoding.DecodeString(out); err != nil || string(got) != tokens["admin-token"] {
			t.Errorf("kubectl get secret pmx-tokens -o jsonpath={.data.admin-token} printed %q (%v)", out, err)
		}

		// An upgrade that changes something else keeps every generated value.
		helm("upgrade", "pmx", chartDir, "--set", "shard.replicas=3")
		var shards pmxv1.ShardPool
		if err := env.Client.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: "default"}, &shards); err != nil {
			t.Fatal(err)
		}
		if got := ptr.Deref(shards.Spec.Replicas, 0); got != 3 {
			t.Fatalf("after the upgrade the shards' pool's replicas are %d, want 3", got)
		}
		sameSecret(t, "after an upgrade", "pmx-tokens", secret(t, env, ns, "pmx-tokens"), tokens)
		sameSecret(t, "after an upgrade", "pmx-postgres", secret(t, env, ns, "pmx-postgres"), postgres)

		// A value given replaces its generated one and leaves the others alone.
		helm("upgrade", "pmx", chartDir, "--set", "secrets.adminToken=chosen-admin-token-0123456789abcdef")
		want := map[string]string{"admin-token": "chosen-admin-token-0123456789abcdef", "internal-token": tokens["internal-token"]}
		sameSecret(t, "after setting secrets.adminToken", "pmx-tokens", secret(t, env, ns, "pmx-tokens"), want)
		sameSecret(t, "after setting secrets.adminToken", "pmx-postgres", secret(t, env, ns, "pmx-postgres"), postgres)

		// helm uninstall keeps the Postgres Secret, like the volume whose database it opens, and
		// a new install of the release reads the password back.
		helm("uninstall", "pmx")
		if err := env.Client.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: "pmx-tokens"}, &corev1.Secret{}); !apierrors.IsNotFound(err) {
			t.Fatalf("pmx-tokens after helm uninstall: %v, want not found", err)
		}
		sameSecret(t, "after helm uninstall", "pmx-postgres", secret(t, env, ns, "pmx-postgres"), postgres)
		helm("install", "pmx", chartDir)
		sameSecret(t, "after a new install", "pmx-postgres", secret(t, env, ns, "pmx-postgres"), postgres)
	})
}

// createNamespace creates a namespace that enforces, and warns about, the restricted Pod Security
// Standard.
func createNamespace(t *testing.T, env *k8stest.Env, name string) {
	t.Helper()
	file := filepath.Join(t.TempDir(), "namespace.yaml")
	ns := fmt.Sprintf(`apiVersion: v1
kind: Namespace
metadata:
  name: %s
  labels:
    pod-security.kubernetes.io/enforce: restricted
    pod-security.kubernetes.io/warn: restricted
`, name)
	if err := os.WriteFile(file, []byte(ns), 0o600); err != nil {
		t.Fatal(err)
	}
	env.Kubectl(t, "apply", "--server-side", "-f", file)
}

type kubectlResult struct{ stdout, stderr string }

// dryRun applies every object of r with a server-side apply and a server-side dry run, with strict
// field validation (an unknown or duplicate field is an error), and checks that the apiserver
// accepted each one.
func dryRun(t *testing.T, env *k8stest.Env, r *render) kubectlResult {
	t.Helper()
	file := filepath.Join(t.TempDir(), "rendered.yaml")
	if err := os.WriteFile(file, []byte(r.text), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	cmd := env.KubectlCmd(ctx, "apply", "--server-side", "--dry-run=server", "--validate=strict",
		"--field-manager=pmx-charttest", "-f", file)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("kubectl apply --server-side --dry-run=server: %v\n%s%s", err, stdout.String(), stderr.String())
	}
	applied := strings.Count(stdout.String(), "serverside-applied (server dry run)")
	if applied != len(r.objects) {
		t.Errorf("the apiserver applied %d objects, the chart rendered %d:\n%s", applied, len(r.objects), stdout.String())
	}
	return kubectlResult{stdout.String(), stderr.String()}
}

// secret returns the data of a Secret, as strings.
func secret(t *testing.T, env *k8stest.Env, namespace, name string) map[string]string {
	t.Helper()
	var s corev1.Secret
	if err := env.Client.Get(t.Context(), client.ObjectKey{Namespace: namespace, Name: name}, &s); err != nil {
		t.Fatalf("Secret %s/%s: %v", namespace, name, err)
	}
	data := map[string]string{}
	for k, v := range s.Data {
		data[k] = string(v)
	}
	return data
}

func sameSecret(t *testing.T, when, name string, got, want map[string]string) {
	t.Helper()
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s, %s %s changed", when, name, k)
		}
	}
	if len(got) != len(want) {
		t.Errorf("%s, %s has %d keys, want %d", when, name, len(got), len(want))
	}
}
