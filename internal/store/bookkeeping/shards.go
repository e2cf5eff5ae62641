package bookkeeping

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/pmx-dev/pmx/internal/store/db"
)

// Shard is a registered matching shard.
type Shard struct {
	Name        string
	Address     string
	StartedAt   time.Time
	HeartbeatAt time.Time
	Markets     int // OPEN markets it owns
	Units       int // what they make up: markets of their own, and events (each counts once)
	// Draining is set once the process has begun to stop (Drain): it still owns and serves what it
	// has not handed over, but takes no market.
	Draining bool
	// Pool is the ShardPool the process runs in (Register; migration 038): "default" for one
	// started without --pool.
	Pool string
	// DedicatedTo is the unit (a market's id, or an event's) of the dedicated OPEN market the shard
	// owns, if any: it then takes no other (package placement).
	DedicatedTo string
}

// ErrSuperseded is the answer to a shard process whose name another process has registered
// since (or whose registration is gone): it must stop serving.
var ErrSuperseded = errors.New("another process has registered under this shard's name, or its registration is gone")

// Register records that a shard process of a pool ("" for the default pool) has started under
// name, with a new incarnation that it returns: the process is alive now, and every market
// recorded as name's moves to a new epoch under the same name. A process that comes back under its own name — a StatefulSet's pod deleted
// by force, whose old container may still be running — so fences its old incarnation: that one's
// commits fail on the epoch, it can load no market (Incarnation no longer names it), and its next
// heartbeat (Beat) tells it to stop.
func (s *Book) Register(ctx context.Context, name, address, pool string) (uuid.UUID, error) {
	incarnation := uuid.New()
	_, err := s.Pool.Exec(ctx, `with fenced as (update markets set epoch = epoch + 1 where shard = $1)
		insert into shards (name, address, started_at, heartbeat_at, incarnation, pool)
		values ($1, $2, now(), now(), $3, coalesce(nullif($4, ''), 'default'))
		on conflict (name) do update set address = excluded.address, started_at = now(), heartbeat_at = now(),
			incarnation = excluded.incarnation, draining_since = null, pool = excluded.pool`, name, address, incarnation, pool)
	if err != nil {
		return uuid.Nil, err
	}
	return incarnation, nil
}

// Beat records that the registered incarnation of a shard is alive, by the database's clock; it
// fails with ErrSuperseded when another process has registered under the name since.
func (s *Book) Beat(ctx context.Context, name, address string, incarnation uuid.UUID) error {
	tag, err := s.Pool.Exec(ctx, `update shards set address = $2, heartbeat_at = now()
		where name = $1 and incarnation = $3`, name, address, incarnation)
	if err != nil {
		return err
	}
	if tag.RowsAffected() == 0 {
		return ErrSuperseded
	}
	return nil
}

// Incarnation returns the incarnation registered under a shard's name (uuid.Nil for none).
func (s *Book) Incarnation(ctx context.Context, name string) (uuid.UUID, error) {
	var id *uuid.UUID
	err := s.Pool.QueryRow(ctx, `select incarnation from shards where name = $1`, name).Scan(&id)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return uuid.Nil, nil
	case err != nil:
		return uuid.Nil, err
	case id == nil:
		return uuid.Nil, nil
	}
	return *id, nil
}

// Unregister removes a stopping shard process and hands its markets back (owner none, epoch + 1),
// so that the operator moves them at once rather than when the heartbeat lapses. It does nothing
// when another process has registered under the name since (Register).
func (s *Book) Unregister(ctx context.Context, name string, incarnation uuid.UUID) error {
	_, err := s.Pool.Exec(ctx, `with gone as (delete from shards where name = $1 and incarnation = $2 returning name)
		update markets set shard = null, epoch = epoch + 1 where shard = (select name from gone)`, name, incarnation)
	return err
}

