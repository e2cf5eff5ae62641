package accounts

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/pmx-dev/pmx/internal/records"
	"github.com/pmx-dev/pmx/internal/store/db"
)

// The SQL of the developer settings pages: accounts with a password, browser sessions, key
// listing and revocation, open orders and sign-in attempts (migration 002), and sign-ups (007).

// CreateAccountWithPassword opens an account with a grant of play money and, unless passwordHash
// is empty, the password hash that lets it sign in to the settings pages. A taken name, in any
// case ("ALICE" when "alice" exists), is db.ErrConflict.
func (s *Accounts) CreateAccountWithPassword(ctx context.Context, name string, grant int64, passwordHash string,
	now time.Time) (records.Account, error) {
	a := records.Account{UID: uuid.New(), Name: name, Available: grant, CreatedAt: now}
	err := s.Pool.QueryRow(ctx, `insert into accounts (uid, name, available, granted, created_at, updated_at,
		password_hash) values ($1, $2, $3, $3, $4, $4, nullif($5, '')) returning id`,
		a.UID, name, grant, now, passwordHash).Scan(&a.ID)
	if db.IsUniqueViolation(err) {
		return a, fmt.Errorf("account %q: %w", name, db.ErrConflict)
	}
	return a, err
}

// PasswordHash returns the id of the account with this name, in any case (names are unique
// whatever their case, migration 008), and its password hash, "" when it has none (accounts opened
// through the admin API). An unknown name is db.ErrNotFound.
func (s *Accounts) PasswordHash(ctx context.Context, name string) (int64, string, error) {
	var id int64
	var hash *string
	err := s.Pool.QueryRow(ctx, `select id, password_hash from accounts where lower(name) = lower($1)`, name).Scan(&id, &hash)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, "", db.ErrNotFound
	}
	if err != nil || hash == nil {
		return id, "", err
	}
	return id, *hash, nil
}

// Session is a signed-in browser. The token that names it lives only in the browser's cookie.
type Session struct {
	AccountID int64
	CSRFToken []byte
	CreatedAt time.Time
	ExpiresAt time.Time
}

// CreateSession stores a session under the hash of its token.
func (s *Accounts) CreateSession(ctx context.Context, tokenHash []byte, sess Session) error {
	_, err := s.Pool.Exec(ctx, `insert into sessions (token_hash, account_id, csrf_token, created_at, expires_at)
		values ($1, $2, $3, $4, $5)`, tokenHash, sess.AccountID, sess.CSRFToken, sess.CreatedAt, sess.ExpiresAt)
	return err
}

// UseSession returns the session with this token hash if it has not expired at now, and slides
// its expiry to now + idle, but never past its creation + absolute. A missing or expired session is
// db.ErrNotFound.
func (s *Accounts) UseSession(ctx context.Context, tokenHash []byte, now time.Time, idle, absolute time.Duration) (Session, error) {
	var sess Session
	err := s.Pool.QueryRow(ctx, `update sessions
		set expires_at = least($2 + make_interval(secs => $3), created_at + make_interval(secs => $4))
		where token_hash = $1 and expires_at > $2
		returning account_id, csrf_token, created_at, expires_at`,
		tokenHash, now, idle.Seconds(), absolute.Seconds()).
		Scan(&sess.AccountID, &sess.CSRFToken, &sess.CreatedAt, &sess.ExpiresAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return sess, db.ErrNotFound
	}
	return sess, err
}

// DeleteSession ends a session; ending one that does not exist is not an error.
func (s *Accounts) DeleteSession(ctx context.Context, tokenHash []byte) error {
	_, err := s.Pool.Exec(ctx, `delete from sessions where token_hash = $1`, tokenHash)
	return err
}

// DeleteExpiredSessions removes the sessions that expired before now.
func (s *Accounts) DeleteExpiredSessions(ctx context.Context, now time.Time) error {
	_, err := s.Pool.Exec(ctx, `delete from sessions where expires_at <= $1`, now)
	return err
}

// APIKeys lists an account's keys, revoked ones included, newest first.
func (s *Accounts) APIKeys(ctx context.Context, account int64) ([]APIKey, error) {
	rows, err := s.Pool.Query(ctx, `select id, account_id, prefix, label, scope, created_at, expires_at, ip_allowlist,
		public_key, last_used_at, revoked_at
		from api_keys where account_id = $1 order by created_at desc, id`, account)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (APIKey, error) {
		var k APIKey
		err := r.Scan(&k.ID, &k.AccountID, &k.Prefix, &k.Label, &k.Scope, &k.CreatedAt, &k.ExpiresAt, &k.Allowlist,
			&k.PublicKey, &k.LastUsedAt, &k.RevokedAt)
		return k, err
	})
}

