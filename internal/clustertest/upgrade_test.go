package clustertest

import (
	"bytes"
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/pmx-dev/pmx/internal/exchangetest"
	"github.com/pmx-dev/pmx/internal/poll"
	"github.com/pmx-dev/pmx/internal/store"
)

// testUpgrade rolls the release to a new image tag with `helm upgrade` while bots trade through
// the API Service: orders are acknowledged while the pods roll (the fronts one at a time behind
// the Service, each shard handing its markets over as it stops), none acknowledged is lost, the
// invariants hold, every pmx pod ends on the new tag, and Postgres is left alone.
func (c *cluster) testUpgrade(t *testing.T, tg *exchangetest.Target) {
	sock := filepath.Join(c.dir, "run", "containerd", "containerd.sock")
	c.run(t, time.Minute, "ctr", "--address", sock, "-n", "k8s.io", "images", "tag", "--force",
		"docker.io/library/pmx:dev", "docker.io/library/pmx:"+upgradeTag)
	postgres := c.podUID(t, "postgres")
	markets := []uuid.UUID{tg.NewMarket(t, nil).ID, tg.NewMarket(t, nil).ID, tg.NewMarket(t, nil).ID}
	load, rec, bots := startLoad(t, tg, "upgrade", markets)
	defer load.Stop()
	// Every pmx pod running now: the ones the roll replaces (the pool's shards carry the name
	// label, not the release's instance label).
	rolled := c.followLogs(t, "--selector", "app.kubernetes.io/name=pmx", "--all-containers", "--prefix",
		"--tail=0", "--max-log-requests=20", "--ignore-errors")
	waits := sampleWaits(t, tg.Store)
	began := time.Now()
	c.helmRun(t, "upgrade", release, filepath.Join(c.repo, "charts", "pmx"), "--namespace", namespace,
		"--reuse-values", "--set", "image.tag="+upgradeTag, "--wait", "--timeout", "5m")
	// helm waits for the chart's workloads; the operator rolls the pool's StatefulSet on its own.
	c.checkPods(t, "pmx:"+upgradeTag)
	ended := time.Now()
	poll.Wait(t, 2*time.Minute, "an order sent after the upgrade to be acknowledged", func() bool {
		return load.Sent(ended, time.Now().Add(time.Hour)) > 0
	})
	load.Stop()
	logged := rolled()
	waited := waits()
	warned := warnings(logged)
	during := load.Sent(began, ended)
	t.Logf("helm upgrade to %s under load took %v; %d orders sent meanwhile were acknowledged, %d in all; the pods logged %d lines meanwhile, %d of them warnings or errors",
		upgradeTag, ended.Sub(began).Round(time.Second), during, load.Acked(), strings.Count(logged, "\n"), strings.Count(warned, "\n"))
	if during == 0 {
		t.Errorf("no order sent during the upgrade was acknowledged: the release did not roll")
	}
	// A front that stops serves on for the chart's api.shutdownDelay before its port closes, so the
	// Service never sends a connection to a closed port: before the delay, each roll met 18-20
	// placements refused so. Other failures are logged, not held against the roll (the shards' part,
	// the planned handoff, is TestCluster/Scale's to hold to no 5xx).
	if f := load.Failures(began, ended); len(f) > 0 {
		t.Logf("%d placements were answered 5xx or not at all during the roll, first: %s", len(f), strings.Join(f[:min(len(f), 3)], "; "))
		t.Logf("the warnings and errors the pods that rolled logged meanwhile (their logs go with them):\n%s", warned)
		t.Logf("all that the shards logged meanwhile:\n%s", lines(logged, "[pod/"+chartPool+"-shard-"))
		t.Logf("Postgres's connections busy for over a second meanwhile (sampled every %v; none: %v):\n%s",
			waitSample, len(waited) == 0, strings.Join(waited, "\n"))
		var refused []string
		for _, e := range f {
			if strings.Contains(e, "connection refused") {
				refused = append(refused, e)
			}
		}
		if len(refused) > 0 {
			t.Errorf("%d placements met a closed port during the roll (a front stopped while the Service still sent it connections), first: %s",
				len(refused), refused[0])
		}
	}
	load.CheckKept(t, tg)
	c.checkPods(t, "pmx:"+upgradeTag)
	if got := c.podUID(t, "postgres"); got != postgres {
		t.Errorf("the upgrade, which changed only pmx's image, restarted Postgres")
	}
	exchangetest.CheckInvariants(t, tg)
	exchangetest.CheckHistory(t, tg, rec.History())
	exchangetest.CheckBooksOverAPI(t, tg, bots[0], markets)
}

