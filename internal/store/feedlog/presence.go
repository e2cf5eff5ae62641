package feedlog

import (
	"context"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// The live feed's sessions' presence (migration 017): the connections that cancel their account's
// orders when the last of them closes. Their single-use connection tokens are the keys' concern
// (internal/store/accounts/wstokens.go).

// TouchPresence records that a front holds cancel-on-disconnect connections of the accounts.
func (s *Log) TouchPresence(ctx context.Context, front uuid.UUID, accounts []int64) error {
	if len(accounts) == 0 {
		return nil
	}
	_, err := s.Pool.Exec(ctx, `insert into ws_presence (account_id, front, seen_at)
		select a, $1, now() from unnest($2::bigint[]) a
		on conflict (account_id, front) do update set seen_at = now()`, front, accounts)
	return err
}

// trip is the dead-man switch of the accounts in the query that precedes it (a CTE "gone" of
// account_id): every open order they placed until now is cancelled by the shards' sweeps.
const tripGone = `insert into heartbeats (account_id, tripped) select distinct account_id, now() from gone
	on conflict (account_id) do update set tripped = greatest(heartbeats.tripped, excluded.tripped)`

// LeavePresence records that a front holds no more cancel-on-disconnect connections of an
// account; when no other front holds one (seen within ttl), the account's open orders are
// cancelled (cancelReason HEARTBEAT). It says whether they were.
//
// It first locks the account's records (in the fronts' order, so that two ends never deadlock)
// and only then, in a statement with a new snapshot, removes this front's and looks for others':
// two fronts whose last connections close at once would otherwise each see the other's record
// still there, and neither would cancel anything.
func (s *Log) LeavePresence(ctx context.Context, front uuid.UUID, account int64, ttl time.Duration) (bool, error) {
	var tripped bool
	err := pgx.BeginFunc(ctx, s.Pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `select from ws_presence where account_id = $1 order by front for update`, account); err != nil {
			return err
		}
		tag, err := tx.Exec(ctx, `with left_ as (delete from ws_presence where account_id = $1 and front = $2),
			gone as (select $1::bigint as account_id where not exists (
				select 1 from ws_presence where account_id = $1 and front <> $2 and seen_at > now() - $3::interval))
			`+tripGone, account, front, ttl.String())
		tripped = tag.RowsAffected() > 0
		return err
	})
	return tripped, err
}

// WithdrawPresence records that a front holds no more cancel-on-disconnect connections of an
// account, as LeavePresence does, but cancels nothing even when no other front holds one: the
// last of them was closed because its API key was revoked or expired, and a key that has lost its
// authority must not act on the account by its end. The delete waits on the row locks
// LeavePresence takes, so another front's last connection ending at the same moment sees this
// record either still there (and leaves the decision to this one) or gone (and cancels).
func (s *Log) WithdrawPresence(ctx context.Context, front uuid.UUID, account int64) error {
	_, err := s.Pool.Exec(ctx, `delete from ws_presence where account_id = $1 and front = $2`, account, front)
	return err
}

// SweepPresence forgets the presence not refreshed within ttl (a front that stopped) and cancels
// the open orders of the accounts left with none. It returns how many accounts it tripped.
func (s *Log) SweepPresence(ctx context.Context, ttl time.Duration) (int64, error) {
	tag, err := s.Pool.Exec(ctx, `with stale as (delete from ws_presence where seen_at <= now() - $1::interval returning account_id),
		gone as (select account_id from stale s where not exists (
			select 1 from ws_presence p where p.account_id = s.account_id and p.seen_at > now() - $1::interval))
		`+tripGone, ttl.String())
	return tag.RowsAffected(), err
}
