package controllers

import (
	"context"
	"errors"
	"fmt"

	"github.com/google/uuid"
	corev1 "k8s.io/api/core/v1"

	pmxv1 "github.com/pmx-dev/pmx/api/v1alpha1"
	"github.com/pmx-dev/pmx/market"
	"github.com/pmx-dev/pmx/store"
)

// marketName is the name a Market resource's market is recorded under in Postgres: its namespace
// and name, so that markets of different namespaces never collide.
func marketName(mkt *pmxv1.Market) string {
	if mkt.Namespace == "" {
		return mkt.Name
	}
	return mkt.Namespace + "/" + mkt.Name
}

// record creates the market in Postgres on first sight, and afterwards keeps its text and schedule
// equal to the spec. The REST API sees the change at once.
func (r *MarketReconciler) record(ctx context.Context, mkt *pmxv1.Market) (store.Market, error) {
	name := marketName(mkt)
	var row store.Market
	var err error
	if mkt.Status.MarketID != "" {
		id, perr := uuid.Parse(mkt.Status.MarketID)
		if perr != nil {
			return row, fmt.Errorf("status.marketId %q is not a UUID", mkt.Status.MarketID)
		}
		row, err = r.Store.Market(ctx, id)
	} else {
		row, err = r.Store.MarketByName(ctx, name)
	}
	switch {
	case errors.Is(err, store.ErrNotFound):
		row, err = market.Create(ctx, r.Store, mkt.Spec, &name, r.Clock.Now())
		if err != nil {
			return row, fmt.Errorf("while recording the market: %w", err)
		}
		r.event(mkt, corev1.EventTypeNormal, eventRecorded, "Record", "recorded as market %s", row.ID)
		return row, nil
	case err != nil:
		return row, fmt.Errorf("while reading the market: %w", err)
	}
	spec := mkt.Spec
	if err := market.Validate(&spec); err != nil {
		return row, err
	}
	if err := r.Store.UpdateMarketText(ctx, market.Row(row.ID, spec, &name, r.Clock.Now()), r.Clock.Now().UTC()); err != nil {
		return row, fmt.Errorf("while updating the market: %w", err)
	}
	return r.Store.Market(ctx, row.ID)
}
