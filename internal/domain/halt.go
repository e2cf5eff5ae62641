package domain

// Halt is what halts trading in a market (docs/architecture.md §4, "Halts"): its own pause, its
// event's, or the whole exchange's. A halted market refuses placements and amends with the halt's
// refusal; cancels, GTD expiries and dead-man switches go on.
type Halt string

// Halts, from the narrowest; a market halted by more than one is refused by the widest.
const (
	NotHalted     Halt = ""
	HaltMarket    Halt = "market"
	HaltEvent     Halt = "event"
	HaltExchange  Halt = "exchange"
	haltedMessage      = " halted: placements and amends are refused until it resumes; cancels, cancel-everything, GTD expiries and dead-man switches still work"
)

// Of is what halts a market: the exchange's halt, its event's pause (false for a market of its
// own) or its own pause, the widest first.
func Of(exchange, eventPaused, paused bool) Halt {
	switch {
	case exchange:
		return HaltExchange
	case eventPaused:
		return HaltEvent
	case paused:
		return HaltMarket
	}
	return NotHalted
}

// Refusal is the refusal of a placement or an amend in a market the halt halts (nil for none).
func (h Halt) Refusal() *Error {
	switch h {
	case HaltExchange:
		return ErrExchangeHalted
	case HaltEvent:
		return ErrEventHalted
	case HaltMarket:
		return ErrMarketHalted
	}
	return nil
}

// The refusals of a halted market's placements and amends (409).
var (
	ErrMarketHalted = &Error{Kind: Conflict, Code: "market_halted", Field: "marketId",
		Message: "trading in this market is" + haltedMessage + "; GET /market says whether it is halted"}
	ErrEventHalted = &Error{Kind: Conflict, Code: "event_halted", Field: "marketId",
		Message: "trading in this market's event is" + haltedMessage + "; GET /market says whether it is halted"}
	ErrExchangeHalted = &Error{Kind: Conflict, Code: "exchange_halted", Field: "marketId",
		Message: "trading on the whole exchange is" + haltedMessage + "; GET /market says whether it is halted"}
)
