package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// MarketPhase is where a market is in its lifecycle.
// +kubebuilder:validation:Enum=OPEN;CLOSED;RESOLVED;CANCELED
type MarketPhase string

const (
	// MarketPhaseOpen: the market accepts orders.
	MarketPhaseOpen MarketPhase = "OPEN"
	// MarketPhaseClosed: trading is stopped and every resting order was cancelled; the market can
	// still be reopened, resolved or canceled.
	MarketPhaseClosed MarketPhase = "CLOSED"
	// MarketPhaseResolved: the market was resolved YES or NO and each winning share paid 100. Final.
	MarketPhaseResolved MarketPhase = "RESOLVED"
	// MarketPhaseCanceled: the market was voided and each share of either outcome paid 50. Final.
	MarketPhaseCanceled MarketPhase = "CANCELED"
)

// Final reports whether no transition leaves p (RESOLVED and CANCELED).
func (p MarketPhase) Final() bool {
	return p == MarketPhaseResolved || p == MarketPhaseCanceled
}

// Resolution is how a market ends: the outcome that won, or CANCELED for a void market.
// +kubebuilder:validation:Enum=YES;NO;CANCELED
type Resolution string

const (
	// ResolutionYes resolves the market YES: each YES share pays 100, each NO share nothing.
	ResolutionYes Resolution = "YES"
	// ResolutionNo resolves the market NO: each NO share pays 100, each YES share nothing.
	ResolutionNo Resolution = "NO"
	// ResolutionCanceled voids the market: each share of either outcome pays 50, which returns the
	// collateral of every YES/NO pair.
	ResolutionCanceled Resolution = "CANCELED"
)

// Phase is the phase a market reaches once r is carried out: RESOLVED for YES and NO, CANCELED for
// CANCELED, and "" for the empty (unset) resolution or an unknown value.
func (r Resolution) Phase() MarketPhase {
	switch r {
	case ResolutionYes, ResolutionNo:
		return MarketPhaseResolved
	case ResolutionCanceled:
		return MarketPhaseCanceled
	}
	return ""
}

