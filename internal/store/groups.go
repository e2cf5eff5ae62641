package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// Order groups (migration 027): the front creates, shows and resets them here; the shards read
// them with their batches (GroupState, Begin.Groups) and write what they did to them with their
// commits (GroupDelta, Batch.Groups), which the database guards. internal/shard/groups.go owns the
// rule.

// OrderGroup is a group as GET /order-groups shows it: its limits, and the shares its orders
// filled within the window ending now, since it was made or last reset.
type OrderGroup struct {
	ID            uuid.UUID
	AccountID     int64
	FillLimit     int64
	WindowSeconds int
	Filled        int64
	TriggeredAt   *time.Time
	CountedFrom   time.Time
	CreatedAt     time.Time
}

// windowFillsSQL is the shares group g's orders filled within its window ending at $now, since
// counted_from: the count the shard compares with fill_limit.
const windowFillsSQL = `(select coalesce(sum(f.quantity), 0)::bigint from order_group_fills f
	where f.group_id = g.id and f.at > %s - make_interval(secs => g.window_seconds) and f.at >= g.counted_from)`

var orderGroupSQL = `select g.id, g.account_id, g.fill_limit, g.window_seconds, ` + fmt.Sprintf(windowFillsSQL, "now()") +
	`, g.triggered_at, g.counted_from, g.created_at from order_groups g`

func scanOrderGroup(row pgx.Row) (OrderGroup, error) {
	var g OrderGroup
	err := row.Scan(&g.ID, &g.AccountID, &g.FillLimit, &g.WindowSeconds, &g.Filled, &g.TriggeredAt, &g.CountedFrom, &g.CreatedAt)
	return g, err
}

// CreateOrderGroup makes a group of account's.
func (s *Store) CreateOrderGroup(ctx context.Context, account, fillLimit int64, windowSeconds int) (OrderGroup, error) {
	g, err := scanOrderGroup(s.Pool.QueryRow(ctx, `with g as (
			insert into order_groups (id, account_id, fill_limit, window_seconds, counted_from, created_at)
			values ($1, $2, $3, $4, now(), now()) returning *)
		select g.id, g.account_id, g.fill_limit, g.window_seconds, 0::bigint, g.triggered_at, g.counted_from, g.created_at from g`,
		NewID(), account, fillLimit, windowSeconds))
	if err != nil {
		return g, fmt.Errorf("while creating an order group for account %d: %w", account, err)
	}
	return g, nil
}

// OrderGroups lists account's groups, newest first.
func (s *Store) OrderGroups(ctx context.Context, account int64) ([]OrderGroup, error) {
	rows, err := s.Pool.Query(ctx, orderGroupSQL+` where g.account_id = $1 order by g.created_at desc, g.id`, account)
	if err != nil {
		return nil, fmt.Errorf("while listing the order groups of account %d: %w", account, err)
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (OrderGroup, error) { return scanOrderGroup(r) })
}

// OrderGroupOf returns a group of account's: ErrNotFound for no such group and for another
// account's.
func (s *Store) OrderGroupOf(ctx context.Context, account int64, id uuid.UUID) (OrderGroup, error) {
	g, err := scanOrderGroup(s.Pool.QueryRow(ctx, orderGroupSQL+` where g.id = $1 and g.account_id = $2`, id, account))
	if errors.Is(err, pgx.ErrNoRows) {
		return g, ErrNotFound
	}
	if err != nil {
		return g, fmt.Errorf("while reading order group %s: %w", id, err)
	}
	return g, nil
}

// ResetOrderGroup lets a group of account's take orders again and forgets its fills so far. The
// new version fails every batch that decided by the group as it was (migration 027).
func (s *Store) ResetOrderGroup(ctx context.Context, account int64, id uuid.UUID) (OrderGroup, error) {
	tag, err := s.Pool.Exec(ctx, `update order_groups set triggered_at = null, counted_from = now(), version = version + 1
		where id = $1 and account_id = $2`, id, account)
	if err != nil {
		return OrderGroup{}, fmt.Errorf("while resetting order group %s: %w", id, err)
	}
	if tag.RowsAffected() == 0 {
		return OrderGroup{}, ErrNotFound
	}
	return s.OrderGroupOf(ctx, account, id)
}

// TriggeredGroups returns which of ids are triggered now: the shard's sweep (internal/shard/groups.go).
func (s *Store) TriggeredGroups(ctx context.Context, ids []uuid.UUID) ([]uuid.UUID, error) {
	rows, err := s.Pool.Query(ctx, `select id from order_groups where id = any($1) and triggered_at is not null`, uuidArray(ids))
	if err != nil {
		return nil, fmt.Errorf("while reading which order groups are triggered: %w", err)
	}
	return pgx.CollectRows(rows, pgx.RowTo[uuid.UUID])
}

// GroupState is what a batch reads of a group: enough to decide its orders and count its fills.
type GroupState struct {
	Account   int64
	FillLimit int64
	Filled    int64 // within the window ending at the batch's time, since counted_from
	Triggered bool
	Version   int64
}

// GroupDelta is what a batch did to a group: Filled shares of its orders filled, Trigger when the
// batch triggered it, decided by the state of Version. A delta with neither only placed orders into
// the group, which commits only while it is not triggered.
type GroupDelta struct {
	ID      uuid.UUID
	Version int64
	Filled  int64
	Trigger bool
}

// queueGroups queues the read (with lock, locks the rows) of the groups a batch names, at its time now.
func queueGroups(q *pgx.Batch, ids []uuid.UUID, now time.Time, lock bool, into map[uuid.UUID]GroupState) {
	sql := `select g.id, g.account_id, g.fill_limit, ` + fmt.Sprintf(windowFillsSQL, "$2::timestamptz") + `,
		g.triggered_at is not null, g.version from order_groups g where g.id = any($1)`
	if lock {
		sql += ` order by g.id for update`
	}
	q.Queue(sql, uuidArray(ids), now).Query(func(rows pgx.Rows) error {
		for rows.Next() {
			var id uuid.UUID
			var g GroupState
			if err := rows.Scan(&id, &g.Account, &g.FillLimit, &g.Filled, &g.Triggered, &g.Version); err != nil {
				return err
			}
			into[id] = g
		}
		return rows.Err()
	})
}

// queueGroupDeltas queues the guarded write of what a batch did to groups (order_groups_commit).
func queueGroupDeltas(q *pgx.Batch, b *Batch) {
	if len(b.Groups) == 0 {
		return
	}
	n := len(b.Groups)
	ids, versions, filled, trig := make([][16]byte, n), make([]int64, n), make([]int64, n), make([]bool, n)
	for i, d := range b.Groups {
		ids[i], versions[i], filled[i], trig[i] = d.ID, d.Version, d.Filled, d.Trigger
	}
	q.Queue(`select order_groups_commit($1, $2, $3, $4, $5)`, b.Now, ids, versions, filled, trig)
}
