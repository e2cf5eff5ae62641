package controllers

import (
	"context"
	"errors"
	"fmt"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	pmxv1 "github.com/pmx-dev/pmx/api/v1alpha1"
	"github.com/pmx-dev/pmx/internal/domain"
	"github.com/pmx-dev/pmx/internal/market"
	"github.com/pmx-dev/pmx/internal/market/marketspec"
	"github.com/pmx-dev/pmx/internal/placement"
)

// desiredStatus is the status a Market should show after a reconcile that observed obs and ended
// with err.
func desiredStatus(mkt *pmxv1.Market, obs observation, err error) pmxv1.MarketStatus {
	st := *mkt.Status.DeepCopy()
	st.ObservedGeneration = mkt.Generation
	set := func(t pmxv1.MarketConditionType, ok bool, reason pmxv1.MarketConditionReason, format string, args ...any) {
		status := metav1.ConditionFalse
		if ok {
			status = metav1.ConditionTrue
		}
		meta.SetStatusCondition(&st.Conditions, metav1.Condition{Type: string(t), Status: status,
			Reason: string(reason), Message: fmt.Sprintf(format, args...), ObservedGeneration: mkt.Generation})
	}
	if obs.row == nil {
		set(pmxv1.MarketReady, false, errorReason(err), "%v", err)
		return st
	}
	row := obs.row
	st.MarketID = row.ID.String()
	st.Phase = pmxv1.MarketPhase(row.Status)
	st.Shard, st.Epoch = "", row.Epoch
	if row.Shard != nil && row.Status == domain.MarketOpen {
		st.Shard = *row.Shard
	}
	st.LastTradePrice = nil
	if row.LastTradePrice != nil {
		p := int32(*row.LastTradePrice)
		st.LastTradePrice = &p
	}

	switch {
	case err != nil:
		set(pmxv1.MarketReady, false, errorReason(err), "%v", err)
	case obs.inEvent != nil && obs.inEvent.refused:
		set(pmxv1.MarketReady, false, pmxv1.MarketConditionReason(reasonMarketInEvent),
			"refused: %s; a market of event %s is closed, reopened, resolved and canceled only with its Event", obs.inEvent.why, obs.inEvent.event)
	case obs.inEvent != nil:
		set(pmxv1.MarketReady, false, pmxv1.ReasonReconciling, "%s, with every market of event %s", obs.pending, obs.inEvent.event)
	case obs.pending != "" && obs.noLive:
		set(pmxv1.MarketReady, false, pmxv1.ReasonNoLiveShard, "waiting for a live shard to own the market and carry out %s", obs.pending)
	case obs.pending != "":
		set(pmxv1.MarketReady, false, pmxv1.ReasonReconciling, "carrying out %s", obs.pending)
	default:
		set(pmxv1.MarketReady, true, pmxv1.ReasonRecorded, "market %s is %s", row.ID, row.Status)
	}

	switch {
	case row.Status != domain.MarketOpen && !obs.noLive:
		set(pmxv1.MarketScheduled, false, pmxv1.ReasonNotServed, "a %s market needs no shard", row.Status)
	case obs.lost != "":
		set(pmxv1.MarketScheduled, false, pmxv1.ReasonShardLost, "shard %s stopped sending heartbeats and no shard is live to take the market; waiting for one", obs.lost)
	case obs.noLive && obs.pool != "" && obs.pool != placement.DefaultPool:
		set(pmxv1.MarketScheduled, false, pmxv1.ReasonNoLiveShard, "no shard of pool %s has sent a heartbeat recently; waiting for one (is ShardPool %s running?)", obs.pool, obs.pool)
	case obs.noLive:
		set(pmxv1.MarketScheduled, false, pmxv1.ReasonNoLiveShard, "no shard has sent a heartbeat recently; waiting for one")
	case st.Shard != "" && obs.at != nil && obs.at.shardPool != obs.at.pool:
		set(pmxv1.MarketScheduled, true, pmxv1.ReasonMoving, "served by shard %s of pool %s at epoch %d; moving to a shard of pool %s", st.Shard, obs.at.shardPool, row.Epoch, obs.at.pool)
	case st.Shard != "":
		set(pmxv1.MarketScheduled, true, pmxv1.ReasonShardAssigned, "served by shard %s at epoch %d", st.Shard, row.Epoch)
	}
	if mkt.Spec.Placement != pmxv1.PlacementDedicated || row.Status != domain.MarketOpen {
		meta.RemoveStatusCondition(&st.Conditions, string(pmxv1.MarketDedicated))
	} else if obs.at != nil {
		dedicatedCondition(obs.at, set)
	}

	haltedCondition(row.Halted, set)

	settled := row.Status == domain.MarketResolved || row.Status == domain.MarketCanceled
	switch {
	case settled:
		set(pmxv1.MarketSettled, true, pmxv1.ReasonPaidOut, "every share was paid and retired")
	case mkt.Spec.Resolution != "" && err != nil:
		set(pmxv1.MarketSettled, false, pmxv1.ReasonSettlementFailed, "%v; retrying", err)
	case mkt.Spec.Resolution != "":
		set(pmxv1.MarketSettled, false, pmxv1.ReasonSettlementPending, "resolution %s not carried out yet", mkt.Spec.Resolution)
	default:
		set(pmxv1.MarketSettled, false, pmxv1.ReasonAwaitingResolution, "no resolution yet")
	}
	return st
}

