package accounts

import (
	"context"
	"crypto/ed25519"
	"net/netip"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/pmx-dev/pmx/internal/kit/auth"
)

// KeyRecord is what authentication needs to know of an API key.
type KeyRecord struct {
	ID        uuid.UUID
	Prefix    string // its public part, by which a revocation is announced (ListenKeys)
	AccountID int64
	Hash      []byte
	Revoked   bool
	Scope     auth.Scope
	ExpiresAt *time.Time        // nil: never
	Allowlist []netip.Prefix    // nil: any address
	PublicKey ed25519.PublicKey // nil: the key's requests need no signature
}

// KeysByPrefix returns the API keys with these public prefixes, by prefix, in one statement; a
// prefix no key has is left out. The front reads the keys its requests miss in its cache this
// way, many at once (apiserver's keyReads).
func (s *Accounts) KeysByPrefix(ctx context.Context, prefixes []string) (map[string]KeyRecord, error) {
	rows, err := s.Pool.Query(ctx, `select prefix, id, account_id, hash, revoked_at is not null, scope, expires_at,
		ip_allowlist, public_key from api_keys where prefix = any($1)`, prefixes)
	if err != nil {
		return nil, err
	}
	keys := make(map[string]KeyRecord, len(prefixes))
	var k KeyRecord
	_, err = pgx.ForEachRow(rows, []any{&k.Prefix, &k.ID, &k.AccountID, &k.Hash, &k.Revoked, &k.Scope, &k.ExpiresAt,
		&k.Allowlist, &k.PublicKey}, func() error {
		keys[k.Prefix] = k
		k = KeyRecord{} // the next row's slices are its own
		return nil
	})
	return keys, err
}

// APIKey describes a stored key; the key itself is never stored.
type APIKey struct {
	ID         uuid.UUID
	AccountID  int64
	Prefix     string
	Label      string
	Scope      auth.Scope
	CreatedAt  time.Time
	ExpiresAt  *time.Time        // nil: never
	Allowlist  []netip.Prefix    // nil: any address
	PublicKey  ed25519.PublicKey // nil: the key does not sign its requests
	LastUsedAt *time.Time
	RevokedAt  *time.Time
}

// InsertAPIKey stores a new key by its public prefix and the SHA-256 hash of the whole key, however
// many the account holds (CreateAPIKey counts them).
func (s *Accounts) InsertAPIKey(ctx context.Context, k APIKey, hash []byte) error {
	return insertAPIKey(ctx, s.Pool, k, hash)
}

func insertAPIKey(ctx context.Context, q interface {
	Exec(context.Context, string, ...any) (pgconn.CommandTag, error)
}, k APIKey, hash []byte) error {
	var allow []netip.Prefix // an empty allowlist is stored as null, which is what it means
	if len(k.Allowlist) > 0 {
		allow = k.Allowlist
	}
	_, err := q.Exec(ctx, `insert into api_keys (id, account_id, prefix, hash, label, scope, created_at,
		expires_at, ip_allowlist, public_key) values ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)`,
		k.ID, k.AccountID, k.Prefix, hash, k.Label, k.Scope, k.CreatedAt, k.ExpiresAt, allow, []byte(k.PublicKey))
	return err
}

// TouchAPIKeys records when keys were last used, in one statement: the front gathers its keys'
// uses in memory and writes them at most once a minute (apiserver's keyUse), never per request.
// A time older than the one stored (another replica wrote a later use) changes nothing.
func (s *Accounts) TouchAPIKeys(ctx context.Context, ids []uuid.UUID, at []time.Time) error {
	if len(ids) == 0 {
		return nil
	}
	_, err := s.Pool.Exec(ctx, `update api_keys k set last_used_at = u.at
		from unnest($1::uuid[], $2::timestamptz[]) as u (id, at)
		where k.id = u.id and (k.last_used_at is null or k.last_used_at < u.at)`, ids, at)
	return err
}
