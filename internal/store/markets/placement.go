package markets

import (
	"context"
	"fmt"

	"github.com/google/uuid"

	"github.com/pmx-dev/pmx/internal/store/db"
)

// SetMarketPlacement records the pool whose shards may serve a market ("" for the default pool)
// and whether it asked for a shard of its own (migration 038): the operator writes them from the
// market's Market (or Event) spec, and places the market by them (package placement). It reports
// whether that changed anything; an unknown market is db.ErrNotFound. It moves nothing: the
// market's owner keeps it until the operator moves it.
func (s *Rows) SetMarketPlacement(ctx context.Context, id uuid.UUID, pool string, dedicated bool) (changed bool, err error) {
	var found, updated bool
	err = s.Pool.QueryRow(ctx, `with want as (select coalesce(nullif($2, ''), 'default') as pool),
		changed as (update markets set pool = (select pool from want), dedicated = $3
			where id = $1 and (pool, dedicated) is distinct from ((select pool from want), $3) returning id)
		select exists (select 1 from markets where id = $1), exists (select 1 from changed)`, id, pool, dedicated).Scan(&found, &updated)
	if err != nil {
		return false, err
	}
	if !found {
		return false, fmt.Errorf("market %s: %w", id, db.ErrNotFound)
	}
	return updated, nil
}
