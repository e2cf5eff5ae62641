package apiserver

import (
	"context"
	"time"

	"github.com/google/uuid"

	"github.com/pmx-dev/pmx/engine"
	"github.com/pmx-dev/pmx/internal/domain"
	"github.com/pmx-dev/pmx/internal/eventrec"
	"github.com/pmx-dev/pmx/internal/kit/httpkit"
	"github.com/pmx-dev/pmx/internal/kit/ratelimit"
	"github.com/pmx-dev/pmx/internal/market/marketspec"
	"github.com/pmx-dev/pmx/internal/pages/marketpages"
	"github.com/pmx-dev/pmx/internal/pages/settings"
	"github.com/pmx-dev/pmx/internal/records"
	"github.com/pmx-dev/pmx/internal/store"
	"github.com/pmx-dev/pmx/internal/store/accounts"
	"github.com/pmx-dev/pmx/internal/store/batches"
	"github.com/pmx-dev/pmx/internal/store/db"
	"github.com/pmx-dev/pmx/internal/store/feedlog"
	"github.com/pmx-dev/pmx/internal/store/markets"
)

// The front names what it asks of the database as the small interfaces below, grouped by the
// store's concerns (accounts and keys, reads of markets, events and accounts' orders, the batch
// writer's rows outside a batch, the feed log), rather than taking the whole store: the commands
// that serve it (internal/cmd/api, internal/cmd/dev) and the test harnesses hand it *store.Store,
// which has them all. Its background work takes the smallest of them: the key cache
// KeyRevocations, the last-use writer KeyUses, the presence of cancel-on-disconnect connections
// Presence, the feed's hub FeedLog. The rows they are spelt in are their concerns'
// (accounts.KeyRecord, batches.OrderGroup, ...); the cursor (store.Cursor) and the errors
// (store.ErrNotFound, ...) the aggregate's.

// Store is everything the front asks of the database (Config.Store).
type Store interface {
	// Ping is the readiness check (/readyz).
	httpkit.Pinger
	// RateTake is the accounts' rate limits (package ratelimit).
	ratelimit.Store
	Accounts
	Keys
	KeyRevocations
	KeyUses
	MarketRows
	EventRows
	SeriesRows
	AccountReads
	BatchRows
	FeedLog
	Presence
	Halts
	// The pages the front serves read through it (package settings, package marketpages).
	settings.Store
	marketpages.Store
}

// Accounts are accounts' rows and their risk limits (internal/store/accounts).
type Accounts interface {
	// CreateAccountWithPassword opens an account with a grant and, unless passwordHash is empty,
	// a password; a taken name, in any case, is store.ErrConflict.
	CreateAccountWithPassword(ctx context.Context, name string, grant int64, passwordHash string, now time.Time) (records.Account, error)
	Account(ctx context.Context, id int64) (records.Account, error)
	// AccountByUID returns the internal id of the account the API names uid.
	AccountByUID(ctx context.Context, uid uuid.UUID) (int64, error)
	RiskLimits(ctx context.Context, account int64) (accounts.RiskLimits, error)
	SetRiskLimits(ctx context.Context, account int64, maxPosition, maxLockedCash *int64) (accounts.RiskLimits, error)
}

// Keys are API keys and what authenticates with them: the key a request names, the WebSocket
// connection tokens a key fetches, and the signed requests seen, against replays
// (internal/store/accounts).
type Keys interface {
	// KeysByPrefix returns the keys with these prefixes, by prefix, in one statement (keyReads).
	KeysByPrefix(ctx context.Context, prefixes []string) (map[string]accounts.KeyRecord, error)
	APIKeys(ctx context.Context, account int64) ([]accounts.APIKey, error)
	APIKeyOf(ctx context.Context, account int64, id uuid.UUID) (accounts.APIKey, error)
	// CreateAPIKey stores a new key unless the account holds max active ones already
	// (store.ErrTooManyKeys).
	CreateAPIKey(ctx context.Context, k accounts.APIKey, hash []byte, max int) error
	RevokeAPIKey(ctx context.Context, account int64, id uuid.UUID, now time.Time) (prefix string, err error)
	CreateWSToken(ctx context.Context, account int64, key uuid.UUID, hash []byte, ttl time.Duration) (time.Time, error)
	// UseWSToken spends a connection token; an unknown, spent or expired one is store.ErrNotFound.
	UseWSToken(ctx context.Context, hash []byte) (accounts.KeyRecord, error)
	// FirstSignedRequest says whether a key's signed message is seen for the first time.
	FirstSignedRequest(ctx context.Context, key uuid.UUID, message []byte) (bool, error)
	SweepSignedRequests(ctx context.Context, hold time.Duration) error
}

// KeyRevocations are how the key cache hears of revoked keys (keycache.go): announced on the
// revocation channel, or asked for when announcements may have been missed.
type KeyRevocations interface {
	ListenKeys(ctx context.Context, ready func(), revoked func(prefix string)) error
	RevokedKeys(ctx context.Context, prefixes []string) ([]string, error)
}

// KeyUses records when keys were last used, for the last-use writer (keyuse.go).
type KeyUses interface {
	TouchAPIKeys(ctx context.Context, ids []uuid.UUID, at []time.Time) error
}

// MarketRows are markets' rows and what the API reads of a market: its trades and candles
// (internal/store/markets); creating one goes through marketspec.Create.
type MarketRows interface {
	marketspec.Rows
	Markets(ctx context.Context, status domain.MarketStatus) ([]records.Market, error)
	MarketsPage(ctx context.Context, status domain.MarketStatus, after *store.Cursor, limit int) ([]records.Market, error)
	Trades(ctx context.Context, market uuid.UUID, limit int) ([]records.Trade, error)
	Candles(ctx context.Context, market uuid.UUID, every time.Duration, from, to time.Time) ([]records.Candle, error)
}

