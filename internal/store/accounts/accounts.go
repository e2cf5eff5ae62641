// Package accounts owns accounts and their keys in Postgres: opening accounts, with or without a
// password, and reading them; API keys (creation under a cap, revocation and its announcement,
// last use), the live feed's connection tokens and signed requests' replays; the settings pages'
// browser sessions, sign-in attempts and sign-ups; the per-account rate limits, and the limits an
// account sets on its own risk.
package accounts

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pmx-dev/pmx/internal/records"
	"github.com/pmx-dev/pmx/internal/store/db"
)

// Accounts is the exchange's accounts and keys, on its database.
type Accounts struct {
	// Pool is the connection pool every method uses (the aggregate store's).
	Pool *pgxpool.Pool
}

// New returns the accounts on pool.
func New(pool *pgxpool.Pool) *Accounts { return &Accounts{Pool: pool} }

// CreateAccount opens an account with a grant of play money and no password (no web sign-in).
// A taken name, in any case, is db.ErrConflict.
func (s *Accounts) CreateAccount(ctx context.Context, name string, grant int64, now time.Time) (records.Account, error) {
	return s.CreateAccountWithPassword(ctx, name, grant, "", now)
}

// ExchangeName is the name of the exchange's own account, where fees go and rebates come from
// (migration 035): no one can open an account of that name, since names start with a letter or a
// digit.
const ExchangeName = "pmx:exchange"

// ExchangeAccount returns the engine id of the exchange's own account.
func (s *Accounts) ExchangeAccount(ctx context.Context) (int64, error) {
	var id int64
	err := s.Pool.QueryRow(ctx, `select id from accounts where name = $1`, ExchangeName).Scan(&id)
	return id, db.NotFound(err, "the exchange's account "+ExchangeName)
}

// Account returns an account by its engine id, with its balances as account_balances (migration
// 032) reads them: its wallet and every shard's allocation, and what its open orders lock.
func (s *Accounts) Account(ctx context.Context, id int64) (records.Account, error) {
	var a records.Account
	err := s.Pool.QueryRow(ctx, `select a.id, a.uid, a.name, b.available, b.locked, a.created_at
		from accounts a join account_balances b on b.id = a.id where a.id = $1`, id).
		Scan(&a.ID, &a.UID, &a.Name, &a.Available, &a.Locked, &a.CreatedAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return a, db.ErrNotFound
	}
	return a, err
}
