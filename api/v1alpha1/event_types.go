package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The labels the operator puts on each Market of an Event: which Event owns it and which outcome
// it stands for. The Market controller and the scheduler read pmx.dev/event to tell a market of an
// event from a standalone one.
const (
	// LabelEvent names the Event (in the Market's namespace) that owns the Market.
	LabelEvent = GroupName + "/event"
	// LabelOutcome is the key of the Event's outcome whose market the Market is.
	LabelOutcome = GroupName + "/outcome"
)

// EventResolutionCanceled is the resolution that voids an event: each YES share of an outcome pays
// ⌊100/n⌋, each NO share (n−1)·⌊100/n⌋ for n outcomes.
const EventResolutionCanceled = "CANCELED"

// EventOutcome is one of an event's mutually exclusive answers; the operator lists it as one YES/NO
// Market whose YES means "this outcome wins".
type EventOutcome struct {
	// Key names the outcome for good: the resolution names it, and the outcome's Market is
	// <event>-<key>. Lower-case letters, digits and '-', starting and ending with a letter or
	// digit, at most 63 characters (a DNS label).
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	Key string `json:"key"`

	// Label is the outcome's display name, e.g. "Labour", at most 50 characters.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=50
	Label string `json:"label"`
}

// EventSpec is what the owner of an event asks for: its text, its outcomes, its schedule, and the
// intent to close, reopen, resolve or cancel all of its markets together.
//
// +kubebuilder:validation:XValidation:rule="!has(self.closesAt) || !has(self.resolvesAt) || self.closesAt < self.resolvesAt",message="closesAt must be before resolvesAt"
// +kubebuilder:validation:XValidation:rule="!has(oldSelf.resolution) || (has(self.resolution) && self.resolution == oldSelf.resolution)",message="resolution cannot be changed or removed once set"
// +kubebuilder:validation:XValidation:rule="!has(self.resolution) || self.resolution == 'CANCELED' || self.outcomes.exists(o, o.key == self.resolution)",message="resolution must be the key of one of the outcomes, or CANCELED"
type EventSpec struct {
	// Question the event asks, answered by exactly one of its outcomes, e.g. "Which party wins the
	// most seats?". Traders see it as the event's title. At most 445 characters, so that each
	// outcome market's question ("<question> — <label>") fits a market's 500.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=445
	Question string `json:"question"`

	// Description of the event for traders: the resolution criteria and the source that decides
	// the outcome.
	// +optional
	// +kubebuilder:validation:MaxLength=10000
	Description string `json:"description,omitempty"`

	// Category the event is listed under, e.g. "politics".
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=100
	Category string `json:"category"`

	// URL of a page about the question or its resolution source: an absolute http or https URL.
	// +optional
	// +kubebuilder:validation:MaxLength=2048
	// +kubebuilder:validation:XValidation:rule="isURL(self) && url(self).getScheme() in ['http', 'https']",message="url must be an absolute http or https URL"
	URL string `json:"url,omitempty"`

	// Outcomes are the event's 2 to 50 mutually exclusive answers, exactly one of which wins. Their
	// keys are unique and fixed once the event is created: none can be added, removed, renamed or
	// moved (labels can be edited).
	// +required
	// +kubebuilder:validation:MinItems=2
	// +kubebuilder:validation:MaxItems=50
	// +listType=map
	// +listMapKey=key
	// +kubebuilder:validation:XValidation:rule="self.map(o, o.key) == oldSelf.map(o, o.key)",message="outcome keys are fixed once the event is created: none can be added, removed, renamed or reordered"
	Outcomes []EventOutcome `json:"outcomes"`

	// ClosesAt is when trading in every outcome stops by itself. Unset, the event trades until it
	// is closed or resolved. From 1970-01-01 to the end of year 9999 in UTC.
	// +optional
	// +kubebuilder:validation:XValidation:rule="self >= timestamp('1970-01-01T00:00:00Z') && self <= timestamp('9999-12-31T23:59:59.999999999Z')",message="closesAt must be from 1970-01-01T00:00:00Z to 9999-12-31T23:59:59.999999999Z (in UTC, after its offset)"
	ClosesAt *metav1.Time `json:"closesAt,omitempty"`

	// ResolvesAt is when the question is expected to be decided. Must be after closesAt when both
	// are set. From 1970-01-01 to the end of year 9999 in UTC.
	// +optional
	// +kubebuilder:validation:XValidation:rule="self >= timestamp('1970-01-01T00:00:00Z') && self <= timestamp('9999-12-31T23:59:59.999999999Z')",message="resolvesAt must be from 1970-01-01T00:00:00Z to 9999-12-31T23:59:59.999999999Z (in UTC, after its offset)"
	ResolvesAt *metav1.Time `json:"resolvesAt,omitempty"`

	// Closed stops trading in every outcome when set to true; setting it back to false reopens
	// them all. Defaults to false.
	// +optional
	Closed bool `json:"closed,omitempty"`

	// Paused halts trading in every outcome's market without closing them: while true, placements
	// and amends there are refused (409 event_halted) and resting orders stay on the books;
	// cancels, GTD expiries and dead-man switches go on. Setting it back to false resumes (a
	// Market paused on its own stays paused). Defaults to false.
	// +optional
	Paused bool `json:"paused,omitempty"`

	// Fees is the event's fee schedule, which every outcome's market without a schedule of its own
	// (a Market's spec.fees) carries: takerBps and makerBps, in basis points of P × (1 − P) per
	// share. A fill of q shares at price p cents costs ⌈rate × q × p × (100 − p) / 1,000,000⌉
	// cents, a negative rate paying a rebate rounded down. An order keeps the schedule in force
	// when it was placed; a change applies to the orders placed after it. Unset, its markets
	// charge no fees but their own; removing fees takes the event's schedule away.
	// +optional
	Fees *FeeSchedule `json:"fees,omitempty"`

	// ShardPool names the ShardPool, in the operator's namespace, whose shards serve the event's
	// markets (each outcome's Market takes it); unset, the default pool. An event's markets are
	// always on one shard.
	// +optional
	// +kubebuilder:validation:MaxLength=46
	// +kubebuilder:validation:Pattern=`^[a-z]([-a-z0-9]*[a-z0-9])?$`
	ShardPool string `json:"shardPool,omitempty"`

	// Placement is Shared (the default) or Dedicated: the operator keeps the event's markets alone
	// on a shard of their pool (each outcome's Market takes it).
	// +optional
	// +kubebuilder:validation:Enum=Shared;Dedicated
	Placement Placement `json:"placement,omitempty"`

	// Resolution ends the event: an outcome's key resolves that outcome's market YES and every
	// other outcome's market NO, in one transaction; CANCELED voids the event (each YES share pays
	// ⌊100/n⌋, each NO share (n−1)·⌊100/n⌋). Set once: it cannot be changed or removed. Deleting
	// an event that has no resolution voids it.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	Resolution string `json:"resolution,omitempty"`
}

