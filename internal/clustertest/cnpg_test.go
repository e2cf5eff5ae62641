package clustertest

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/pmx-dev/pmx/internal/apitest"
	"github.com/pmx-dev/pmx/internal/exchangetest"
	"github.com/pmx-dev/pmx/internal/poll"
	"github.com/pmx-dev/pmx/internal/records"
	"github.com/pmx-dev/pmx/internal/store"
)

const (
	// cnpgCluster is the CloudNativePG Cluster pmx runs on: its Services are <name>-rw (the
	// primary) and its Secret <name>-app holds the owner's credentials.
	cnpgCluster = "pmxdb"
	// cnpgOperand is the Postgres image `make cnpg-images` built from Debian's packages.
	cnpgOperand = "pmx-local/cnpg-postgres:15"
	// cnpgVolumes is how many hostPath PersistentVolumes are made for the instances' claims: one
	// for each of the three, and one spare should the operator replace an instance.
	cnpgVolumes = 4
	// resumeBound is how soon after the primary goes an order must be acknowledged again. The
	// failover measured 19–23 s on a 2-core machine (mostly CloudNativePG noticing the primary
	// gone and promoting a standby): the bound leaves room for a machine busy with other builds.
	resumeBound = 45 * time.Second
)

// TestCNPG runs pmx on a CloudNativePG Cluster of three instances with synchronous replication
// that refuses to acknowledge a commit no standby has (dataDurability: required): the operator
// installed from the manifests of its pinned release onto the local images, pmx installed against
// the Cluster's -rw Service with the credentials the operator generated. Under load through the
// API Service the primary's pod is deleted by force, then a planned switchover is asked for as
// `kubectl cnpg promote` asks it; each time no acknowledged order may be lost on the new primary,
// orders must be acknowledged again within resumeBound, and the invariants and books must hold.
func TestCNPG(t *testing.T) {
	c := attach(t)
	manifests, _ := filepath.Glob(filepath.Join(c.repo, "bin", "cnpg", "*", "operator.yaml"))
	if len(manifests) != 1 {
		t.Fatalf("want one bin/cnpg/<version>/operator.yaml, found %v: `make cnpg-images` renders it (make test-cluster does)", manifests)
	}
	started := time.Now()
	c.installCNPG(t, manifests[0])
	t.Logf("CloudNativePG's operator Ready in %v", time.Since(started).Round(time.Second))
	fmt.Fprintf(os.Stderr, "cluster: CloudNativePG's operator Ready in %v\n", time.Since(started).Round(time.Second))

	// The chart's own CloudNativePG option makes the Cluster: 3 instances, synchronous with
	// dataDurability required; on one node the instances may share it (preferred anti-affinity),
	// and their requests are cut to fit beside pmx on 2 cores.
	started = time.Now()
	c.cnpgVolumes(t)
	c.cnpgWebhookServes(t)
	c.helmRun(t, "install", release, filepath.Join(c.repo, "charts", "pmx"), "--namespace", namespace, "--create-namespace",
		"-f", filepath.Join(c.repo, "hack", "cluster", "values.yaml"),
		"--set", "postgres.enabled=false", "--set", "database.cloudnativepg.enabled=true",
		"--set", "operator.rebalance.enabled=false", // as TestCluster's install says
		"--set", "database.cloudnativepg.name="+cnpgCluster,
		"--set", "database.cloudnativepg.imageName="+cnpgOperand, "--set", "database.cloudnativepg.imagePullPolicy=Never",
		"--set", "database.cloudnativepg.antiAffinity.type=preferred",
		"--set", "database.cloudnativepg.storage.size=1Gi",
		"--set", "database.cloudnativepg.resources.requests.cpu=100m",
		"--set", "database.cloudnativepg.resources.requests.memory=256Mi",
		"--set", "database.cloudnativepg.resources.limits.memory=1Gi",
		"--set", "secrets.adminToken="+adminToken, "--set", "secrets.internalToken="+internalToken,
		"--wait", "--timeout", "8m")
	c.cnpgHealthy(t, 8*time.Minute, "")
	t.Logf("pmx installed with database.cloudnativepg: the Cluster's 3 instances healthy and every pmx pod Ready in %v",
		time.Since(started).Round(time.Second))
	fmt.Fprintf(os.Stderr, "cluster: pmx and its CloudNativePG Cluster of 3 instances Ready in %v\n", time.Since(started).Round(time.Second))

	st := c.cnpgStore(t)
	api := c.serviceURL(t, fullname+"-api", "http")
	exchangetest.WaitReady(t, api+"/readyz")
	tg := &exchangetest.Target{URL: api, AdminToken: adminToken, Store: st,
		Validator: apitest.NewValidator(t), Feed: apitest.NewAsyncValidator(t), HTTP: &http.Client{Timeout: time.Minute}}
	markets := &exchangetest.KubeMarkets{Client: c.Client, Store: st, Namespace: "default",
		Scheduled: func(_ context.Context, m records.Market) bool { return m.Shard != nil && isShard(*m.Shard) }}
	tg.Markets, tg.Events = markets, &exchangetest.KubeEvents{Markets: markets}

	t.Run("Failover", func(t *testing.T) {
		c.tradeThrough(t, tg, "failover", func(t *testing.T, primary string) {
			c.Kubectl(t, "delete", "pod", "-n", namespace, primary, "--grace-period=0", "--force", "--wait=false")
		})
	})
	t.Run("Switchover", func(t *testing.T) {
		c.tradeThrough(t, tg, "switchover", func(t *testing.T, primary string) {
			target := c.cnpgStandby(t, primary)
			// What `kubectl cnpg promote` writes: the operator switches over to status.targetPrimary.
			patch, err := json.Marshal(map[string]any{"status": map[string]any{
				"targetPrimary": target, "targetPrimaryTimestamp": time.Now().UTC().Format("2006-01-02T15:04:05.000000Z07:00"),
				"phase": "Switchover in progress", "phaseReason": "Switching over to " + target,
			}})
			if err != nil {
				t.Fatal(err)
			}
			c.Kubectl(t, "patch", "clusters.postgresql.cnpg.io", cnpgCluster, "-n", namespace, "--subresource=status", "--type=merge", "-p", string(patch))
		})
	})
	// The release takes its Cluster with it (the test's volumes stay; the cluster goes after the
	// tests), its Markets deleted first, as docs/kubernetes.md says (the operator must void them,
	// and its pool's shards, owning none then, let the pool go). In the test's body, not a
	// cleanup: t.Context() is done by the time cleanups run.
	if !t.Failed() {
		c.Kubectl(t, "delete", "mkt", "--all", "--all-namespaces", "--timeout", "2m")
		c.helmRun(t, "uninstall", release, "--namespace", namespace, "--wait", "--timeout", "5m")
	}
}

