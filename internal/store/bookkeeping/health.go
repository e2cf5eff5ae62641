package bookkeeping

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"
)

// ShardHealth is a registered shard as the operator's metrics report it.
type ShardHealth struct {
	Name string
	// HeartbeatAge is the time since its last heartbeat, by the database's clock.
	HeartbeatAge time.Duration
	Markets      int // OPEN markets it owns
	// Pool is its ShardPool (migration 038), Live whether its heartbeat is within the TTL asked,
	// and Orders the orders per second its markets took, as it last reported (ReportLoad).
	Pool   string
	Live   bool
	Orders float64
}

// Health is what the distributed exchange's alerts watch in Postgres: every registered shard's
// heartbeat, the OPEN markets that nobody live owns (no order in them can be matched), and those
// still OPEN past their closesAt (the operator closes them at that time).
type Health struct {
	Shards  []ShardHealth
	Unowned int // OPEN markets with no owner, or one whose heartbeat is older than the TTL asked
	Overdue int // OPEN markets whose closesAt has passed, by the database's clock
}

// Health reads the exchange's Health, a shard being live while its heartbeat is within ttl (as
// LiveShards has it). Two statements, each on indexes of OPEN markets' few columns: it runs at
// every scrape of the operator's metrics.
func (s *Book) Health(ctx context.Context, ttl time.Duration) (Health, error) {
	var h Health
	rows, err := s.Pool.Query(ctx, `select s.name, extract(epoch from now() - s.heartbeat_at)::float8,
		(select count(*) from markets m where m.shard = s.name and m.status = 'OPEN'),
		s.pool, s.heartbeat_at > now() - $1::interval,
		coalesce((select sum(l.value::float8) from jsonb_each_text(s.market_load) l), 0)
		from shards s order by s.name`, ttl.String())
	if err != nil {
		return h, err
	}
	h.Shards, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (ShardHealth, error) {
		var sh ShardHealth
		var age float64
		err := r.Scan(&sh.Name, &age, &sh.Markets, &sh.Pool, &sh.Live, &sh.Orders)
		sh.HeartbeatAge = time.Duration(age * float64(time.Second))
		return sh, err
	})
	if err != nil {
		return h, err
	}
	err = s.Pool.QueryRow(ctx, `select
		count(*) filter (where m.shard is null or not exists (
			select 1 from shards s where s.name = m.shard and s.heartbeat_at > now() - $1::interval)),
		count(*) filter (where m.closes_at <= now())
		from markets m where m.status = 'OPEN'`, ttl.String()).Scan(&h.Unowned, &h.Overdue)
	return h, err
}
