package clustertest

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/pmx-dev/pmx/internal/apitest"
	"github.com/pmx-dev/pmx/internal/exchangetest"
	"github.com/pmx-dev/pmx/internal/k8stest"
	"github.com/pmx-dev/pmx/internal/poll"
	"github.com/pmx-dev/pmx/internal/records"
	"github.com/pmx-dev/pmx/internal/store"
)

const (
	release   = "pmx"
	namespace = "pmx"
	// fullname is the chart's <release>-pmx prefix, which a release named pmx shortens to pmx.
	fullname = "pmx"

	adminToken    = "cluster-test-admin-token-0123456789abcdef"
	internalToken = "cluster-test-internal-token"
	// upgradeTag is the image tag `helm upgrade` rolls the release to: pmx:dev tagged anew in the
	// node's containerd.
	upgradeTag = "dev-upgrade"
	// chartPool is the ShardPool the chart runs the release's shards as (shardPool.name), whose
	// pods are <chartPool>-shard-N.
	chartPool = "default"
)

// cluster is the one-node cluster hack/cluster brought up, with pmx's release on it.
type cluster struct {
	*k8stest.Env
	dir  string // the cluster's folder (CLUSTER_DIR)
	helm string
	repo string
}

// attach finds the cluster that `make test-cluster` brought up; without one the test is
// skipped, saying how to run it.
func attach(t *testing.T) *cluster {
	dir := os.Getenv("PMX_TEST_CLUSTER")
	if dir == "" {
		t.Skip("no cluster: `make test-cluster` brings one up (hack/cluster) and runs this test on it")
	}
	helm := os.Getenv("PMX_TEST_HELM")
	if helm == "" {
		t.Fatal("PMX_TEST_CLUSTER is set but PMX_TEST_HELM, the helm binary, is not")
	}
	return &cluster{Env: k8stest.Attach(t, filepath.Join(dir, "kubeconfig")), dir: dir, helm: helm, repo: k8stest.RepoRoot(t)}
}

// command is a command against the cluster: kubectl and helm find its kubeconfig, helm keeps its
// folders in the cluster's, and cluster.sh finds the cluster (CLUSTER_DIR).
func (c *cluster) command(ctx context.Context, name string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Env = append(os.Environ(), "CLUSTER_DIR="+c.dir, "KUBECONFIG="+c.Kubeconfig,
		"HELM_CACHE_HOME="+filepath.Join(c.dir, "helm", "cache"), "HELM_CONFIG_HOME="+filepath.Join(c.dir, "helm", "config"),
		"HELM_DATA_HOME="+filepath.Join(c.dir, "helm", "data"))
	cmd.WaitDelay = 5 * time.Second
	return cmd
}

// run runs a command against the cluster and returns its output; it fails t when the command
// fails or runs past timeout.
func (c *cluster) run(t testing.TB, timeout time.Duration, name string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), timeout)
	defer cancel()
	out, err := c.command(ctx, name, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", filepath.Base(name), strings.Join(args, " "), err, out)
	}
	return string(out)
}

// clearAfterFailure logs cluster.sh's report of the cluster as the failed test left it, then
// takes the release away as testUninstall would (Events, then Markets, while the operator may
// still void them; then helm uninstall), so that the next test installs on a clear cluster. It
// runs as a cleanup, after t.Context() is done, and only logs what fails: t has failed already.
func (c *cluster) clearAfterFailure(t *testing.T) {
	step := func(timeout time.Duration, name string, args ...string) {
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		out, err := c.command(ctx, name, args...).CombinedOutput()
		t.Logf("after the failure: %s %s (%v):\n%s", filepath.Base(name), strings.Join(args, " "), err, out)
	}
	step(time.Minute, "bash", filepath.Join(c.repo, "hack", "cluster", "cluster.sh"), "report")
	step(2*time.Minute, c.KubectlPath, "delete", "events.pmx.dev", "--all", "--all-namespaces", "--timeout", "1m")
	step(2*time.Minute, c.KubectlPath, "delete", "mkt", "--all", "--all-namespaces", "--timeout", "1m")
	step(4*time.Minute, c.helm, "uninstall", release, "--namespace", namespace, "--ignore-not-found", "--wait", "--timeout", "3m")
}

func (c *cluster) helmRun(t testing.TB, args ...string) string {
	t.Helper()
	return c.run(t, 6*time.Minute, c.helm, args...)
}

