package batches

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/pmx-dev/pmx/internal/store/db"
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

// ErrTooManyOrderGroups refuses a group past the most an account may keep (CreateOrderGroup).
var ErrTooManyOrderGroups = errors.New("the account keeps the most order groups it may")

// CreateOrderGroup makes a group of account's, unless it keeps max groups already
// (ErrTooManyOrderGroups; nothing made). The count is taken under a lock of the account's groups,
// so that requests at once on every front cannot together pass max.
func (s *Writer) CreateOrderGroup(ctx context.Context, account, fillLimit int64, windowSeconds, max int) (OrderGroup, error) {
	var g OrderGroup
	err := pgx.BeginFunc(ctx, s.Pool, func(tx pgx.Tx) error {
		if err := db.LockOfAccount(ctx, tx, "order-groups", account); err != nil {
			return err
		}
		var n int
		if err := tx.QueryRow(ctx, `select count(*) from order_groups where account_id = $1`, account).Scan(&n); err != nil {
			return err
		}
		if n >= max {
			return ErrTooManyOrderGroups
		}
		var err error
		g, err = scanOrderGroup(tx.QueryRow(ctx, `with g as (
				insert into order_groups (id, account_id, fill_limit, window_seconds, counted_from, created_at, active_at)
				values ($1, $2, $3, $4, now(), now(), now()) returning *)
			select g.id, g.account_id, g.fill_limit, g.window_seconds, 0::bigint, g.triggered_at, g.counted_from, g.created_at from g`,
			db.NewID(), account, fillLimit, windowSeconds))
		return err
	})
	if errors.Is(err, ErrTooManyOrderGroups) {
		return g, err
	}
	if err != nil {
		return g, fmt.Errorf("while creating an order group for account %d: %w", account, err)
	}
	return g, nil
}

// OrderGroups lists account's groups, newest first: every one, at most as many as
// CreateOrderGroup lets it keep.
func (s *Writer) OrderGroups(ctx context.Context, account int64) ([]OrderGroup, error) {
	rows, err := s.Pool.Query(ctx, orderGroupSQL+` where g.account_id = $1 order by g.created_at desc, g.id desc`, account)
	if err != nil {
		return nil, fmt.Errorf("while listing the order groups of account %d: %w", account, err)
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (OrderGroup, error) { return scanOrderGroup(r) })
}

// OrderGroupsPage lists at most limit of account's groups, newest first, after the cursor (nil:
// from the newest).
func (s *Writer) OrderGroupsPage(ctx context.Context, account int64, after *db.Cursor, limit int) ([]OrderGroup, error) {
	// The cursor is a row comparison the index seeks to, written out only when there is one (as Fills).
	args := []any{account, limit}
	where := ""
	if after != nil {
		args = append(args, after.CreatedAt, after.ID)
		where = " and (g.created_at, g.id) < ($3, $4)"
	}
	rows, err := s.Pool.Query(ctx, orderGroupSQL+` where g.account_id = $1`+where+` order by g.created_at desc, g.id desc limit $2`, args...)
	if err != nil {
		return nil, fmt.Errorf("while listing the order groups of account %d: %w", account, err)
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (OrderGroup, error) { return scanOrderGroup(r) })
}

// OrderGroupIdle is how long a group with no open order may see nothing happen (made, reset, an
// order of it placed or filled, triggered) before ExpireOrderGroups deletes it.
const OrderGroupIdle = 24 * time.Hour

// expireRows bounds the groups one statement of ExpireOrderGroups deletes, so that none holds
// many locks for long.
const expireRows = 1000

// ExpireOrderGroups deletes every group in which nothing happened since cutoff (the fronts pass
// OrderGroupIdle before now) and that has no open order (expire_order_groups, migration 030), and
// answers how many.
func (s *Writer) ExpireOrderGroups(ctx context.Context, cutoff time.Time) (int, error) {
	total := 0
	for {
		var n int
		if err := s.Pool.QueryRow(ctx, `select expire_order_groups($1, $2)`, cutoff, expireRows).Scan(&n); err != nil {
			return total, fmt.Errorf("while deleting idle order groups: %w", err)
		}
		total += n
		if n < expireRows {
			return total, nil
		}
	}
}

// OrderGroupOf returns a group of account's: db.ErrNotFound for no such group and for another
// account's.
func (s *Writer) OrderGroupOf(ctx context.Context, account int64, id uuid.UUID) (OrderGroup, error) {
	g, err := scanOrderGroup(s.Pool.QueryRow(ctx, orderGroupSQL+` where g.id = $1 and g.account_id = $2`, id, account))
	if errors.Is(err, pgx.ErrNoRows) {
		return g, db.ErrNotFound
	}
	if err != nil {
		return g, fmt.Errorf("while reading order group %s: %w", id, err)
	}
	return g, nil
}

// ResetOrderGroup lets a group of account's take orders again and forgets its fills so far. The
// new version fails every batch that decided by the group as it was (migration 027).
func (s *Writer) ResetOrderGroup(ctx context.Context, account int64, id uuid.UUID) (OrderGroup, error) {
	tag, err := s.Pool.Exec(ctx, `update order_groups set triggered_at = null, counted_from = now(), active_at = now(), version = version + 1
		where id = $1 and account_id = $2`, id, account)
	if err != nil {
		return OrderGroup{}, fmt.Errorf("while resetting order group %s: %w", id, err)
	}
	if tag.RowsAffected() == 0 {
		return OrderGroup{}, db.ErrNotFound
	}
	return s.OrderGroupOf(ctx, account, id)
}

// ErrGroupHasOpenOrders refuses to delete a group an open order is in (DeleteOrderGroup).
var ErrGroupHasOpenOrders = errors.New("an open order is in the order group")

// DeleteOrderGroup deletes a group of account's that no open order is in: db.ErrNotFound for no such
// group (and for another account's), ErrGroupHasOpenOrders while an order of it is open (nothing
// changed). As expire_order_groups does (migration 030), it locks the group first, waiting for a
// batch that holds it, and looks for its open orders after, by a statement of its own that sees
// every order such a batch committed: so a group is never deleted under an order placed into it,
// and a batch that read the group before it was deleted fails at commit, runs again and refuses
// its placement as naming no group.
func (s *Writer) DeleteOrderGroup(ctx context.Context, account int64, id uuid.UUID) error {
	err := pgx.BeginFunc(ctx, s.Pool, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, `select 1 from order_groups where id = $1 and account_id = $2 for update`, id, account)
		if err != nil {
			return err
		}
		if tag.RowsAffected() == 0 {
			return db.ErrNotFound
		}
		var open bool
		if err := tx.QueryRow(ctx, `select exists (select 1 from orders where account_id = $1 and order_group_id = $2
			and status in ('OPEN', 'PARTIALLY_FILLED'))`, account, id).Scan(&open); err != nil {
			return err
		}
		if open {
			return ErrGroupHasOpenOrders
		}
		if _, err := tx.Exec(ctx, `delete from order_group_fills where group_id = $1`, id); err != nil {
			return err
		}
		_, err = tx.Exec(ctx, `delete from order_groups where id = $1`, id)
		return err
	})
	if err != nil && !errors.Is(err, db.ErrNotFound) && !errors.Is(err, ErrGroupHasOpenOrders) {
		return fmt.Errorf("while deleting order group %s: %w", id, err)
	}
	return err
}

// TriggeredGroups returns which of ids are triggered now: the shard's sweep (internal/shard/groups.go).
func (s *Writer) TriggeredGroups(ctx context.Context, ids []uuid.UUID) ([]uuid.UUID, error) {
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
