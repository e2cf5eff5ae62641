// Package event holds the rules of an event: a question with 2 to 50 mutually exclusive outcomes,
// each traded as its own YES/NO market whose YES means "this outcome wins". Exactly one outcome
// wins, so the exchange's obligations for an event are tied together across its markets, and a
// trader holding NO of some outcomes holds, in effect, YES of the others. This package says what
// an event may be (Validate), what a conversion does (Convert), what a void pays (VoidPayout), and
// the ledger rule that every one of them keeps (Totals.Check): for every outcome w, what the
// exchange would pay if w won equals the collateral it holds for the event. The store applies the
// effects; the shard decides the refusals with these functions; no other package restates them.
// docs/architecture.md describes the ledger and proves the void's remainder non-negative.
package event

import (
	"fmt"

	"github.com/pmx-dev/pmx/internal/domain"
)

// Bounds of an event's outcomes.
const (
	MinOutcomes = 2
	MaxOutcomes = 50
	// MaxKey bounds an outcome's key, a DNS label (RFC 1123), so that it can name the outcome's
	// Market resource and appear in a URL as it is.
	MaxKey = 63
	// MaxLabel bounds an outcome's label, the words a page shows.
	MaxLabel = 200
)

// Payout is what a winning share pays, in cents.
const Payout = 100

// An Outcome is one of an event's answers: a key fixed when the event is created, which names it
// in requests, and a label for people.
type Outcome struct {
	Key   string `json:"key"`
	Label string `json:"label"`
}

// ValidKey is true of a DNS label: 1 to 63 characters of a-z, 0-9 and '-', beginning and ending
// with a letter or digit.
func ValidKey(k string) bool {
	if k == "" || len(k) > MaxKey || k[0] == '-' || k[len(k)-1] == '-' {
		return false
	}
	for i := 0; i < len(k); i++ {
		switch c := k[i]; {
		case c >= 'a' && c <= 'z', c >= '0' && c <= '9', c == '-':
		default:
			return false
		}
	}
	return true
}

// Validate checks an event's outcomes: between MinOutcomes and MaxOutcomes of them, each key a
// DNS label given once, each label 1 to MaxLabel bytes. The refusal names the first fault.
func Validate(outcomes []Outcome) error {
	if len(outcomes) < MinOutcomes || len(outcomes) > MaxOutcomes {
		return invalidOutcomes(fmt.Sprintf("an event has %d to %d outcomes, not %d", MinOutcomes, MaxOutcomes, len(outcomes)))
	}
	seen := make(map[string]bool, len(outcomes))
	for i, o := range outcomes {
		switch {
		case !ValidKey(o.Key):
			return invalidOutcomes(fmt.Sprintf("outcome %d's key %q is not a DNS label: 1 to %d characters of a-z, 0-9 and '-', beginning and ending with a letter or digit", i, o.Key, MaxKey))
		case seen[o.Key]:
			return invalidOutcomes(fmt.Sprintf("outcome key %q is given twice; each outcome needs its own key", o.Key))
		case o.Label == "" || len(o.Label) > MaxLabel:
			return invalidOutcomes(fmt.Sprintf("outcome %q needs a label of 1 to %d bytes", o.Key, MaxLabel))
		}
		seen[o.Key] = true
	}
	return nil
}

// ErrInvalidOutcomes is the code of every refusal of an event's or a conversion's outcomes.
var ErrInvalidOutcomes = &domain.Error{Kind: domain.Invalid, Code: "invalid_outcomes", Field: "outcomes",
	Message: "the outcomes are not valid"}

func invalidOutcomes(msg string) *domain.Error {
	return &domain.Error{Kind: ErrInvalidOutcomes.Kind, Code: ErrInvalidOutcomes.Code, Field: ErrInvalidOutcomes.Field, Message: msg}
}
