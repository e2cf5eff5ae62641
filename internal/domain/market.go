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
