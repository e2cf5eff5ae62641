package metricscheck

import (
	"bytes"
	"context"
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
	"github.com/prometheus/prometheus/promql/parser"
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
	adminToken    = "metricscheck-admin-token-0123456789abcdef"
	internalToken = "metricscheck-internal-token"
)

// TestQueriedMetricsAreExported parses every query of the chart's alerts and of the Grafana
// dashboard, and checks that each metric one selects is one that pmx exports: found in a scrape
// of a running `pmx dev`, which is driven first until every labelled series the queries read has
// appeared (an order, a refused key, a feed subscription refused rate_limited, a feed closed),
// or of the distributed processes (pmx operator leading, pmx shard, pmx api). A panel of a metric
// that was renamed or never existed would otherwise stay empty, and an alert on it silent.
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

// queriedMetrics are the metric names every alert and dashboard query selects, each with one of
// the places that queries it.
func queriedMetrics(t *testing.T, root string) map[string]string {
	exprs := map[string]string{}
	d, err := dashboards.Overview()
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range dashboards.Queries(d) {
		exprs[q] = "the dashboard's query " + q
	}
	for alert, expr := range alertExprs(t, root) {
		exprs[expr] = "alert " + alert
	}
	names := map[string]string{}
	for expr, where := range exprs {
		// Grafana's interval variable is no PromQL; the parser reads the rest as it is.
		e, err := parser.NewParser(parser.Options{}).ParseExpr(strings.ReplaceAll(expr, "$__rate_interval", "5m"))
		if err != nil {
			t.Fatalf("%s: %v", where, err)
		}
		n := 0
		parser.Inspect(e, func(node parser.Node, _ []parser.Node) error {
			if vs, ok := node.(*parser.VectorSelector); ok {
				names[vs.Name] = where
				n++
			}
			return nil
		})
		if n == 0 {
			t.Errorf("%s selects no metric", where)
		}
	}
	if len(names) < 20 {
		t.Fatalf("%d metrics queried; the alerts and the dashboard query more than 20", len(names))
	}
	return names
}

// alertExprs renders the chart's PrometheusRule with the pinned helm (bin/, as `make helm`
// installs it) and returns each alert's expression.
func alertExprs(t *testing.T, root string) map[string]string {
	makefile, err := os.ReadFile(filepath.Join(root, "Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^HELM_VERSION\s*:?=\s*(v\S+)\s*$`).FindSubmatch(makefile)
	if m == nil {
		t.Fatal("Makefile: no HELM_VERSION line")
	}
	helm := filepath.Join(root, "bin", "helm-"+string(m[1]))
	home := t.TempDir()
	cmd := exec.Command(helm, "template", "pmx", "charts/pmx", "--namespace", "pmx",
		"--set", "prometheusRule.enabled=true", "--show-only", "templates/prometheusrule.yaml")
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "HELM_CONFIG_HOME="+filepath.Join(home, "config"),
		"HELM_CACHE_HOME="+filepath.Join(home, "cache"), "HELM_DATA_HOME="+filepath.Join(home, "data"))
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%v (run `make helm` first): %v", cmd, err)
	}
	var rule struct {
		Spec struct {
			Groups []struct {
				Rules []struct{ Alert, Expr string }
			}
		}
	}
	if err := yaml.Unmarshal(out, &rule); err != nil {
		t.Fatal(err)
	}
	exprs := map[string]string{}
	for _, g := range rule.Spec.Groups {
		for _, r := range g.Rules {
			exprs[r.Alert] = r.Expr
		}
	}
	if len(exprs) == 0 {
		t.Fatalf("no alerts rendered:\n%s", out)
	}
	return exprs
}

// buildPMX builds cmd/pmx from the pmx module itself, with its own dependencies.
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
		"--metrics-addr", "127.0.0.1:0", "--markets", "", "--admin-token", adminToken, "--data-dir", t.TempDir(),
		"--log-level", "warn", "--read-rate", "0.001", "--read-burst", "4")
	exchangetest.WaitReady(t, base+"/readyz")
	st, err := store.Open(context.Background(), db)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(st.Close)
	tg := &exchangetest.Target{URL: base, AdminToken: adminToken, Store: st, Validator: apitest.NewValidator(t), Feed: apitest.NewAsyncValidator(t),
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
		"--metrics-addr", "127.0.0.1:0", "--database-url", db, "--internal-token", internalToken, "--log-level", "warn")
	api, base := exchangetest.StartProcess(t, apiLine, bin, "api", "--addr", "127.0.0.1:0", "--metrics-addr", "127.0.0.1:0",
		"--database-url", db, "--admin-token", adminToken, "--internal-token", internalToken, "--log-level", "warn")
	exchangetest.WaitReady(t, base+"/readyz")
	// controller-runtime does not say which port it took for :0, so the operator gets a free one.
	operatorMetrics := "127.0.0.1:" + strconv.Itoa(freePort(t))
	exchangetest.StartProcessEnv(t, operatorLine, []string{"KUBECONFIG=" + env.Kubeconfig, "PMX_INTERNAL_TOKEN=" + internalToken},
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
