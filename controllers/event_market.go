package controllers

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	pmxv1 "github.com/pmx-dev/pmx/api/v1alpha1"
	"github.com/pmx-dev/pmx/internal/records"
)

// The Market controller's side of events: a market of an event (a Market labelled pmx.dev/event)
// is closed, reopened, resolved and cancelled only with its whole event, in one transaction of the
// event's shard, which the Event controller asks for. The Market controller never carries such a
// change out on one market; a Market whose own spec asks for one that its Event does not is
// refused, reported, and left as it is.

// reasonMarketInEvent is the reason, on the Ready condition and on a Warning event, of a lifecycle
// change refused because the market belongs to an event: the admin API's 409 code, so one search
// finds both.
const reasonMarketInEvent recordReason = "market_in_event"

// eventMarket is what the owning Event asks of a Market of an event.
type eventMarket struct {
	event string // the Event's name, in the Market's namespace
	// refused: the Market's spec asks for a lifecycle change its Event does not; why says how.
	refused bool
	why     string
}

// lifecycleOf is the closed and resolution fields that an Event's spec sets on the Market of its
// outcome key: the Event's closed, and YES for the winning outcome, NO for the others, CANCELED
// for a void event.
func lifecycleOf(ev *pmxv1.Event, key string) (closed bool, resolution pmxv1.Resolution) {
	switch ev.Spec.Resolution {
	case "":
	case pmxv1.EventResolutionCanceled:
		resolution = pmxv1.ResolutionCanceled
	case key:
		resolution = pmxv1.ResolutionYes
	default:
		resolution = pmxv1.ResolutionNo
	}
	return ev.Spec.Closed, resolution
}

// inEvent says whether mkt is a market of an event and, if so, whether its spec's lifecycle fields
// are its Event's. An Event gone or being deleted asks for nothing more than a void, which its
// finalizer carries out; a Market of it is not refused meanwhile.
func (r *MarketReconciler) inEvent(ctx context.Context, mkt *pmxv1.Market) (*eventMarket, error) {
	name := mkt.Labels[pmxv1.LabelEvent]
	if name == "" {
		return nil, nil
	}
	em := &eventMarket{event: name}
	var ev pmxv1.Event
	switch err := r.Get(ctx, client.ObjectKey{Namespace: mkt.Namespace, Name: name}, &ev); {
	case apierrors.IsNotFound(err):
		return em, nil
	case err != nil:
		return nil, err
	}
	if !ev.DeletionTimestamp.IsZero() {
		return em, nil
	}
	closed, resolution := lifecycleOf(&ev, mkt.Labels[pmxv1.LabelOutcome])
	switch {
	case mkt.Spec.Resolution != resolution:
		em.refused = true
		em.why = "resolution " + orNone(string(mkt.Spec.Resolution)) + " on the Market, " + orNone(string(resolution)) + " by its Event"
	case mkt.Spec.Closed != closed:
		em.refused = true
		em.why = "closed is set on the Market but not on its Event, or the other way round"
	}
	if em.refused {
		r.k8sEvent(mkt, corev1.EventTypeWarning, reasonMarketInEvent, "Refuse",
			"market of event %s: %s; close, reopen, resolve or cancel the Event %s instead, which moves all of its markets together", name, em.why, name)
	}
	return em, nil
}

func orNone(s string) string {
	if s == "" {
		return "(none)"
	}
	return s
}

// finalizeInEvent is finalize for a deleted Market of an event whose market is not settled: only
// voiding the whole event may settle it, so the Market waits for its Event to be resolved or
// deleted (the Event's finalizer voids the event), on a live shard. It returns how long to wait.
func (r *MarketReconciler) finalizeInEvent(ctx context.Context, mkt *pmxv1.Market, row records.Market, event string) (time.Duration, error) {
	// Keep it on a live shard with its siblings, where the event's void is carried out.
	var obs observation
	if _, err := r.schedule(ctx, mkt, row, &obs); err != nil {
		return 0, err
	}
	r.k8sEvent(mkt, corev1.EventTypeWarning, reasonMarketInEvent, "Cancel",
		"market of event %s is not voided on its own: it goes once the Event is resolved, canceled or deleted", event)
	return max(r.Resync, time.Second), nil
}