// TestCluster installs the chart with the images `make image` built and checks the exchange on
// real pods: every pod Ready; the samples applied with kubectl scheduled onto the shards; the
// contract suite through the API Service; a shard pod deleted by force under load; the sample
// Event applied with kubectl, traded and converted through the Service, its shard killed and its
// markets moved together, halted and resumed with kubectl patch (spec.paused), and resolved with
// kubectl patch; the node's pmx pods drained through the
// Eviction API under load, within their disruption budgets; the chart's shard pool scaled with
// helm upgrade under load; a second ShardPool, a dedicated market of it trading while the chart's
// scales through its scale subresource; the shards moved from the operator's pool to the chart's
// own StatefulSet (the chart before pools) and back with helm upgrade under load; a rolling
// upgrade under load; a resolution patched with kubectl; and an uninstall that leaves only what
// the chart keeps on purpose.
func TestCluster(t *testing.T) {
	c := attach(t)
	t.Cleanup(func() {
		if t.Failed() {
			c.clearAfterFailure(t)
		}
	})
	started := time.Now()
	c.install(t)
	installed := time.Since(started)
	t.Logf("helm install to every pod Ready: %v", installed.Round(time.Second))
	fmt.Fprintf(os.Stderr, "cluster: helm install to every pod Ready in %v\n", installed.Round(time.Second))
	c.checkPods(t, "pmx:dev")

	st := c.store(t)
	api := c.serviceURL(t, fullname+"-api", "http")
	metrics := c.serviceURL(t, fullname+"-api-metrics", "metrics")
	exchangetest.WaitReady(t, api+"/readyz")
	target := func(url string) *exchangetest.Target {
		tg := &exchangetest.Target{URL: url, MetricsURL: metrics, AdminToken: adminToken, Store: st,
			Validator: apitest.NewValidator(t), Feed: apitest.NewAsyncValidator(t), HTTP: &http.Client{Timeout: time.Minute}}
		markets := &exchangetest.KubeMarkets{Client: c.Client, Store: st, Namespace: "default",
			Scheduled: func(_ context.Context, m records.Market) bool { return m.Shard != nil && isShard(*m.Shard) }}
		tg.Markets, tg.Events = markets, &exchangetest.KubeEvents{Markets: markets}
		return tg
	}

	t.Run("Suite", func(t *testing.T) {
		// The suite's requests reach one front or the other through the Service: its metrics check
		// reads both fronts' listeners.
		tg := target(api)
		tg.MetricsURL = ""
		for _, ip := range c.podIPs(t, "api") {
			tg.MetricsURLs = append(tg.MetricsURLs, "http://"+ip+":9090")
		}
		exchangetest.RunSuite(t, tg)
	})
	// The failover's feed clients each follow one front: through the pods' own addresses, which
	// the node reaches on its bridge.
	var fronts []*exchangetest.Target
	for _, ip := range c.podIPs(t, "api") {
		fronts = append(fronts, target("http://"+ip+":8080"))
	}
	t.Run("Failover", func(t *testing.T) {
		exchangetest.RunFailover(t, exchangetest.Distributed{
			Fronts:  fronts,
			Kubectl: c.Kubectl,
			IsShard: isShard,
			Shards:  2,
			Kill: func(t testing.TB, name string) {
				c.Kubectl(t, "delete", "pod", "-n", namespace, name, "--grace-period=0", "--force", "--wait=false")
			},
			Returns: true,
		}, filepath.Join(c.repo, "config", "samples"))
	})
	// After Failover, whose samples are every Market not the suite's: the Event's would be counted.
	t.Run("Event", func(t *testing.T) { c.testEvent(t, target(api)) })
	t.Run("Drain", func(t *testing.T) { c.testDrain(t, target(api), "pmx:dev") })
	t.Run("Scale", func(t *testing.T) { c.testScale(t, target(api)) })
	t.Run("Pools", func(t *testing.T) { c.testPools(t, target(api)) })
	t.Run("PoolUpgrade", func(t *testing.T) { c.testPoolUpgrade(t, target(api)) })
	t.Run("RollingUpgrade", func(t *testing.T) { c.testUpgrade(t, target(api)) })
	t.Run("Uninstall", func(t *testing.T) { c.testUninstall(t) })
}

// isShard says whether a shard's name is a pod's of a ShardPool's (<pool>-shard-N) or of the
// chart's own StatefulSet (<fullname>-shard-N, with shardPool.enabled=false).
func isShard(name string) bool { return strings.Contains(name, "-shard-") }

