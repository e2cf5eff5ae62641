package shard

import (
	"context"
	"fmt"
	"slices"
)

// CheckBooks compares every book the shard holds with a rebuild from Postgres and reports the
// first difference: after every commit the two must be equal, order for order.
func (s *Shard) CheckBooks(ctx context.Context) error {
	c := &command{kind: cmdCheck}
	if err := s.do(ctx, c); err != nil {
		return err
	}
	return c.checkErr
}

// checkBooks runs on the loop goroutine, between batches.
func (s *Shard) checkBooks(ctx context.Context) error {
	for id, m := range s.markets {
		if m.book == nil {
			continue
		}
		fresh, err := s.load(ctx, id)
		if err != nil {
			return err
		}
		mem, db := m.book.Resting(nil), fresh.book.Resting(nil)
		if !slices.Equal(mem, db) {
			return fmt.Errorf("market %s: the book in memory holds %d orders %v, a rebuild from Postgres %d orders %v",
				id, len(mem), mem, len(db), db)
		}
		if m.book.LastTradePrice() != fresh.book.LastTradePrice() || m.lastTrade != fresh.lastTrade {
			return fmt.Errorf("market %s: memory has last price %d, trade sequence %d; Postgres %d, %d", id,
				m.book.LastTradePrice(), m.lastTrade, fresh.book.LastTradePrice(), fresh.lastTrade)
		}
		// The order counter is where a rebuild continues it: after every number an order took,
		// the priorities amends gave to orders that have since ended included.
		if m.lastOrder != fresh.lastOrder {
			return fmt.Errorf("market %s: memory's order sequence is at %d; Postgres's last number taken is %d",
				id, m.lastOrder, fresh.lastOrder)
		}
	}
	return nil
}
