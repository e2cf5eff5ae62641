package controllers

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/google/uuid"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	pmxv1 "github.com/pmx-dev/pmx/api/v1alpha1"
	"github.com/pmx-dev/pmx/internal/domain"
	"github.com/pmx-dev/pmx/internal/eventrec"
)

// reasonMarketNameTaken: a Market that an outcome's Market would be named after exists and the
// Event does not own it; the Event leaves it alone until it is renamed or deleted.
const reasonMarketNameTaken pmxv1.MarketConditionReason = "MarketNameTaken"

// desiredEventStatus is the status an Event should show after a reconcile that observed obs and
// ended with err.
func desiredEventStatus(ev *pmxv1.Event, obs eventObservation, err error) pmxv1.EventStatus {
	st := *ev.Status.DeepCopy()
	st.ObservedGeneration = ev.Generation
	set := func(t pmxv1.MarketConditionType, ok bool, reason pmxv1.MarketConditionReason, format string, args ...any) {
		status := metav1.ConditionFalse
		if ok {
			status = metav1.ConditionTrue
		}
		meta.SetStatusCondition(&st.Conditions, metav1.Condition{Type: string(t), Status: status,
			Reason: string(reason), Message: fmt.Sprintf(format, args...), ObservedGeneration: ev.Generation})
	}
	if obs.id != uuid.Nil {
		st.EventID = obs.id.String()
	}
	st.Phase, st.Shard = obs.phase, ""
	if obs.phase == pmxv1.MarketPhaseOpen {
		st.Shard = obs.shard
	}
	st.Outcomes, st.Leader, st.LeaderPrice = nil, "", nil
	recorded := 0
	for i, o := range ev.Spec.Outcomes {
		os := pmxv1.EventOutcomeStatus{Key: o.Key}
		if i < len(obs.markets) && obs.markets[i] != nil {
			os.Market = obs.markets[i].Name
		}
		if i < len(obs.rows) && obs.rows[i] != nil {
			row := obs.rows[i]
			recorded++
			os.MarketID = row.ID.String()
			if row.LastTradePrice != nil {
				p := int32(*row.LastTradePrice)
				os.LastTradePrice = &p
				if st.LeaderPrice == nil || p > *st.LeaderPrice {
					st.Leader, st.LeaderPrice = o.Key, &p
				}
			}
		}
		st.Outcomes = append(st.Outcomes, os)
	}

	n := len(ev.Spec.Outcomes)
	switch {
	case err != nil:
		set(pmxv1.MarketReady, false, eventErrorReason(err), "%v", err)
	case len(obs.taken) > 0:
		set(pmxv1.MarketReady, false, reasonMarketNameTaken, "Markets %s exist and are not this Event's; rename or delete them", strings.Join(obs.taken, ", "))
	case recorded < n:
		set(pmxv1.MarketReady, false, pmxv1.ReasonReconciling, "%d of %d outcome markets recorded", recorded, n)
	case obs.pending != "" && obs.waiting != "":
		set(pmxv1.MarketReady, false, pmxv1.ReasonReconciling, "%s waits: %s", obs.pending, obs.waiting)
	case obs.pending != "":
		set(pmxv1.MarketReady, false, pmxv1.ReasonReconciling, "carrying out %s on every market", obs.pending)
	case obs.phase == "":
		set(pmxv1.MarketReady, false, pmxv1.ReasonReconciling, "the outcome markets are not in one phase yet")
	default:
		set(pmxv1.MarketReady, true, pmxv1.ReasonRecorded, "event %s is %s, with %d outcome markets", obs.id, obs.phase, n)
	}

	switch {
	case obs.phase != "" && obs.phase != pmxv1.MarketPhaseOpen:
		set(pmxv1.MarketScheduled, false, pmxv1.ReasonNotServed, "a %s event needs no shard", obs.phase)
	case obs.shard != "":
		set(pmxv1.MarketScheduled, true, pmxv1.ReasonShardAssigned, "shard %s serves all %d outcome markets", obs.shard, n)
	default:
		set(pmxv1.MarketScheduled, false, pmxv1.ReasonNoLiveShard, "the outcome markets are not all on one live shard yet")
	}

	haltedCondition(obs.halted, set)

	switch {
	case obs.phase.Final():
		set(pmxv1.MarketSettled, true, pmxv1.ReasonPaidOut, "every share of every outcome was paid and retired")
	case ev.Spec.Resolution != "" && err != nil:
		set(pmxv1.MarketSettled, false, pmxv1.ReasonSettlementFailed, "%v; retrying", err)
	case ev.Spec.Resolution != "":
		set(pmxv1.MarketSettled, false, pmxv1.ReasonSettlementPending, "resolution %s not carried out yet", ev.Spec.Resolution)
	default:
		set(pmxv1.MarketSettled, false, pmxv1.ReasonAwaitingResolution, "no resolution yet")
	}
	return st
}

// updateStatus writes the status of a reconcile, as the Market controller's updateStatus does:
// with an optimistic lock, skipped when nothing changed, never claiming a newer spec.
func (r *EventReconciler) updateStatus(ctx context.Context, ev *pmxv1.Event, obs eventObservation, rerr error) error {
	return writeStatus(ctx, r.Client, ev, func(e *pmxv1.Event) *pmxv1.EventStatus { return &e.Status },
		func() (pmxv1.EventStatus, bool) {
			if ev.Status.ObservedGeneration > ev.Generation {
				return pmxv1.EventStatus{}, false // a reconcile of a newer spec has reported already
			}
			return desiredEventStatus(ev, obs, rerr), true
		})
}

// eventErrorReason is the Ready reason of an Event's reconcile that failed with err: a spec the
// event rules refuse (outcomes, or an outcome market's text), else as a Market's.
func eventErrorReason(err error) pmxv1.MarketConditionReason {
	var de *domain.Error
	if errors.As(err, &de) && (de.Kind == domain.Invalid || de.Code == eventrec.ErrOutcomesChanged.Code) {
		return pmxv1.ReasonInvalidSpec
	}
	return errorReason(err)
}
