package charttest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"image/png"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/pmx-dev/pmx/internal/apitest"
	"github.com/pmx-dev/pmx/internal/browsertest"
	"github.com/pmx-dev/pmx/internal/exchangetest"
	"github.com/pmx-dev/pmx/internal/k8stest"
	"github.com/pmx-dev/pmx/internal/pgtest"
	"github.com/pmx-dev/pmx/internal/poll"
	"github.com/pmx-dev/pmx/internal/records"
	"github.com/pmx-dev/pmx/internal/store"
	"github.com/pmx-dev/pmx/internal/tools/dashboards"
)

// The dashboard's variables as a release pmx in namespace pmx fills them, and Grafana's
// $__rate_interval for a 1 s scrape (Grafana takes at least four scrape intervals).
const (
	runNamespace    = "pmx"
	runRelease      = "pmx"
	runRateInterval = "10s"
	// runLoad is how long the bots trade while Prometheus scrapes.
	runLoad = 30 * time.Second
)

var prometheusReady = regexp.MustCompile(`msg="Server is ready to receive web requests\.".*()`)

// TestDashboardOnARealRun runs the distributed exchange — an operator leading against a real
// kube-apiserver, two shards, a front — under bots that trade, follow the feeds, are rate-limited
// and send a wrong key, with the chart's Prometheus (built from its Go module at promtool's
// version) scraping every process each second under the job and pod labels the chart's
// ServiceMonitors give them. Then it asks Prometheus for every query of the committed dashboard
// JSON over the run, as Grafana would, and checks that every panel a healthy exchange under load
// fills has data: a query that selects a label pmx does not set, or a metric that stays empty,
// shows up here as an empty panel. It renders the panels from those answers in Chromium, laid
// out by the dashboard's own grid; with PMX_SCREENSHOT_DASHBOARD=docs/img/dashboard.png (relative
// to the repository root) it saves that screenshot:
//
//	PMX_SCREENSHOT_DASHBOARD=docs/img/dashboard.png go test -count=1 -run TestDashboardOnARealRun ./internal/charttest/
func TestDashboardOnARealRun(t *testing.T) {
	root := k8stest.RepoRoot(t)
	promBin := prometheusBinary(t)
	bin := buildPMX(t, root)
	ex := startRun(t, bin)
	prom := startPrometheus(t, promBin, ex.targets)

	started := time.Now()
	ex.drive(t, runLoad)
	ended := time.Now()

	raw, err := os.ReadFile(filepath.Join(root, "charts", "pmx", "dashboards", dashboards.File))
	if err != nil {
		t.Fatal(err)
	}
	var dash grafanaDashboard
	if err := json.Unmarshal(raw, &dash); err != nil {
		t.Fatal(err)
	}
	panels := 0
	for i := range dash.Panels {
		p := &dash.Panels[i]
		if p.Type != "timeseries" {
			continue
		}
		panels++
		for _, target := range p.Targets {
			series := prom.queryRange(t, fillVariables(target.Expr), started, ended)
			for _, s := range series {
				s.Legend = legend(target.LegendFormat, s.Metric)
			}
			p.series = append(p.series, series...)
		}
		if len(p.series) == 0 && quietPanels[p.Title] == "" {
			t.Errorf("panel %q has no data from a run under load: its queries %v", p.Title, p.exprs())
		}
	}
	if panels < 20 {
		t.Fatalf("the dashboard has %d time series panels; it has more than 20", panels)
	}

	page := renderDashboard(dash, started, ended)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		_, _ = w.Write(page)
	}))
	t.Cleanup(srv.Close)
	ctx := browsertest.Start(t, pageWidth, 900)
	if err := chromedp.Do(ctx, chromedp.Navigate(srv.URL), chromedp.WaitVisible(chromedp.ID("dashboard"))); err != nil {
		t.Fatalf("opening the rendered dashboard: %v", err)
	}
	shot, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatalf("screenshot: %v", err)
	}
	img, err := png.Decode(bytes.NewReader(shot))
	if err != nil {
		t.Fatalf("the screenshot is no PNG: %v", err)
	}
	if w := img.Bounds().Dx(); w != pageWidth {
		t.Errorf("the screenshot is %d px wide, want the page's %d", w, pageWidth)
	}
	if path := os.Getenv("PMX_SCREENSHOT_DASHBOARD"); path != "" {
		if err := os.WriteFile(filepath.Join(root, path), shot, 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("saved the dashboard's screenshot to %s", path)
	}
}