// Halts are the market's, event's and exchange's halts (internal/store/markets, migration 033).
type Halts interface {
	ExchangeHalt(ctx context.Context) (halted bool, since time.Time, err error)
	SetExchangeHalted(ctx context.Context, halted bool, now time.Time) (changed bool, err error)
	SetMarketPaused(ctx context.Context, id uuid.UUID, paused bool, now time.Time) (changed bool, err error)
	SetEventPaused(ctx context.Context, id uuid.UUID, paused bool, now time.Time) (changed bool, err error)
	// The fee schedules (migration 035), trading rules versioned with the halts (fees.go).
	SetMarketFees(ctx context.Context, id uuid.UUID, fees *engine.Fees, now time.Time) (changed bool, err error)
	SetEventFees(ctx context.Context, id uuid.UUID, fees *engine.Fees, now time.Time) (changed bool, err error)
}

// EventRows are events' rows (internal/store/markets); creating one goes through eventrec.Record.
type EventRows interface {
	eventrec.Rows
	EventsPage(ctx context.Context, status domain.MarketStatus, afterAt time.Time, afterID uuid.UUID, limit int) ([]records.Event, error)
}

// SeriesRows are series' rows and their live instances, as the operator records them
// (internal/store/markets).
type SeriesRows interface {
	SeriesPage(ctx context.Context, after *store.Cursor, limit int) ([]records.Series, error)
	Series(ctx context.Context, id uuid.UUID) (records.Series, error)
	SeriesInstances(ctx context.Context, s records.Series) ([]records.SeriesInstance, error)
}

// AccountReads are what the API reads of an account's trading: its orders, positions, fills and
// settlements (internal/store/markets).
type AccountReads interface {
	Order(ctx context.Context, id uuid.UUID) (records.Order, error)
	OrderByClientID(ctx context.Context, account int64, clientOrderID string) (records.Order, error)
	Orders(ctx context.Context, f markets.OrderFilter) ([]records.Order, error)
	// AccountRestingOrders are an account's resting orders in one market.
	AccountRestingOrders(ctx context.Context, account int64, market uuid.UUID) ([]records.Order, error)
	// RestingMarkets are the markets an account has resting orders in.
	RestingMarkets(ctx context.Context, account int64) ([]uuid.UUID, error)
	Positions(ctx context.Context, account int64) ([]records.Position, error)
	Fills(ctx context.Context, account int64, market *uuid.UUID, after *store.Cursor, limit int) ([]records.Fill, error)
	// Fees sums an account's fees and rebates over its fills in a period (GET /account/fees).
	Fees(ctx context.Context, account int64, since, until time.Time) (markets.FeeTotals, error)
	Settlements(ctx context.Context, account int64, after *store.Cursor, limit int) ([]records.AccountSettlement, error)
}

// BatchRows are the batch writer's rows that the front writes or reads outside a batch: order
// groups, the dead-man switch, conversions (internal/store/batches).
type BatchRows interface {
	// CreateOrderGroup makes a group unless the account keeps max already
	// (store.ErrTooManyOrderGroups).
	CreateOrderGroup(ctx context.Context, account, fillLimit int64, windowSeconds, max int) (batches.OrderGroup, error)
	OrderGroupOf(ctx context.Context, account int64, id uuid.UUID) (batches.OrderGroup, error)
	OrderGroups(ctx context.Context, account int64) ([]batches.OrderGroup, error)
	OrderGroupsPage(ctx context.Context, account int64, after *store.Cursor, limit int) ([]batches.OrderGroup, error)
	ResetOrderGroup(ctx context.Context, account int64, id uuid.UUID) (batches.OrderGroup, error)
	// DeleteOrderGroup deletes a group without open orders (store.ErrGroupHasOpenOrders).
	DeleteOrderGroup(ctx context.Context, account int64, id uuid.UUID) error
	// ExpireOrderGroups deletes the groups idle since cutoff without open orders.
	ExpireOrderGroups(ctx context.Context, cutoff time.Time) (int, error)
	ArmHeartbeat(ctx context.Context, account int64, timeout time.Duration) (batches.Heartbeat, error)
	ConversionByRequest(ctx context.Context, account int64, clientRequestID string) (records.Conversion, error)
}

// FeedLog is the feeds' log, which the hub reads what it did not see live from (feedlog.go) and
// GET /account/events reads (internal/store/feedlog).
type FeedLog interface {
	EventsAfter(ctx context.Context, market uuid.UUID, after int64, limit int) ([]db.EventBatch, error)
	FirstEvent(ctx context.Context, market uuid.UUID) (int64, error)
	MarketsChanged(ctx context.Context, since time.Time) ([]feedlog.MarketSeq, error)
	ExchangeHalted(ctx context.Context) (bool, error)
	AccountEventsAfter(ctx context.Context, account int64, after map[string]int64, limit int, upTo map[string]int64) ([]db.AccountEvents, error)
	AccountFeed(ctx context.Context, account int64) ([]db.AccountStream, error)
	AccountSeqs(ctx context.Context, accounts []int64) (map[int64]map[string]int64, error)
}

// Presence is this front's record of its cancel-on-disconnect connections (presence.go;
// internal/store/feedlog).
type Presence interface {
	TouchPresence(ctx context.Context, front uuid.UUID, accounts []int64) error
	WithdrawPresence(ctx context.Context, front uuid.UUID, account int64) error
	// LeavePresence records that this front holds no more of the account's connections and,
	// when no other front does, cancels its open orders, saying whether it did.
	LeavePresence(ctx context.Context, front uuid.UUID, account int64, ttl time.Duration) (bool, error)
	SweepPresence(ctx context.Context, ttl time.Duration) (int64, error)
}
