package exchange

import (
	"context"
	"sync"

	"github.com/google/uuid"
)

// BooksReader reads many markets' books at once, each as OrderBook reads it: the distributed
// front's router reads their owners from Postgres in one query and asks each shard that owns
// some of them once, so that reading an event costs the same whatever its number of outcomes; a
// process's own shards, whose books are in memory, read them one by one (BooksOneByOne). The
// answer is in the order of markets; an error of any market is the answer's.
type BooksReader interface {
	OrderBooks(ctx context.Context, markets []uuid.UUID) ([]*Snapshot, error)
}

// booksAtOnce bounds how many books BooksOneByOne reads at once (an event has up to 50 outcomes).
const booksAtOnce = 8

// BooksOneByOne is OrderBooks for an exchange that reads each book as cheaply alone: it reads
// them with orderBook, at most booksAtOnce at a time.
func BooksOneByOne(ctx context.Context, markets []uuid.UUID,
	orderBook func(context.Context, uuid.UUID) (*Snapshot, error)) ([]*Snapshot, error) {
	snaps := make([]*Snapshot, len(markets))
	errs := make([]error, len(markets))
	sem := make(chan struct{}, booksAtOnce)
	var wg sync.WaitGroup
	for i, id := range markets {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			snaps[i], errs[i] = orderBook(ctx, id)
		})
	}
	wg.Wait()
	for _, err := range errs { // the first market's error, in the order of markets
		if err != nil {
			return nil, err
		}
	}
	return snaps, nil
}
