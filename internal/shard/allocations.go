package shard

import (
	"context"
	"errors"
	"slices"
	"time"

	"github.com/pmx-dev/pmx/internal/exchange"

	"github.com/pmx-dev/pmx/internal/store"
)

// Allocations (docs/architecture.md §11). The shard's views of accounts' cash are its own
// allocations of them: the free cash (and, under a maxLockedCash, the room) it holds, which only
// its batches spend, so that no row its batches write is written by another shard's. When its
// views cannot pay for a batch, it first acquires what the batch needs — from the account's
// wallet, else from other shards' allocations — in a short transaction of its own, then runs the
// batch reading what it holds (batch.go, open). An order is refused for funds only when the
// account's whole free cash, wherever it lies, could not pay for it.

// holder is the shard's name as a holder of allocations (Config.Holder).
func (s *Shard) holder() string { return s.cfg.Holder }

// allAllocated reports whether a batch's every account has an allocation row of the shard's that
// a batch of it committed (Shard.allocated): the batch's accounts' statement then writes them by
// an update alone (store.Batch.Allocated), the cheaper statement. A batch that meets an account
// for the first time since the shard started, or since a failed batch, writes them with the
// insert of the rows that do not exist; its commit adds them (committedAllocations).
func (s *Shard) allAllocated(cash []store.CashDelta) bool {
	for _, d := range cash {
		if _, ok := s.allocated[d.Account]; !ok {
			return false
		}
	}
	return true
}

// committedAllocations records, once a batch has committed, that the shard's allocation row of
// each of its accounts exists (a new one starting afresh past maxCashViews of them).
func (s *Shard) committedAllocations(cash []store.CashDelta) {
	if len(s.allocated)+len(cash) > maxCashViews {
		clear(s.allocated)
	}
	for _, d := range cash {
		s.allocated[d.Account] = struct{}{}
	}
}

// acquire moves to the shard's allocations what the commands' placements and amends need, for
// every account whose view cannot pay for them or that the views do not know, and takes what it
// leaves into the views. An account the allocation already pays for is only read. It marks
// exhausted the accounts whose cash it found short: all they had free is now the shard's — as of
// the acquire. Another shard's acquire may take some of it back before the batch reads its
// allocation, so the batch's read keeps the mark only if it finds no free cash of the account
// outside this shard's allocation (store.Locked.Elsewhere, accumulator.track): then a refusal for
// funds decided from that read is true as of it. (Fees made the race likely enough for
// TestPropertyDemarcation's bursts to meet it, when the mark was kept from the acquire alone.)
// Room is not marked: a refusal on maxLockedCash from a read is doubted, and the batch that runs
// again locked acquires all the room there is (Begin.AcquireAll).
func (s *Shard) acquire(ctx context.Context, conn BatchConn, cmds []*command, exhausted map[int64]exhaustion) error {
	needCash, _ := s.needs(cmds)
	var need []store.Need
	for account, c := range needCash {
		have, known := s.cash[account]
		r := s.risk[account]
		if known && have >= c && (r.MaxLockedCash == store.NoLimit || r.Room >= c) {
			continue
		}
		need = append(need, store.Need{Account: account, Cash: c, Room: c})
	}
	if len(need) == 0 {
		return nil
	}
	began := time.Now()
	cash, risk, err := conn.Acquire(ctx, s.holder(), need, s.cfg.Spread)
	took := time.Since(began).Seconds()
	s.metrics.database.Add(took)
	if err != nil {
		return err
	}
	s.metrics.acquires.Inc()
	s.metrics.acquireSeconds.Add(took)
	s.viewAccounts(cash, risk)
	for _, n := range need {
		if cash[n.Account] < n.Cash {
			exhausted[n.Account] |= exhaustedCash
		}
	}
	return nil
}

// returnAll gives back to the wallets everything the shard holds, once it has stopped: no cash
// stays with a shard that no longer trades. A shard that cannot (the database is gone) leaves
// it; the next shard short of an account's cash takes it from the allocation.
func (s *Shard) returnAll() {
	ctx, cancel := context.WithTimeout(context.Background(), accountReadTimeout)
	defer cancel()
	conn, err := s.connection(ctx)
	if err != nil {
		s.log.Warn("could not return the accounts' cash this shard holds; other shards take it when they need it", "err", err)
		return
	}
	if _, err := conn.Return(ctx, s.holder(), nil); err != nil {
		s.log.Warn("could not return the accounts' cash this shard holds; other shards take it when they need it", "err", err)
		s.releaseConn()
	}
}

// Returning idle cash. What a shard acquired beyond an order's need (a share of the wallet) stays
// with it while it trades for the account; once the account has been idle here for idleReturn,
// the return sweep gives it back to the wallet, where any shard takes it without taking it from
// another (which would make that shard's next batch for the account run again).
const (
	returnSweep = 5 * time.Second
	idleReturn  = 10 * time.Second
)

// sweepReturns sends the return sweep command (every returnSweep, see New).
func (s *Shard) sweepReturns(ctx context.Context) {
	if err := s.do(ctx, &command{kind: cmdReturn}); err != nil && !errors.Is(err, exchange.ErrStopped) {
		s.log.Warn("the return of idle cash failed; it runs again shortly", "err", err)
	}
}

// returnIdle gives back the cash and room of the accounts no committed batch has moved for
// idleReturn, and forgets their views: the next command for one acquires again. It runs between
// batches, on the shard's connection, so it waits for no wallet another transaction holds: those
// accounts keep their views and go back at a later sweep.
func (s *Shard) returnIdle(ctx context.Context) {
	cutoff := s.cfg.Now().Add(-idleReturn)
	var idle []int64
	for a, at := range s.used {
		if at.Before(cutoff) {
			idle = append(idle, a)
		}
	}
	if len(idle) == 0 {
		return
	}
	slices.Sort(idle)
	conn, err := s.connection(ctx)
	if err != nil {
		s.log.Debug("could not return idle cash", "err", err)
		return
	}
	busy, err := conn.ReturnIdle(ctx, s.holder(), idle)
	if err != nil {
		s.log.Debug("could not return idle cash", "err", err)
		s.releaseConn()
		return
	}
	for _, a := range idle {
		if slices.Contains(busy, a) {
			continue // its wallet was held (another shard's acquire): kept, and returned by a later sweep
		}
		delete(s.used, a)
		delete(s.cash, a)
		delete(s.risk, a)
	}
}
