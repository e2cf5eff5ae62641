package v1alpha1

// MaxFeeBps is the largest fee rate of a FeeSchedule, in basis points (engine.MaxFeeRate): 10,000
// charge P × (1 − P) of a share, at most 25 cents. It must match the markers on FeeSchedule.
const MaxFeeBps = 10000

// FeeRuleMessage is what the CRD answers (and Market.Validate) for a maker rate outside
// −takerBps..takerBps; it must match the XValidation marker on FeeSchedule.
const FeeRuleMessage = "makerBps must lie between -takerBps and takerBps (a maker rebate may be at most the taker fee): lower the rebate or the maker fee, or raise takerBps"

// FeeSchedule is what each fill costs the two orders of a trade: a taker rate and a maker rate, in
// basis points of P × (1 − P) per share, P the trade's price as a fraction of the 100-cent payout
// (takerBps 700 charges 0.07 × P × (1 − P) a share, 1.75 cents at 50).
//
// In cents, the fee of a fill of q shares at price p (1..99 cents, either outcome's price: p × (100
// − p) is the same for both) is ⌈rate × q × p × (100 − p) / 1,000,000⌉, rounded up; a negative rate
// is a rebate the exchange pays, ⌊|rate| × q × p × (100 − p) / 1,000,000⌋ rounded down, and never
// more than the taker's fee on the same fill. The order that arrives and trades pays takerBps;
// the resting order it meets pays (or, negative, earns) makerBps.
//
// An order keeps the schedule in force when it was placed for all its fills: a change applies to
// the orders placed after it, and resting orders keep theirs.
//
// +kubebuilder:validation:XValidation:rule="self.makerBps >= -self.takerBps && self.makerBps <= self.takerBps",message="makerBps must lie between -takerBps and takerBps (a maker rebate may be at most the taker fee): lower the rebate or the maker fee, or raise takerBps"
type FeeSchedule struct {
	// TakerBps is the taker's rate, in basis points of P × (1 − P) per share: from 0 (no fee) to
	// 10000 (P × (1 − P) of each share, at most 25 cents); 700 charges 0.07 × P × (1 − P).
	// +required
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=10000
	TakerBps int32 `json:"takerBps"`

	// MakerBps is the maker's rate, in basis points of P × (1 − P) per share, from -takerBps to
	// takerBps: positive a fee, 0 none, negative a rebate the maker earns on each fill of its
	// resting order (e.g. -175 with takerBps 700 pays makers about a quarter of the taker's fee).
	// +required
	// +kubebuilder:validation:Minimum=-10000
	// +kubebuilder:validation:Maximum=10000
	MakerBps int32 `json:"makerBps"`
}
