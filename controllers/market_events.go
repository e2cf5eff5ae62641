package controllers

import (
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/pmx-dev/pmx/internal/domain"
)

// eventReason is the reason of an event the operator records on a Market: one CamelCase word, what
// `kubectl get events --field-selector reason=...` matches on.
type eventReason string

// The operator's event reasons, all in one place.
const (
	eventRecorded  eventReason = "Recorded"  // the market was created in the database
	eventClosed    eventReason = "Closed"    // trading stopped (spec.closed, or closesAt arrived)
	eventReopened  eventReason = "Reopened"  // trading resumed
	eventResolved  eventReason = "Resolved"  // resolved YES or NO and settled
	eventCanceled  eventReason = "Canceled"  // spec.resolution CANCELED: voided and settled
	eventVoided    eventReason = "Voided"    // the Market was deleted before settlement
	eventScheduled eventReason = "Scheduled" // a live shard took the market
	eventShardLost eventReason = "ShardLost" // the market's shard stopped sending heartbeats
	eventRegrouped eventReason = "Regrouped" // the market joined its event's other markets on their live shard
	// eventRebalanced: the operator moved the market between live shards to keep them spread.
	eventRebalanced eventReason = "Rebalanced"
	// eventWaitingForShard: a lifecycle change waits for a live shard to own the market.
	eventWaitingForShard eventReason = "WaitingForShard"
	// eventMarketCreated: an Event created the Market of one of its outcomes.
	eventMarketCreated eventReason = "MarketCreated"
)

// transitionReason is the event reason of a market having undergone action.
func transitionReason(a domain.MarketAction) eventReason {
	switch a {
	case domain.CloseMarket:
		return eventClosed
	case domain.ReopenMarket:
		return eventReopened
	case domain.CancelMarket:
		return eventCanceled
	}
	return eventResolved
}

// event records an event on the Market when a recorder is configured; eventType is
// corev1.EventTypeNormal or corev1.EventTypeWarning.
func (r *MarketReconciler) event(obj runtime.Object, eventType string, reason eventReason, action, note string, args ...any) {
	if r.Recorder != nil {
		r.Recorder.Eventf(obj, nil, eventType, string(reason), action, note, args...)
	}
}
