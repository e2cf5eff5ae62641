package shard

import "github.com/prometheus/client_golang/prometheus"

// metrics describe the shard's group commit.
type metrics struct {
	batches  prometheus.Counter
	failures prometheus.Counter
	relocked prometheus.Counter
	size     prometheus.Histogram
	duration prometheus.Histogram
}

func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		batches: prometheus.NewCounter(prometheus.CounterOpts{Name: "pmx_shard_batches_total",
			Help: "Batches committed: each is one Postgres transaction for every command queued meanwhile."}),
		failures: prometheus.NewCounter(prometheus.CounterOpts{Name: "pmx_shard_batch_failures_total",
			Help: "Batches whose transaction failed; their books were rebuilt from Postgres."}),
		relocked: prometheus.NewCounter(prometheus.CounterOpts{Name: "pmx_shard_batches_relocked_total",
			Help: "Batches that ran without locks on what the shard believed its accounts and holdings had, found it out of date, and ran again with locks."}),
		size: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "pmx_shard_batch_commands",
			Help: "Commands per batch.", Buckets: prometheus.ExponentialBuckets(1, 2, 12)}),
		duration: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "pmx_shard_batch_seconds",
			Help: "Time to run a batch, from its first command to its commit.", Buckets: prometheus.ExponentialBuckets(0.0001, 2, 16)}),
	}
	if reg != nil {
		reg.MustRegister(m.batches, m.failures, m.relocked, m.size, m.duration)
	}
	return m
}