// MarketSpec is what the owner of a market asks for: its text, its schedule, and the intent to
// close, reopen, resolve or cancel it. The operator carries the intent out and reports in status.
//
// +kubebuilder:validation:XValidation:rule="!has(self.closesAt) || !has(self.resolvesAt) || self.closesAt < self.resolvesAt",message="closesAt must be before resolvesAt"
// +kubebuilder:validation:XValidation:rule="!has(oldSelf.resolution) || (has(self.resolution) && self.resolution == oldSelf.resolution)",message="resolution cannot be changed or removed once set"
type MarketSpec struct {
	// Question the market asks, answered YES or NO at resolution, e.g. "Will it rain in Paris on
	// 1 June 2027?". Traders see it as the market's title.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=500
	Question string `json:"question"`

	// Description of the market for traders: the resolution criteria and the source that decides
	// the outcome.
	// +optional
	// +kubebuilder:validation:MaxLength=10000
	Description string `json:"description,omitempty"`

	// Category the market is listed under, e.g. "weather" or "sports".
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=100
	Category string `json:"category"`

	// URL of a page about the question or its resolution source: an absolute http or https URL.
	// +optional
	// +kubebuilder:validation:MaxLength=2048
	// +kubebuilder:validation:XValidation:rule="isURL(self) && url(self).getScheme() in ['http', 'https']",message="url must be an absolute http or https URL"
	URL string `json:"url,omitempty"`

	// LabelA is the display name of the YES outcome. Defaults to "Yes" (quote it in YAML, which
	// reads an unquoted Yes as a boolean).
	// +optional
	// +kubebuilder:default="Yes"
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=50
	LabelA string `json:"labelA,omitempty"`

	// LabelB is the display name of the NO outcome. Defaults to "No".
	// +optional
	// +kubebuilder:default="No"
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=50
	LabelB string `json:"labelB,omitempty"`

	// ClosesAt is when trading stops by itself: at this time an OPEN market becomes CLOSED and its
	// resting orders are cancelled. Unset, the market trades until it is closed or resolved.
	// A market whose closesAt has passed stays CLOSED; move closesAt later to reopen it. From
	// 1970-01-01 to the end of year 9999 in UTC.
	// +optional
	// +kubebuilder:validation:XValidation:rule="self >= timestamp('1970-01-01T00:00:00Z') && self <= timestamp('9999-12-31T23:59:59.999999999Z')",message="closesAt must be from 1970-01-01T00:00:00Z to 9999-12-31T23:59:59.999999999Z (in UTC, after its offset)"
	ClosesAt *metav1.Time `json:"closesAt,omitempty"`

	// ResolvesAt is when the question is expected to be decided and the market resolved. It tells
	// traders when to expect the payout; resolving still takes setting resolution. Must be after
	// closesAt when both are set. From 1970-01-01 to the end of year 9999 in UTC.
	// +optional
	// +kubebuilder:validation:XValidation:rule="self >= timestamp('1970-01-01T00:00:00Z') && self <= timestamp('9999-12-31T23:59:59.999999999Z')",message="resolvesAt must be from 1970-01-01T00:00:00Z to 9999-12-31T23:59:59.999999999Z (in UTC, after its offset)"
	ResolvesAt *metav1.Time `json:"resolvesAt,omitempty"`

	// Closed stops trading when set to true: the market becomes CLOSED and its resting orders are
	// cancelled. Setting it back to false reopens a CLOSED market. Defaults to false.
	// +optional
	Closed bool `json:"closed,omitempty"`

	// Paused halts trading without closing the market: while true, placements and amends are
	// refused (409 market_halted) and resting orders stay on the book; cancels, GTD expiries and
	// dead-man switches go on. Setting it back to false resumes. The Halted condition shows what
	// halts the market, its Event's pause and the whole exchange's halt included. A Market of an
	// Event may be paused on its own; its Event leaves the field as it is. Defaults to false.
	// +optional
	Paused bool `json:"paused,omitempty"`

	// Fees is the market's own fee schedule: takerBps and makerBps, in basis points of P × (1 − P)
	// per share. A fill of q shares at price p cents costs ⌈rate × q × p × (100 − p) / 1,000,000⌉
	// cents, a negative rate paying a rebate rounded down. An order keeps the schedule in force
	// when it was placed; a change applies to the orders placed after it. Unset, the market's
	// orders carry its Event's schedule, or none (no fees); removing fees leaves that. A Market of
	// an Event may have a schedule of its own; its Event leaves the field as it is.
	// +optional
	Fees *FeeSchedule `json:"fees,omitempty"`

	// ShardPool names the ShardPool, in the operator's namespace, whose shards serve the market:
	// the operator places it only on a shard of that pool, moves it within the pool when its shard
	// stops, and the rebalancer spreads it only over that pool. Unset, the default pool (the
	// chart's, named default, which runs every shard started without a pool). A Market of an
	// Event takes its Event's. A change moves the market to the new pool by the planned handoff.
	// +optional
	// +kubebuilder:validation:MaxLength=46
	// +kubebuilder:validation:Pattern=`^[a-z]([-a-z0-9]*[a-z0-9])?$`
	ShardPool string `json:"shardPool,omitempty"`

	// Placement is Shared (the default: the market shares a shard with others) or Dedicated: the
	// operator keeps the market alone on a shard of its pool, which the pool adds for it up to its
	// spec.maxDedicatedShards, and no other market is moved onto that shard. The Dedicated
	// condition says whether it is alone, and why not when it is not. A Market of an Event takes
	// its Event's: the event's markets share their dedicated shard.
	// +optional
	// +kubebuilder:validation:Enum=Shared;Dedicated
	Placement Placement `json:"placement,omitempty"`

	// Resolution ends the market: YES or NO resolves it (each winning share pays 100), CANCELED voids
	// it (each share of either outcome pays 50). Settlement happens once; the value cannot be changed
	// or removed after it is set. Deleting a market that has no resolution voids it. In YAML, quote
	// "YES" and "NO": unquoted, YAML reads them as booleans.
	// +optional
	Resolution Resolution `json:"resolution,omitempty"`
}

