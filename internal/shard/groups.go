package shard

import (
	"bytes"
	"context"
	"errors"
	"maps"
	"slices"
	"time"

	"github.com/google/uuid"

	"github.com/pmx-dev/pmx/engine"
	"github.com/pmx-dev/pmx/internal/apijson"
	"github.com/pmx-dev/pmx/internal/domain"
	"github.com/pmx-dev/pmx/internal/exchange"
	"github.com/pmx-dev/pmx/internal/store"
)

// Order groups (docs/architecture.md §3, "Order groups"). An account's orders placed with an
// orderGroupId belong to that group, in whatever markets and on whatever shards they rest. When
// the shares the group's orders filled within its rolling window (since it was made or last
// reset) reach its fillLimit, the group is triggered: the command whose fills reached it finishes,
// every resting order of the group on this shard is cancelled (reason ORDER_GROUP) in the same
// batch, and the group refuses orders until it is reset.
//
// The group is the account's, shared by shards, so it is decided as the risk limits are
// (risk.go): read with the batch (store.BeginBatch) and held at commit by the database (migration
// 027). A batch that counted fills of a group commits only if no other batch changed the group
// since it read it, so fills of one group are counted one batch after another, across all shards,
// each batch from the exact count before it. Hence the bound: the group's fills in its window
// exceed fillLimit by less than what the one command that reached it filled of it; once that batch
// commits, no order of the group fills again until the reset, on any shard. A batch that did not
// see the trigger fails at commit, runs again from reads, and then cancels the group's orders
// here before it runs its commands. Resting orders of the group on a shard that trades nothing
// where they rest are cancelled by the group sweep within about groupSweep.
//
// What a batch reads of groups does not grow with the groups resting where it trades: a batch
// reads the groups its placements name (a placement into a group is decided from what Postgres
// holds now), and of the groups resting in the markets it trades in only those the shard does not
// know yet (Shard.groups: loaded, or as a batch last left them; marketState.groupsKnown). Every
// other group a command meets is decided from what the shard keeps of it, which the commit's guard
// makes as good as a read: a group another shard (or a reset) changed since has another version,
// so a batch that counted fills of it from what the shard kept fails at commit and runs again,
// locked, reading every group it may meet. What the shard keeps of a group's fills counts those
// that have since left the window, so it only ever says more than a read would: a batch that would
// trigger a group from what the shard kept runs again from a read instead (errDoubted), and
// triggers it only if the read says so.
//
// Batches that may touch a group never run from the views, and are not pipelined: so a batch that
// meets a group is built only once the batch before it has landed, and what the shard keeps of
// the group (keepGroups, as each batch lands) is what the batches before it committed.

// groupSweep is how often a shard asks Postgres whether a group with orders resting here was
// triggered on another shard.
const groupSweep = time.Second

// errNoGroupTriggered answers a group sweep that found nothing to do; it never leaves the shard.
var errNoGroupTriggered = errors.New("shard: no order group resting here was triggered")

// groupState is what a batch knows of a group: as read (store.GroupState), with what the batch
// did to it.
type groupState struct {
	store.GroupState
	fresh   bool  // read at the batch's start, not taken from what the shard kept (Shard.groups)
	filled  int64 // shares of its orders the batch filled
	placed  bool  // the batch placed an order into it
	trigger bool  // the batch triggered it
}

// rest keeps a resting order's group membership (marketState.grouped).
func (m *marketState) rest(seq int64, o *apijson.Order) {
	if o.OrderGroupID == nil {
		return
	}
	if m.grouped == nil {
		m.grouped = map[uuid.UUID]map[int64]struct{}{}
	}
	g := m.grouped[*o.OrderGroupID]
	if g == nil {
		g = map[int64]struct{}{}
		m.grouped[*o.OrderGroupID] = g
	}
	g[seq] = struct{}{}
}

// unrest forgets a resting order as it leaves the book: m.resting and its group's membership.
func (m *marketState) unrest(seq int64) {
	if o, ok := m.resting[seq]; ok && o.OrderGroupID != nil {
		if g := m.grouped[*o.OrderGroupID]; g != nil {
			delete(g, seq)
			if len(g) == 0 {
				delete(m.grouped, *o.OrderGroupID)
			}
		}
	}
	delete(m.resting, seq)
}

