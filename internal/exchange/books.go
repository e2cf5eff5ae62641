package exchange

import (
	"context"

	"github.com/google/uuid"
)

// BooksReader reads many markets' books at once, each as OrderBook reads it: the distributed
// front's router, which reads their owners from Postgres in one query and asks each shard that owns
// some of them once, so that reading an event costs the same whatever its number of outcomes. The
// answer is in the order of markets; an error of any market is the answer's.
type BooksReader interface {
	OrderBooks(ctx context.Context, markets []uuid.UUID) ([]*Snapshot, error)
}
