package store

import (
	"context"
	"fmt"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// Move hands OPEN markets that a live shard still owns to another shard, each with a new epoch, in
// one transaction: all of them or none. It is the operator's rebalancing move where the old owner
// cannot hand the markets over itself (a shard of the release before the planned handoff, HandOver;
// controllers, docs/architecture.md §6), which moves an event's markets as one unit, so they are
// never left split over two shards, and which must not undo a move made since it looked: a market
// whose owner is no longer from (the reconciler moved it off a lost shard, another rebalance moved
// it) or that is no longer OPEN leaves every market where it is, and Move reports false. The new
// owner takes over as after a failover (§7): it loads each market on its next heartbeat, and the
// old one's commits for them fail on the epoch.
func (s *Store) Move(ctx context.Context, markets []uuid.UUID, from, to string) (moved bool, err error) {
	if len(markets) == 0 || from == to {
		return false, nil
	}
	moved, err = s.reassign(ctx, markets, to, `select count(*) from (select 1 from markets
		where id = any($1) and shard = $2 and status = 'OPEN' for update) m`, markets, from)
	if err != nil {
		return false, fmt.Errorf("while moving markets from %s to %s: %w", from, to, err)
	}
	return moved, nil
}

// HandOver is the planned move of a handoff (docs/architecture.md §6, "The planned handoff"): the
// shard from hands OPEN markets it holds to another shard, each under the next epoch, in one
// transaction — all of them or none. Only the owner itself calls it, from its batch loop with no
// batch of its own in flight, so that none of its writes to the markets can land after the move;
// epochs are the epochs it holds them under, and a market no longer from's under that epoch (or
// no longer OPEN) leaves every market where it is (moved false): the shard lost it meanwhile, and
// fencing has the rest.
func (s *Store) HandOver(ctx context.Context, markets []uuid.UUID, epochs []int64, from, to string) (moved bool, err error) {
	if len(markets) == 0 || len(markets) != len(epochs) || from == to || to == "" {
		return false, fmt.Errorf("a handoff names each market with its epoch, and another shard to go to")
	}
	moved, err = s.reassign(ctx, markets, to, `select count(*) from (select 1 from markets m
		join unnest($1::uuid[], $2::bigint[]) as h(id, epoch) on h.id = m.id and h.epoch = m.epoch
		where m.shard = $3 and m.status = 'OPEN' for update of m) o`, markets, epochs, from)
	if err != nil {
		return false, fmt.Errorf("while handing markets from %s to %s: %w", from, to, err)
	}
	return moved, nil
}

// reassign gives markets to the shard to, each under the next epoch, in one transaction, when
// owned — a query that locks the markets it finds still where the caller expects them, and counts
// them (args its parameters) — finds every one; otherwise it changes nothing and reports false.
// Locking first makes the count and the update see the same owners.
func (s *Store) reassign(ctx context.Context, markets []uuid.UUID, to string, owned string, args ...any) (moved bool, err error) {
	err = pgx.BeginFunc(ctx, s.Pool, func(tx pgx.Tx) error {
		var n int
		if err := tx.QueryRow(ctx, owned, args...).Scan(&n); err != nil {
			return err
		}
		if n != len(markets) {
			return nil
		}
		if _, err := tx.Exec(ctx, `update markets set shard = $2, epoch = epoch + 1 where id = any($1)`, markets, to); err != nil {
			return err
		}
		moved = true
		return nil
	})
	return moved, err
}