// groupsOf lists, in id order, the groups a batch reads as it begins: the groups its placements
// name, a group sweep's, and, of the groups with an order resting in a market it places or amends
// in (any of them may be met), those the shard does not know — or, with all (a batch run again,
// locked), every one of them.
func (s *Shard) groupsOf(cmds []*command, all bool) []uuid.UUID {
	var ids []uuid.UUID
	for _, c := range cmds {
		if c.err != nil {
			continue
		}
		var market uuid.UUID
		switch c.kind {
		case cmdPlace:
			if c.place.OrderGroupID != uuid.Nil {
				ids = append(ids, c.place.OrderGroupID)
			}
			market = c.place.Market
		case cmdAmend:
			market = c.amend.Market
		case cmdGroupSweep:
			ids = append(ids, c.groups...)
			continue
		default:
			continue
		}
		if m := s.markets[market]; m != nil && (all || !m.groupsKnown) {
			for id := range m.grouped {
				if _, known := s.groups[id]; all || !known {
					ids = append(ids, id)
				}
			}
		}
	}
	slices.SortFunc(ids, func(a, b uuid.UUID) int { return bytes.Compare(a[:], b[:]) })
	return slices.Compact(ids)
}

// involvesGroups reports whether a batch's commands may touch an order group: such a batch reads
// its groups, so it never runs from the views.
func (s *Shard) involvesGroups(cmds []*command) bool {
	for _, c := range cmds {
		if c.err != nil {
			continue
		}
		switch c.kind {
		case cmdGroupSweep:
			return true
		case cmdPlace:
			if c.place.OrderGroupID != uuid.Nil || len(s.markets[c.place.Market].groupedOrNil()) > 0 {
				return true
			}
		case cmdAmend:
			if len(s.markets[c.amend.Market].groupedOrNil()) > 0 {
				return true
			}
		}
	}
	return false
}

func (m *marketState) groupedOrNil() map[uuid.UUID]map[int64]struct{} {
	if m == nil {
		return nil
	}
	return m.grouped
}

// trackGroups takes the groups a batch read, and cancels here the resting orders of every one of
// them that is triggered: before the batch's commands run, so that none of them meets one.
func (s *Shard) trackGroups(read map[uuid.UUID]store.GroupState) {
	a := s.acc
	clear(a.groups)
	for id, g := range read {
		a.groups[id] = &groupState{GroupState: g, fresh: true}
	}
	for _, id := range slices.SortedFunc(maps.Keys(a.groups), func(a, b uuid.UUID) int { return bytes.Compare(a[:], b[:]) }) {
		if a.groups[id].Triggered {
			s.cancelGroup(id)
		}
	}
}

// checkGroup refuses a placement into a group that is not the account's or is triggered, and
// notes the placement, which the commit holds to an untriggered group.
func (s *Shard) checkGroup(account int64, id uuid.UUID) error {
	g := s.acc.groups[id] // read: the batch reads every group its placements name
	if g == nil || !g.fresh || g.Account != account {
		return domain.ErrOrderGroupNotFound
	}
	if g.Triggered {
		return domain.ErrOrderGroupTriggered
	}
	g.placed = true
	return nil
}

// groupFilled counts q shares of an order of group id filled.
func (s *Shard) groupFilled(id *uuid.UUID, q int64) {
	if id == nil {
		return
	}
	g := s.groupOf(*id)
	if g == nil {
		// groupsOf names every group whose order a command can meet; a miss is a bug, and the
		// batch must not commit a fill it could not count.
		s.log.Error("an order of an order group the batch did not read filled; the batch runs again", "group", *id)
		s.acc.doubted = true
		return
	}
	g.filled += q
}

// triggerReached triggers every group whose fills the command just run took to its limit, and
// cancels its resting orders here.
func (s *Shard) triggerReached() {
	for id, g := range s.acc.groups {
		if !g.Triggered && g.filled > 0 && g.Filled+g.filled >= g.FillLimit {
			if !g.fresh {
				// What the shard kept may count fills that have left the window since: the batch
				// runs again, reading the group, and triggers it only if the read says so.
				s.acc.doubted = true
				continue
			}
			g.Triggered, g.trigger = true, true
			s.cancelGroup(id)
		}
	}
}