// APIKeyOf returns one of an account's keys, revoked or not; a key that does not exist or is
// another account's is db.ErrNotFound.
func (s *Accounts) APIKeyOf(ctx context.Context, account int64, id uuid.UUID) (APIKey, error) {
	var k APIKey
	err := s.Pool.QueryRow(ctx, `select id, account_id, prefix, label, scope, created_at, expires_at, ip_allowlist,
		public_key, last_used_at, revoked_at
		from api_keys where id = $1 and account_id = $2`, id, account).Scan(&k.ID, &k.AccountID, &k.Prefix, &k.Label,
		&k.Scope, &k.CreatedAt, &k.ExpiresAt, &k.Allowlist, &k.PublicKey, &k.LastUsedAt, &k.RevokedAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return k, db.ErrNotFound
	}
	return k, err
}

// AccountByUID returns the internal id of the account the API names uid; an unknown one is
// db.ErrNotFound.
func (s *Accounts) AccountByUID(ctx context.Context, uid uuid.UUID) (int64, error) {
	var id int64
	err := s.Pool.QueryRow(ctx, `select id from accounts where uid = $1`, uid).Scan(&id)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, db.ErrNotFound
	}
	return id, err
}

// ErrTooManyKeys refuses a key past the most active keys an account may hold (CreateAPIKey).
var ErrTooManyKeys = errors.New("the account holds the most active API keys it may")

// CreateAPIKey stores a new key of an account, as InsertAPIKey does, unless the account holds max
// active keys already, neither revoked nor expired at the new key's creation (ErrTooManyKeys;
// nothing stored). The count is taken under a lock of the account's keys, so that keys made at once
// on every front cannot together pass max.
func (s *Accounts) CreateAPIKey(ctx context.Context, k APIKey, hash []byte, max int) error {
	return pgx.BeginFunc(ctx, s.Pool, func(tx pgx.Tx) error {
		if err := db.LockOfAccount(ctx, tx, "api-keys", k.AccountID); err != nil {
			return err
		}
		var n int
		err := tx.QueryRow(ctx, `select count(*) from api_keys where account_id = $1 and revoked_at is null
			and (expires_at is null or expires_at > $2)`, k.AccountID, k.CreatedAt).Scan(&n)
		if err != nil {
			return err
		}
		if n >= max {
			return ErrTooManyKeys
		}
		return insertAPIKey(ctx, tx, k, hash)
	})
}

// RevokeAPIKey revokes one of an account's keys at now and returns its prefix. A key that does not exist, belongs to
// another account or is already revoked is db.ErrNotFound, and nothing changes.
func (s *Accounts) RevokeAPIKey(ctx context.Context, account int64, id uuid.UUID, now time.Time) (prefix string, err error) {
	// The notification goes out when the revocation commits: every API replica forgets the key.
	err = s.Pool.QueryRow(ctx, `with revoked as (
			update api_keys set revoked_at = $3 where id = $1 and account_id = $2 and revoked_at is null
			returning prefix)
		select prefix, pg_notify('`+KeyChannel+`', prefix) from revoked`, id, account, now).Scan(&prefix, nil)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", db.ErrNotFound
	}
	return prefix, err
}

// OpenOrder is a resting order with its market's question, for display.
type OpenOrder struct {
	records.Order
	MarketQuestion string
}

// OpenOrders lists an account's resting orders (OPEN or PARTIALLY_FILLED), newest first, at most
// limit of them.
func (s *Accounts) OpenOrders(ctx context.Context, account int64, limit int) ([]OpenOrder, error) {
	rows, err := s.Pool.Query(ctx, `select o.id, o.market_id, o.side, o.outcome, o.price, o.quantity,
		o.filled_quantity, o.status, o.created_at, o.updated_at, o.seq, o.account_id, m.question
		from orders o join markets m on m.id = o.market_id
		where o.account_id = $1 and o.status in ('OPEN', 'PARTIALLY_FILLED')
		order by o.created_at desc, o.id desc limit $2`, account, limit)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (OpenOrder, error) {
		var o OpenOrder
		var price int16
		err := r.Scan(&o.ID, &o.MarketID, &o.Side, &o.Outcome, &price, &o.Quantity, &o.FilledQuantity,
			db.StatusColumn{To: &o.Status}, &o.CreatedAt, &o.UpdatedAt, &o.Seq, &o.AccountID, &o.MarketQuestion)
		o.Price = int(price)
		return o, err
	})
}

// SignInAttempt is a recorded sign-in attempt and the attempts of the window at the time it was
// recorded, itself included: by the same account name and by the same client, with the oldest of
// each (the window's limit lifts when the oldest leaves it); and the earlier attempts on the name
// from the same client, without this one, with the newest of them (the client is clean of the name
// when it leaves the window).
type SignInAttempt struct {
	ID             int64
	ByName         int
	ByClient       int
	OldestByName   time.Time
	OldestByClient time.Time

	EarlierByNameAndClient int
	NewestByNameAndClient  time.Time
}

