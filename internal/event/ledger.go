package event

import "fmt"

// Totals are the shares outstanding in each of an event's markets, in the event's order: the YES
// and NO shares every account holds, locked or not.
type Totals struct {
	YES, NO []int64
}

// PayoutIf is what the exchange pays if outcome w wins: 100 per YES share of w's market and 100
// per NO share of every other market.
func (t Totals) PayoutIf(w int) int64 {
	p := t.YES[w]
	for i, no := range t.NO {
		if i != w {
			p += no
		}
	}
	return Payout * p
}

// Check is the event's ledger rule: whichever outcome wins, the exchange pays exactly the
// collateral it holds for the event. A trade that mints or burns a pair in one market moves both
// sides by 100 per pair, a transfer moves neither, and a conversion pays out in cash exactly what
// it takes off every world's payout, so every step keeps it.
func (t Totals) Check(collateral int64) error {
	for w := range t.YES {
		if p := t.PayoutIf(w); p != collateral {
			return fmt.Errorf("if outcome %d won the exchange would pay %d cents, but it holds %d for the event", w, p, collateral)
		}
	}
	return nil
}

// VoidPayout is what one share pays when an event of n outcomes is cancelled: ⌊100/n⌋ for YES,
// (n − 1) × ⌊100/n⌋ for NO. For n = 2 it is a market's own void, 50 and 50. NO of an outcome is,
// in payoff, YES of the n − 1 others, so it is paid as that many YES shares.
func VoidPayout(n int) (yes, no int64) {
	yes = Payout / int64(n)
	return yes, int64(n-1) * yes
}

// Void is what cancelling the event pays its holders in total, and what it leaves of the
// collateral, which the exchange keeps on its own account so that every cent is accounted for.
// With the ledger rule holding, summing PayoutIf over all n outcomes gives
// 100 × (ΣYES + (n − 1) × ΣNO) = n × collateral, so the void pays
// ⌊100/n⌋ × (ΣYES + (n − 1) × ΣNO) = ⌊100/n⌋ × n × collateral / 100 ≤ collateral:
// the remainder, collateral × (100 − n⌊100/n⌋) / 100, is never negative (and is zero when n
// divides 100).
func (t Totals) Void() (paid, remainder int64, err error) {
	n := len(t.YES)
	yes, no := VoidPayout(n)
	for i := range t.YES {
		paid += yes*t.YES[i] + no*t.NO[i]
	}
	var collateral int64
	if n > 0 {
		collateral = t.PayoutIf(0)
	}
	if err := t.Check(collateral); err != nil {
		return 0, 0, err
	}
	return paid, collateral - paid, nil
}
