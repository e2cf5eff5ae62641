package doctest

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestKindBlocks keeps docs/kubernetes.md's kind section and `make test-kind` one: the test runs
// the blocks marked <!-- test: kind -->, which hack/kind/kind.sh reads with awk, so this checks
// that kind.sh reads exactly the blocks this package's Markdown parser reads, that they are the
// docs' whole kind path (create the cluster on the node image of this Kubernetes version, load
// the images, helm install, the samples, a trade through the API Service, delete), that the
// Makefile's test-kind runs them, and that the versions the section and hack/kind/cluster.yaml
// name are those the build modules pin.
func TestKindBlocks(t *testing.T) {
	root := repoRoot(t)
	var want []string
	for _, b := range blocks(parse(readDoc(t, root, "docs/kubernetes.md"))) {
		if b.mark != "kind" {
			continue
		}
		if b.info != "sh" {
			t.Errorf("docs/kubernetes.md:%d: a block marked kind is %q, not sh", b.start, b.info)
		}
		want = append(want, b.body)
	}
	if len(want) < 3 {
		t.Fatalf("docs/kubernetes.md has %d blocks marked <!-- test: kind -->, want the kind path's 3", len(want))
	}

	if _, err := exec.LookPath("bash"); err != nil {
		t.Fatal("the check needs bash")
	}
	cmd := exec.Command("bash", "hack/kind/kind.sh", "blocks")
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("hack/kind/kind.sh blocks: %v", err)
	}
	got := strings.Split(string(out), "#@block\n")[1:]
	if strings.Join(got, "\x00") != strings.Join(want, "\x00") {
		t.Errorf("hack/kind/kind.sh blocks reads docs/kubernetes.md's kind blocks otherwise than the Markdown parser:\nkind.sh:\n%s\nparser:\n%s",
			strings.Join(got, "----\n"), strings.Join(want, "----\n"))
	}

	k8s := modVersion(t, root, "hack/k8s/go.mod", "k8s.io/kubernetes")
	script := strings.Join(want, "")
	for _, c := range []string{
		"kind create cluster --image pmx-local/kind-node:" + k8s + " --config hack/kind/cluster.yaml\n",
		"kind load image-archive bin/images/pmx-dev.tar\n",
		"helm install pmx charts/pmx ",
		"kubectl apply -f config/samples/\n",
		"kubectl -n pmx port-forward service/pmx-api 8080:80 &\n",
		"$PMX/api/v1/order",
		"kind delete cluster\n",
	} {
		if !strings.Contains(script, c) {
			t.Errorf("docs/kubernetes.md's kind blocks do not run %q", strings.TrimSpace(c))
		}
	}

	makefile := readDoc(t, root, "Makefile")
	if !regexp.MustCompile(`(?m)^test-kind:.*\n\t.*hack/kind/kind\.sh test$`).MatchString(makefile) {
		t.Error("the Makefile's test-kind does not run hack/kind/kind.sh test")
	}

	doc := strings.Join(strings.Fields(readDoc(t, root, "docs/kubernetes.md")), " ") // lines wrap anywhere
	kind := modVersion(t, root, "hack/kind/go.mod", "sigs.k8s.io/kind")
	lpp := modVersion(t, root, "hack/kind/go.mod", "github.com/rancher/local-path-provisioner")
	coredns := modVersion(t, root, "hack/coredns/go.mod", "github.com/coredns/coredns")
	etcd := modVersion(t, root, "hack/etcd/go.mod", "go.etcd.io/etcd/server/v3")
	for _, v := range []string{"kind " + kind, "local-path-provisioner " + lpp, "CoreDNS " + coredns,
		"etcd " + strings.TrimPrefix(etcd, "v"), "pmx-local/kind-node:" + k8s} {
		if !strings.Contains(doc, v) {
			t.Errorf("docs/kubernetes.md's kind section should name %s, the version its build pins", v)
		}
	}
	cluster := readDoc(t, root, "hack/kind/cluster.yaml")
	if !strings.Contains(cluster, "imageTag: "+coredns+"\n") {
		t.Errorf("hack/kind/cluster.yaml should give kubeadm the CoreDNS of hack/coredns/go.mod, %s", coredns)
	}
}

// modVersion is the version a go.mod requires of a module.
func modVersion(t *testing.T, root, gomod, module string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, gomod))
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		f := strings.Fields(l)
		if len(f) >= 2 && f[0] == module && strings.HasPrefix(f[1], "v") {
			return f[1]
		}
		if len(f) >= 3 && f[0] == "require" && f[1] == module {
			return f[2]
		}
	}
	t.Fatalf("%s requires no %s", gomod, module)
	return ""
}
