package domain

// MarketStatus is where a market is in its lifecycle (package market holds the rules that move it).
type MarketStatus string

// Market statuses, spelled as the API spells them.
const (
	MarketOpen     MarketStatus = "OPEN"
	MarketClosed   MarketStatus = "CLOSED"
	MarketResolved MarketStatus = "RESOLVED"
	MarketCanceled MarketStatus = "CANCELED"
)

// MarketStatuses are all of them, in lifecycle order.
var MarketStatuses = []MarketStatus{MarketOpen, MarketClosed, MarketResolved, MarketCanceled}

// ParseMarketStatus reads a market status as the API spells it.
func ParseMarketStatus(s string) (MarketStatus, bool) {
	for _, st := range MarketStatuses {
		if string(st) == s {
			return st, true
		}
	}
	return "", false
}

// MarketAction is a requested lifecycle change: what the admin API, a Market's intent and the
// closer ask an exchange to do to a market (package market holds which status allows which, and
// what each entails).
type MarketAction string

// Market actions.
const (
	CloseMarket  MarketAction = "close"
	ReopenMarket MarketAction = "reopen"
	ResolveYes   MarketAction = "resolve YES"
	ResolveNo    MarketAction = "resolve NO"
	CancelMarket MarketAction = "cancel"
)
