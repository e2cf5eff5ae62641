package controllers

import (
	"context"
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	pmxv1 "github.com/pmx-dev/pmx/api/v1alpha1"
)

// updateStatus writes what a look at the pool found, with an optimistic lock, and skips the write
// when nothing changed; on a conflict it takes the stored resourceVersion and status and writes the
// same observation again.
func (r *ShardPoolReconciler) updateStatus(ctx context.Context, pool *pmxv1.ShardPool, obs poolObservation, rerr error) error {
	return writeStatus(ctx, r.Client, pool, func(p *pmxv1.ShardPool) *pmxv1.ShardPoolStatus { return &p.Status },
		func() (pmxv1.ShardPoolStatus, bool) { return desiredPoolStatus(pool, obs, rerr), true })
}

// desiredPoolStatus is the pool's status after a look that found obs (and failed with rerr).
func desiredPoolStatus(pool *pmxv1.ShardPool, obs poolObservation, rerr error) pmxv1.ShardPoolStatus {
	st := *pool.Status.DeepCopy()
	st.ObservedGeneration = pool.Generation
	ready := metav1.Condition{Type: string(pmxv1.ShardPoolReady), ObservedGeneration: pool.Generation}
	draining := metav1.Condition{Type: string(pmxv1.ShardPoolDraining), ObservedGeneration: pool.Generation,
		Status: metav1.ConditionFalse, Reason: string(pmxv1.ReasonNoShardLeaving), Message: "no shard that is to go owns a market"}
	switch {
	case obs.outside:
		ready.Status, ready.Reason = metav1.ConditionFalse, string(pmxv1.ReasonOutsideNamespace)
		ready.Message = "the operator runs the shard pools of its own namespace only (pmx operator --shard-pool-namespace); nothing is made for this one"
		meta.SetStatusCondition(&st.Conditions, ready)
		return st
	case len(obs.taken) > 0:
		ready.Status, ready.Reason = metav1.ConditionFalse, string(pmxv1.ReasonObjectTaken)
		ready.Message = fmt.Sprintf("%s exists and is not this pool's: rename the pool, or delete the object for the pool to make its own",
			strings.Join(obs.taken, " and "))
		meta.SetStatusCondition(&st.Conditions, ready)
		return st
	}
	st.Selector = selectorOf(pool)
	st.StatefulSet = pmxv1.ShardPoolStatefulSetName(pool.Name)
	st.DrainingShards = obs.draining
	if obs.applied {
		// The scale subresource's status.replicas is the spec's to compare with: the shards added
		// for dedicated markets are not the autoscaler's.
		st.Replicas, st.ReadyReplicas = max(obs.pods.Replicas-obs.dedicated, 0), obs.pods.ReadyReplicas
		st.DedicatedShards = obs.dedicated
		st.LiveShards, st.Markets = int32(len(obs.live)), 0
		for _, s := range obs.live {
			st.Markets += int32(s.Markets)
		}
		st.OrdersPerSecond = roundRate(obs.orders)
	}
	switch {
	case rerr != nil && obs.applyErr:
		ready.Status, ready.Reason, ready.Message = metav1.ConditionFalse, string(pmxv1.ReasonApplyFailed), rerr.Error()
	case rerr != nil:
		ready.Status, ready.Reason, ready.Message = metav1.ConditionFalse, string(pmxv1.ReasonDatabaseError), rerr.Error()
	case obs.drain.deleting:
		ready.Status, ready.Reason = metav1.ConditionFalse, string(pmxv1.ReasonProgressing)
		ready.Message = "the pool is being deleted"
	case st.ReadyReplicas >= obs.replicas && st.LiveShards >= obs.replicas:
		ready.Status, ready.Reason = metav1.ConditionTrue, string(pmxv1.ReasonShardsReady)
		ready.Message = fmt.Sprintf("%d of %d shards ready and live", st.ReadyReplicas, obs.replicas)
	default:
		ready.Status, ready.Reason = metav1.ConditionFalse, string(pmxv1.ReasonProgressing)
		ready.Message = fmt.Sprintf("%d of %d shard pods ready, %d shards live in Postgres", st.ReadyReplicas, obs.replicas, st.LiveShards)
	}
	if d := obs.drain; len(d.leaving) > 0 && d.owned > 0 {
		why := fmt.Sprintf("the scale from %d to %d shards waits", d.from, d.to)
		if d.deleting {
			why = "the pool's deletion waits"
		}
		draining.Status = metav1.ConditionTrue
		if d.noTarget {
			draining.Reason = string(pmxv1.ReasonNoShardToTakeOver)
			draining.Message = fmt.Sprintf("shards %v own %d markets and no live shard outside them can take them: they serve on, and %s until one is live",
				d.leaving, d.owned, why)
		} else {
			draining.Reason = string(pmxv1.ReasonHandingOver)
			draining.Message = fmt.Sprintf("shards %v hand their %d markets to the other live shards; %s until they own none", d.leaving, d.owned, why)
			if d.err != nil {
				draining.Message += fmt.Sprintf(" (the last handoff failed: %v)", d.err)
			}
		}
	}
	meta.SetStatusCondition(&st.Conditions, ready)
	meta.SetStatusCondition(&st.Conditions, draining)
	return st
}