// LiveShards lists the shards whose last heartbeat is within ttl, by the database's clock, least
// loaded first, each with its pool and the unit it is dedicated to, if any.
func (s *Book) LiveShards(ctx context.Context, ttl time.Duration) ([]Shard, error) {
	rows, err := s.Pool.Query(ctx, `select s.name, s.address, s.started_at, s.heartbeat_at,
		(select count(*) from markets m where m.shard = s.name and m.status = 'OPEN'),
		(select count(distinct coalesce(m.event_id, m.id)) from markets m where m.shard = s.name and m.status = 'OPEN'),
		s.draining_since is not null, s.pool,
		coalesce((select coalesce(m.event_id, m.id)::text from markets m
			where m.shard = s.name and m.status = 'OPEN' and m.dedicated order by m.created_at, m.id limit 1), '')
		from shards s where s.heartbeat_at > now() - $1::interval
		order by 5, s.name`, ttl.String())
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (Shard, error) {
		var sh Shard
		err := r.Scan(&sh.Name, &sh.Address, &sh.StartedAt, &sh.HeartbeatAt, &sh.Markets, &sh.Units, &sh.Draining, &sh.Pool, &sh.DedicatedTo)
		return sh, err
	})
}

// Drain records that the process registered under a shard's name has begun to stop (migration
// 029): from now on no market is moved onto it, while it hands its own to the others. A process
// registered under the name later (Register) takes markets again.
func (s *Book) Drain(ctx context.Context, name string) error {
	_, err := s.Pool.Exec(ctx, `update shards set draining_since = coalesce(draining_since, now()) where name = $1`, name)
	return err
}

// Undrain takes a drain back (migration 029): the shard takes markets again. The operator calls it
// only for a shard it marked draining itself, to scale a ShardPool down, when the scale-down is
// undone before the shard went (controllers.ShardPoolReconciler); a process that drains because it
// is stopping (its SIGTERM) clears its drain only by registering anew.
func (s *Book) Undrain(ctx context.Context, name string) error {
	_, err := s.Pool.Exec(ctx, `update shards set draining_since = null where name = $1`, name)
	return err
}

// DedicatedUnits counts a pool's OPEN dedicated markets of their own and its events with an OPEN
// dedicated market (migration 038): each is owed a shard of its own.
func (s *Book) DedicatedUnits(ctx context.Context, pool string) (int, error) {
	var n int
	err := s.Pool.QueryRow(ctx, `select count(distinct coalesce(event_id, id)) from markets
		where status = 'OPEN' and dedicated and pool = $1`, pool).Scan(&n)
	return n, err
}

// ExpectShards records the names of the shards a pool ("" for the default pool) is to run now
// (migration 040): the ShardPool reconciler calls it at each look at a pool, with the shards its
// StatefulSet keeps, and with none when the pool is deleted, which removes the pool's row. An
// expectation unchanged writes nothing, so that calling it at every look costs one read.
func (s *Book) ExpectShards(ctx context.Context, pool string, shards []string) error {
	if len(shards) == 0 {
		if _, err := s.Pool.Exec(ctx, `delete from shard_pools where name = coalesce(nullif($1, ''), 'default')`, pool); err != nil {
			return fmt.Errorf("while removing the shards pool %q expects: %w", pool, err)
		}
		return nil
	}
	// The insert's select finds nothing to write when the row already says so: no row is locked or
	// updated then.
	_, err := s.Pool.Exec(ctx, `insert into shard_pools (name, shards)
		select coalesce(nullif($1, ''), 'default'), $2::text[]
		where not exists (select 1 from shard_pools where name = coalesce(nullif($1, ''), 'default') and shards = $2::text[])
		on conflict (name) do update set shards = excluded.shards, updated_at = now()`, pool, shards)
	if err != nil {
		return fmt.Errorf("while recording the shards pool %q expects, %v: %w", pool, shards, err)
	}
	return nil
}

// Successors lists, in the order ExpectShards recorded them, the shards a pool ("" for the default
// pool) expects, other than self, that are not live now: no process registered under the name
// with a heartbeat within ttl (by the database's clock), or one that drains. They are what a
// stopping shard of the pool may wait for, when no live shard of its pool can take its markets
// (pmx shard's handOffOnStop): shards its pool is to run that have yet to start. None when the pool
// expects nothing (no ShardPool of that name, or a release whose operator records no expectation).
func (s *Book) Successors(ctx context.Context, pool, self string, ttl time.Duration) ([]string, error) {
	rows, err := s.Pool.Query(ctx, `select e.name from shard_pools p, unnest(p.shards) with ordinality as e(name, ordinal)
		where p.name = coalesce(nullif($1, ''), 'default') and e.name <> $2
			and not exists (select 1 from shards s where s.name = e.name
				and s.heartbeat_at > now() - $3::interval and s.draining_since is null)
		order by e.ordinal`, pool, self, ttl.String())
	if err != nil {
		return nil, fmt.Errorf("while reading the shards pool %q expects: %w", pool, err)
	}
	names, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("while reading the shards pool %q expects: %w", pool, err)
	}
	return names, nil
}

