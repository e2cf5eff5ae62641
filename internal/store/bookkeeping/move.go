package bookkeeping

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// HandoffTargetTTL is how recent the heartbeat of the shard markets move to must be (Move,
// HandOver): the operator's default --shard-ttl. A shard that has stopped beating, or never
// registered, would hold the markets and serve none of them until the operator noticed it lost and
// moved them again; a target the operator judges live under a longer TTL, but older than this, is
// refused, and the operator tries its move again later.
const HandoffTargetTTL = 5 * time.Second

// The refusals of Move and HandOver that leave every market where it was, for the caller to name
// other markets or another shard.
var (
	ErrTargetNotLive = errors.New("the shard to move the markets to is not live: none is registered under that name, " +
		"it is stopping, or its last heartbeat is older than " + HandoffTargetTTL.String() + "; move them to a live shard")
	ErrSplitsEvent = errors.New("the markets named are some but not all of an event's markets, " +
		"and an event's markets move together: name all of them")
)

// Move hands OPEN markets that a live shard still owns to another shard, each with a new epoch, in
// one transaction: all of them or none. It is the operator's rebalancing move where the old owner
// cannot hand the markets over itself (a shard of the release before the planned handoff, HandOver;
// controllers, docs/architecture.md §6), which moves an event's markets as one unit, so they are
// never left split over two shards, and which must not undo a move made since it looked: a market
// whose owner is no longer from (the reconciler moved it off a lost shard, another rebalance moved
// it) or that is no longer OPEN leaves every market where it is, and Move reports false. A target
// that is not live is ErrTargetNotLive, and some of an event's markets without the others
// ErrSplitsEvent, with nothing moved. The new owner takes over as after a failover (§7): it loads
// each market on its next heartbeat, and the old one's commits for them fail on the epoch.
func (s *Book) Move(ctx context.Context, markets []uuid.UUID, from, to string) (moved bool, err error) {
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
// fencing has the rest. As Move, it refuses a target that is not live (ErrTargetNotLive) and some
// of an event's markets without the others (ErrSplitsEvent).
func (s *Book) HandOver(ctx context.Context, markets []uuid.UUID, epochs []int64, from, to string) (moved bool, err error) {
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
// Locking first makes the count and the update see the same owners. It refuses a target that is
// not live and a part of an event (checkTarget, checkWhole).
func (s *Book) reassign(ctx context.Context, markets []uuid.UUID, to string, owned string, args ...any) (moved bool, err error) {
	err = pgx.BeginFunc(ctx, s.Pool, func(tx pgx.Tx) error {
		if err := checkTarget(ctx, tx, to); err != nil {
			return err
		}
		if err := checkWhole(ctx, tx, markets); err != nil {
			return err
		}
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

// checkTarget refuses a target that is not a live shard: registered, not draining (a stopping
// shard takes no market), its heartbeat within HandoffTargetTTL by the database's clock. Its row
// is locked against a delete (Unregister) until the move commits, so that a shard cannot stop
// between the check and the move and leave the markets to a name nobody serves; its heartbeats go
// on meanwhile.
func checkTarget(ctx context.Context, tx pgx.Tx, to string) error {
	var one int
	err := tx.QueryRow(ctx, `select 1 from shards where name = $1 and draining_since is null
		and heartbeat_at > now() - $2::interval for key share`, to, HandoffTargetTTL.String()).Scan(&one)
	if errors.Is(err, pgx.ErrNoRows) {
		return fmt.Errorf("shard %q: %w", to, ErrTargetNotLive)
	}
	return err
}

// checkWhole refuses markets that name some of an event's markets but not all: an event's markets
// are one unit, which a conversion needs on one shard, and so does a lifecycle change (all of them
// in one batch).
func checkWhole(ctx context.Context, tx pgx.Tx, markets []uuid.UUID) error {
	var event uuid.UUID
	var named, all int
	err := tx.QueryRow(ctx, `select event_id, count(*) filter (where id = any($1)), count(*) from markets
		where event_id in (select event_id from markets where id = any($1) and event_id is not null)
		group by event_id having count(*) filter (where id = any($1)) < count(*) limit 1`, markets).Scan(&event, &named, &all)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil
	}
	if err != nil {
		return err
	}
	return fmt.Errorf("event %s has %d markets and %d of them are named: %w", event, all, named, ErrSplitsEvent)
}
