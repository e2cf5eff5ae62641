package shardproto

import (
	"slices"

	"github.com/google/uuid"

	"github.com/pmx-dev/pmx/internal/domain"
)

// PathBooks reads many markets' books at once (exchange.BooksReader), for an event's read:
// one call per shard rather than one per outcome. It is new in version 1, as an optional call: a
// shard of the release before answers 404, and the front reads each book on its own (GET
// /internal/v1/book), as it did before.
const PathBooks = "/internal/v1/books"

// BooksV1 asks for the books of markets, each with the epoch Postgres records for its owner: a
// shard that holds a market under another epoch has not yet noticed a move, and answers not_owner
// for it, as GET /internal/v1/book does.
type BooksV1 struct {
	Markets []uuid.UUID `json:"markets"`
	Epochs  []int64     `json:"epochs"`
}

// BookResultV1 answers one market of a books call, in the request's order: its book, or the
// error GET /internal/v1/book would have answered for it.
type BookResultV1 struct {
	Book  *SnapshotV1 `json:"book,omitempty"`
	Error *ErrorV1    `json:"error,omitempty"`
}

// CheckBooks checks a books call: from 1 to MaxMany markets, none twice, each with its epoch.
func CheckBooks(w *BooksV1) *domain.Error {
	if e := CheckMarkets(w.Markets); e != nil {
		return e
	}
	if len(w.Epochs) != len(w.Markets) || slices.ContainsFunc(w.Epochs, func(e int64) bool { return e < 0 }) {
		return Invalid("epochs", "epochs must give each market's epoch, a whole number from 0, in the order of markets")
	}
	return nil
}
