package feed

import (
	"time"

	"github.com/google/uuid"
)

// The live feed's messages, as a WebSocket client receives them (documented in the API's
// AsyncAPI file, apiserver/asyncapi.yaml). Every message has a type; those of a subscription
// also name its channel and market.

// Channels a client may subscribe to.
const (
	ChannelBook      = "book"      // a snapshot, then every event of the market
	ChannelTrades    = "trades"    // the market's trade events
	ChannelTicker    = "ticker"    // best bid, best ask and last price, on change
	ChannelLifecycle = "lifecycle" // every market's status changes, and new markets
)

// Level is a price level of a snapshot: the YES price and the quantity resting there.
type Level struct {
	Price    int   `json:"price"`
	Quantity int64 `json:"quantity"`
}

// SnapshotMessage is a market's whole book as of Seq, the first message of a book subscription
// that does not resume. Bids are the YES bids (BUY YES and SELL NO), asks the YES asks (SELL YES
// and BUY NO), best first.
type SnapshotMessage struct {
	Type      string    `json:"type"` // "snapshot"
	Channel   string    `json:"channel"`
	MarketID  uuid.UUID `json:"marketId"`
	Seq       int64     `json:"seq"`
	Status    string    `json:"status"`
	Bids      []Level   `json:"bids"`
	Asks      []Level   `json:"asks"`
	LastPrice *int      `json:"lastPrice"`
}

// EventsMessage carries events of a market in sequence order: on the book channel every event
// (gapless: each seq is the one after the last), on the trades channel its trades.
type EventsMessage struct {
	Type     string    `json:"type"` // "events"
	Channel  string    `json:"channel"`
	MarketID uuid.UUID `json:"marketId"`
	Events   []Event   `json:"events"`
}

// TickerMessage is a market's best prices as of Seq, sent on subscribing and whenever one changes.
type TickerMessage struct {
	Type      string    `json:"type"` // "ticker"
	Channel   string    `json:"channel"`
	MarketID  uuid.UUID `json:"marketId"`
	Seq       int64     `json:"seq"`
	BestBid   *int      `json:"bestBid"`
	BestAsk   *int      `json:"bestAsk"`
	LastPrice *int      `json:"lastPrice"`
}

// Lifecycle changes.
const (
	ChangeListed = "listed" // a new market
	ChangeStatus = "status" // a market's status changed
	// ChangeHalted: trading in a market was halted without closing (MarketMessage.Halted says by
	// what: its own pause, its event's or the exchange's); ChangeResumed: it may trade again.
	ChangeHalted  = "halted"
	ChangeResumed = "resumed"
)

// MarketMessage is a lifecycle change of a market.
type MarketMessage struct {
	Type     string    `json:"type"` // "market"
	Channel  string    `json:"channel"`
	MarketID uuid.UUID `json:"marketId"`
	Change   string    `json:"change"`
	Status   string    `json:"status"`
	Seq      int64     `json:"seq"` // the market's last seq when the change was seen
	At       time.Time `json:"at"`
	// EventID names the event of a market that answers one of its outcomes (absent otherwise):
	// an event's markets move together, so its status changes are theirs.
	EventID *uuid.UUID `json:"eventId,omitempty"`
	// Halted, while trading in the market is halted, says by what: "market", "event" or
	// "exchange" (absent otherwise).
	Halted string `json:"halted,omitempty"`
}

func optionalPrice(p int) *int {
	if p == 0 {
		return nil
	}
	return &p
}
