package controllers

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"

	pmxv1 "github.com/pmx-dev/pmx/api/v1alpha1"
	"github.com/pmx-dev/pmx/internal/records"
	"github.com/pmx-dev/pmx/internal/store"
)

// schedule keeps a market on a live shard — an OPEN one, and one with a lifecycle change to
// undergo, which its owner carries out: one without a live owner goes to the least loaded live
// shard, with epoch + 1. When no shard is live it notes so in obs, and which shard was lost if one
// owned the market.
func (r *MarketReconciler) schedule(ctx context.Context, mkt *pmxv1.Market, row records.Market, obs *observation) (records.Market, error) {
	live, err := r.Store.LiveShards(ctx, r.ShardTTL)
	if err != nil {
		return row, fmt.Errorf("while listing live shards: %w", err)
	}
	owner := ""
	if row.Shard != nil {
		owner = *row.Shard
	}
	target, move := pick(owner, live)
	if !move {
		return row, nil
	}
	// Its shard stopped answering (or, from releases before, the operator of the time took it over
	// to close it).
	lost := owner != ""
	if target == "" {
		obs.noLive = true
		if lost {
			obs.lost = owner
		}
		return row, nil
	}
	o, err := r.Store.Assign(ctx, row.ID, target)
	if err != nil {
		return row, err
	}
	if lost {
		r.event(mkt, corev1.EventTypeWarning, eventShardLost, "Schedule", "shard %s stopped answering; market moved to %s at epoch %d", owner, o.Shard, o.Epoch)
	} else {
		r.event(mkt, corev1.EventTypeNormal, eventScheduled, "Schedule", "market served by shard %s at epoch %d", o.Shard, o.Epoch)
	}
	return r.Store.Market(ctx, row.ID)
}

// pick decides where an OPEN market owned by owner should be: it stays if its owner is live;
// otherwise it moves to the least-loaded live shard (live is sorted least loaded first), or to
// none ("") when no shard is live.
func pick(owner string, live []store.Shard) (target string, move bool) {
	for _, s := range live {
		if s.Name == owner {
			return owner, false
		}
	}
	if len(live) == 0 {
		return "", true
	}
	return live[0].Name, true
}