// EventOwners lists the shard of each of an event's markets that has one, one entry per market.
func (s *Book) EventOwners(ctx context.Context, event uuid.UUID) ([]string, error) {
	rows, err := s.Pool.Query(ctx, `select shard from markets where event_id = $1 and shard is not null`, event)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowTo[string])
}

// Owner returns a market's owner.
func (s *Book) Owner(ctx context.Context, market uuid.UUID) (db.Ownership, error) {
	o := db.Ownership{Market: market}
	var shard *string
	err := s.Pool.QueryRow(ctx, `select shard, epoch, status from markets where id = $1`, market).Scan(&shard, &o.Epoch, &o.Status)
	if errors.Is(err, pgx.ErrNoRows) {
		return o, db.ErrNotFound
	}
	if shard != nil {
		o.Shard = *shard
	}
	return o, err
}

// Assign gives a market to a shard ("" for none) with a new epoch, unless the market is settled
// or already its own. It returns the ownership afterwards.
func (s *Book) Assign(ctx context.Context, market uuid.UUID, shard string) (db.Ownership, error) {
	var owner *string
	if shard != "" {
		owner = &shard
	}
	o := db.Ownership{Market: market}
	var got *string
	err := s.Pool.QueryRow(ctx, `with moved as (
			update markets set shard = $2, epoch = epoch + 1
			where id = $1 and shard is distinct from $2 and status in ('OPEN', 'CLOSED')
			returning shard, epoch, status)
		select shard, epoch, status from moved
		union all
		select shard, epoch, status from markets where id = $1 and not exists (select 1 from moved)`,
		market, owner).Scan(&got, &o.Epoch, &o.Status)
	if errors.Is(err, pgx.ErrNoRows) {
		return o, db.ErrNotFound
	}
	if err != nil {
		return o, fmt.Errorf("while assigning market %s to %q: %w", market, shard, err)
	}
	if got != nil {
		o.Shard = *got
	}
	return o, nil
}

// OwnedMarkets lists the markets a shard owns, with their epochs.
func (s *Book) OwnedMarkets(ctx context.Context, shard string) ([]db.Ownership, error) {
	rows, err := s.Pool.Query(ctx, `select id, epoch, status from markets where shard = $1 order by id`, shard)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (db.Ownership, error) {
		o := db.Ownership{Shard: shard}
		err := r.Scan(&o.Market, &o.Epoch, &o.Status)
		return o, err
	})
}

// ShardAddress returns the internal address a shard registered.
func (s *Book) ShardAddress(ctx context.Context, name string) (string, error) {
	var addr string
	err := s.Pool.QueryRow(ctx, `select address from shards where name = $1`, name).Scan(&addr)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", db.ErrNotFound
	}
	return addr, err
}

// Route is where a reader finds a market's book: its owner and that shard's registered address
// ("" when it has none), and, for a market that is not OPEN, whose book no shard holds, what its
// empty book answers from Postgres: its last trade's YES price and its feed sequence.
type Route struct {
	db.Ownership
	Address        string
	LastTradePrice *int
	EventSeq       int64
}

// Routes returns the routes of markets in one query, in no particular order; a market that does
// not exist has none. An event's read takes all its outcomes' routes so, rather than an Owner and
// a ShardAddress per outcome.
func (s *Book) Routes(ctx context.Context, markets []uuid.UUID) ([]Route, error) {
	rows, err := s.Pool.Query(ctx, `select m.id, m.shard, m.epoch, m.status, coalesce(s.address, ''), m.last_trade_price, m.event_seq
		from markets m left join shards s on s.name = m.shard where m.id = any($1)`, markets)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (Route, error) {
		var rt Route
		var shard *string
		var last *int16
		err := r.Scan(&rt.Market, &shard, &rt.Epoch, &rt.Status, &rt.Address, &last, &rt.EventSeq)
		if shard != nil {
			rt.Shard = *shard
		}
		if last != nil {
			p := int(*last)
			rt.LastTradePrice = &p
		}
		return rt, err
	})
}
