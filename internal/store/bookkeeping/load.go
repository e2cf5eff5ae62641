package bookkeeping

import (
	"context"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// ReportLoad records the orders per second each market took on a shard process over its recent
// window, for the operator's rebalancing (migration 028). It does nothing when another process
// has registered under the name since: that one reports its own.
func (s *Book) ReportLoad(ctx context.Context, name string, incarnation uuid.UUID, load map[uuid.UUID]float64) error {
	byID := make(map[string]float64, len(load))
	for id, rate := range load {
		byID[id.String()] = rate
	}
	_, err := s.Pool.Exec(ctx, `update shards set market_load = $3 where name = $1 and incarnation = $2`, name, incarnation, byID)
	return err
}

// ShardLoads returns the load each live shard (heartbeat within ttl) last reported, by shard and
// market; a shard that never reported is absent.
func (s *Book) ShardLoads(ctx context.Context, ttl time.Duration) (map[string]map[uuid.UUID]float64, error) {
	rows, err := s.Pool.Query(ctx, `select name, market_load from shards
		where heartbeat_at > now() - $1::interval and market_load is not null`, ttl.String())
	if err != nil {
		return nil, err
	}
	out := map[string]map[uuid.UUID]float64{}
	var name string
	var load map[string]float64
	_, err = pgx.ForEachRow(rows, []any{&name, &load}, func() error {
		byID := make(map[uuid.UUID]float64, len(load))
		for id, rate := range load {
			if u, err := uuid.Parse(id); err == nil {
				byID[u] = rate
			}
		}
		out[name] = byID
		load = nil
		return nil
	})
	return out, err
}