// dedicatedCondition shows, for an OPEN market whose spec.placement is Dedicated, whether it is
// alone on its shard (at: where it is served), and why not; a market that shares a shard, or is
// no longer OPEN, shows none (desiredStatus).
func dedicatedCondition(at *placedAt, set func(pmxv1.MarketConditionType, bool, pmxv1.MarketConditionReason, string, ...any)) {
	switch {
	case at.shardPool != at.pool:
		set(pmxv1.MarketDedicated, false, pmxv1.ReasonMoving, "on shard %s of pool %s; moving to a free shard of pool %s", at.shard, at.shardPool, at.pool)
	case at.alone:
		set(pmxv1.MarketDedicated, true, pmxv1.ReasonAlone, "alone on shard %s of pool %s", at.shard, at.pool)
	case at.free != "":
		set(pmxv1.MarketDedicated, false, pmxv1.ReasonMoving, "shares shard %s with other markets; moving to shard %s, free in pool %s", at.shard, at.free, at.pool)
	default:
		set(pmxv1.MarketDedicated, false, pmxv1.ReasonNoFreeShard, "shares shard %s with other markets: no shard of pool %s is free; "+
			"the ShardPool adds one per dedicated market up to its spec.maxDedicatedShards: raise it, or spec.replicas", at.shard, at.pool)
	}
}

// haltedCondition sets the Halted condition of a Market or an Event by what halts it (set is the
// status's own setter).
func haltedCondition(h domain.Halt, set func(pmxv1.MarketConditionType, bool, pmxv1.MarketConditionReason, string, ...any)) {
	const refused = ": placements and amends are refused; cancels, GTD expiries and dead-man switches go on"
	switch h {
	case domain.HaltExchange:
		set(pmxv1.MarketHalted, true, pmxv1.ReasonExchangeHalted, "trading on the whole exchange is halted (PUT /admin/v1/halt)"+refused)
	case domain.HaltEvent:
		set(pmxv1.MarketHalted, true, pmxv1.ReasonEventPaused, "the Event is paused (its spec.paused)"+refused)
	case domain.HaltMarket:
		set(pmxv1.MarketHalted, true, pmxv1.ReasonPaused, "spec.paused is true"+refused)
	default:
		set(pmxv1.MarketHalted, false, pmxv1.ReasonTrading, "trading is not halted")
	}
}

// errorReason is the Ready reason of a reconcile that failed with err: a spec the market rules
// refuse, a transition the market's phase no longer allows, or else a failure to read or write the
// database (directly, or by the market's shard).
func errorReason(err error) pmxv1.MarketConditionReason {
	var se *marketspec.SpecError
	switch {
	case errors.As(err, &se):
		return pmxv1.ReasonInvalidSpec
	case errors.Is(err, market.ErrIllegalTransition):
		return pmxv1.ReasonIllegalTransition
	case errors.Is(err, errEventNotRecorded):
		return pmxv1.ReasonReconciling
	}
	return pmxv1.ReasonDatabaseError
}

// updateStatus writes the status of a reconcile that acted on mkt's spec as read at its start, with
// an optimistic lock, and skips the write when nothing changed. On a conflict it takes only the
// stored object's resourceVersion and status and writes the same observation again, still stamped
// with the generation it was computed from: a status never claims a spec it did not act on (the
// newer generation has a reconcile of its own coming). mkt's spec and generation are left as read.
func (r *MarketReconciler) updateStatus(ctx context.Context, mkt *pmxv1.Market, obs observation, rerr error) error {
	return writeStatus(ctx, r.Client, mkt, func(m *pmxv1.Market) *pmxv1.MarketStatus { return &m.Status },
		func() (pmxv1.MarketStatus, bool) {
			if mkt.Status.ObservedGeneration > mkt.Generation {
				return pmxv1.MarketStatus{}, false // a reconcile of a newer spec has reported already
			}
			return desiredStatus(mkt, obs, rerr), true
		})
}

func (r *MarketReconciler) removeFinalizer(ctx context.Context, mkt *pmxv1.Market) error {
	patch := client.MergeFrom(mkt.DeepCopy())
	controllerutil.RemoveFinalizer(mkt, finalizer)
	return client.IgnoreNotFound(r.Patch(ctx, mkt, patch))
}
