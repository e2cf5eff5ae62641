package shard

import (
	"context"
	"fmt"

	"github.com/pmx-dev/pmx/engine"
	"github.com/pmx-dev/pmx/internal/domain"
)

// Halts (docs/architecture.md §4, "Halts"): a market paused on its own, an event paused, or the
// whole exchange halted refuses placements and amends (domain.Halt's refusals); cancels,
// cancel-everything, GTD expiries, the dead-man switch and transitions go on. This is the one
// place that decides it, for pmx dev's in-process shards and the distributed ones alike.
//
// The halts live in Postgres (migration 033), as of a version that each change raises. The shard
// reads them when it does not know them (haltOf's caller readies them, readyHalts), decides every
// placement and amend of a batch under that version, and the batch's commit checks that the
// version is still the database's (store.Batch.Halts), under the halts' mark that every batch
// holds shared from its first statement until it commits: a change of a halt waits for such
// commits and raises the version, so a batch that committed decided under the halts as they were
// at its commit. A batch whose check fails (store.HaltsMoved) is undone like any failed batch; the
// shard forgets the halts, reads them again and runs the batch again (again, in batch.go).

// readyHalts reads the halts if the shard does not know them: before a batch that may decide a
// placement or an amend.
//
// The fee schedules (migration 035) are read with them, under the same version: every placement
// carries the schedule of its market as of the halts it was decided under (feesOf), so a change of
// a schedule, which raises the version, applies exactly to the orders of the batches that commit
// after it.
func (s *Shard) readyHalts(ctx context.Context) error {
	if s.haltsKnown {
		return nil
	}
	if s.exchange == 0 {
		id, err := s.cfg.Store.ExchangeAccount(ctx)
		if err != nil {
			return fmt.Errorf("while reading the exchange's account: %w", err)
		}
		s.exchange = id
	}
	h, err := s.cfg.Store.Halts(ctx)
	if err != nil {
		return fmt.Errorf("while reading the halts: %w", err)
	}
	s.halts, s.haltsKnown = h, true
	return nil
}

// haltOf is what halts trading in m, if anything; deciding it makes the batch check the halts'
// version at commit.
func (s *Shard) haltOf(m *marketState) *domain.Error {
	v := s.halts.Version
	s.acc.batch.Halts = &v
	return s.halts.Of(m.id, m.event).Refusal()
}

// feesOf is the fee schedule an order placed in m now carries: its own, else its event's, as of the
// halts' version the batch decides under (haltOf, which every placement calls first).
func (s *Shard) feesOf(m *marketState) engine.Fees { return s.halts.FeesOf(m.id, m.event) }

// forgetHalts makes the next batch that decides a placement or an amend read the halts again.
func (s *Shard) forgetHalts() { s.haltsKnown = false }