// waitSample is how often sampleWaits looks at Postgres's connections.
const waitSample = 200 * time.Millisecond

// sampleWaits samples, until the function it returns is called, Postgres's connections that have
// been busy (in a statement or a transaction) for over a second: when, which process (its
// application_name, store.ApplicationName), in what state, waiting on what and held up by whom,
// and its statement. The function gives back what it saw, each connection's statement once.
func sampleWaits(t *testing.T, st *store.Store) func() []string {
	ctx, cancel := context.WithCancel(t.Context())
	var (
		mu   sync.Mutex
		seen = map[string]bool{}
		out  []string
	)
	done := make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(waitSample)
		defer tick.Stop()
		for {
			rows, err := st.Pool.Query(ctx, `select to_char(clock_timestamp(), 'HH24:MI:SS.MS'), pid, application_name, state,
					coalesce(wait_event_type || '/' || wait_event, 'on CPU'), pg_blocking_pids(pid)::text,
					round(extract(epoch from clock_timestamp() - coalesce(xact_start, query_start))::numeric, 1),
					left(regexp_replace(query, '\s+', ' ', 'g'), 160)
				from pg_stat_activity
				where backend_type = 'client backend' and pid <> pg_backend_pid() and state <> 'idle'
					and clock_timestamp() - coalesce(xact_start, query_start) > interval '1 second'`)
			if err != nil && ctx.Err() == nil {
				mu.Lock()
				if !seen[err.Error()] { // a sampler that cannot look must not read as "none busy"
					seen[err.Error()] = true
					out = append(out, "could not sample: "+err.Error())
				}
				mu.Unlock()
			}
			if err == nil {
				for rows.Next() {
					var at, app, state, wait, blockers, age, query string
					var pid int
					if rows.Scan(&at, &pid, &app, &state, &wait, &blockers, &age, &query) != nil {
						break
					}
					mu.Lock()
					if key := strconv.Itoa(pid) + query; !seen[key] && len(out) < 200 {
						seen[key] = true
						out = append(out, fmt.Sprintf("%s pid %d (%s) %s %ss, waiting on %s, blocked by %s: %s",
							at, pid, app, state, age, wait, blockers, query))
					}
					mu.Unlock()
				}
				rows.Close()
			}
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
		}
	}()
	stop := sync.OnceFunc(func() { cancel(); <-done })
	t.Cleanup(stop)
	return func() []string {
		stop()
		mu.Lock()
		defer mu.Unlock()
		return out
	}
}

// lines gives the lines of log that begin with prefix.
func lines(log, prefix string) string {
	var out strings.Builder
	for line := range strings.Lines(log) {
		if strings.HasPrefix(line, prefix) {
			out.WriteString(line)
		}
	}
	return out.String()
}

// followLogs follows, from now, the logs kubectl logs args names in the release's namespace (a
// pod, or --selector and its options) — those of pods that may go away, taking their logs with
// them — until the function it returns is called, which gives back what they logged.
func (c *cluster) followLogs(t *testing.T, args ...string) func() string {
	ctx, cancel := context.WithCancel(t.Context())
	cmd := c.KubectlCmd(ctx, append([]string{"logs", "--namespace", namespace, "--follow"}, args...)...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		cancel()
		t.Fatalf("kubectl logs: %v", err)
	}
	end := sync.OnceFunc(func() {
		cancel()
		_ = cmd.Wait() // ended by cancel, or before it when every pod it followed went away
	})
	t.Cleanup(end) // a test that fails before it reads them still stops kubectl
	return func() string {
		end()
		return out.String()
	}
}

