// Package exchange is the contract between the exchange's callers and its implementation: the
// Exchange interface, the requests and answers of its calls, and the errors its callers test
// for. The front API (apiserver), the shard's internal API and the router (internal/shardclient)
// and the operator speak it; the shard (internal/shard: one Shard, or a Set of them) and the
// router implement it. It lives apart from the shard so that what speaks the contract does not
// link what carries it out — the books, the batch committer, the database driver: it imports the
// vocabulary (engine's order terms, internal/domain, the rows of internal/records) and nothing
// else, which depcheck_test.go holds it to. See docs/architecture.md §1.
package exchange

import (
	"context"
	"errors"

	"github.com/google/uuid"

	"github.com/pmx-dev/pmx/internal/domain"
	"github.com/pmx-dev/pmx/internal/records"
)

// Exchange executes market writes and serves books: one shard.Shard, a shard.Set of them (pmx
// dev, pmx shard), or in a front of the distributed exchange the router to the shard that owns
// each market (shardclient.Router). The front API and the shard's internal API serve whichever they
// are given. Every part of the contract is in it, events' and the operator's included, and every
// implementation asserts it at compile time: no caller finds a capability at run time.
type Exchange interface {
	EventLifecycle
	Converter
	OperatorManaged
	BooksReader
	QueueReader

	Place(ctx context.Context, r PlaceRequest) (records.PlacedOrder, error)
	Cancel(ctx context.Context, r CancelRequest) (records.Order, error)
	Amend(ctx context.Context, r AmendRequest) (records.PlacedOrder, error)
	// PlaceMany and CancelMany run each market's requests together, in order, in one batch; each
	// request is answered on its own.
	PlaceMany(ctx context.Context, rs []PlaceRequest) []PlaceResult
	CancelMany(ctx context.Context, rs []CancelRequest) []CancelResult
	CancelAll(ctx context.Context, account int64, markets []uuid.UUID) ([]records.Order, error)
	Transition(ctx context.Context, market uuid.UUID, action domain.MarketAction) error
	OrderBook(ctx context.Context, market uuid.UUID) (*Snapshot, error)
}

// Errors that say a command could not run here or now, so that the caller may send it again
// (elsewhere). Each leaves nothing changed. A command the exchange's rules refuse fails with a
// *domain.Error instead (domain.ErrMarketNotOpen, domain.ErrInsufficientFunds, ...).
var (
	ErrStopped     = errors.New("shard is shutting down")
	ErrNotOwner    = errors.New("this shard does not own the market")
	ErrUnavailable = errors.New("the database could not commit; try again")
)

// ErrOutcomeUnknown is a write the exchange may or may not have carried out: the answer of the
// shard it was sent to was lost (shardclient.Router).
var ErrOutcomeUnknown = errors.New("the shard did not answer; the request may have been carried out")

// ErrManagedByOperator answers market administration in distributed mode, where Market resources
// are the one way to manage markets (shardclient.Router's Transition).
var ErrManagedByOperator = errors.New("markets and events are managed by the operator here: apply or edit their Market and Event resources with kubectl")

// OperatorManaged says whether an Exchange's markets and events are Market and Event resources
// (the distributed front): where ManagedByOperator reports so, the admin API creates neither (a row
// it wrote would be scheduled by nobody), answering ErrManagedByOperator.
type OperatorManaged interface {
	ManagedByOperator() bool
}
