package controllers

import (
	"context"
	"fmt"

	"github.com/google/uuid"
	corev1 "k8s.io/api/core/v1"

	pmxv1 "github.com/pmx-dev/pmx/api/v1alpha1"
	"github.com/pmx-dev/pmx/internal/market"
	"github.com/pmx-dev/pmx/internal/records"
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
// equal to the spec (market.Record). The REST API sees the change at once.
func (r *MarketReconciler) record(ctx context.Context, mkt *pmxv1.Market) (records.Market, error) {
	id := uuid.Nil
	if mkt.Status.MarketID != "" {
		var err error
		if id, err = uuid.Parse(mkt.Status.MarketID); err != nil {
			return records.Market{}, fmt.Errorf("status.marketId %q is not a UUID", mkt.Status.MarketID)
		}
	}
	row, created, err := market.Record(ctx, r.Store, id, marketName(mkt), mkt.Spec, r.Clock.Now())
	if created {
		r.event(mkt, corev1.EventTypeNormal, eventRecorded, "Record", "recorded as market %s", row.ID)
	}
	return row, err
}
