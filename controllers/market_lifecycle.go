package controllers

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	pmxv1 "github.com/pmx-dev/pmx/api/v1alpha1"
	"github.com/pmx-dev/pmx/internal/domain"
	"github.com/pmx-dev/pmx/internal/market"
	"github.com/pmx-dev/pmx/internal/records"
	"github.com/pmx-dev/pmx/internal/store"
)

// Exchange is what the operator asks of the exchange: a market's lifecycle change, carried out by
// the shard that owns the market — it cancels the resting orders and settles with the code the
// standalone exchange runs, and the market keeps its owner and epoch. In distributed mode it is
// the front's router to the shards (shardclient.Router, with Lifecycle set). It fails, and the
// operator tries again, when the market has no live owner.
type Exchange interface {
	Transition(ctx context.Context, market uuid.UUID, action domain.MarketAction) error
}

// carryOut performs the action the spec's intent asks of the market — close (also at closesAt),
// reopen, resolve or cancel — on the shard that owns it, which schedule has made sure is live.
func (r *MarketReconciler) carryOut(ctx context.Context, mkt *pmxv1.Market, row records.Market, action domain.MarketAction) (records.Market, error) {
	if err := r.Exchange.Transition(ctx, row.ID, action); err != nil {
		return row, fmt.Errorf("while carrying out %s: %w", action, err)
	}
	row, err := r.Store.Market(ctx, row.ID)
	if err != nil {
		return row, err
	}
	r.k8sEvent(mkt, corev1.EventTypeNormal, transitionReason(action), string(action), "market %s is now %s", row.ID, row.Status)
	return row, nil
}

// waitForShard notes that the market's change waits for a live shard to own the market, and
// returns how long to wait before looking again: Resync at first, doubling with each look, up to
// maxShardWait. The operator never carries a change out itself: only the owner may, or the books
// in memory and Postgres would part.
func (r *MarketReconciler) waitForShard(mkt *pmxv1.Market, action domain.MarketAction) time.Duration {
	r.k8sEvent(mkt, corev1.EventTypeWarning, reasonWaitingForShard, string(action),
		"no shard is live to own the market and carry out %s; waiting for one", action)
	looks, _ := r.waiting.Load(mkt.UID)
	n, _ := looks.(int)
	r.waiting.Store(mkt.UID, n+1)
	return min(r.Resync<<min(n, 8), max(r.Resync, maxShardWait))
}

// maxShardWait bounds the wait between looks for a live shard.
const maxShardWait = 30 * time.Second

// doneWaiting forgets a market's wait for a shard.
func (r *MarketReconciler) doneWaiting(uid types.UID) { r.waiting.Delete(uid) }

// finalize voids a deleted market that was never settled, on its owning shard, then lets the
// Market go; it returns how long to wait when no shard is live to own the market.
func (r *MarketReconciler) finalize(ctx context.Context, mkt *pmxv1.Market) (time.Duration, error) {
	if !controllerutil.ContainsFinalizer(mkt, finalizer) {
		return 0, nil
	}
	row, err := r.existing(ctx, mkt)
	switch {
	case errors.Is(err, store.ErrNotFound):
	case err != nil:
		return 0, err
	case (row.Status == domain.MarketOpen || row.Status == domain.MarketClosed) && mkt.Labels[pmxv1.LabelEvent] != "":
		return r.finalizeInEvent(ctx, mkt, row, mkt.Labels[pmxv1.LabelEvent])
	case row.Status == domain.MarketOpen || row.Status == domain.MarketClosed:
		var obs observation
		if row, err = r.schedule(ctx, mkt, row, &obs); err != nil {
			return 0, err
		}
		if obs.noLive {
			return r.waitForShard(mkt, domain.CancelMarket), nil
		}
		r.doneWaiting(mkt.UID)
		if err := r.Exchange.Transition(ctx, row.ID, domain.CancelMarket); err != nil && !errors.Is(err, market.ErrIllegalTransition) {
			return 0, fmt.Errorf("while voiding the deleted market: %w", err)
		}
		r.k8sEvent(mkt, corev1.EventTypeNormal, reasonVoided, "Cancel", "deleted before settlement: market %s voided, each share paid 50", row.ID)
	}
	return 0, r.removeFinalizer(ctx, mkt)
}

// existing finds the market of a Market, without creating it.
func (r *MarketReconciler) existing(ctx context.Context, mkt *pmxv1.Market) (records.Market, error) {
	if mkt.Status.MarketID != "" {
		if id, err := uuid.Parse(mkt.Status.MarketID); err == nil {
			return r.Store.Market(ctx, id)
		}
	}
	return r.Store.MarketByName(ctx, marketName(mkt))
}