// installCNPG applies the operator's rendered manifests (server-side: its CRDs are too large for
// the last-applied annotation) and waits until the operator is Ready. Its CPU limit is raised:
// the release's 100m makes its start outlast its own startup probe on a busy 2-core machine.
func (c *cluster) installCNPG(t *testing.T, manifests string) {
	t.Helper()
	c.run(t, 3*time.Minute, c.KubectlPath, "--kubeconfig="+c.Kubeconfig, "apply", "--server-side", "-f", manifests)
	c.Kubectl(t, "set", "resources", "deployment", "-n", "cnpg-system", "cnpg-controller-manager", "--limits=cpu=1,memory=512Mi")
	c.run(t, 5*time.Minute, c.KubectlPath, "--kubeconfig="+c.Kubeconfig, "rollout", "status", "deployment", "-n", "cnpg-system",
		"cnpg-controller-manager", "--timeout=5m")
}

// cnpgVolumes gives the instances' claims their volumes: the cluster has no StorageClass, so
// hostPath PersistentVolumes of no class, which claims of no class bind to (three instances and
// a spare for the one a failover may recreate).
func (c *cluster) cnpgVolumes(t *testing.T) {
	t.Helper()
	for i := range cnpgVolumes {
		data := filepath.Join(c.dir, "volumes", "cnpg-"+strconv.Itoa(i))
		if err := os.MkdirAll(data, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.Chown(data, 26, 26); err != nil { // the operand runs as uid 26; hostPath ignores fsGroup
			t.Fatal(err)
		}
		c.applyJSON(t, fmt.Sprintf(`{"apiVersion": "v1", "kind": "PersistentVolume",
			"metadata": {"name": "pmx-test-cnpg-%d"},
			"spec": {"capacity": {"storage": "2Gi"}, "accessModes": ["ReadWriteOnce"], "persistentVolumeReclaimPolicy": "Retain",
				"storageClassName": "", "hostPath": {"path": %q, "type": "Directory"}}}`, i, data))
	}
}

// cnpgWebhookServes waits until CloudNativePG's admission webhook takes a Cluster (a server-side
// dry run): it serves a moment after the operator's pod is Ready, and helm would fail on it.
func (c *cluster) cnpgWebhookServes(t *testing.T) {
	t.Helper()
	c.applyJSON(t, fmt.Sprintf(`{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": %q}}`, namespace))
	probe := fmt.Sprintf(`{"apiVersion": "postgresql.cnpg.io/v1", "kind": "Cluster",
		"metadata": {"name": "webhook-probe", "namespace": %q},
		"spec": {"instances": 1, "imageName": %q, "storage": {"size": "1Gi"}}}`, namespace, cnpgOperand)
	poll.Wait(t, 2*time.Minute, "a Cluster taken by CloudNativePG's webhook (a dry run)", func() bool {
		ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
		defer cancel()
		cmd := c.KubectlCmd(ctx, "apply", "--dry-run=server", "-f", "-")
		cmd.Stdin = strings.NewReader(probe)
		return cmd.Run() == nil
	})
}

// cnpgStatus is what the checks read of the Cluster's status.
type cnpgStatus struct {
	Phase          string
	ReadyInstances int
	CurrentPrimary string
	TargetPrimary  string
	InstanceNames  []string
}

func (c *cluster) cnpgStatus(t testing.TB) cnpgStatus {
	t.Helper()
	var cl struct{ Status cnpgStatus }
	if err := json.Unmarshal([]byte(c.Kubectl(t, "get", "clusters.postgresql.cnpg.io", cnpgCluster, "-n", namespace, "-o", "json")), &cl); err != nil {
		t.Fatal(err)
	}
	return cl.Status
}

// cnpgHealthy waits until the Cluster says it is healthy with its three instances ready and its
// primary the one it aims for, and that primary is not notPrimary ("": any) — after a failover
// the Cluster's status can still read healthy under the old primary for a moment, before the
// operator has seen it go; it fails t with the Cluster's pods if it does not within timeout.
func (c *cluster) cnpgHealthy(t *testing.T, timeout time.Duration, notPrimary string) cnpgStatus {
	t.Helper()
	var s cnpgStatus
	healthy := func(context.Context) (bool, error) {
		s = c.cnpgStatus(t)
		return s.Phase == "Cluster in healthy state" && s.ReadyInstances == 3 && s.CurrentPrimary == s.TargetPrimary &&
			s.CurrentPrimary != notPrimary, nil
	}
	if err := poll.Until(t.Context(), timeout, healthy); err != nil {
		t.Fatalf("the Cluster is not healthy after %v: %+v\n%s", timeout, s, c.Kubectl(t, "get", "pods", "-n", namespace, "-o", "wide"))
	}
	return s
}

// cnpgStandby names a ready instance other than primary.
func (c *cluster) cnpgStandby(t *testing.T, primary string) string {
	t.Helper()
	for _, name := range c.cnpgStatus(t).InstanceNames {
		if name != primary {
			return name
		}
	}
	t.Fatalf("the Cluster has no instance besides its primary %s", primary)
	return ""
}

// cnpgStore connects to the Cluster's primary through its -rw Service (which follows the
// primary, as pmx's own connections do) with the credentials the operator generated.
func (c *cluster) cnpgStore(t *testing.T) *store.Store {
	t.Helper()
	secret := func(key string) string {
		raw, err := base64.StdEncoding.DecodeString(c.Kubectl(t, "get", "secret", "-n", namespace, cnpgCluster+"-app", "-o", "jsonpath={.data."+key+"}"))
		if err != nil {
			t.Fatal(err)
		}
		return string(raw)
	}
	host := c.Kubectl(t, "get", "service", "-n", namespace, cnpgCluster+"-rw", "-o", "jsonpath={.spec.clusterIP}")
	u := url.URL{Scheme: "postgres", User: url.UserPassword(secret("username"), secret("password")), Host: host + ":5432", Path: "/" + secret("dbname")}
	var st *store.Store
	poll.Wait(t, time.Minute, "the Cluster's primary through its -rw Service", func() bool {
		var err error
		st, err = store.Open(t.Context(), u.String())
		return err == nil
	})
	t.Cleanup(st.Close)
	return st
}

// tradeThrough starts bots trading through the API Service, takes the Cluster's primary away with
// act once they trade, and checks what must hold: a new primary; an order acknowledged within
// resumeBound of act (the figure is logged); every acknowledged order on the new primary; the
// invariants and the books. The Cluster must be healthy again before it returns.
func (c *cluster) tradeThrough(t *testing.T, tg *exchangetest.Target, name string, act func(t *testing.T, primary string)) {
	before := c.cnpgHealthy(t, 5*time.Minute, "")
	markets := []uuid.UUID{tg.NewMarket(t, nil).ID, tg.NewMarket(t, nil).ID, tg.NewMarket(t, nil).ID}
	load, rec, bots := startLoad(t, tg, name, markets)
	defer load.Stop()

	began := time.Now()
	act(t, before.CurrentPrimary)
	var resumed time.Duration
	poll.Wait(t, 3*time.Minute, "an order sent after the primary went to be acknowledged", func() bool {
		if load.Sent(began, time.Now().Add(time.Hour)) == 0 {
			return false
		}
		resumed = time.Since(began)
		return true
	})
	after := c.cnpgHealthy(t, 5*time.Minute, before.CurrentPrimary)
	healed := time.Now()
	acked := load.Acked()
	poll.Wait(t, time.Minute, "100 more acknowledged orders", func() bool { return load.Acked() >= acked+100 })
	load.Stop()
	// The first order sent after act may still reach the old primary before it stops: the outage
	// is the longest stretch from act until the Cluster was healthy again in which no order that
	// was acknowledged had been sent.
	outage := longestSilence(load, began, healed)
	t.Logf("%s: primary %s -> %s; first order acknowledged %v after; longest stretch without an acknowledged order %v; %d orders acknowledged in all",
		name, before.CurrentPrimary, after.CurrentPrimary, resumed.Round(10*time.Millisecond), outage, load.Acked())
	fmt.Fprintf(os.Stderr, "cluster: CloudNativePG %s: no order acknowledged for at most %v (bound %v)\n", name, outage, resumeBound)
	if outage > resumeBound {
		t.Errorf("no order was acknowledged for %v around the %s, want at most %v", outage, name, resumeBound)
	}
	if after.CurrentPrimary == before.CurrentPrimary {
		t.Errorf("the primary is still %s", before.CurrentPrimary)
	}
	if resumed > resumeBound {
		t.Errorf("orders were acknowledged again only %v after the primary went, want within %v", resumed, resumeBound)
	}
	load.CheckKept(t, tg)
	exchangetest.CheckInvariants(t, tg)
	exchangetest.CheckHistory(t, tg, rec.History())
	exchangetest.CheckBooksOverAPI(t, tg, bots[0], markets)
}

// silenceStep is the resolution of longestSilence.
const silenceStep = 50 * time.Millisecond

// longestSilence is the longest run of silenceSteps in [from, to) in which no acknowledged order
// was sent.
func longestSilence(load *exchangetest.Load, from, to time.Time) time.Duration {
	var longest, run time.Duration
	for at := from; at.Before(to); at = at.Add(silenceStep) {
		if load.Sent(at, at.Add(silenceStep)) > 0 {
			run = 0
			continue
		}
		run += silenceStep
		longest = max(longest, run)
	}
	return longest
}
