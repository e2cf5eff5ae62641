package controllers

import (
	"context"

	"github.com/google/uuid"

	pmxv1 "github.com/pmx-dev/pmx/api/v1alpha1"
	"github.com/pmx-dev/pmx/internal/domain"
	"github.com/pmx-dev/pmx/internal/market"
	"github.com/pmx-dev/pmx/internal/records"
)

// EventExchange is what the Event controller asks of the exchange: a lifecycle change of a whole
// event — close, reopen, resolve to an outcome (domain.ResolveYes with the outcome's key), void
// (domain.CancelMarket) — carried out by the shard that owns all of its markets, in one
// transaction.
type EventExchange interface {
	EventTransition(ctx context.Context, event uuid.UUID, action domain.MarketAction, outcome string) error
}

// reasonEventNotRecorded: the Event's outcome markets are listed, and the event that ties them
// together is not recorded in Postgres.
const reasonEventNotRecorded pmxv1.MarketConditionReason = "EventNotRecorded"

// intentOfEvent is the part of an Event's spec that a market's intent also has: closed and
// closesAt (its resolution names an outcome, which eventNext handles).
func intentOfEvent(spec *pmxv1.EventSpec) market.Intent {
	in := market.Intent{Closed: spec.Closed}
	if spec.ClosesAt != nil {
		t := spec.ClosesAt.Time
		in.ClosesAt = &t
	}
	return in
}

// recordEvent records the event that ties the recorded outcome markets together and returns its
// id; uuid.Nil while not every market is recorded.
//
// Not wired yet: the events store (internal/event's Record) is not on this branch, so the event
// is never recorded and no lifecycle change is carried out (Ready says EventNotRecorded).
func (r *EventReconciler) recordEvent(ctx context.Context, ev *pmxv1.Event, rows []*records.Market) (uuid.UUID, error) {
	_, _, _ = ctx, ev, rows
	return uuid.Nil, nil
}

// existingEvent finds the recorded event of an Event, without recording it; uuid.Nil when there
// is none.
func (r *EventReconciler) existingEvent(ctx context.Context, ev *pmxv1.Event) (uuid.UUID, error) {
	if ev.Status.EventID != "" {
		if id, err := uuid.Parse(ev.Status.EventID); err == nil {
			return id, nil
		}
	}
	_ = ctx
	return uuid.Nil, nil
}