// EventOutcomeStatus is what the operator reports of one outcome: its Market and the market's id
// and last YES price.
type EventOutcomeStatus struct {
	// Key of the outcome.
	// +required
	Key string `json:"key"`

	// Market is the name of the outcome's Market resource, in the Event's namespace.
	// +optional
	Market string `json:"market,omitempty"`

	// MarketID is the outcome's market id in the REST API.
	// +optional
	MarketID string `json:"marketId,omitempty"`

	// LastTradePrice is the YES price, in cents from 1 to 99, of the outcome market's most recent
	// trade: the market's estimate of the outcome's chance. Unset until its first trade.
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=99
	LastTradePrice *int32 `json:"lastTradePrice,omitempty"`
}

// EventStatus is what the operator last observed and did.
type EventStatus struct {
	// EventID is the event's id in the REST API (GET /api/v1/event?eventId=...).
	// +optional
	EventID string `json:"eventId,omitempty"`

	// Phase is where the event is in its lifecycle: OPEN, CLOSED, RESOLVED or CANCELED, the phase
	// its markets share. RESOLVED and CANCELED are final.
	// +optional
	Phase MarketPhase `json:"phase,omitempty"`

	// Shard is the shard that serves every one of the event's markets.
	// +optional
	Shard string `json:"shard,omitempty"`

	// Leader is the key of the outcome whose market last traded at the highest YES price.
	// +optional
	Leader string `json:"leader,omitempty"`

	// LeaderPrice is the leader's last YES price, in cents.
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=99
	LeaderPrice *int32 `json:"leaderPrice,omitempty"`

	// Outcomes reports each outcome's Market, market id and price, in the order of spec.outcomes.
	// +optional
	// +listType=map
	// +listMapKey=key
	Outcomes []EventOutcomeStatus `json:"outcomes,omitempty"`

	// Conditions of the event: Ready (recorded, its markets created and in step with the spec),
	// Scheduled (one live shard serves all its markets) and Settled (payouts made).
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

// Event is a question with 2 to 50 mutually exclusive outcomes, each listed as a YES/NO Market that
// the Event owns. Create one to list them all; edit its spec to close, reopen, resolve or cancel
// them together.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// kubectl resolves the plural events to the core Event first, so kubectl commands name this
// resource by a short name, evt or pmxev, or as events.pmx.dev (ev is kubectl's own short name for
// the core Event, so it is none of this one's).
//
// +kubebuilder:resource:path=events,singular=event,scope=Namespaced,shortName=evt;pmxev,categories=pmx
// +kubebuilder:validation:XValidation:rule="size(self.metadata.name) <= 63",message="metadata.name of an Event must be at most 63 characters (it labels the Event's Markets)"
// +kubebuilder:printcolumn:name="Question",type=string,JSONPath=`.spec.question`,description="The question the event asks"
// +kubebuilder:printcolumn:name="Status",type=string,JSONPath=`.status.phase`,description="Lifecycle phase: OPEN, CLOSED, RESOLVED or CANCELED"
// +kubebuilder:printcolumn:name="Leader",type=string,JSONPath=`.status.leader`,description="Outcome whose market last traded highest"
// +kubebuilder:printcolumn:name="Price",type=integer,JSONPath=`.status.leaderPrice`,description="The leader's last YES price, in cents"
// +kubebuilder:printcolumn:name="Shard",type=string,JSONPath=`.status.shard`,description="Shard that serves the event's markets"
// +kubebuilder:printcolumn:name="Halted",type=string,JSONPath=`.status.conditions[?(@.type=="Halted")].status`,description="True while trading is halted: by spec.paused or the exchange's halt"
// +kubebuilder:printcolumn:name="Resolution",type=string,JSONPath=`.spec.resolution`,priority=1,description="Winning outcome, or CANCELED"
// +kubebuilder:printcolumn:name="ID",type=string,JSONPath=`.status.eventId`,priority=1,description="Event id in the REST API"
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type Event struct {
	metav1.TypeMeta `json:",inline"`
	// +optional
	metav1.ObjectMeta `json:"metadata,omitzero"`

	// Spec is the event's text, outcomes, schedule and the intent to close, resolve or cancel it.
	// +required
	Spec EventSpec `json:"spec"`

	// Status is what the operator last observed and did.
	// +optional
	Status EventStatus `json:"status,omitzero"`
}

// EventList is a list of Events.
//
// +kubebuilder:object:root=true
type EventList struct {
	metav1.TypeMeta `json:",inline"`
	// +optional
	metav1.ListMeta `json:"metadata,omitzero"`
	Items           []Event `json:"items"`
}

// MarketName is the name of the Market that lists outcome key of the Event named event.
func MarketName(event, key string) string { return event + "-" + key }
