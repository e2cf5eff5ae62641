package engine

import "errors"

// Fees is a fee schedule: what each fill costs the order on either side of it, as a rate in basis
// points of P × (1 − P) per share, P the execution price as a fraction of the payout (the shape
// Kalshi's taker fee has: 0.07 × C × P × (1 − P) is Taker 700). An order carries the schedule in
// force when it was placed; the taker pays its Taker rate on each of its fills as the incoming
// order, the maker its Maker rate on each fill of its resting order. A negative Maker rate is a
// rebate: the exchange pays it. The zero Fees charges nothing, which is every market's default.
//
// In cents, a fill of q shares at price p (1..99, either outcome's: p × (100 − p) is the same for
// both) costs
//
//	Fee(rate, p, q) = ⌈rate × q × p × (100 − p) / 1,000,000⌉   for rate ≥ 0 (a fee, rounded up)
//	                = −⌊|rate| × q × p × (100 − p) / 1,000,000⌋ for rate < 0 (a rebate, rounded down)
//
// A maker's rebate is paid out of the taker's fee of the same fill and never exceeds it: under one
// schedule it never does (Validate asks |Maker| ≤ Taker, and the rebate rounds down), but a resting
// order keeps the schedule it was placed with while the taker brings today's, so the engine caps
// it. The exchange's account therefore never goes below what it had.
type Fees struct {
	Taker int // basis points, 0..MaxFeeRate
	Maker int // basis points, −Taker..Taker
}

// MaxFeeRate is the largest rate: 10,000 basis points charge P × (1 − P) of a share, at most 25
// cents, never more than the share's price (so a SELL's proceeds always cover its fee).
const MaxFeeRate = 10000

// feeScale turns rate × p × (100 − p) into cents: basis points (10⁴) times P(1−P) in hundredths
// squared (10⁴), over the 100 cents of a payout.
const feeScale = 1_000_000

// Errors of Fees.Validate.
var (
	ErrInvalidTakerFee = errors.New("engine: the taker fee rate must be 0 to 10000 basis points")
	ErrInvalidMakerFee = errors.New("engine: the maker fee rate must lie between minus the taker rate (a rebate no larger than the fee) and the taker rate")
)

// Validate checks a schedule: 0 ≤ Taker ≤ MaxFeeRate and −Taker ≤ Maker ≤ Taker.
func (f Fees) Validate() error {
	switch {
	case f.Taker < 0 || f.Taker > MaxFeeRate:
		return ErrInvalidTakerFee
	case f.Maker < -f.Taker || f.Maker > f.Taker:
		return ErrInvalidMakerFee
	}
	return nil
}

// Fee is what a fill of q shares at price p costs the side paying rate: positive a fee, negative a
// rebate (see Fees for the formula and its rounding).
func Fee(rate, p int, q int64) int64 {
	if rate == 0 {
		return 0
	}
	r := int64(rate) * int64(p) * int64(Payout-p) // |r| ≤ 2.5 × 10⁷
	if rate < 0 {
		return -scaled(-r, q, false)
	}
	return scaled(r, q, true)
}

// scaled is r × q / feeScale rounded up or down, without overflow: q ≤ MaxQuantity would let
// r × q pass 2⁶³, so the whole millions of q are taken apart.
func scaled(r, q int64, up bool) int64 {
	whole, part := q/feeScale, q%feeScale
	n := part * r
	v := whole*r + n/feeScale
	if up && n%feeScale != 0 {
		v++
	}
	return v
}

// feeReserve is what an order paying rate locks per share of a BUY, beside its price, for the fee
// of its fills at its limit p: ⌈rate × p × (100 − p) / 10⁶⌉, 0 for a rebate. The fee of a fill of
// q shares never exceeds q times it, and a BUY taker filled below its limit pays no more than the
// lock at its limit holds (price plus fee grows with the price while rate ≤ MaxFeeRate).
func feeReserve(rate, p int) int64 {
	if rate <= 0 {
		return 0
	}
	return Fee(rate, p, 1)
}
