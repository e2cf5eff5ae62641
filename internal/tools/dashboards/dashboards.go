// Package dashboards builds pmx's Grafana dashboard as code, with Grafana's own Go SDK for
// dashboards (grafana-foundation-sdk: typed builders of the dashboard schema Grafana itself
// generates them from, so that a panel the SDK builds is one Grafana reads, which hand-written
// JSON cannot promise). `go generate ./internal/tools/dashboards` writes it to
// charts/pmx/dashboards/, where the chart's ConfigMap picks it up for Grafana's sidecar; a test
// fails when the committed file is stale.
//
// Every query selects pmx's series as the chart's alerts do, by namespace and by the job its
// ServiceMonitors give each component (<release>-pmx-<component>-metrics); the dashboard's
// variables choose the namespace and the release. It reads only what pmx exports: figures pmx
// does not keep — the book's depth and spread per market, how far a feed client is behind —
// have no panel.
package dashboards

// Grafana's sidecar provisions the classic dashboard JSON model that package dashboard builds, which
// every Grafana in use reads; dashboardv2 is the schema of Grafana 12's v2 dashboard API, which
// file provisioning and older Grafanas do not read.
//
//lint:file-ignore SA1019 the classic model is the one the sidecar provisions (above)

//go:generate go run ./gen ../../../charts/pmx/dashboards

import (
	"encoding/json"
	"fmt"

	"github.com/grafana/grafana-foundation-sdk/go/cog"
	"github.com/grafana/grafana-foundation-sdk/go/common"
	"github.com/grafana/grafana-foundation-sdk/go/dashboard"
	"github.com/grafana/grafana-foundation-sdk/go/prometheus"
	"github.com/grafana/grafana-foundation-sdk/go/timeseries"
)

// File is the name of the overview dashboard's JSON under charts/pmx/dashboards/.
const File = "pmx-overview.json"

// The selectors of each component's series: the namespace and release the variables choose.
const (
	api      = `namespace="$namespace", job="$release-api-metrics"`
	shard    = `namespace="$namespace", job="$release-shard-metrics"`
	operator = `namespace="$namespace", job="$release-operator-metrics"`
	all      = `namespace="$namespace", job=~"$release-(api|shard|operator)-metrics"`
	// orderRoutes are the API's routes that place, amend or cancel orders (apiserver/routes.go).
	orderRoutes = `route=~"/api/v1/(order|order/amend|orders/batch|cancel-order|orders/cancel|cancel-everything)", method="POST"`
)

func ptr[T any](v T) *T { return &v }

// datasource is the Prometheus the dashboard's variable chooses.
var datasource = common.DataSourceRef{Type: ptr("prometheus"), Uid: ptr("${datasource}")}

// query is one PromQL target, its series named by legend.
type query struct{ expr, legend string }

// ids numbers the panels in order, rows included, so that each has the id Grafana links to.
type ids struct{ last uint32 }

func (n *ids) next() uint32 { n.last++; return n.last }

// panel is a time series of queries in unit (a Grafana unit id), a third of the width; its
// queries are refIds A, B, ... as Grafana names them.
func (n *ids) panel(title, description, unit string, qs ...query) cog.Builder[dashboard.Panel] {
	p := timeseries.NewPanelBuilder().Id(n.next()).Title(title).Description(description).Unit(unit).
		Datasource(datasource).Span(8).Height(8).Min(0).
		Legend(common.NewVizLegendOptionsBuilder().ShowLegend(true).DisplayMode(common.LegendDisplayModeList).
			Placement(common.LegendPlacementBottom))
	for i, q := range qs {
		p.WithTarget(prometheus.NewDataqueryBuilder().RefId(string(rune('A' + i))).Datasource(datasource).Expr(q.expr).LegendFormat(q.legend))
	}
	return p
}

