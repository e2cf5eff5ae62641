package controllers

import (
	"context"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// healthTimeout bounds the reads of one scrape; Postgres being slower than that is for
// pmx_postgres_up to say.
const healthTimeout = 5 * time.Second

var (
	heartbeatAgeDesc = prometheus.NewDesc("pmx_operator_shard_heartbeat_age_seconds",
		"Time since each registered shard's last heartbeat in Postgres; the operator moves its markets once it passes the shard TTL.",
		[]string{"shard"}, nil)
	shardMarketsDesc = prometheus.NewDesc("pmx_operator_shard_markets",
		"OPEN markets each registered shard owns.", []string{"shard"}, nil)
	unownedDesc = prometheus.NewDesc("pmx_operator_markets_unowned",
		"OPEN markets with no live owner (none, or one whose heartbeat is older than the shard TTL): no order in them is matched until the operator schedules them.",
		nil, nil)
	overdueDesc = prometheus.NewDesc("pmx_operator_markets_overdue",
		"OPEN markets whose closesAt has passed: the operator closes each at that time through its shard.", nil, nil)
	poolOrdersDesc = prometheus.NewDesc("pmx_operator_pool_orders_per_second",
		"Orders per second the live shards of each pool took over the last minute, as each last reported: what an autoscaler on a ShardPool scales by.",
		[]string{"pool"}, nil)
	poolShardsDesc = prometheus.NewDesc("pmx_operator_pool_live_shards",
		"Live shards (heartbeat within the shard TTL) of each pool.", []string{"pool"}, nil)
)

// HealthCollector exports what the operator alone knows the exchange by — which shard owns each
// market, and when each should close — read from Postgres at each scrape, so that every replica,
// leader or standby, reports the same figures and alerts need no leader to be right.
type HealthCollector struct {
	Store HealthStore
	// ShardTTL is the operator's: a shard is live while its heartbeat is this recent.
	ShardTTL time.Duration
	Logger   *slog.Logger
}

// Describe implements prometheus.Collector.
func (c *HealthCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- heartbeatAgeDesc
	ch <- shardMarketsDesc
	ch <- unownedDesc
	ch <- overdueDesc
	ch <- poolOrdersDesc
	ch <- poolShardsDesc
}

// Collect implements prometheus.Collector. When Postgres cannot be read it reports nothing (and
// logs why) rather than zeros that would clear the alerts: pmx_postgres_up says the rest.
func (c *HealthCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), healthTimeout)
	defer cancel()
	h, err := c.Store.Health(ctx, c.ShardTTL)
	if err != nil {
		if c.Logger != nil {
			c.Logger.Warn("the exchange's health could not be read for the metrics", "err", err)
		}
		return
	}
	orders, live := map[string]float64{}, map[string]int{}
	for _, s := range h.Shards {
		ch <- prometheus.MustNewConstMetric(heartbeatAgeDesc, prometheus.GaugeValue, s.HeartbeatAge.Seconds(), s.Name)
		ch <- prometheus.MustNewConstMetric(shardMarketsDesc, prometheus.GaugeValue, float64(s.Markets), s.Name)
		if _, ok := live[s.Pool]; !ok {
			orders[s.Pool], live[s.Pool] = 0, 0 // a pool whose shards are all down reports zeros
		}
		if s.Live {
			orders[s.Pool] += s.Orders
			live[s.Pool]++
		}
	}
	for pool, n := range live {
		ch <- prometheus.MustNewConstMetric(poolOrdersDesc, prometheus.GaugeValue, orders[pool], pool)
		ch <- prometheus.MustNewConstMetric(poolShardsDesc, prometheus.GaugeValue, float64(n), pool)
	}
	ch <- prometheus.MustNewConstMetric(unownedDesc, prometheus.GaugeValue, float64(h.Unowned))
	ch <- prometheus.MustNewConstMetric(overdueDesc, prometheus.GaugeValue, float64(h.Overdue))
}
