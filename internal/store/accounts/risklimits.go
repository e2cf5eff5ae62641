package accounts

import (
	"context"
	"errors"
	"fmt"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/pmx-dev/pmx/internal/store/db"
)

// RiskLimits are an account's self-set limits (nil: none) and what it uses of them now.
type RiskLimits struct {
	MaxPosition   *int64
	MaxLockedCash *int64
	// Position is the largest position-if-filled the account has in any market — the shares of one
	// outcome it holds plus the remaining quantity of its open BUY orders of that outcome — with
	// the market and outcome it is in (nil when it has none).
	Position         int64
	PositionMarketID *uuid.UUID
	PositionOutcome  *string
	LockedCash       int64
}

// riskLimitsSQL reads an account's limits and use; its exposure per (market, outcome) is the rule
// internal/shard/risk.go keeps in memory, computed here from what is committed.
const riskLimitsSQL = `with exposure as (
		select market_id, outcome, sum(q)::bigint as q from (
			select market_id, outcome, quantity as q from positions where account_id = $1 and quantity > 0
			union all
			select market_id, outcome, quantity - filled_quantity from orders
			 where account_id = $1 and side = 'BUY' and status in ('OPEN', 'PARTIALLY_FILLED')
		) x group by market_id, outcome)
	select a.max_position, a.max_locked_cash, b.locked, e.market_id, e.outcome::text, coalesce(e.q, 0)
	from accounts a join account_balances b on b.id = a.id left join lateral (select * from exposure order by q desc, market_id, outcome limit 1) e on true
	where a.id = $1`

// RiskLimits returns an account's limits and what it uses of them.
func (s *Accounts) RiskLimits(ctx context.Context, account int64) (RiskLimits, error) {
	var r RiskLimits
	err := s.Pool.QueryRow(ctx, riskLimitsSQL, account).
		Scan(&r.MaxPosition, &r.MaxLockedCash, &r.LockedCash, &r.PositionMarketID, &r.PositionOutcome, &r.Position)
	if errors.Is(err, pgx.ErrNoRows) {
		return r, db.ErrNotFound
	}
	if err != nil {
		return r, fmt.Errorf("while reading the risk limits of account %d: %w", account, err)
	}
	return r, nil
}

// SetRiskLimits sets an account's limits (nil: none) and returns them with what it uses. A new
// version, written on the account and on every shard's allocation of it, makes every batch that
// decided an order of the account by the limits before fail at commit (migration 032), so the
// change holds for every order the shards decide after it. Every allocation's room goes back to
// no holder: each shard acquires its room again under the new limit (docs/architecture.md §11),
// which is what makes a lower limit exact at once.
func (s *Accounts) SetRiskLimits(ctx context.Context, account int64, maxPosition, maxLockedCash *int64) (RiskLimits, error) {
	err := pgx.BeginFunc(ctx, s.Pool, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, `update accounts set max_position = $2, max_locked_cash = $3,
			risk_version = risk_version + 1 where id = $1`, account, maxPosition, maxLockedCash)
		if err != nil {
			return err
		}
		if tag.RowsAffected() == 0 {
			return db.ErrNotFound
		}
		_, err = tx.Exec(ctx, `update allocations al set room = 0, risk_version = a.risk_version, risk_checked = a.risk_version
			from accounts a where a.id = $1 and al.account_id = a.id`, account)
		return err
	})
	if errors.Is(err, db.ErrNotFound) {
		return RiskLimits{}, err
	}
	if err != nil {
		return RiskLimits{}, fmt.Errorf("while setting the risk limits of account %d: %w", account, err)
	}
	return s.RiskLimits(ctx, account)
}
