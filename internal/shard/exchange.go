package shard

import (
	"context"

	"github.com/google/uuid"

	"github.com/pmx-dev/pmx/internal/exchange"
)

// A Shard, and a Set of them, carry out the exchange contract and the handoff.
var (
	_ exchange.Shard = (*Shard)(nil)
	_ exchange.Shard = (*Set)(nil)
)

// ManagedByOperator is false: a shard carries out whatever lifecycle change it is given; in
// distributed mode the operator is who gives them (exchange.OperatorManaged).
func (s *Shard) ManagedByOperator() bool { return false }

// ManagedByOperator is false, as a Shard's.
func (set *Set) ManagedByOperator() bool { return false }

// OrderBooks reads each market's committed book (exchange.BooksReader): from memory, one by one.
func (s *Shard) OrderBooks(ctx context.Context, markets []uuid.UUID) ([]*exchange.Snapshot, error) {
	return exchange.BooksOneByOne(ctx, markets, s.OrderBook)
}

// OrderBooks reads each market's committed book from its shard, as Shard.OrderBooks.
func (set *Set) OrderBooks(ctx context.Context, markets []uuid.UUID) ([]*exchange.Snapshot, error) {
	return exchange.BooksOneByOne(ctx, markets, set.OrderBook)
}
