package settings

import (
	"context"
	"time"

	"github.com/google/uuid"

	"github.com/pmx-dev/pmx/internal/records"
	"github.com/pmx-dev/pmx/internal/store/accounts"
)

// The settings pages name what they ask of the database as the small interfaces below, grouped
// by what they serve, rather than taking the whole store: the front (package apiserver) hands
// them its store, which has them all. Every one is of the accounts concern
// (internal/store/accounts), whose rows (accounts.Session, ...) they are spelt in; what opens an
// account or makes a key goes through the front instead (Accounts), which owns those rules.

// Store is everything the settings pages ask of the database (Config.Store).
type Store interface {
	SignIns
	Sessions
	AccountReads
	KeyRevocation
}

// SignIns are the sign-in and sign-up pages' records: the limits on attempts from one client and
// on one name, and the password to check.
type SignIns interface {
	// PasswordHash returns the id of the account with this name, in any case, and its password
	// hash ("" when it has none); an unknown name is store.ErrNotFound.
	PasswordHash(ctx context.Context, name string) (int64, string, error)
	RecordSignInAttempt(ctx context.Context, name, client string, now, windowStart time.Time) (accounts.SignInAttempt, error)
	DeleteSignInAttempt(ctx context.Context, id int64) error
	ClearSignInFailures(ctx context.Context, name, client string) error
	RecordSignUp(ctx context.Context, client string, now, windowStart time.Time) (accounts.SignUp, error)
	DeleteSignUp(ctx context.Context, id int64) error
}

// Sessions are the signed-in browsers, named by the hash of their cookie's token, and the key
// that signs anonymous forms.
type Sessions interface {
	CreateSession(ctx context.Context, tokenHash []byte, sess accounts.Session) error
	// UseSession returns a live session and slides its expiry; a missing or expired one is
	// store.ErrNotFound.
	UseSession(ctx context.Context, tokenHash []byte, now time.Time, idle, absolute time.Duration) (accounts.Session, error)
	DeleteSession(ctx context.Context, tokenHash []byte) error
	DeleteExpiredSessions(ctx context.Context, now time.Time) error
	FormKey(ctx context.Context) ([]byte, error)
}

// AccountReads are what the keys page shows of the signed-in account: its row, its keys and its
// resting orders.
type AccountReads interface {
	Account(ctx context.Context, id int64) (records.Account, error)
	APIKeys(ctx context.Context, account int64) ([]accounts.APIKey, error)
	OpenOrders(ctx context.Context, account int64, limit int) ([]accounts.OpenOrder, error)
}

// KeyRevocation revokes one of the account's keys, returning its prefix for the front to forget;
// a key that is not the account's, or is already revoked, is store.ErrNotFound.
type KeyRevocation interface {
	RevokeAPIKey(ctx context.Context, account int64, id uuid.UUID, now time.Time) (prefix string, err error)
}
