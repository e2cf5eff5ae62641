package store

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// pingTimeout bounds the ping of each scrape: a database that takes longer is as good as down to
// a shard whose batches wait on it.
const pingTimeout = 2 * time.Second

var (
	upDesc = prometheus.NewDesc("pmx_postgres_up",
		"Whether Postgres answered this process's ping at the scrape (1) or not within 2s (0).", nil, nil)
	acquiresDesc = prometheus.NewDesc("pmx_postgres_acquires_total",
		"Connections taken from the pool: one per statement or transaction sent to Postgres.", nil, nil)
	acquireWaitDesc = prometheus.NewDesc("pmx_postgres_acquire_wait_seconds_total",
		"Time spent waiting for a pooled connection, summed over every acquire.", nil, nil)
	connsDesc = prometheus.NewDesc("pmx_postgres_connections",
		"Connections of the pool, by state (acquired: in use; idle).", []string{"state"}, nil)
)

// Collector is the store's metrics, read at each scrape: whether Postgres answers (what the
// PostgresUnreachable alert watches, from every process that uses it) and its connection pool's
// round trips and waits.
func (s *Store) Collector() prometheus.Collector { return collector{s} }

type collector struct{ s *Store }

func (collector) Describe(ch chan<- *prometheus.Desc) {
	ch <- upDesc
	ch <- acquiresDesc
	ch <- acquireWaitDesc
	ch <- connsDesc
}

func (c collector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), pingTimeout)
	defer cancel()
	up := 1.0
	if c.s.Ping(ctx) != nil {
		up = 0
	}
	ch <- prometheus.MustNewConstMetric(upDesc, prometheus.GaugeValue, up)
	st := c.s.Pool.Stat()
	ch <- prometheus.MustNewConstMetric(acquiresDesc, prometheus.CounterValue, float64(st.AcquireCount()))
	ch <- prometheus.MustNewConstMetric(acquireWaitDesc, prometheus.CounterValue, st.AcquireDuration().Seconds())
	ch <- prometheus.MustNewConstMetric(connsDesc, prometheus.GaugeValue, float64(st.AcquiredConns()), "acquired")
	ch <- prometheus.MustNewConstMetric(connsDesc, prometheus.GaugeValue, float64(st.IdleConns()), "idle")
}
