package controllers

import (
	"context"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	pmxv1 "github.com/pmx-dev/pmx/api/v1alpha1"
	"github.com/pmx-dev/pmx/internal/placement"
	"github.com/pmx-dev/pmx/internal/records"
	"github.com/pmx-dev/pmx/internal/store"
	"github.com/pmx-dev/pmx/internal/store/bookkeeping"
)

// schedule keeps a market on a live shard of its pool — an OPEN one, and one with a lifecycle
// change to undergo, which its owner carries out: one without a live owner goes, with epoch + 1,
// to the shard placement.Choose gives it (the least loaded live shard of its pool that may take
// it: a free one for a dedicated market). When no shard of its pool is live it notes so in obs,
// and which shard was lost if one owned the market. A market whose owner is live stays there: the
// Rebalancer moves it by the planned handoff when its placement asks for another shard.
func (r *MarketReconciler) schedule(ctx context.Context, mkt *pmxv1.Market, row records.Market, obs *observation) (records.Market, error) {
	live, err := r.Store.LiveShards(ctx, r.ShardTTL)
	if err != nil {
		return row, fmt.Errorf("while listing live shards: %w", err)
	}
	unit := placement.UnitOf(row)
	owner := ""
	if row.Shard != nil {
		owner = *row.Shard
	}
	target, move := pick(owner, live, unit)
	regroup := false
	if !move && row.EventID != nil {
		// An event's markets split over live shards (one moved, and before the others followed its
		// old shard came back and kept them) would stay split: none has a dead owner to leave. A
		// market goes to the live shard that owns most of its event's markets, itself counted, so
		// that every market of the event picks the same one.
		owners, err := r.Store.EventOwners(ctx, *row.EventID)
		if err != nil {
			return row, fmt.Errorf("while listing the shards of the market's event: %w", err)
		}
		if s := together(owners, live, unit); s != "" && s != owner {
			target, move, regroup = s, true, true
		}
	}
	if !move {
		obs.placed(live, owner, unit)
		return row, nil
	}
	if target != "" && !regroup {
		// A market of an event goes where its siblings are: an event's conversions and its
		// resolution are one transaction of the shard that owns all of its markets.
		owners, err := r.siblingOwners(ctx, mkt)
		if err != nil {
			return row, err
		}
		if s := together(owners, live, unit); s != "" {
			target = s
		}
	}
	// Its shard stopped answering (or, from releases before, the operator of the time took it over
	// to close it).
	lost := owner != "" && !regroup
	if target == "" {
		obs.noLive, obs.pool = true, placement.Pool(unit.Pool)
		if lost {
			obs.lost = owner
		}
		return row, nil
	}
	o, err := r.Store.Assign(ctx, row.ID, target)
	if err != nil {
		return row, err
	}
	if r.Moves != nil {
		r.Moves.Record(r.Clock.Now(), row.ID) // the Rebalancer leaves it there for its cooldown
	}
	if regroup {
		r.k8sEvent(mkt, corev1.EventTypeNormal, reasonRegrouped, "Schedule", "market moved from shard %s to %s at epoch %d, where its event's other markets are", owner, o.Shard, o.Epoch)
	} else if lost {
		r.k8sEvent(mkt, corev1.EventTypeWarning, reasonShardLost, "Schedule", "shard %s stopped answering; market moved to %s at epoch %d", owner, o.Shard, o.Epoch)
	} else {
		r.k8sEvent(mkt, corev1.EventTypeNormal, reasonScheduled, "Schedule", "market served by shard %s at epoch %d", o.Shard, o.Epoch)
	}
	if live, err = r.Store.LiveShards(ctx, r.ShardTTL); err != nil {
		return row, fmt.Errorf("while listing live shards: %w", err)
	}
	obs.placed(live, o.Shard, unit)
	return r.Store.Market(ctx, row.ID)
}

// pick decides where an OPEN market of unit u owned by owner should be: it stays if its owner is
// live; otherwise it moves to the shard placement.Choose gives it among the live ones (sorted
// least loaded first), or to none ("") when no shard of its pool is live and not draining.
func pick(owner string, live []bookkeeping.Shard, u placement.Unit) (target string, move bool) {
	for _, s := range live {
		if s.Name == owner {
			return owner, false // a draining owner still serves it, and hands it over itself
		}
	}
	if i, _ := placement.Choose(live, u); i >= 0 {
		return live[i].Name, true
	}
	return "", true
}

// siblingOwners lists the shards that own the other markets of mkt's event (the Markets labelled
// with the same pmx.dev/event in its namespace), one entry per recorded sibling; none for a market
// of no event. The owners come from Postgres, which the operator's reconciles, one at a time,
// write: a sibling scheduled a moment ago is seen even before the cache shows its status.
func (r *MarketReconciler) siblingOwners(ctx context.Context, mkt *pmxv1.Market) ([]string, error) {
	event := mkt.Labels[pmxv1.LabelEvent]
	if event == "" {
		return nil, nil
	}
	var siblings pmxv1.MarketList
	if err := r.List(ctx, &siblings, client.InNamespace(mkt.Namespace), client.MatchingLabels{pmxv1.LabelEvent: event}); err != nil {
		return nil, fmt.Errorf("while listing the markets of event %s: %w", event, err)
	}
	var owners []string
	for i := range siblings.Items {
		sib := &siblings.Items[i]
		if sib.UID == mkt.UID {
			continue
		}
		row, err := r.Store.MarketByName(ctx, marketName(sib))
		switch {
		case errors.Is(err, store.ErrNotFound):
			continue // not recorded yet: it will follow this one
		case err != nil:
			return nil, err
		}
		if row.Shard != nil {
			owners = append(owners, *row.Shard)
		}
	}
	return owners, nil
}

// together is the live shard that may take unit u (placement.Takes) and owns the most of an
// event's other markets (owners, one entry per market), the least loaded of those tied; "" when
// no such shard owns any, and the market goes where pick sends it, where its siblings then follow.
func together(owners []string, live []bookkeeping.Shard, u placement.Unit) string {
	count := map[string]int{}
	for _, o := range owners {
		count[o]++
	}
	best := ""
	for _, s := range live { // least loaded first
		if placement.Takes(s, u) && count[s.Name] > count[best] {
			best = s.Name
		}
	}
	return best
}