// Placement is whether a market shares a shard with others (Shared) or has one of its own
// (Dedicated).
type Placement string

const (
	PlacementShared    Placement = "Shared"
	PlacementDedicated Placement = "Dedicated"
)

// MarketStatus is what the operator last observed and did: the market's id in the REST API, its
// phase, the shard that serves it and the conditions of each step.
type MarketStatus struct {
	// MarketID is the market's id in the REST API (GET /api/v1/market?id=...), a UUID the operator
	// assigns when it first records the market.
	// +optional
	// +kubebuilder:validation:Format=uuid
	MarketID string `json:"marketId,omitempty"`

	// Phase is where the market is in its lifecycle: OPEN, CLOSED, RESOLVED or CANCELED. RESOLVED
	// and CANCELED are final.
	// +optional
	Phase MarketPhase `json:"phase,omitempty"`

	// Shard is the name of the shard that owns the market's order book and serves its orders.
	// +optional
	Shard string `json:"shard,omitempty"`

	// Epoch is the ownership epoch of the market on its shard; it grows by one each time the market
	// moves to another shard, and a shard's writes are rejected unless they carry the current epoch.
	// +optional
	// +kubebuilder:validation:Minimum=0
	Epoch int64 `json:"epoch,omitempty"`

	// LastTradePrice is the YES price, in cents from 1 to 99, of the market's most recent trade.
	// Unset until the first trade.
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=99
	LastTradePrice *int32 `json:"lastTradePrice,omitempty"`

	// Conditions of the market: Ready (recorded and serving as its phase says), Scheduled (a live
	// shard owns it) and Settled (payouts made, for a RESOLVED or CANCELED market).
	// +optional
	// +listType=map
	// +listMapKey=type
	// +patchStrategy=merge
	// +patchMergeKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty" patchStrategy:"merge" patchMergeKey:"type"`

	// ObservedGeneration is the metadata.generation of the spec that this status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
}

// Market is a YES/NO prediction market. Create one to list it on the exchange; edit its spec to
// close, reopen, resolve or cancel it; read its status for its id, phase and owning shard.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:path=markets,singular=market,scope=Namespaced,shortName=mkt,categories=pmx
// +kubebuilder:printcolumn:name="Question",type=string,JSONPath=`.spec.question`,description="The question the market asks"
// +kubebuilder:printcolumn:name="Status",type=string,JSONPath=`.status.phase`,description="Lifecycle phase: OPEN, CLOSED, RESOLVED or CANCELED"
// +kubebuilder:printcolumn:name="Shard",type=string,JSONPath=`.status.shard`,description="Shard that owns the market"
// +kubebuilder:printcolumn:name="Halted",type=string,JSONPath=`.status.conditions[?(@.type=="Halted")].status`,description="True while trading is halted: by spec.paused, the Event's pause or the exchange's halt"
// +kubebuilder:printcolumn:name="Last",type=integer,JSONPath=`.status.lastTradePrice`,description="YES price of the last trade, in cents"
// +kubebuilder:printcolumn:name="Closes",type=string,JSONPath=`.spec.closesAt`,description="When trading stops"
// +kubebuilder:printcolumn:name="Category",type=string,JSONPath=`.spec.category`,priority=1,description="Category the market is listed under"
// +kubebuilder:printcolumn:name="ID",type=string,JSONPath=`.status.marketId`,priority=1,description="Market id in the REST API"
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type Market struct {
	metav1.TypeMeta `json:",inline"`
	// +optional
	metav1.ObjectMeta `json:"metadata,omitzero"`

	// Spec is the market's text, schedule and the intent to close, resolve or cancel it.
	// +required
	Spec MarketSpec `json:"spec"`

	// Status is what the operator last observed and did.
	// +optional
	Status MarketStatus `json:"status,omitzero"`
}

// MarketList is a list of Markets.
//
// +kubebuilder:object:root=true
type MarketList struct {
	metav1.TypeMeta `json:",inline"`
	// +optional
	metav1.ListMeta `json:"metadata,omitzero"`
	Items           []Market `json:"items"`
}
