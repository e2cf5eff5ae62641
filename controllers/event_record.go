package controllers

import (
	"context"
	"errors"
	"fmt"

	"github.com/google/uuid"
	corev1 "k8s.io/api/core/v1"

	pmxv1 "github.com/pmx-dev/pmx/api/v1alpha1"
	"github.com/pmx-dev/pmx/internal/eventrec"
	"github.com/pmx-dev/pmx/internal/exchange"
	"github.com/pmx-dev/pmx/internal/market"
	"github.com/pmx-dev/pmx/internal/market/marketspec"
	"github.com/pmx-dev/pmx/internal/records"
	"github.com/pmx-dev/pmx/internal/store"
)

// EventExchange is what the Event controller asks of the exchange: a lifecycle change of a whole
// event, carried out by the shard that owns all of its markets, in one transaction. In
// distributed mode it is the front's router to the shards (shardclient.Router, with Lifecycle set).
type EventExchange = exchange.EventLifecycle

// eventName is the name an Event's event is recorded under in Postgres: its namespace and name,
// as a Market's market is (marketName); its outcome markets' rows are then named as the Markets.
func eventName(ev *pmxv1.Event) string {
	if ev.Namespace == "" {
		return ev.Name
	}
	return ev.Namespace + "/" + ev.Name
}

// specOf is what the Event's spec defines of its event, in the form eventrec records.
func specOf(ev *pmxv1.Event) eventrec.Spec { return eventrec.SpecOf(&ev.Spec) }

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

// recordEvent creates the event and its outcomes' markets in Postgres on first sight (one
// transaction, eventrec.Record), and afterwards keeps their text and schedule equal to the spec;
// then the event's pause and fee schedule (pauseEvent, eventFees).
func (r *EventReconciler) recordEvent(ctx context.Context, ev *pmxv1.Event) (records.Event, error) {
	id := uuid.Nil
	if ev.Status.EventID != "" {
		var err error
		if id, err = uuid.Parse(ev.Status.EventID); err != nil {
			return records.Event{}, fmt.Errorf("status.eventId %q is not a UUID", ev.Status.EventID)
		}
	}
	e, created, err := eventrec.Record(ctx, r.Store, id, eventName(ev), specOf(ev), r.Clock.Now())
	if created {
		r.k8sEvent(ev, corev1.EventTypeNormal, reasonRecorded, "Record", "recorded as event %s with %d outcome markets", e.ID, len(e.Outcomes))
	}
	if err != nil {
		return e, err
	}
	if e, err = r.pauseEvent(ctx, ev, e); err != nil {
		return e, err
	}
	return r.eventFees(ctx, ev, e)
}

// pauseEvent makes the event's pause what spec.paused says (eventrec.Pause), with a Kubernetes
// event when it changes. It returns the event's row as it is afterwards.
func (r *EventReconciler) pauseEvent(ctx context.Context, ev *pmxv1.Event, e records.Event) (records.Event, error) {
	e, changed, err := eventrec.Pause(ctx, r.Store, e, ev.Spec.Paused, r.Clock.Now())
	if err != nil || !changed {
		return e, err
	}
	reason, action, note := reasonResumed, "Resume", "trading resumed in its markets"
	if ev.Spec.Paused {
		reason, action, note = reasonPaused, "Pause", "trading halted in its markets: placements and amends are refused, cancels go on"
	}
	r.k8sEvent(ev, corev1.EventTypeNormal, reason, action, "event %s: %s", e.ID, note)
	return e, nil
}

// eventFees makes the event's fee schedule what spec.fees says (eventrec.SetFees): set, changed,
// or taken away when spec.fees is unset, with a Kubernetes event when it changes. It returns the
// event's row as it is afterwards.
func (r *EventReconciler) eventFees(ctx context.Context, ev *pmxv1.Event, e records.Event) (records.Event, error) {
	e, changed, err := eventrec.SetFees(ctx, r.Store, e, ev.Spec.Fees, r.Clock.Now())
	if err != nil || !changed {
		return e, err
	}
	note := "fee schedule taken away: orders placed from now on in its markets carry their own, or none"
	if ev.Spec.Fees != nil {
		note = "orders placed from now on in its markets without a schedule of their own carry its fee schedule, " +
			marketspec.DescribeFees(marketspec.FeesOf(ev.Spec.Fees))
	}
	r.k8sEvent(ev, corev1.EventTypeNormal, reasonFeesSet, "SetFees", "event %s: %s", e.ID, note)
	return e, nil
}

// existingEvent finds the recorded event of an Event, without recording it; ok is false when
// there is none.
func (r *EventReconciler) existingEvent(ctx context.Context, ev *pmxv1.Event) (e records.Event, ok bool, err error) {
	if id, perr := uuid.Parse(ev.Status.EventID); perr == nil && ev.Status.EventID != "" {
		e, err = r.Store.Event(ctx, id)
	} else {
		e, err = r.Store.EventByName(ctx, eventName(ev))
	}
	if errors.Is(err, store.ErrNotFound) {
		return e, false, nil
	}
	return e, err == nil, err
}
