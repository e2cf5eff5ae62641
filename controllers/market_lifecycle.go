package controllers

import (
	"context"
	"errors"
	"fmt"

	"github.com/google/uuid"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	pmxv1 "github.com/pmx-dev/pmx/api/v1alpha1"
	"github.com/pmx-dev/pmx/internal/domain"
	"github.com/pmx-dev/pmx/internal/exchange"
	"github.com/pmx-dev/pmx/internal/market"
	"github.com/pmx-dev/pmx/internal/records"
	"github.com/pmx-dev/pmx/internal/store"
)

// carryOut performs the action the spec's intent asks of the market: close (also at closesAt),
// reopen, resolve or cancel.
func (r *MarketReconciler) carryOut(ctx context.Context, mkt *pmxv1.Market, row records.Market, action domain.MarketAction) (records.Market, error) {
	if err := r.transition(ctx, row.ID, action); err != nil {
		return row, fmt.Errorf("while carrying out %s: %w", action, err)
	}
	row, err := r.Store.Market(ctx, row.ID)
	if err != nil {
		return row, err
	}
	r.event(mkt, corev1.EventTypeNormal, transitionReason(action), string(action), "market %s is now %s", row.ID, row.Status)
	return row, nil
}

// transition takes the market over from whichever shard serves it — the new epoch fences that
// shard out, so it can commit nothing more for the market — and applies the action with the
// operator's own shard: resting orders are cancelled and the market settled by the same code the
// standalone exchange runs.
func (r *MarketReconciler) transition(ctx context.Context, id uuid.UUID, action domain.MarketAction) error {
	if _, err := r.Store.Assign(ctx, id, r.Name); err != nil {
		return err
	}
	err := r.Lifecycle.Transition(ctx, id, action)
	if errors.Is(err, exchange.ErrNotOwner) {
		// The lifecycle shard held the market under an older epoch and has just dropped it; the
		// retry loads it afresh.
		err = r.Lifecycle.Transition(ctx, id, action)
	}
	return err
}

// finalize voids a deleted market that was never settled, then lets the Market go.
func (r *MarketReconciler) finalize(ctx context.Context, mkt *pmxv1.Market) error {
	if !controllerutil.ContainsFinalizer(mkt, finalizer) {
		return nil
	}
	row, err := r.existing(ctx, mkt)
	switch {
	case errors.Is(err, store.ErrNotFound):
	case err != nil:
		return err
	case row.Status == domain.MarketOpen || row.Status == domain.MarketClosed:
		if err := r.transition(ctx, row.ID, domain.CancelMarket); err != nil && !errors.Is(err, market.ErrIllegalTransition) {
			return fmt.Errorf("while voiding the deleted market: %w", err)
		}
		r.event(mkt, corev1.EventTypeNormal, eventVoided, "Cancel", "deleted before settlement: market %s voided, each share paid 50", row.ID)
	}
	return r.removeFinalizer(ctx, mkt)
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