// RecordSignInAttempt records an attempt to sign in as name from client at now, as a failure until
// it is deleted, and counts the attempts since windowStart. Attempts older than the window are
// deleted on the way. The attempt is committed before the count, so concurrent attempts see each
// other: of attempts racing for the last place under a limit, at most one finds itself under it.
func (s *Accounts) RecordSignInAttempt(ctx context.Context, name, client string, now, windowStart time.Time) (SignInAttempt, error) {
	var a SignInAttempt
	var q pgx.Batch
	q.Queue(`delete from sign_in_failures where at <= $1`, windowStart)
	q.Queue(`insert into sign_in_failures (name, client, at) values ($1, $2, $3) returning id`, name, client, now).
		QueryRow(func(r pgx.Row) error { return r.Scan(&a.ID) })
	if err := s.Pool.SendBatch(ctx, &q).Close(); err != nil {
		return a, fmt.Errorf("while recording a sign-in attempt: %w", err)
	}
	var byName, byClient, byBoth *time.Time
	err := s.Pool.QueryRow(ctx, `select count(*) filter (where name = $1), min(at) filter (where name = $1),
		count(*) filter (where client = $2), min(at) filter (where client = $2),
		count(*) filter (where name = $1 and client = $2 and id <> $4),
		max(at) filter (where name = $1 and client = $2 and id <> $4)
		from sign_in_failures where (name = $1 or client = $2) and at > $3`, name, client, windowStart, a.ID).
		Scan(&a.ByName, &byName, &a.ByClient, &byClient, &a.EarlierByNameAndClient, &byBoth)
	if err != nil {
		return a, fmt.Errorf("while counting sign-in attempts: %w", err)
	}
	if byName != nil {
		a.OldestByName = *byName
	}
	if byClient != nil {
		a.OldestByClient = *byClient
	}
	if byBoth != nil {
		a.NewestByNameAndClient = *byBoth
	}
	return a, nil
}

// DeleteSignInAttempt forgets one attempt: one that was refused before its password was checked.
func (s *Accounts) DeleteSignInAttempt(ctx context.Context, id int64) error {
	_, err := s.Pool.Exec(ctx, `delete from sign_in_failures where id = $1`, id)
	return err
}

// ClearSignInFailures forgets the failed attempts on an account name from one client, after a
// successful sign-in from it. Other clients' failures stay: the owner signing in must not lift the
// limits of someone guessing the password elsewhere.
func (s *Accounts) ClearSignInFailures(ctx context.Context, name, client string) error {
	_, err := s.Pool.Exec(ctx, `delete from sign_in_failures where name = $1 and client = $2`, name, client)
	return err
}

// SignUp is a recorded sign-up and the sign-ups from the same client in the window at the time it
// was recorded, itself included, with the oldest of them (the limit lifts when it leaves the window).
type SignUp struct {
	ID             int64
	ByClient       int
	OldestByClient time.Time
}

// RecordSignUp records a sign-up from client at now and counts the client's sign-ups since
// windowStart. Sign-ups older than the window are deleted on the way. As with RecordSignInAttempt,
// the sign-up is committed before the count, so that concurrent ones see each other.
func (s *Accounts) RecordSignUp(ctx context.Context, client string, now, windowStart time.Time) (SignUp, error) {
	var u SignUp
	var q pgx.Batch
	q.Queue(`delete from sign_ups where at <= $1`, windowStart)
	q.Queue(`insert into sign_ups (client, at) values ($1, $2) returning id`, client, now).
		QueryRow(func(r pgx.Row) error { return r.Scan(&u.ID) })
	if err := s.Pool.SendBatch(ctx, &q).Close(); err != nil {
		return u, fmt.Errorf("while recording a sign-up: %w", err)
	}
	err := s.Pool.QueryRow(ctx, `select count(*), min(at) from sign_ups where client = $1 and at > $2`,
		client, windowStart).Scan(&u.ByClient, &u.OldestByClient)
	if err != nil {
		return u, fmt.Errorf("while counting sign-ups: %w", err)
	}
	return u, nil
}

// DeleteSignUp forgets one sign-up: one refused before its password was hashed.
func (s *Accounts) DeleteSignUp(ctx context.Context, id int64) error {
	_, err := s.Pool.Exec(ctx, `delete from sign_ups where id = $1`, id)
	return err
}

// FormKey returns the deployment's key for signing the CSRF tokens of anonymous forms.
func (s *Accounts) FormKey(ctx context.Context) ([]byte, error) {
	var key []byte
	err := s.Pool.QueryRow(ctx, `select key from form_keys`).Scan(&key)
	return key, err
}