// quietPanels are the panels a healthy run may leave empty, and why.
var quietPanels = map[string]string{
	"Internal protocol refusals": "every process speaks the same protocol version",
}

// fillVariables gives the dashboard's variables the values a release pmx in namespace pmx has.
func fillVariables(expr string) string {
	return strings.NewReplacer("$namespace", runNamespace, "$release", runRelease, "$__rate_interval", runRateInterval).Replace(expr)
}

var legendLabel = regexp.MustCompile(`\{\{\s*(\w+)\s*\}\}`)

// legend is Grafana's legend format with the series' labels filled in.
func legend(format string, labels map[string]string) string {
	if format == "" {
		return fmt.Sprint(labels)
	}
	return strings.TrimSpace(legendLabel.ReplaceAllStringFunc(format, func(m string) string {
		return labels[legendLabel.FindStringSubmatch(m)[1]]
	}))
}

// grafanaDashboard is what the renderer reads of the dashboard JSON Grafana imports.
type grafanaDashboard struct {
	Title  string         `json:"title"`
	Panels []grafanaPanel `json:"panels"`
}

type grafanaPanel struct {
	Type    string `json:"type"`
	Title   string `json:"title"`
	GridPos struct {
		H, W, X, Y int
	} `json:"gridPos"`
	FieldConfig struct {
		Defaults struct {
			Unit string `json:"unit"`
		} `json:"defaults"`
	} `json:"fieldConfig"`
	Targets []struct {
		Expr         string `json:"expr"`
		LegendFormat string `json:"legendFormat"`
	} `json:"targets"`

	series []*series
}

func (p *grafanaPanel) exprs() []string {
	var out []string
	for _, target := range p.Targets {
		out = append(out, fillVariables(target.Expr))
	}
	return out
}

// series is one series of a range query's answer.
type series struct {
	Metric map[string]string
	Legend string
	Times  []float64 // Unix seconds
	Values []float64
}

// run is the distributed exchange the test drives: its front's API and the metrics endpoints
// Prometheus scrapes, by job and pod.
type run struct {
	tg      *exchangetest.Target
	markets []string
	targets []scrapeTarget
}

// scrapeTarget is a process's metrics endpoint, its component (the job is
// <release>-<component>-metrics, as the chart's ServiceMonitors name them) and the pod name the
// chart's StatefulSet (shards) would give it, or for the Deployments' one replica the
// Deployment's name.
type scrapeTarget struct{ job, pod, addr string }

// startRun starts the distributed exchange's processes on one database, as the chart runs them:
// an operator that leads, against a real kube-apiserver; two shards; a front with a small read
// limit, so that a greedy reader is refused; and three markets applied as Market resources.
func startRun(t *testing.T, bin string) *run {
	env := k8stest.Start(t)
	db := pgtest.NewDatabase(t, pgtest.Shared(t))
	r := &run{}
	for i := range 2 {
		shard, _ := exchangetest.StartProcess(t, shardLine, bin, "shard", "--name", fmt.Sprintf("shard-%d", i), "--addr", "127.0.0.1:0",
			"--metrics-addr", "127.0.0.1:0", "--database-url", db, "--internal-token", metricsInternalToken, "--log-level", "warn")
		r.targets = append(r.targets, scrapeTarget{"shard", fmt.Sprintf("%s-shard-%d", runRelease, i), shard.Line(metricsLine)})
	}
	api, base := exchangetest.StartProcess(t, apiLine, bin, "api", "--addr", "127.0.0.1:0", "--metrics-addr", "127.0.0.1:0",
		"--database-url", db, "--admin-token", metricsAdminToken, "--internal-token", metricsInternalToken, "--log-level", "warn",
		"--read-rate", "20", "--read-burst", "40", "--write-rate", "0")
	exchangetest.WaitReady(t, base+"/readyz")
	r.targets = append(r.targets, scrapeTarget{"api", runRelease + "-api", api.Line(metricsLine)})
	operatorMetrics := "127.0.0.1:" + strconv.Itoa(freePort(t))
	exchangetest.StartProcessEnv(t, operatorLine, []string{"KUBECONFIG=" + env.Kubeconfig, "PMX_INTERNAL_TOKEN=" + metricsInternalToken},
		bin, "operator", "--database-url", db, "--leader-elect=true", "--leader-election-namespace", "default",
		"--metrics-bind-address", operatorMetrics, "--health-probe-bind-address", "0", "--log-level", "info")
	r.targets = append(r.targets, scrapeTarget{"operator", runRelease + "-operator", "http://" + operatorMetrics})

	st, err := store.Open(context.Background(), db)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(st.Close)
	r.tg = &exchangetest.Target{URL: base, AdminToken: metricsAdminToken, Store: st, Validator: apitest.NewValidator(t),
		Feed: apitest.NewAsyncValidator(t), HTTP: &http.Client{Timeout: 30 * time.Second}}
	r.tg.Markets = &exchangetest.KubeMarkets{Client: env.Client, Store: st, Namespace: "default",
		Scheduled: func(_ context.Context, m records.Market) bool {
			return m.Shard != nil && strings.HasPrefix(*m.Shard, "shard-")
		}}
	for i := range 3 {
		r.markets = append(r.markets, r.tg.NewMarket(t, map[string]any{"question": fmt.Sprintf("Dashboard market %d?", i)}).ID.String())
	}
	return r
}

