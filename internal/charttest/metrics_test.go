package charttest

import (
	"bytes"
	"context"
	"encoding/json"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"sigs.k8s.io/yaml"

	"github.com/pmx-dev/pmx/internal/apitest"
	"github.com/pmx-dev/pmx/internal/exchangetest"
	"github.com/pmx-dev/pmx/internal/k8stest"
	"github.com/pmx-dev/pmx/internal/pgtest"
	"github.com/pmx-dev/pmx/internal/poll"
	"github.com/pmx-dev/pmx/internal/store"
	"github.com/pmx-dev/pmx/internal/tools/dashboards"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

var (
	apiLine      = regexp.MustCompile(`API:\s+(http://\S+)/api/v1`)
	metricsLine  = regexp.MustCompile(`Metrics:\s+(http://\S+)/metrics`)
	shardLine    = regexp.MustCompile(`pmx shard \S+ is running on (\S+)`)
	operatorLine = regexp.MustCompile(`msg="starting the (operator)"`)
)

const (
	metricsAdminToken    = "metricscheck-admin-token-0123456789abcdef"
	metricsInternalToken = "metricscheck-internal-token"
)

// TestQueriedMetricsAreExported reads every query of the chart's alerts and of the Grafana
// dashboard with Prometheus's own PromQL parser (hack/metricscheck), and checks that each metric
// one selects is one that pmx exports: found in a scrape of a running `pmx dev`, which is driven
// first until every labelled series the queries read has appeared (an order, a refused key, a feed
// subscription refused rate_limited, a feed closed), or of the distributed processes (pmx
// operator leading, pmx shard, pmx api). A panel of a metric that was renamed or never existed
// would otherwise stay empty, and an alert on it silent.
func TestQueriedMetricsAreExported(t *testing.T) {
	root := k8stest.RepoRoot(t)
	queried := queriedMetrics(t, root)
	bin := buildPMX(t, root)
	exported := map[string]dto.MetricType{}
	scrapeDev(t, bin, exported)
	scrapeDistributed(t, bin, exported)
	for name, where := range queried {
		// Prometheus writes up itself, for every target it scrapes.
		if name == "up" {
			continue
		}
		_, ok := exported[name]
		if base, found := strings.CutSuffix(name, "_bucket"); !ok && found {
			typ, known := exported[base]
			ok = known && typ == dto.MetricType_HISTOGRAM
		}
		if !ok {
			t.Errorf("%s queries %s, which no pmx process exports", where, name)
		}
	}
}

// TestMetricscheckMatchesPromtool keeps the PromQL parser hack/metricscheck reads the queries
// with at the version of the promtool that tests the alerts.
func TestMetricscheckMatchesPromtool(t *testing.T) {
	root := k8stest.RepoRoot(t)
	gomod, err := os.ReadFile(filepath.Join(root, "hack", "metricscheck", "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^require github.com/prometheus/prometheus (v\S+)$`).FindSubmatch(gomod)
	if m == nil {
		t.Fatal("hack/metricscheck/go.mod: no `require github.com/prometheus/prometheus v<version>` line")
	}
	if want := makefileVar(t, root, "PROMTOOL_VERSION"); string(m[1]) != want {
		t.Errorf("hack/metricscheck requires Prometheus %s, the Makefile's promtool is %s: keep them one", m[1], want)
	}
}

// makefileVar is the value of a `NAME := value` line of the Makefile.
func makefileVar(t testing.TB, root, name string) string {
	t.Helper()
	makefile, err := os.ReadFile(filepath.Join(root, "Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^` + name + `\s*:?=[ \t]*(.*?)\s*$`).FindSubmatch(makefile)
	if m == nil {
		t.Fatalf("Makefile: no %s line", name)
	}
	return string(m[1])
}

// queriedMetrics are the metric names every alert and dashboard query selects, each with one of
// the places that queries it.
func queriedMetrics(t *testing.T, root string) map[string]string {
	var exprs, where []string
	d, err := dashboards.Overview()
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range dashboards.Queries(d) {
		// Grafana's interval variable is no PromQL; the parser reads the rest as it is.
		exprs = append(exprs, strings.ReplaceAll(q, "$__rate_interval", "5m"))
		where = append(where, "the dashboard's query "+q)
	}
	var rules ruleGroups
	if err := yaml.Unmarshal(renderRules(t, "--set", "prometheusRule.enabled=true"), &rules); err != nil {
		t.Fatal(err)
	}
	for _, g := range rules.Groups {
		for _, r := range g.Rules {
			exprs = append(exprs, r.Expr)
			where = append(where, "alert "+r.Alert)
		}
	}
	names := map[string]string{}
	for i, selected := range selectedMetrics(t, root, exprs) {
		if len(selected) == 0 {
			t.Errorf("%s selects no metric", where[i])
		}
		for _, n := range selected {
			names[n] = where[i]
		}
	}
	if len(names) < 20 {
		t.Fatalf("%d metrics queried; the alerts and the dashboard query more than 20", len(names))
	}
	return names
}

// selectedMetrics runs hack/metricscheck, built from its own module, on exprs: the metric names
// each selects.
func selectedMetrics(t *testing.T, root string, exprs []string) [][]string {
	dir := filepath.Join(root, "hack", "metricscheck")
	bin := filepath.Join(t.TempDir(), "metricscheck")
	build := exec.Command("go", "build", "-o", bin, ".")
	build.Dir = dir
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build in %s: %v\n%s", dir, err, out)
	}
	in, err := json.Marshal(exprs)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin)
	cmd.Stdin = bytes.NewReader(in)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("metricscheck: %v\n%s", err, stderr.Bytes())
	}
	var names [][]string
	if err := json.Unmarshal(out, &names); err != nil || len(names) != len(exprs) {
		t.Fatalf("metricscheck printed %s for %d expressions: %v", out, len(exprs), err)
	}
	return names
}

// buildPMX builds cmd/pmx.
func buildPMX(t *testing.T, root string) string {
	bin := filepath.Join(t.TempDir(), "pmx")
	cmd := exec.Command("go", "build", "-o", bin, "./cmd/pmx")
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/pmx: %v\n%s", err, out)
	}
	return bin
}

// scrapeDev runs `pmx dev` with a small read limit, drives it until the labelled series the
// queries read exist, and adds what it exports to exported.
func scrapeDev(t *testing.T, bin string, exported map[string]dto.MetricType) {
	db := pgtest.NewDatabase(t, pgtest.Shared(t))
	p, base := exchangetest.StartProcess(t, apiLine, bin, "dev", "--database-url", db, "--addr", "127.0.0.1:0",
		"--metrics-addr", "127.0.0.1:0", "--markets", "", "--admin-token", metricsAdminToken, "--data-dir", t.TempDir(),
		"--log-level", "warn", "--read-rate", "0.001", "--read-burst", "4")
	exchangetest.WaitReady(t, base+"/readyz")
	st, err := store.Open(context.Background(), db)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(st.Close)
	tg := &exchangetest.Target{URL: base, AdminToken: metricsAdminToken, Store: st, Validator: apitest.NewValidator(t), Feed: apitest.NewAsyncValidator(t),
		HTTP: &http.Client{Timeout: 30 * time.Second}}
	tg.Markets = exchangetest.AdminMarkets{T: tg}

	var markets []string
	for range 3 {
		markets = append(markets, tg.NewMarket(t, nil).ID.String())
	}
	a := tg.NewAccount(t, "metrics")
	a.Place(t, tg.NewMarket(t, nil).ID, "BUY", "YES", 40, 1)
	// A well-formed key with a wrong secret (a malformed one is refused uncounted).
	wrong := a.Key[:len(a.Key)-1] + map[bool]string{true: "b", false: "a"}[strings.HasSuffix(a.Key, "a")]
	if code, _ := (&exchangetest.Client{T: tg, Key: wrong}).Do(t, "GET", "/account", nil); code != http.StatusUnauthorized {
		t.Fatalf("a wrong key: %d, want 401", code)
	}
	// Subscribe until the account's reads are spent: a subscription refused rate_limited.
	f := a.DialFeed(t)
	limited := false
	id := 0
	for _, m := range markets {
		for _, ch := range []string{"book", "trades", "ticker"} {
			if limited {
				break
			}
			id++
			f.Send(t, map[string]any{"op": "subscribe", "id": id, "channel": ch, "marketId": m})
			for reply := false; !reply; {
				msg := f.Next(t, 30*time.Second)
				switch {
				case msg.Type == "subscribed":
					reply = true
				case msg.Type == "error" && msg.Code == "rate_limited":
					reply, limited = true, true
				case msg.Type == "error":
					t.Fatalf("subscribing: %s", msg.Raw)
				}
			}
		}
	}
	if !limited {
		t.Fatal("no subscription was refused rate_limited")
	}
	f.Close()
	url := p.Line(metricsLine) + "/metrics"
	poll.Wait(t, 30*time.Second, "the feed's close counted", func() bool {
		_, ok := scrape(t, url)["pmx_feed_closed_total"]
		return ok
	})
	for name, typ := range scrape(t, url) {
		exported[name] = typ
	}
}

// scrapeDistributed runs the distributed exchange's processes on one database — an operator
// that leads, against a real kube-apiserver, a shard and a front — and adds what each exports.
func scrapeDistributed(t *testing.T, bin string, exported map[string]dto.MetricType) {
	env := k8stest.Start(t)
	db := pgtest.NewDatabase(t, pgtest.Shared(t))
	shard, _ := exchangetest.StartProcess(t, shardLine, bin, "shard", "--name", "shard-a", "--addr", "127.0.0.1:0",
		"--metrics-addr", "127.0.0.1:0", "--database-url", db, "--internal-token", metricsInternalToken, "--log-level", "warn")
	api, base := exchangetest.StartProcess(t, apiLine, bin, "api", "--addr", "127.0.0.1:0", "--metrics-addr", "127.0.0.1:0",
		"--database-url", db, "--admin-token", metricsAdminToken, "--internal-token", metricsInternalToken, "--log-level", "warn")
	exchangetest.WaitReady(t, base+"/readyz")
	// controller-runtime does not say which port it took for :0, so the operator gets a free one.
	operatorMetrics := "127.0.0.1:" + strconv.Itoa(freePort(t))
	exchangetest.StartProcessEnv(t, operatorLine, []string{"KUBECONFIG=" + env.Kubeconfig, "PMX_INTERNAL_TOKEN=" + metricsInternalToken},
		bin, "operator", "--database-url", db, "--leader-elect=true", "--leader-election-namespace", "default",
		"--metrics-bind-address", operatorMetrics, "--health-probe-bind-address", "0", "--log-level", "info")
	var operator map[string]dto.MetricType
	poll.Wait(t, time.Minute, "the operator leading and reporting the shard", func() bool {
		operator = scrape(t, "http://"+operatorMetrics+"/metrics")
		_, leads := operator["leader_election_master_status"]
		_, shards := operator["pmx_operator_shard_heartbeat_age_seconds"]
		return leads && shards
	})
	for _, m := range []map[string]dto.MetricType{operator, scrape(t, shard.Line(metricsLine)+"/metrics"), scrape(t, api.Line(metricsLine)+"/metrics")} {
		for name, typ := range m {
			exported[name] = typ
		}
	}
}

// scrape reads the metric families a /metrics serves, by name; none when it does not answer.
func scrape(t *testing.T, url string) map[string]dto.MetricType {
	resp, err := http.Get(url)
	if err != nil {
		return nil
	}
	defer resp.Body.Close()
	var buf bytes.Buffer
	if _, err := buf.ReadFrom(resp.Body); err != nil || resp.StatusCode != http.StatusOK {
		return nil
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(&buf)
	if err != nil {
		t.Fatalf("%s: %v", url, err)
	}
	out := map[string]dto.MetricType{}
	for name, f := range families {
		out[name] = f.GetType()
	}
	return out
}

// freePort is a loopback port free a moment ago.
func freePort(t *testing.T) int {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}
