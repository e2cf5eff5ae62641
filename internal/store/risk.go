package store

import (
	"context"
	"errors"
	"fmt"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/pmx-dev/pmx/engine"
)

// Risk is what a batch reads of an account with its cash: the cash its open orders lock, its
// self-set limits (NoLimit for none) and their version (migration 024). The shard decides
// refusals by them (internal/shard/risk.go).
type Risk struct {
	Locked        int64
	MaxPosition   int64
	MaxLockedCash int64
	Version       int64
}

// NoLimit is a limit that is not set.
const NoLimit = -1

// riskColumns are the columns of accounts a Risk is scanned from (Risk.fields).
const riskColumns = `locked, coalesce(max_position, -1), coalesce(max_locked_cash, -1), risk_version`

func (r *Risk) fields() []any { return []any{&r.Locked, &r.MaxPosition, &r.MaxLockedCash, &r.Version} }

// AccountViews reads accounts' available cash and risk as a batch's start does (BeginBatch), but
// outside any transaction: for a shard's views of accounts it has not read yet, taken while a batch
// of its own commits (internal/shard/views.go, learnAccounts). An id with no account is left out.
func (s *Store) AccountViews(ctx context.Context, ids []int64) (map[int64]int64, map[int64]Risk, error) {
	rows, err := s.Pool.Query(ctx, accountsQuery, ids)
	if err != nil {
		return nil, nil, fmt.Errorf("while reading accounts: %w", err)
	}
	defer rows.Close()
	cash, risk := make(map[int64]int64, len(ids)), make(map[int64]Risk, len(ids))
	if err := scanAccounts(rows, cash, risk); err != nil {
		return nil, nil, fmt.Errorf("while reading accounts: %w", err)
	}
	return cash, risk, nil
}

// accountsQuery reads accounts' available cash and risk by id ($1), for scanAccounts: a batch's
// start (BeginBatch, which may lock them) and a shard's views (AccountViews).
const accountsQuery = `select id, available, ` + riskColumns + ` from accounts where id = any($1)`

// scanAccounts reads accountsQuery's rows into cash and risk, by account id.
func scanAccounts(rows pgx.Rows, cash map[int64]int64, risk map[int64]Risk) error {
	for rows.Next() {
		var id, available int64
		var r Risk
		if err := rows.Scan(append([]any{&id, &available}, r.fields()...)...); err != nil {
			return err
		}
		cash[id], risk[id] = available, r
	}
	return rows.Err()
}

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
	select a.max_position, a.max_locked_cash, a.locked, e.market_id, e.outcome::text, coalesce(e.q, 0)
	from accounts a left join lateral (select * from exposure order by q desc, market_id, outcome limit 1) e on true
	where a.id = $1`

// RiskLimits returns an account's limits and what it uses of them.
func (s *Store) RiskLimits(ctx context.Context, account int64) (RiskLimits, error) {
	var r RiskLimits
	err := s.Pool.QueryRow(ctx, riskLimitsSQL, account).
		Scan(&r.MaxPosition, &r.MaxLockedCash, &r.LockedCash, &r.PositionMarketID, &r.PositionOutcome, &r.Position)
	if errors.Is(err, pgx.ErrNoRows) {
		return r, ErrNotFound
	}
	if err != nil {
		return r, fmt.Errorf("while reading the risk limits of account %d: %w", account, err)
	}
	return r, nil
}

// SetRiskLimits sets an account's limits (nil: none) and returns them with what it uses. A new
// version makes every batch that decided an order of the account by the limits before fail at
// commit (migration 024), so the change holds for every order the shards decide after it.
func (s *Store) SetRiskLimits(ctx context.Context, account int64, maxPosition, maxLockedCash *int64) (RiskLimits, error) {
	tag, err := s.Pool.Exec(ctx, `update accounts set max_position = $2, max_locked_cash = $3,
		risk_version = risk_version + 1, risk_checked = risk_version + 1 where id = $1`, account, maxPosition, maxLockedCash)
	if err != nil {
		return RiskLimits{}, fmt.Errorf("while setting the risk limits of account %d: %w", account, err)
	}
	if tag.RowsAffected() == 0 {
		return RiskLimits{}, ErrNotFound
	}
	return s.RiskLimits(ctx, account)
}

// Holding is one account's shares of one outcome of a market.
type Holding struct {
	Account  int64
	Outcome  engine.Outcome
	Quantity int64
}

// Holdings lists the positive holdings of a market, for a shard that loads it (the shares count
// toward the account's position limit).
func (s *Store) Holdings(ctx context.Context, market uuid.UUID) ([]Holding, error) {
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
