package shard

import "github.com/prometheus/client_golang/prometheus"

// metrics describe the shard's group commit.
type metrics struct {
	batches  prometheus.Counter
	failures prometheus.Counter
	rerun    prometheus.Counter
	read     prometheus.Counter
	// acquires counts the transactions that moved cash or room to the shard's allocations
	// (allocations.go).
	acquires prometheus.Counter
	// acquireSeconds is the time those transactions took, which the batches that needed them
	// waited (allocations.go).
	acquireSeconds prometheus.Counter
	// aside counts the acquires learnAccounts makes on a pool connection for accounts the views
	// do not know, while a batch commits (views.go); asideSeconds is what they took, which the
	// shard's loop waited.
	aside        prometheus.Counter
	asideSeconds prometheus.Counter
	// groupsRead counts the order groups batches read at their start (groups.go).
	groupsRead prometheus.Counter
	ahead      prometheus.Counter
	held       prometheus.Counter
	size       prometheus.Histogram
	duration   prometheus.Histogram
	// commit is the round trip of a batch's writes and commit alone (batch.go, send).
	commit prometheus.Histogram
	// database is the time the shard's connection spent on its batches' round trips.
	database prometheus.Counter
	// The planned handoff (handoff.go): markets handed over, and markets lost without one.
	handedOver prometheus.Counter
	fenced     prometheus.Counter
}

func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		batches: prometheus.NewCounter(prometheus.CounterOpts{Name: "pmx_shard_batches_total",
			Help: "Batches committed: each is one Postgres transaction for every command queued meanwhile."}),
		failures: prometheus.NewCounter(prometheus.CounterOpts{Name: "pmx_shard_batch_failures_total",
			Help: "Batches whose transaction failed; their books were rebuilt from Postgres."}),
		rerun: prometheus.NewCounter(prometheus.CounterOpts{Name: "pmx_shard_batches_rerun_total",
			Help: "Batches that found what they reserved from out of date (the shard's views, or a read without locks) and ran again, learning it more surely."}),
		read: prometheus.NewCounter(prometheus.CounterOpts{Name: "pmx_shard_batches_read_total",
			Help: "Batches that read what their placements reserve from at their start, because the shard's views did not show enough (or a batch ran again); the others reserve from the views and read nothing."}),
		acquires: prometheus.NewCounter(prometheus.CounterOpts{Name: "pmx_shard_acquires_total",
			Help: "Transactions that moved accounts' free cash (or room under a maxLockedCash) to this shard's allocations before a batch that needed it: from the accounts' wallets, else from other shards' allocations. Each costs the batch one round trip more."}),
		acquireSeconds: prometheus.NewCounter(prometheus.CounterOpts{Name: "pmx_shard_acquire_seconds_total",
			Help: "Seconds the acquires of pmx_shard_acquires_total took, each a round trip to Postgres in a transaction of its own: what the batches that needed them waited before they could decide. Divided by pmx_shard_acquires_total, what one costs."}),
		aside: prometheus.NewCounter(prometheus.CounterOpts{Name: "pmx_shard_acquires_aside_total",
			Help: "Acquires the shard made aside, on a connection of the pool, for accounts its views did not know yet, while a batch of its own committed, so that their commands could join the batch built meanwhile: once for each account a shard meets (again after it returned the account's idle cash, or after a failed batch). Not in pmx_shard_acquires_total. The shard's loop waits for each: most come in a shard's first seconds."}),
		asideSeconds: prometheus.NewCounter(prometheus.CounterOpts{Name: "pmx_shard_acquire_aside_seconds_total",
			Help: "Seconds the acquires of pmx_shard_acquires_aside_total took, failed ones too, which the shard's loop waited: it built no batch and answered none meanwhile."}),
		groupsRead: prometheus.NewCounter(prometheus.CounterOpts{Name: "pmx_shard_order_groups_read_total",
			Help: "Order groups batches read at their start: those their placements name, and those resting in a market they trade in that the shard does not know yet (loaded, or met again after a batch ran again). A group the shard knows is decided from what it keeps."}),
		ahead: prometheus.NewCounter(prometheus.CounterOpts{Name: "pmx_shard_commands_pipelined_total",
			Help: "Commands matched while the batch before theirs was committing, on the state it leaves."}),
		held: prometheus.NewCounter(prometheus.CounterOpts{Name: "pmx_shard_commands_held_total",
			Help: "Commands that could not join the batch built while the one before committed (a load, a check, one the views could not pay for): each waited for both batches to commit, and the shard built nothing meanwhile."}),
		size: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "pmx_shard_batch_commands",
			Help: "Commands per batch.", Buckets: prometheus.ExponentialBuckets(1, 2, 12)}),
		duration: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "pmx_shard_batch_seconds",
			Help: "Time to run a batch, from its first command to its commit.", Buckets: prometheus.ExponentialBuckets(0.0001, 2, 16)}),
		commit: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "pmx_shard_commit_seconds",
			Help:    "Time a batch's writes and commit took on the shard's connection, one round trip once the batch was built: the part of pmx_shard_batch_seconds spent in Postgres (with the wait for the WAL's flush). A batch's time far above its commit's was spent in the shard: waiting for the batch before it, or for the shard's loop.",
			Buckets: prometheus.ExponentialBuckets(0.0001, 2, 16)}),
		database: prometheus.NewCounter(prometheus.CounterOpts{Name: "pmx_shard_database_seconds_total",
			Help: "Seconds the shard waited on Postgres for its batches: each batch's writes and commit, and the read at the start of a batch that reads, one at a time on the shard's own connection. Its rate is the share of the time that connection was busy: near 1, the shard is bound by Postgres (its statements and commit flushes), not by pmx."}),
		handedOver: prometheus.NewCounter(prometheus.CounterOpts{Name: "pmx_shard_markets_handed_over_total",
			Help: "Markets this shard handed to another in a planned handoff, after committing what it had taken for them."}),
		fenced: prometheus.NewCounter(prometheus.CounterOpts{Name: "pmx_shard_fenced_total",
			Help: "Times this shard found that a market it held had moved without its part — a failover's move, not a handoff: a commit the fence refused, or the market dropped at a batch's start or a heartbeat."}),
	}
	if reg != nil {
		reg.MustRegister(m.batches, m.failures, m.rerun, m.read, m.acquires, m.acquireSeconds, m.aside, m.asideSeconds, m.groupsRead, m.ahead, m.held, m.size, m.duration, m.commit, m.database, m.handedOver, m.fenced)
	}
	return m
}
