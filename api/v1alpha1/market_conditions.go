package v1alpha1

// MarketConditionType names one of a Market's status conditions.
type MarketConditionType string

const (
	// MarketReady is True when the market is recorded in the database and served as its phase says
	// (taking orders when OPEN, refusing them otherwise).
	MarketReady MarketConditionType = "Ready"
	// MarketScheduled is True when a live shard owns the market at the current epoch.
	MarketScheduled MarketConditionType = "Scheduled"
	// MarketSettled is True once a RESOLVED or CANCELED market has paid out every share; False while
	// settlement is pending or failing.
	MarketSettled MarketConditionType = "Settled"
	// MarketHalted is True while trading in the market (or the event's markets) is halted without
	// closing: by its spec.paused (reason Paused), its Event's (EventPaused) or the whole
	// exchange's halt (ExchangeHalted); False (Trading) otherwise. Its phase stays as it is.
	MarketHalted MarketConditionType = "Halted"
	// MarketDedicated is shown only for a market whose spec.placement is Dedicated: True while it
	// is alone on its shard (reason Alone), False while it shares one because its pool has no free
	// shard (NoFreeShard) or it is on its way there (Moving).
	MarketDedicated MarketConditionType = "Dedicated"
)

// MarketConditionReason is the machine-readable reason of a Market condition: one CamelCase word
// that says why the condition has its status.
type MarketConditionReason string

const (
	// ReasonReconciling: the spec asks for a lifecycle change (close, reopen, resolve, cancel) that
	// the operator has not carried out yet; Ready is False meanwhile.
	ReasonReconciling MarketConditionReason = "Reconciling"
	// ReasonRecorded: the market is recorded in the database and matches its spec (Ready).
	ReasonRecorded MarketConditionReason = "Recorded"
	// ReasonInvalidSpec: the spec breaks one of the Market's rules (the message names the field);
	// the market keeps its last recorded text until the spec is fixed.
	ReasonInvalidSpec MarketConditionReason = "InvalidSpec"
	// ReasonIllegalTransition: the market's phase no longer allowed the lifecycle change the spec
	// asks for (an admin request or its closing time moved it meanwhile); the operator looks again.
	ReasonIllegalTransition MarketConditionReason = "IllegalTransition"
	// ReasonDatabaseError: the database could not be read or written (directly, or by the
	// market's shard carrying out a lifecycle change); the operator retries.
	ReasonDatabaseError MarketConditionReason = "DatabaseError"

	// ReasonAlone: a dedicated market is alone on its shard (Dedicated).
	ReasonAlone MarketConditionReason = "Alone"
	// ReasonNoFreeShard: a dedicated market shares its shard, as no shard of its pool is free and
	// the pool has added as many as its spec.maxDedicatedShards allows (Dedicated).
	ReasonNoFreeShard MarketConditionReason = "NoFreeShard"
	// ReasonMoving: a market is not yet where its placement asks (another pool's shard, or a
	// shared one while a free shard of its pool is live); the rebalancer moves it by the planned
	// handoff (Dedicated, Scheduled).
	ReasonMoving MarketConditionReason = "Moving"
	// ReasonShardAssigned: a live shard owns the market (Scheduled).
	ReasonShardAssigned MarketConditionReason = "ShardAssigned"
	// ReasonNoLiveShard: no shard has a recent heartbeat, so the market has no owner yet (Scheduled),
	// or its lifecycle change waits for one to own it and carry the change out (Ready).
	ReasonNoLiveShard MarketConditionReason = "NoLiveShard"
	// ReasonShardLost: the owning shard's heartbeat lapsed and no shard is live to take the market;
	// it moves as soon as one is (a market moved at once shows ShardAssigned, and a ShardLost
	// event).
	ReasonShardLost MarketConditionReason = "ShardLost"
	// ReasonNotServed: the market is not OPEN (it is CLOSED, RESOLVED or CANCELED), so it takes no
	// orders and needs no shard, unless a lifecycle change is to be carried out on it.
	ReasonNotServed MarketConditionReason = "NotServed"

	// ReasonAwaitingResolution: the market has no resolution yet, so there is nothing to settle.
	ReasonAwaitingResolution MarketConditionReason = "AwaitingResolution"
	// ReasonSettlementPending: a resolution is set and settlement has not completed yet.
	ReasonSettlementPending MarketConditionReason = "SettlementPending"
	// ReasonSettlementFailed: the settlement transaction failed; the operator retries it (it is
	// safe to retry: settlement happens exactly once).
	ReasonSettlementFailed MarketConditionReason = "SettlementFailed"
	// ReasonPaused, ReasonEventPaused, ReasonExchangeHalted: what halts trading (Halted);
	// ReasonTrading: nothing does.
	ReasonPaused         MarketConditionReason = "Paused"
	ReasonEventPaused    MarketConditionReason = "EventPaused"
	ReasonExchangeHalted MarketConditionReason = "ExchangeHalted"
	ReasonTrading        MarketConditionReason = "Trading"

	// ReasonPaidOut: every share of the market was paid and retired (Settled).
	ReasonPaidOut MarketConditionReason = "PaidOut"
)
