package shard

import (
	"context"
	"errors"
	"fmt"

	"github.com/google/uuid"

	"github.com/pmx-dev/pmx/internal/domain"
	"github.com/pmx-dev/pmx/internal/event"
	"github.com/pmx-dev/pmx/internal/exchange"
	"github.com/pmx-dev/pmx/internal/market"
	"github.com/pmx-dev/pmx/internal/store"
)

// An event's markets move together (package event): its close, reopen, resolution or void is one
// transition command per market, joined in one group so that they commit in one transaction
// (doGroup), the first carrying the event's own change. A market of an event refuses a transition
// of its own (domain.ErrMarketInEvent).

// eventMove is what a market's transition does as part of its event's.
type eventMove struct {
	change          *store.EventChange // on the first market's command only: the event row's change
	voidYes, voidNo int64              // a void's payout per YES and NO share (event.VoidPayout)
}

// moveEvent adds the event's change to the batch with its first market's transition.
func (s *Shard) moveEvent(c *command, plan *market.Plan) {
	if c.event != nil && c.event.change != nil {
		ch := *c.event.change
		ch.Status = plan.To
		s.acc.batch.EventChanges = append(s.acc.batch.EventChanges, ch)
	}
}

// TransitionEvent carries out an event's lifecycle action on all of its markets in one batch: close
// and reopen move them all; cancel voids them at event.VoidPayout, keeping what is left of the
// collateral on the exchange's account; resolving to outcome k resolves k's market YES and every
// other NO. Every market of the event must be this shard's. An action the event's status does not
// allow is market.ErrIllegalTransition, an unknown outcome event.ErrInvalidOutcomes.
func (s *Shard) TransitionEvent(ctx context.Context, id uuid.UUID, a domain.EventAction) error {
	e, err := s.cfg.Store.Event(ctx, id)
	if errors.Is(err, store.ErrNotFound) {
		return domain.ErrEventNotFound
	} else if err != nil {
		return err
	}
	if s.cfg.Name != "" { // a named shard moves an event only if it owns all of its markets
		ms, err := s.cfg.Store.EventMarkets(ctx, e)
		if err != nil {
			return err
		}
		for _, m := range ms {
			if m.Shard == nil || *m.Shard != s.cfg.Name {
				return fmt.Errorf("event %s's market %s is not this shard's: %w", e.ID, m.ID, exchange.ErrNotOwner)
			}
		}
	}
	action := a.Action
	if action == domain.ResolveNo {
		return fmt.Errorf("an event resolves to the outcome that wins: %w", market.ErrIllegalTransition)
	}
	if _, err := market.Transition(e.Status, action); err != nil {
		return fmt.Errorf("event %s: %w", e.ID, err)
	}
	winner := -1
	if action == domain.ResolveYes {
		for i, o := range e.Outcomes {
			if o.Key == a.Outcome {
				winner = i
			}
		}
		if winner < 0 {
			return &domain.Error{Kind: domain.Invalid, Code: event.ErrInvalidOutcomes.Code, Field: "outcome",
				Message: fmt.Sprintf("the event has no outcome %q; GET /event lists its outcomes' keys", a.Outcome)}
		}
	}
	yes, no := event.VoidPayout(len(e.Outcomes))
	change := &store.EventChange{Event: e.ID, VoidYes: yes, VoidNo: no}
	if winner >= 0 {
		change.Resolution = &e.Outcomes[winner].Key
	}
	cmds := make([]*command, len(e.Outcomes))
	for i, o := range e.Outcomes {
		mv := &eventMove{voidYes: yes, voidNo: no}
		if i == 0 {
			mv.change = change
		}
		act := action
		if winner >= 0 && i != winner {
			act = domain.ResolveNo
		}
		cmds[i] = &command{kind: cmdTransition, market: o.MarketID, action: act, event: mv}
	}
	return errors.Join(s.doGroup(ctx, cmds)...)
}