// install gives Postgres a volume (the cluster has no StorageClass: a hostPath PersistentVolume,
// bound in advance to the claim the chart's StatefulSet makes) and installs the chart with the
// suite's limits, waiting until every pod is Ready.
func (c *cluster) install(t *testing.T) {
	data := filepath.Join(c.dir, "volumes", "postgres")
	if err := os.MkdirAll(data, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(data, 70, 70); err != nil { // the chart runs Postgres as uid 70; hostPath ignores fsGroup
		t.Fatal(err)
	}
	pv := fmt.Sprintf(`{"apiVersion": "v1", "kind": "PersistentVolume",
		"metadata": {"name": "pmx-test-postgres"},
		"spec": {"capacity": {"storage": "2Gi"}, "accessModes": ["ReadWriteOnce"], "persistentVolumeReclaimPolicy": "Retain",
			"hostPath": {"path": %q, "type": "Directory"},
			"claimRef": {"namespace": %q, "name": "data-%s-postgres-0"}}}`, data, namespace, fullname)
	c.applyJSON(t, pv)
	f := func(v float64) string { return strconv.FormatFloat(v, 'f', -1, 64) }
	c.helmRun(t, "install", release, filepath.Join(c.repo, "charts", "pmx"), "--namespace", namespace, "--create-namespace",
		"-f", filepath.Join(c.repo, "hack", "cluster", "values.yaml"),
		"--set", "secrets.adminToken="+adminToken, "--set", "secrets.internalToken="+internalToken,
		"--set", "api.rateLimits.read.perSecond="+f(exchangetest.SuiteReadLimit.Rate),
		"--set", "api.rateLimits.read.burst="+f(exchangetest.SuiteReadLimit.Burst),
		"--set", "api.rateLimits.write.perSecond="+f(exchangetest.SuiteWriteLimit.Rate),
		"--set", "api.rateLimits.write.burst="+f(exchangetest.SuiteWriteLimit.Burst),
		"--set", "shard.extraArgs={--max-open-orders="+strconv.Itoa(exchangetest.SuiteMaxOpenOrders)+"}",
		// The subtests kill and drain shards and would see markets moved back onto the returned
		// pod a minute later, in the middle of another subtest's load and its measurement.
		// testScale turns rebalancing on for its own run; processes (TestDistributedRebalance,
		// TestDistributedHandoff) and envtest (TestRebalance) test it too.
		"--set", "operator.rebalance.enabled=false",
		"--wait", "--timeout", "5m")
}

func (c *cluster) applyJSON(t testing.TB, doc string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	cmd := c.KubectlCmd(ctx, "apply", "-f", "-")
	cmd.Stdin = strings.NewReader(doc)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("kubectl apply: %v\n%s", err, out)
	}
}

// pod is what the checks read of a pod.
type pod struct {
	Metadata struct {
		Name   string
		UID    string
		Labels map[string]string
	}
	Spec struct {
		Containers []struct{ Name, Image string }
	}
	Status struct {
		PodIP             string
		Conditions        []struct{ Type, Status string }
		ContainerStatuses []struct {
			Name         string
			Ready        bool
			RestartCount int
		}
	}
}

func (c *cluster) pods(t testing.TB) []pod {
	t.Helper()
	var list struct{ Items []pod }
	if err := json.Unmarshal([]byte(c.Kubectl(t, "get", "pods", "-n", namespace, "-o", "json")), &list); err != nil {
		t.Fatal(err)
	}
	return list.Items
}

func component(p pod) string { return p.Metadata.Labels["app.kubernetes.io/component"] }

// checkPods waits until the release's pods are the chart's — Postgres, the operator, two fronts
// and two shards, the old ones of a rollout gone — every one Ready without a restart and the pmx
// ones running image; after two minutes it fails t with what is still wrong.
func (c *cluster) checkPods(t *testing.T, image string) {
	t.Helper()
	var problems []string
	settled := func(context.Context) (bool, error) {
		problems = podProblems(c.pods(t), image)
		return len(problems) == 0, nil
	}
	if err := poll.Until(t.Context(), 2*time.Minute, settled); err != nil {
		t.Errorf("the release's pods:\n  %s", strings.Join(problems, "\n  "))
	}
	t.Logf("kubectl get pods:\n%s", c.Kubectl(t, "get", "pods", "-n", namespace, "-o", "wide"))
}

