package event

import (
	"fmt"

	"github.com/pmx-dev/pmx/engine"
	"github.com/pmx-dev/pmx/internal/domain"
)

// A Conversion turns Quantity NO shares of each listed outcome (k of the event's n) into Quantity
// YES shares of each outcome not listed, and (k − 1) × 100 × Quantity cents. Per unit of
// Quantity, whichever outcome w wins: the k NO shares pay (k − 1) × 100 if w is listed (w's own NO
// pays nothing) and k × 100 if not; what the conversion gives pays the same, its cash plus 100
// from the YES of w when w is not listed. The exchange owes the same in every world, which is why
// it may hand the cash out at once.
type Conversion struct {
	Listed   []int // indices into the event's outcomes, in the order requested, each once
	Quantity int64 // 1..engine.MaxQuantity
}

// ErrInvalidQuantity refuses a conversion's quantity.
var ErrInvalidQuantity = &domain.Error{Kind: domain.Invalid, Code: "invalid_quantity", Field: "quantity",
	Message: fmt.Sprintf("quantity must be a whole number of shares from 1 to %d", engine.MaxQuantity)}

// ParseConversion checks a conversion request against the event's outcome keys, in the event's
// order: the listed keys must be known, each given once, and at least one; the quantity within
// bounds. Refusals are invalid_outcomes and invalid_quantity, naming the fault.
func ParseConversion(keys []string, listed []string, quantity int64) (Conversion, error) {
	if len(listed) == 0 {
		return Conversion{}, invalidOutcomes("list at least one of the event's outcomes whose NO shares to convert")
	}
	if len(listed) > len(keys) {
		return Conversion{}, invalidOutcomes(fmt.Sprintf("the event has %d outcomes; %d are listed", len(keys), len(listed)))
	}
	index := make(map[string]int, len(keys))
	for i, k := range keys {
		index[k] = i
	}
	c := Conversion{Listed: make([]int, 0, len(listed)), Quantity: quantity}
	seen := make(map[int]bool, len(listed))
	for _, k := range listed {
		i, ok := index[k]
		switch {
		case !ok:
			return Conversion{}, invalidOutcomes(fmt.Sprintf("the event has no outcome %q; GET /event lists its outcomes' keys", k))
		case seen[i]:
			return Conversion{}, invalidOutcomes(fmt.Sprintf("outcome %q is listed twice; list each once", k))
		}
		seen[i] = true
		c.Listed = append(c.Listed, i)
	}
	if quantity < 1 || quantity > engine.MaxQuantity {
		return Conversion{}, ErrInvalidQuantity
	}
	return c, nil
}

// Effect is what a conversion does to the converting account, per outcome in the event's order:
// the change of its NO and YES shares, and the cash it receives.
type Effect struct {
	NO, YES []int64
	Cash    int64
}

// Effect computes the conversion's changes for an event of n outcomes. c must come from
// ParseConversion for the same event.
func (c Conversion) Effect(n int) Effect {
	e := Effect{NO: make([]int64, n), YES: make([]int64, n)}
	for i := range e.YES {
		e.YES[i] = c.Quantity
	}
	for _, i := range c.Listed {
		e.NO[i] = -c.Quantity
		e.YES[i] = 0
	}
	e.Cash = int64(len(c.Listed)-1) * Payout * c.Quantity
	return e
}