// drive trades for d: six bots place and cancel orders on every market; two accounts follow the
// markets' books and trades on the feed, one of them reconnecting halfway; a greedy reader asks
// past its read limit (429s); and a wrong key is refused.
func (r *run) drive(t *testing.T, d time.Duration) {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	var wg sync.WaitGroup
	var mu sync.Mutex
	counts := map[int]int{}
	count := func(code int) {
		mu.Lock()
		counts[code]++
		mu.Unlock()
	}
	for i := range 6 {
		bot := r.tg.NewAccount(t, "dashboard-bot")
		rng := rand.New(rand.NewPCG(uint64(i), 7))
		wg.Go(func() {
			var mine []string
			for ctx.Err() == nil {
				m := r.markets[rng.IntN(len(r.markets))]
				if len(mine) > 0 && rng.IntN(4) == 0 {
					id := mine[rng.IntN(len(mine))]
					code, _ := bot.Do(t, "POST", "/cancel-order", map[string]any{"orderId": id})
					count(code)
					continue
				}
				body := map[string]any{"marketId": m, "side": []string{"BUY", "SELL"}[rng.IntN(2)], "outcome": []string{"YES", "NO"}[rng.IntN(2)],
					"price": 40 + rng.IntN(21), "quantity": 1 + rng.IntN(5)}
				code, raw := bot.Do(t, "POST", "/order", body)
				count(code)
				if code == http.StatusCreated {
					var o struct{ ID string }
					if err := json.Unmarshal(raw, &o); err == nil {
						mine = append(mine, o.ID)
					}
				}
			}
		})
	}
	follow := func(c *exchangetest.Client) *exchangetest.FeedConn {
		f := c.DialFeed(t)
		id := 0
		for _, m := range r.markets {
			for _, ch := range []string{"book", "trades"} {
				id++
				f.Send(t, map[string]any{"op": "subscribe", "id": id, "channel": ch, "marketId": m})
			}
		}
		wg.Go(func() {
			for {
				if _, err := f.TryNext(time.Minute); err != nil {
					return
				}
			}
		})
		return f
	}
	watchers := []*exchangetest.FeedConn{follow(r.tg.NewAccount(t, "dashboard-watcher")), nil}
	restless := r.tg.NewAccount(t, "dashboard-restless")
	watchers[1] = follow(restless)
	wg.Go(func() {
		select {
		case <-ctx.Done():
		case <-time.After(d / 2):
			watchers[1].Close()
			watchers[1] = follow(restless)
		}
	})
	greedy := r.tg.NewAccount(t, "dashboard-greedy")
	wg.Go(func() {
		for ctx.Err() == nil {
			code, _ := greedy.Do(t, "GET", "/positions", nil)
			count(code)
		}
	})
	wrong := &exchangetest.Client{T: r.tg, Key: greedy.Key[:len(greedy.Key)-1] + map[bool]string{true: "b", false: "a"}[strings.HasSuffix(greedy.Key, "a")]}
	if code, _ := wrong.Do(t, "GET", "/account", nil); code != http.StatusUnauthorized {
		t.Errorf("a wrong key: %d, want 401", code)
	}
	<-ctx.Done()
	for _, w := range watchers {
		w.Close()
	}
	wg.Wait()
	t.Logf("the bots' answers by status: %v", counts)
	for code, n := range counts {
		if code >= 500 {
			t.Errorf("%d answers were %d", n, code)
		}
	}
	if counts[http.StatusCreated] == 0 || counts[http.StatusTooManyRequests] == 0 {
		t.Errorf("the run placed %d orders and was refused %d reads; the panels need both", counts[http.StatusCreated], counts[http.StatusTooManyRequests])
	}
}

