package controllers

import (
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/pmx-dev/pmx/internal/domain"
)

// recordReason is the reason of a Kubernetes event the operator records (its recorder, Recorder)
// on a Market or an Event: one CamelCase word, what `kubectl get events --field-selector
// reason=...` matches on.
type recordReason string

// The reasons of the operator's Kubernetes events, all in one place.
const (
	reasonRecorded  recordReason = "Recorded"  // the market was created in the database
	reasonClosed    recordReason = "Closed"    // trading stopped (spec.closed, or closesAt arrived)
	reasonReopened  recordReason = "Reopened"  // trading resumed
	reasonResolved  recordReason = "Resolved"  // resolved YES or NO and settled
	reasonCanceled  recordReason = "Canceled"  // spec.resolution CANCELED: voided and settled
	reasonVoided    recordReason = "Voided"    // the Market was deleted before settlement
	reasonScheduled recordReason = "Scheduled" // a live shard took the market
	reasonShardLost recordReason = "ShardLost" // the market's shard stopped sending heartbeats
	reasonRegrouped recordReason = "Regrouped" // the market joined its event's other markets on their live shard
	// reasonRebalanced: the operator moved the market between live shards to keep them spread.
	reasonRebalanced recordReason = "Rebalanced"
	// reasonWaitingForShard: a lifecycle change waits for a live shard to own the market.
	reasonWaitingForShard recordReason = "WaitingForShard"
	// reasonMarketCreated: an Event created the Market of one of its outcomes.
	reasonMarketCreated recordReason = "MarketCreated"
	// reasonPaused, reasonResumed: spec.paused halted or resumed trading (a halt, not a close).
	reasonPaused  recordReason = "Paused"
	reasonResumed recordReason = "Resumed"
	// reasonFeesSet: spec.fees gave the market or event its fee schedule, changed it or took it
	// away.
	reasonFeesSet recordReason = "FeesSet"
	// reasonPlaced: spec.shardPool or spec.placement changed the market's pool or whether it has
	// a shard of its own.
	reasonPlaced recordReason = "Placed"
)

// transitionReason is the Kubernetes event's reason of a market having undergone action.
func transitionReason(a domain.MarketAction) recordReason {
	switch a {
	case domain.CloseMarket:
		return reasonClosed
	case domain.ReopenMarket:
		return reasonReopened
	case domain.CancelMarket:
		return reasonCanceled
	}
	return reasonResolved
}

// k8sEvent records a Kubernetes event on the Market when a recorder is configured; eventType is
// corev1.EventTypeNormal or corev1.EventTypeWarning.
func (r *MarketReconciler) k8sEvent(obj runtime.Object, eventType string, reason recordReason, action, note string, args ...any) {
	if r.Recorder != nil {
		r.Recorder.Eventf(obj, nil, eventType, string(reason), action, note, args...)
	}
}
