package controllers

import (
	"context"
	"errors"
	"fmt"

	"github.com/google/uuid"
	corev1 "k8s.io/api/core/v1"

	pmxv1 "github.com/pmx-dev/pmx/api/v1alpha1"
	"github.com/pmx-dev/pmx/internal/market/marketspec"
	"github.com/pmx-dev/pmx/internal/records"
	"github.com/pmx-dev/pmx/internal/store"
)

// marketName is the name a Market resource's market is recorded under in Postgres: its namespace
// and name, so that markets of different namespaces never collide.
func marketName(mkt *pmxv1.Market) string {
	if mkt.Namespace == "" {
		return mkt.Name
	}
	return mkt.Namespace + "/" + mkt.Name
}

// errEventNotRecorded: a Market of an event waits for its Event to record the event and its
// markets.
var errEventNotRecorded = errors.New("not recorded yet: its Event records it with the event")

// record creates the market in Postgres on first sight, and afterwards keeps its text and schedule
// equal to the spec (marketspec.Record). The REST API sees the change at once.
func (r *MarketReconciler) record(ctx context.Context, mkt *pmxv1.Market) (records.Market, error) {
	id := uuid.Nil
	if mkt.Status.MarketID != "" {
		var err error
		if id, err = uuid.Parse(mkt.Status.MarketID); err != nil {
			return records.Market{}, fmt.Errorf("status.marketId %q is not a UUID", mkt.Status.MarketID)
		}
	}
	if event := mkt.Labels[pmxv1.LabelEvent]; event != "" && id == uuid.Nil {
		// The market of an event is recorded with its event, by the Event controller: never
		// created here, or it would be a market of no event.
		if _, err := r.Store.MarketByName(ctx, marketName(mkt)); errors.Is(err, store.ErrNotFound) {
			return records.Market{}, fmt.Errorf("market of event %s: %w", event, errEventNotRecorded)
		} else if err != nil {
			return records.Market{}, err
		}
	}
	row, created, err := marketspec.Record(ctx, r.Store, id, marketName(mkt), mkt.Spec, r.Clock.Now())
	if created {
		r.k8sEvent(mkt, corev1.EventTypeNormal, reasonRecorded, "Record", "recorded as market %s", row.ID)
	}
	return row, err
}