func (c *cluster) podUID(t testing.TB, comp string) string {
	t.Helper()
	for _, p := range c.pods(t) {
		if component(p) == comp {
			return p.Metadata.UID
		}
	}
	t.Fatalf("no %s pod", comp)
	return ""
}

// testUninstall deletes the MarketSeries, then the Events, then the Markets, while the operator
// still runs, as docs/operations.md ("Uninstalling") tells users to: a series would list its next
// instances again, and each finalizer needs the operator, which voids what is unsettled (a
// Market of an unsettled Event waits for its Event, so Events go first). Then it uninstalls the release: nothing of pmx's is left but the CRDs (helm keeps a
// chart's crds/), serving no Event or Market, and the Postgres data the chart keeps on purpose
// (the StatefulSet's claim and the Secret with its password, which a reinstall reuses), besides
// the test's own volume.
func (c *cluster) testUninstall(t *testing.T) {
	c.Kubectl(t, "delete", "marketseries.pmx.dev", "--all", "--all-namespaces", "--timeout", "2m")
	c.Kubectl(t, "delete", "events.pmx.dev", "--all", "--all-namespaces", "--timeout", "2m")
	c.Kubectl(t, "delete", "mkt", "--all", "--all-namespaces", "--timeout", "2m")
	c.helmRun(t, "uninstall", release, "--namespace", namespace, "--wait", "--timeout", "3m")
	if out := strings.TrimSpace(c.Kubectl(t, "get", "marketseries.pmx.dev,events.pmx.dev,markets.pmx.dev", "--all-namespaces", "-o", "name")); out != "" {
		t.Errorf("after helm uninstall, MarketSeries, Events or Markets are left, their finalizers waiting for an operator:\n%s", out)
	}
	want := []string{
		"customresourcedefinition.apiextensions.k8s.io/events.pmx.dev",
		"customresourcedefinition.apiextensions.k8s.io/markets.pmx.dev",
		"customresourcedefinition.apiextensions.k8s.io/marketseries.pmx.dev",
		"customresourcedefinition.apiextensions.k8s.io/shardpools.pmx.dev",
		"persistentvolume/pmx-test-postgres",
		"persistentvolumeclaim/data-" + fullname + "-postgres-0",
		"secret/" + fullname + "-postgres",
	}
	var left []string
	gone := func(context.Context) (bool, error) {
		left = c.leftovers(t)
		return slices.Equal(left, want), nil
	}
	if err := poll.Until(t.Context(), time.Minute, gone); err != nil {
		t.Fatalf("after helm uninstall:\n  %s\nwant only:\n  %s", strings.Join(left, "\n  "), strings.Join(want, "\n  "))
	}
	t.Logf("left after helm uninstall, as intended: %s", strings.Join(left, ", "))
}

// leftovers lists, sorted, every object in the release's namespace but those Kubernetes puts
// in every namespace, and every cluster-scoped object whose name says pmx.
func (c *cluster) leftovers(t testing.TB) []string {
	t.Helper()
	kinds := func(namespaced bool) string {
		out := c.Kubectl(t, "api-resources", "--verbs=list", "--namespaced="+strconv.FormatBool(namespaced), "-o", "name")
		var ks []string
		for _, k := range strings.Fields(out) {
			if k != "events" && k != "events.events.k8s.io" {
				ks = append(ks, k)
			}
		}
		return strings.Join(ks, ",")
	}
	var left []string
	for _, o := range strings.Fields(c.Kubectl(t, "get", kinds(true), "-n", namespace, "-o", "name", "--ignore-not-found")) {
		if o != "serviceaccount/default" && o != "configmap/kube-root-ca.crt" {
			left = append(left, o)
		}
	}
	for _, o := range strings.Fields(c.Kubectl(t, "get", kinds(false), "-o", "name", "--ignore-not-found")) {
		switch {
		case o == "namespace/"+namespace: // helm install --create-namespace's, which helm never deletes
		case o == "apiservice.apiregistration.k8s.io/v1alpha1.pmx.dev": // the CRD's group, served while it is
		case strings.Contains(o, "pmx"):
			left = append(left, o)
		}
	}
	slices.Sort(left)
	return left
}