// quantiles are the p50 and p99 of a histogram's series, grouped by by.
func quantiles(metric, selector, by, legend string) []query {
	var qs []query
	for _, q := range []string{"0.5", "0.99"} {
		qs = append(qs, query{
			fmt.Sprintf(`histogram_quantile(%s, sum by (le, %s) (rate(%s_bucket{%s}[$__rate_interval])))`, q, by, metric, selector),
			fmt.Sprintf("p%s %s", map[string]string{"0.5": "50", "0.99": "99"}[q], legend)})
	}
	return qs
}

// Overview is the dashboard an on-call engineer opens first: the orders, the shards' batches, the
// markets' owners, the feeds, the refusals and Postgres, a row each.
func Overview() (dashboard.Dashboard, error) {
	var n ids
	panel, row := n.panel, func(title string) *dashboard.RowBuilder { return dashboard.NewRowBuilder(title).Id(n.next()) }
	variable := func(name, label, q, regex string) *dashboard.QueryVariableBuilder {
		return dashboard.NewQueryVariableBuilder(name).Label(label).Datasource(datasource).
			Query(dashboard.StringOrMap{String: ptr(q)}).Regex(regex).Refresh(dashboard.VariableRefreshOnTimeRangeChanged).
			Sort(dashboard.VariableSortAlphabeticalAsc)
	}
	b := dashboard.NewDashboardBuilder("pmx").
		Uid("pmx-overview").
		Description("The pmx exchange: orders, shards, markets, feeds, refusals and Postgres. Built by internal/tools/dashboards; alerts and runbooks in docs/operations.md.").
		Tags([]string{"pmx"}).
		Refresh("30s").
		Time("now-1h", "now").
		Timezone(common.TimeZoneBrowser).
		Tooltip(dashboard.DashboardCursorSyncCrosshair).
		WithVariable(dashboard.NewDatasourceVariableBuilder("datasource").Label("Data source").Type("prometheus")).
		WithVariable(variable("namespace", "Namespace", `label_values(pmx_http_requests_total, namespace)`, "")).
		WithVariable(variable("release", "Release", `label_values(pmx_http_requests_total{namespace="$namespace"}, job)`, `/(.*)-api-metrics/`))

	b.WithRow(row("Orders")).
		WithPanel(panel("Order requests by outcome",
			"Placements, amends and cancels the front API answered per second, by route and status code: 2xx done, 4xx refused (the body says why), 429 rate-limited, 503 no live shard.",
			"reqps",
			query{`sum by (route, code) (rate(pmx_http_requests_total{` + api + `, ` + orderRoutes + `}[$__rate_interval]))`, "{{route}} {{code}}"})).
		WithPanel(panel("Order latency by route",
			"Time to answer a placement, amend or cancel, from the request to the answer, which waits for the batch's commit.",
			"s", quantiles("pmx_http_request_duration_seconds", api+`, `+orderRoutes, "route", "{{route}}")...)).
		WithPanel(panel("API answers that are 5xx",
			"Share of all the front API's answers that are 5xx (PmxHighErrorRate); 0 while none has been.",
			"percentunit",
			// Until the first 5xx there is no such series; "or vector(0)" draws the healthy 0
			// rather than leaving the panel empty, which reads as a broken query.
			query{`(sum(rate(pmx_http_requests_total{` + api + `, code=~"5.."}[$__rate_interval])) or vector(0)) / sum(rate(pmx_http_requests_total{` + api + `}[$__rate_interval]))`, "5xx"}))

	b.WithRow(row("Shards")).
		WithPanel(panel("Batches committed per shard",
			"Batches per second: each is one Postgres transaction for every command queued meanwhile.",
			"ops",
			query{`sum by (pod) (rate(pmx_shard_batches_total{` + shard + `}[$__rate_interval]))`, "{{pod}}"})).
		WithPanel(panel("Batch size per shard", "Commands per batch.", "short",
			quantiles("pmx_shard_batch_commands", shard, "pod", "{{pod}}")...)).
		WithPanel(panel("Batch commit latency per shard",
			"Time to run a batch, from its first command to its commit (PmxBatchCommitSlow).", "s",
			quantiles("pmx_shard_batch_seconds", shard, "pod", "{{pod}}")...)).
		WithPanel(panel("Commit round trip per shard",
			"Time a batch's writes and commit took in Postgres, one round trip once the batch was built. Near the batches' own time, a slow batch is a slow commit (Postgres: the WAL's flush, a lock); far below it, the batch waited in the shard.", "s",
			quantiles("pmx_shard_commit_seconds", shard, "pod", "{{pod}}")...)).
		WithPanel(panel("Shard time on Postgres",
			"Share of each shard's time its connection spent on its batches' round trips to Postgres: writes and commit, and the read of a batch that reads (the busiest shard of the pod). Near 100%, the shard is bound by Postgres: its statements and commit flushes; well below it while orders are slow, by pmx itself.",
			"percentunit",
			query{`max by (pod) (rate(pmx_shard_database_seconds_total{` + shard + `}[$__rate_interval]))`, "{{pod}}"})).
		WithPanel(panel("Batch failures and reruns",
			"Batches whose transaction failed (their books rebuilt from Postgres) and batches that ran again on fresher state, per second.",
			"ops",
			query{`sum by (pod) (rate(pmx_shard_batch_failures_total{` + shard + `}[$__rate_interval]))`, "failed {{pod}}"},
			query{`sum by (pod) (rate(pmx_shard_batches_rerun_total{` + shard + `}[$__rate_interval]))`, "rerun {{pod}}"})).
		WithPanel(panel("Commands pipelined and held",
			"Commands matched while the batch before theirs was committing (pipelined), commands that could not join that batch and waited for two commits (held: a load, a check, one the views could not pay for), and batches that read what they reserve from, per second. Held commands are the orders' latency tail.", "ops",
			query{`sum by (pod) (rate(pmx_shard_commands_pipelined_total{` + shard + `}[$__rate_interval]))`, "pipelined {{pod}}"},
			query{`sum by (pod) (rate(pmx_shard_commands_held_total{` + shard + `}[$__rate_interval]))`, "held {{pod}}"},
			query{`sum by (pod) (rate(pmx_shard_batches_read_total{` + shard + `}[$__rate_interval]))`, "batches read {{pod}}"}))

	b.WithRow(row("Markets and their shards")).
		WithPanel(panel("OPEN markets per shard", "As the operator reads it from Postgres.", "short",
			query{`max by (shard) (pmx_operator_shard_markets{` + operator + `})`, "{{shard}}"})).
		WithPanel(panel("Shard heartbeat age",
			"Time since each shard's last heartbeat; past the operator's shard TTL its markets move (PmxShardHeartbeatLagging).", "s",
			query{`max by (shard) (pmx_operator_shard_heartbeat_age_seconds{` + operator + `})`, "{{shard}}"})).
		WithPanel(panel("Markets needing the operator",
			"OPEN markets without a live owner (PmxMarketWithoutOwner) and OPEN past their closesAt (PmxMarketPastClose); the operator leader (1 when one leads).",
			"short",
			query{`max(pmx_operator_markets_unowned{` + operator + `})`, "without a live owner"},
			query{`max(pmx_operator_markets_overdue{` + operator + `})`, "past closesAt"},
			query{`max(leader_election_master_status{` + operator + `, name="pmx-operator.pmx.dev"})`, "operator leads"}))

	b.WithRow(row("Feeds")).
		WithPanel(panel("Feed connections", "WebSocket feed connections open, per front.", "short",
			query{`sum by (pod) (pmx_feed_connections{` + api + `})`, "{{pod}}"})).
		WithPanel(panel("Feed messages sent", "Messages written to feed connections per second, per front.", "ops",
			query{`sum by (pod) (rate(pmx_feed_messages_sent_total{` + api + `}[$__rate_interval]))`, "{{pod}}"})).
		WithPanel(panel("Feed connections closed by reason",
			"Per second: slow_consumer (its queue filled or a write timed out; PmxFeedSlowConsumers), heartbeat_timeout, client, ...", "ops",
			query{`sum by (reason) (rate(pmx_feed_closed_total{` + api + `}[$__rate_interval]))`, "{{reason}}"})).
		WithPanel(panel("Markets followed and book loads",
			"Markets the fronts' feeds follow, and whole books read per second to start following one.", "short",
			query{`sum by (pod) (pmx_feed_topics{` + api + `})`, "followed {{pod}}"},
			query{`sum by (pod) (rate(pmx_feed_book_loads_total{` + api + `}[$__rate_interval]))`, "book loads/s {{pod}}"}))

	b.WithRow(row("Refusals")).
		WithPanel(panel("Rate-limit refusals",
			"Requests answered 429 per second, by route, and feed subscriptions refused rate_limited, by the limit spent.", "reqps",
			query{`sum by (route) (rate(pmx_http_requests_total{` + api + `, code="429"}[$__rate_interval]))`, "{{route}}"},
			query{`sum by (limit) (rate(pmx_feed_rate_limited_total{` + api + `}[$__rate_interval]))`, "feed {{limit}}"})).
		WithPanel(panel("Credentials refused",
			"Per second, by kind and how: invalid (checked and wrong) or throttled (the address failed too often).", "reqps",
			query{`sum by (credential, outcome) (rate(pmx_api_auth_failures_total{` + api + `}[$__rate_interval]))`, "{{credential}} {{outcome}}"})).
		WithPanel(panel("Internal protocol refusals",
			"Internal requests or answers refused for want of a shared protocol version (a release skipped in an upgrade).", "reqps",
			query{`sum by (job) (rate(pmx_internal_protocol_refused_total{` + all + `}[$__rate_interval]))`, "{{job}}"}))

	b.WithRow(row("Postgres")).
		WithPanel(panel("Postgres round trips",
			"Connections taken from the pools per second, one per statement or transaction, by component.", "ops",
			query{`sum by (job) (rate(pmx_postgres_acquires_total{` + all + `}[$__rate_interval]))`, "{{job}}"})).
		WithPanel(panel("Waiting for a connection",
			"Time spent waiting for a pooled connection, per second, by component: above 0 the pools are too small or Postgres too slow.", "s",
			query{`sum by (job) (rate(pmx_postgres_acquire_wait_seconds_total{` + all + `}[$__rate_interval]))`, "{{job}}"})).
		WithPanel(panel("Pool connections and reachability",
			"Connections in use and idle, by component; and the fewest processes' view of Postgres (1 up, 0 unreachable: PmxPostgresUnreachable).", "short",
			query{`sum by (job, state) (pmx_postgres_connections{` + all + `})`, "{{job}} {{state}}"},
			query{`min(pmx_postgres_up{` + all + `})`, "reachable"}))

	return b.Build()
}

// JSON is the overview dashboard as Grafana imports it.
func JSON() ([]byte, error) {
	d, err := Overview()
	if err != nil {
		return nil, err
	}
	out, err := json.MarshalIndent(d, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(out, '\n'), nil
}

// Queries are the PromQL expressions of every panel of d, for the tests that check them.
func Queries(d dashboard.Dashboard) []string {
	var out []string
	add := func(p dashboard.Panel) {
		for _, t := range p.Targets {
			switch q := t.(type) {
			case prometheus.Dataquery:
				out = append(out, q.Expr)
			case *prometheus.Dataquery:
				out = append(out, q.Expr)
			}
		}
	}
	for _, p := range d.Panels {
		if p.Panel != nil {
			add(*p.Panel)
		}
		if p.RowPanel != nil {
			for _, inner := range p.RowPanel.Panels {
				add(inner)
			}
		}
	}
	return out
}
