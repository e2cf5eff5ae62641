package batches

import (
	"context"
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
func (s *Writer) AccountViews(ctx context.Context, ids []int64) (map[int64]int64, map[int64]Risk, error) {
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
