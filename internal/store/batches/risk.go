package batches

import (
	"context"
	"fmt"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/pmx-dev/pmx/engine"
)

// Risk is what a batch reads of an account with its cash: the room its shard's allocation has
// under a maxLockedCash (what it may still lock), the account's self-set limits (NoLimit for none)
// and the version of the limits the allocation was last told of (migrations 024, 032). The shard
// decides refusals by them (internal/shard/risk.go).
type Risk struct {
	Room          int64
	MaxPosition   int64
	MaxLockedCash int64
	Version       int64
}

// NoLimit is a limit that is not set.
const NoLimit = -1

// allocationsQuery reads holder $2's allocations of accounts $1 with the accounts' limits, and
// (elsewhereColumn, for an unlocked read) the free cash each account has outside them — its wallet
// and every other holder's — all from one snapshot, for scanBeginAllocations: a batch's start
// (BeginBatch, which may lock the accounts' wallets against acquires and changes of limits: see
// Begin.LockAccounts; a locked batch has acquired everything, and reads 0 there). A missing
// allocation reads as nothing held, under the account's current version of its limits.
const (
	allocationsQuery = `select a.id, coalesce(al.available, 0), coalesce(al.room, 0), coalesce(a.max_position, -1),
		coalesce(a.max_locked_cash, -1), coalesce(al.risk_version, a.risk_version), %s
	from accounts a left join allocations al on al.account_id = a.id and al.holder = $2
	where a.id = any($1)`
	elsewhereColumn = `a.available + coalesce((select sum(o.available) from allocations o where o.account_id = a.id and o.holder <> $2), 0)`
)

var (
	allocationsUnlocked = fmt.Sprintf(allocationsQuery, elsewhereColumn)
	allocationsLocked   = fmt.Sprintf(allocationsQuery, "0::bigint") + ` order by a.id for share of a`
)

// scanBeginAllocations reads allocationsQuery's rows into cash, risk and elsewhere, by account id.
func scanBeginAllocations(rows pgx.Rows, cash map[int64]int64, risk map[int64]Risk, elsewhere map[int64]int64) error {
	for rows.Next() {
		var id, available, outside int64
		var r Risk
		if err := rows.Scan(&id, &available, &r.Room, &r.MaxPosition, &r.MaxLockedCash, &r.Version, &outside); err != nil {
			return err
		}
		cash[id], risk[id], elsewhere[id] = available, r, outside
	}
	return rows.Err()
}

// scanAllocations reads acquire_cash's rows into cash and risk, by account id.
func scanAllocations(rows pgx.Rows, cash map[int64]int64, risk map[int64]Risk) error {
	for rows.Next() {
		var id, available int64
		var r Risk
		if err := rows.Scan(&id, &available, &r.Room, &r.MaxPosition, &r.MaxLockedCash, &r.Version); err != nil {
			return err
		}
		cash[id], risk[id] = available, r
	}
	return rows.Err()
}

// Holding is one account's shares of one outcome of a market.
type Holding struct {
	Account  int64
	Outcome  engine.Outcome
	Quantity int64
}

// Holdings lists the positive holdings of a market, for a shard that loads it (the shares count
// toward the account's position limit).
func (s *Writer) Holdings(ctx context.Context, market uuid.UUID) ([]Holding, error) {
	rows, err := s.Pool.Query(ctx, `select account_id, outcome, quantity from positions where market_id = $1 and quantity > 0`, market)
	if err != nil {
		return nil, fmt.Errorf("while reading the holdings of market %s: %w", market, err)
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (Holding, error) {
		var h Holding
		var outcome string
		err := r.Scan(&h.Account, &outcome, &h.Quantity)
		h.Outcome, _ = engine.ParseOutcome(outcome)
		return h, err
	})
}
