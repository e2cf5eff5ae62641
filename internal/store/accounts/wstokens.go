package accounts

import (
	"context"
	"errors"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/pmx-dev/pmx/internal/kit/auth"
	"github.com/pmx-dev/pmx/internal/store/db"
)

// The live feed's single-use connection tokens (migration 017), each fetched with an API key and
// authenticating as it.

// CreateWSToken records a connection token's hash for an account and the key that fetched it,
// valid for ttl, and forgets expired ones.
func (s *Accounts) CreateWSToken(ctx context.Context, account int64, key uuid.UUID, hash []byte, ttl time.Duration) (time.Time, error) {
	var expires time.Time
	err := s.Pool.QueryRow(ctx, `with old as (delete from ws_tokens where expires_at < now())
		insert into ws_tokens (token_hash, account_id, key_id, expires_at) values ($1, $2, $3, now() + $4::interval)
		returning expires_at`, hash, account, key, ttl.String()).Scan(&expires)
	return expires, err
}

// UseWSToken spends a connection token: it returns the key that fetched it, for the token to
// connect with its rights, or db.ErrNotFound when the token is unknown, spent or expired. (A token
// from before keys had rights, migration 023, has no key: it has its account's full rights, as
// before.)
func (s *Accounts) UseWSToken(ctx context.Context, hash []byte) (KeyRecord, error) {
	var k KeyRecord
	var id *uuid.UUID
	var prefix *string
	var scope *auth.Scope
	var revoked *bool
	err := s.Pool.QueryRow(ctx, `with used as (
			delete from ws_tokens where token_hash = $1 and expires_at >= now() returning account_id, key_id)
		select u.account_id, k.id, k.prefix, k.revoked_at is not null, k.scope, k.expires_at, k.ip_allowlist,
			k.public_key
		from used u left join api_keys k on k.id = u.key_id`,
		hash).Scan(&k.AccountID, &id, &prefix, &revoked, &scope, &k.ExpiresAt, &k.Allowlist, &k.PublicKey)
	if errors.Is(err, pgx.ErrNoRows) {
		return k, db.ErrNotFound
	}
	k.Scope = auth.ScopeTrade
	if id != nil {
		k.ID, k.Prefix, k.Revoked, k.Scope = *id, *prefix, *revoked, *scope
	}
	return k, err
}