// prometheus is a Prometheus server's HTTP API.
type prometheus struct{ url string }

// startPrometheus runs Prometheus scraping targets every second, each under the job the chart's
// ServiceMonitor of its component gives it (<release>-<component>-metrics) and its pod and
// namespace labels, and waits until it has scraped every one.
func startPrometheus(t *testing.T, bin string, targets []scrapeTarget) *prometheus {
	var cfg strings.Builder
	cfg.WriteString("global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\nscrape_configs:\n")
	for _, tg := range targets {
		u, err := url.Parse(tg.addr)
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&cfg, "  - job_name: %s-%s\n    static_configs:\n      - targets: [%q]\n        labels: {namespace: %s, pod: %s, job: %s-%s-metrics}\n",
			tg.pod, tg.job, u.Host, runNamespace, tg.pod, runRelease, tg.job)
	}
	dir := t.TempDir()
	config := filepath.Join(dir, "prometheus.yml")
	if err := os.WriteFile(config, []byte(cfg.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	addr := "127.0.0.1:" + strconv.Itoa(freePort(t))
	exchangetest.StartProcess(t, prometheusReady, bin, "--config.file", config, "--storage.tsdb.path", filepath.Join(dir, "data"),
		"--web.listen-address", addr, "--log.level", "info")
	p := &prometheus{url: "http://" + addr}
	poll.Wait(t, time.Minute, "Prometheus scraping every pmx process", func() bool {
		up := p.query(t, "sum(up)")
		return len(up) == 1 && up[0] == float64(len(targets))
	})
	return p
}

// apiAnswer is the envelope of Prometheus's HTTP API.
type apiAnswer struct {
	Status string `json:"status"`
	Error  string `json:"error"`
	Data   struct {
		Result []struct {
			Metric map[string]string `json:"metric"`
			Value  [2]any            `json:"value"`
			Values [][2]any          `json:"values"`
		} `json:"result"`
	} `json:"data"`
}

func (p *prometheus) get(t *testing.T, path string, params url.Values) apiAnswer {
	t.Helper()
	resp, err := http.Get(p.url + path + "?" + params.Encode())
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var a apiAnswer
	if err := json.NewDecoder(resp.Body).Decode(&a); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	if a.Status != "success" {
		t.Fatalf("Prometheus %s %v: %s", path, params, a.Error)
	}
	return a
}

// query is an instant query's values.
func (p *prometheus) query(t *testing.T, expr string) []float64 {
	var out []float64
	for _, r := range p.get(t, "/api/v1/query", url.Values{"query": {expr}}).Data.Result {
		out = append(out, number(r.Value[1]))
	}
	return out
}

// queryRange is a range query's series from start to end, a point a second, as Grafana asks.
func (p *prometheus) queryRange(t *testing.T, expr string, start, end time.Time) []*series {
	a := p.get(t, "/api/v1/query_range", url.Values{"query": {expr}, "start": {unix(start)}, "end": {unix(end)}, "step": {"1"}})
	var out []*series
	for _, r := range a.Data.Result {
		s := &series{Metric: r.Metric}
		for _, v := range r.Values {
			s.Times = append(s.Times, number(v[0]))
			s.Values = append(s.Values, number(v[1]))
		}
		out = append(out, s)
	}
	return out
}

func unix(t time.Time) string { return strconv.FormatFloat(float64(t.UnixMilli())/1000, 'f', 3, 64) }

// number reads a sample's time (a JSON number) or value (a string, "NaN" included).
func number(v any) float64 {
	switch x := v.(type) {
	case float64:
		return x
	case string:
		f, _ := strconv.ParseFloat(x, 64)
		return f
	}
	return 0
}