// groupOf is the batch's state of group id: as read at its start, or else as the shard kept it
// (nil if neither).
func (s *Shard) groupOf(id uuid.UUID) *groupState {
	if g := s.acc.groups[id]; g != nil {
		return g
	}
	kept, ok := s.groups[id]
	if !ok {
		return nil
	}
	g := &groupState{GroupState: kept}
	s.acc.groups[id] = g
	return g
}

// keepGroups keeps, as a batch lands, what it leaves of the groups it read or met, as the commit
// left them in Postgres (order_groups_commit: a count or a trigger raises the version), for those
// with an order still resting here; and notes the markets it traded in whose every resting group
// the shard now knows.
func (s *Shard) keepGroups(a *accumulator) {
	for id, g := range a.groups {
		kept := g.GroupState
		if g.filled > 0 || g.trigger {
			kept.Version++
		}
		kept.Filled += g.filled
		if s.restsHere(id) {
			s.groups[id] = kept
		} else {
			delete(s.groups, id)
		}
	}
	for _, m := range a.touched {
		if m.groupsKnown {
			continue
		}
		m.groupsKnown = true
		for id := range m.grouped {
			if _, ok := s.groups[id]; !ok {
				m.groupsKnown = false
				break
			}
		}
	}
}

// restsHere reports whether an order of group id rests on this shard.
func (s *Shard) restsHere(id uuid.UUID) bool {
	for _, m := range s.markets {
		if len(m.grouped[id]) > 0 {
			return true
		}
	}
	return false
}

// cancelGroup cancels every resting order of a group on this shard, in every market it holds.
func (s *Shard) cancelGroup(id uuid.UUID) {
	for _, m := range s.markets {
		seqs := m.grouped[id]
		if len(seqs) == 0 || m.book == nil {
			continue
		}
		for _, seq := range slices.Sorted(maps.Keys(seqs)) {
			st, err := m.book.Cancel(engine.OrderID(seq))
			if err != nil {
				m.unrest(seq) // not in the book: nothing to cancel
				continue
			}
			s.acc.touch(m)
			s.release(m, &st, engine.ReasonOrderGroup)
		}
	}
}

// groupDeltas is what the batch did to groups, in id order (the order the commit locks them in).
func (a *accumulator) groupDeltas() []store.GroupDelta {
	out := a.batch.Groups[:0]
	for id, g := range a.groups {
		if g.filled > 0 || g.trigger || g.placed {
			out = append(out, store.GroupDelta{ID: id, Version: g.Version, Filled: g.filled, Trigger: g.trigger})
		}
	}
	slices.SortFunc(out, func(x, y store.GroupDelta) int { return bytes.Compare(x.ID[:], y.ID[:]) })
	return out
}

// restingGroups lists the groups with an order resting on this shard.
func (s *Shard) restingGroups() []uuid.UUID {
	seen := map[uuid.UUID]bool{}
	for _, m := range s.markets {
		for id := range m.grouped {
			seen[id] = true
		}
	}
	return slices.Collect(maps.Keys(seen))
}

// prepareGroupSweep finds which groups with orders resting here were triggered (on another shard:
// this one cancels them as it triggers them); the sweep's batch reads them and cancels their orders.
func (s *Shard) prepareGroupSweep(ctx context.Context, c *command) error {
	ids := s.restingGroups()
	// What the shard keeps of groups whose orders all left it (cancelled, or their markets handed
	// over) goes here; keepGroups drops only the groups a batch met.
	if len(s.groups) > 0 {
		resting := make(map[uuid.UUID]bool, len(ids))
		for _, id := range ids {
			resting[id] = true
		}
		maps.DeleteFunc(s.groups, func(id uuid.UUID, _ store.GroupState) bool { return !resting[id] })
	}
	if len(ids) == 0 {
		return errNoGroupTriggered
	}
	triggered, err := s.cfg.Store.TriggeredGroups(ctx, ids)
	if err != nil {
		return err
	}
	if len(triggered) == 0 {
		return errNoGroupTriggered
	}
	c.groups = triggered
	return nil
}

// sweepGroups sends the group sweep command (every groupSweep, see New).
func (s *Shard) sweepGroups(ctx context.Context) {
	err := s.do(ctx, &command{kind: cmdGroupSweep})
	if err != nil && !errors.Is(err, errNoGroupTriggered) && !errors.Is(err, exchange.ErrStopped) {
		s.log.Warn("the order group sweep failed; it runs again shortly", "err", err)
	}
}