// podProblems says what keeps pods from being the chart's set, Ready, never restarted and on
// image (Postgres apart); nothing when they are.
func podProblems(pods []pod, image string) []string {
	var problems []string
	counts := map[string]int{}
	for _, p := range pods {
		counts[component(p)]++
		ready := slices.ContainsFunc(p.Status.Conditions, func(cond struct{ Type, Status string }) bool {
			return cond.Type == "Ready" && cond.Status == "True"
		})
		if !ready {
			problems = append(problems, fmt.Sprintf("pod %s is not Ready", p.Metadata.Name))
		}
		for _, s := range p.Status.ContainerStatuses {
			if s.RestartCount > 0 {
				problems = append(problems, fmt.Sprintf("pod %s: container %s restarted %d times", p.Metadata.Name, s.Name, s.RestartCount))
			}
		}
		for _, ct := range p.Spec.Containers {
			if component(p) != "postgres" && ct.Image != image {
				problems = append(problems, fmt.Sprintf("pod %s: container %s runs %s, want %s", p.Metadata.Name, ct.Name, ct.Image, image))
			}
		}
	}
	if want := map[string]int{"postgres": 1, "operator": 1, "api": 2, "shard": 2}; !maps.Equal(counts, want) {
		problems = append(problems, fmt.Sprintf("pods by component %v, want %v", counts, want))
	}
	return problems
}

// podIPs lists the addresses of a component's pods.
func (c *cluster) podIPs(t testing.TB, comp string) []string {
	t.Helper()
	var ips []string
	for _, p := range c.pods(t) {
		if component(p) == comp && p.Status.PodIP != "" {
			ips = append(ips, p.Status.PodIP)
		}
	}
	slices.Sort(ips)
	return ips
}

// serviceURL is http://<ClusterIP>:<port> of a Service's named port: kube-proxy's rules take the
// node's own connections there too. It returns once those rules lead to the Service's endpoints:
// until then a connection to the address leaves the machine by its default route, and whatever
// answers there is not pmx.
func (c *cluster) serviceURL(t testing.TB, service, port string) string {
	t.Helper()
	out := c.Kubectl(t, "get", "service", "-n", namespace, service, "-o",
		fmt.Sprintf(`jsonpath={.spec.clusterIP}:{.spec.ports[?(@.name=="%s")].port}`, port))
	ip, p, _ := strings.Cut(out, ":")
	if ip == "" || p == "" {
		t.Fatalf("service %s has no port %s: %q", service, port, out)
	}
	c.waitRouted(t, service, ip, p)
	return "http://" + out
}

// waitRouted waits until kube-proxy (iptables mode, as cluster.sh runs it) has a NAT rule that
// takes ip:port to a Service's endpoints; a Service without ready endpoints has only a REJECT rule
// in the filter table.
func (c *cluster) waitRouted(t testing.TB, service, ip, port string) {
	t.Helper()
	dest, dport := "-d "+ip+"/32 ", "--dport "+port+" "
	last := ""
	routed := func(ctx context.Context) (bool, error) {
		out, err := exec.CommandContext(ctx, "iptables-save", "-t", "nat").CombinedOutput()
		if err != nil {
			last = fmt.Sprintf("iptables-save -t nat: %v: %s", err, out)
			return false, nil
		}
		for line := range strings.SplitSeq(string(out), "\n") {
			if strings.HasPrefix(line, "-A KUBE-SERVICES ") && strings.Contains(line, dest) && strings.Contains(line, dport) {
				return true, nil
			}
		}
		last = "no KUBE-SERVICES rule for " + ip + ":" + port
		return false, nil
	}
	if err := poll.Until(t.Context(), time.Minute, routed); err != nil {
		k8stest.LogTail(t, filepath.Join(c.dir, "logs", "kube-proxy.log"), 20)
		t.Fatalf("kube-proxy never routed Service %s (%s:%s) to its endpoints: %v (%s); the last lines of its log, where it wrote any, are above",
			service, ip, port, err, last)
	}
}

// store connects to the release's Postgres through its Service, with the password the chart
// generated, for the checks in SQL.
func (c *cluster) store(t *testing.T) *store.Store {
	t.Helper()
	password := c.Kubectl(t, "get", "secret", "-n", namespace, fullname+"-postgres", "-o", "jsonpath={.data.password}")
	raw, err := base64.StdEncoding.DecodeString(password)
	if err != nil {
		t.Fatal(err)
	}
	host := strings.TrimPrefix(c.serviceURL(t, fullname+"-postgres", "postgres"), "http://")
	url := fmt.Sprintf("postgres://pmx:%s@%s/pmx?sslmode=disable", raw, host)
	var st *store.Store
	// A Service's rules reach the node a moment after `helm --wait` returns.
	poll.Wait(t, time.Minute, "Postgres through its Service", func() bool {
		st, err = store.Open(t.Context(), url)
		return err == nil
	})
	t.Cleanup(st.Close)
	return st
}
