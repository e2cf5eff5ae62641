package market

import (
	"time"

	"github.com/pmx-dev/pmx/internal/domain"
)

// Intent is the state a market's owner asks for: a Market resource's spec, or a manifest.
type Intent struct {
	// Closed asks for trading to stop (true) or to run (false) while closesAt allows.
	Closed bool
	// Resolution asks to resolve YES or NO, or to cancel the market (CANCELED); "" asks for
	// neither.
	Resolution string
	ClosesAt   *time.Time
}

// Next is the action that moves a market in status toward intent at time now, or false when it is
// where it should be (or cannot get there: a settled market stays settled).
func (in Intent) Next(status domain.MarketStatus, now time.Time) (domain.MarketAction, bool) {
	live := status == domain.MarketOpen || status == domain.MarketClosed
	switch {
	case in.Resolution == "YES" && live:
		return domain.ResolveYes, true
	case in.Resolution == "NO" && live:
		return domain.ResolveNo, true
	case in.Resolution == "CANCELED" && live:
		return domain.CancelMarket, true
	case in.Resolution != "":
		return "", false
	}
	due := in.ClosesAt != nil && !now.Before(*in.ClosesAt)
	switch {
	case status == domain.MarketOpen && (in.Closed || due):
		return domain.CloseMarket, true
	case status == domain.MarketClosed && !in.Closed && !due:
		return domain.ReopenMarket, true
	}
	return "", false
}
