// Package market holds the rules of a market's lifecycle (docs/architecture.md §4) that the
// standalone exchange, the shards and the operator share: what a spec asks for (Intent), which
// status transitions are legal and what each one entails (Transition, whose Plan the shard carries
// out and the store settles), and closing markets when their closesAt arrives (Closer). It does no
// settlement itself, and links no Kubernetes package: the Market CRD's spec, checked by the CRD's
// rules and recorded (Validate, Create, Record, Sync), is package marketspec's, which only the
// operator and the standalone admin API link.
package market

import (
	"errors"
	"fmt"

	"github.com/pmx-dev/pmx/internal/domain"
)

// ErrIllegalTransition is returned for an action the market's status does not allow.
var ErrIllegalTransition = errors.New("illegal market transition")

// Resolve is the action that resolves a market to outcome YES or NO.
func Resolve(outcome string) (domain.MarketAction, error) {
	switch outcome {
	case "YES":
		return domain.ResolveYes, nil
	case "NO":
		return domain.ResolveNo, nil
	}
	return "", fmt.Errorf("outcome must be YES or NO, not %q", outcome)
}

// Plan is what an action does to a market in a given status.
type Plan struct {
	To domain.MarketStatus // the status afterwards
	// CancelOrders: the market leaves OPEN, so every resting order is cancelled and its lock
	// released.
	CancelOrders bool
	// Settle: the market is settled (store.Settlement) with this outcome — YES or NO, or "" for a
	// cancelled (void) market paying 50 per share.
	Settle  bool
	Outcome string
}

// Transition says what action does to a market in status from, or ErrIllegalTransition:
// OPEN → CLOSED on close, CLOSED → OPEN on reopen, OPEN|CLOSED → RESOLVED on resolve,
// OPEN|CLOSED → CANCELED on cancel. RESOLVED and CANCELED are final.
func Transition(from domain.MarketStatus, action domain.MarketAction) (Plan, error) {
	open := from == domain.MarketOpen
	live := open || from == domain.MarketClosed
	var p Plan
	switch {
	case action == domain.CloseMarket && open:
		p = Plan{To: domain.MarketClosed}
	case action == domain.ReopenMarket && from == domain.MarketClosed:
		p = Plan{To: domain.MarketOpen}
	case action == domain.ResolveYes && live:
		p = Plan{To: domain.MarketResolved, Settle: true, Outcome: "YES"}
	case action == domain.ResolveNo && live:
		p = Plan{To: domain.MarketResolved, Settle: true, Outcome: "NO"}
	case action == domain.CancelMarket && live:
		p = Plan{To: domain.MarketCanceled, Settle: true}
	default:
		return p, fmt.Errorf("cannot %s a market that is %s: %w", action, from, ErrIllegalTransition)
	}
	p.CancelOrders = open
	return p, nil
}
