package engine

import (
	"errors"
	"fmt"
)

// Side is BUY or SELL.
type Side uint8

// Sides. The zero value is invalid so that a forgotten field is caught.
const (
	Buy Side = iota + 1
	Sell
)

func (s Side) String() string {
	switch s {
	case Buy:
		return "BUY"
	case Sell:
		return "SELL"
	}
	return fmt.Sprintf("Side(%d)", uint8(s))
}

// Outcome is YES or NO.
type Outcome uint8

// Outcomes. The zero value is invalid.
const (
	Yes Outcome = iota + 1
	No
)

func (o Outcome) String() string {
	switch o {
	case Yes:
		return "YES"
	case No:
		return "NO"
	}
	return fmt.Sprintf("Outcome(%d)", uint8(o))
}

// Status is the lifecycle state of an order, spelled as the public API spells it.
type Status uint8

// Order statuses.
const (
	StatusOpen Status = iota + 1
	StatusPartiallyFilled
	StatusFilled
	StatusCancelled
	StatusPartiallyFilledCancelled
)

var statusNames = [...]string{
	StatusOpen:                     "OPEN",
	StatusPartiallyFilled:          "PARTIALLY_FILLED",
	StatusFilled:                   "FILLED",
	StatusCancelled:                "CANCELLED",
	StatusPartiallyFilledCancelled: "PARTIALLY_FILLED_CANCELLED",
}

func (s Status) String() string {
	if s >= StatusOpen && s <= StatusPartiallyFilledCancelled {
		return statusNames[s]
	}
	return fmt.Sprintf("Status(%d)", uint8(s))
}

// Resting reports whether an order in this status sits in the book.
func (s Status) Resting() bool { return s == StatusOpen || s == StatusPartiallyFilled }

// Kind says what a match between a bid and an ask does to the shares of a market
// (docs/architecture.md §3).
type Kind uint8

// Match kinds.
const (
	// TransferYes: BUY YES meets SELL YES; a YES share changes hands.
	TransferYes Kind = iota + 1
	// TransferNo: SELL NO meets BUY NO; a NO share changes hands.
	TransferNo
	// Mint: BUY YES meets BUY NO; a new YES/NO pair is created from 100 cents of the two buyers.
	Mint
	// Burn: SELL NO meets SELL YES; a YES/NO pair is retired and its 100 cents paid to the sellers.
	Burn
)

func (k Kind) String() string {
	switch k {
	case TransferYes:
		return "TRANSFER_YES"
	case TransferNo:
		return "TRANSFER_NO"
	case Mint:
		return "MINT"
	case Burn:
		return "BURN"
	}
	return fmt.Sprintf("Kind(%d)", uint8(k))
}

// TimeInForce says how long an order may wait in the book for a counterparty.
//
// GTD is GTC to the engine: time never enters the engine, so the caller, which stamps and persists
// an order's expiry, cancels a GTD order once it expires (reason EXPIRED). The engine keeps the value
// only so that one vocabulary spells every time in force and a restored book round-trips it.
type TimeInForce uint8

// Times in force. The zero value is GTC, so that an order built without one behaves as every order
// did before there was a choice. Those that rest come first, so that one comparison tells them
// apart on the hot path.
const (
	// GTC rests whatever does not fill at once, until it fills or is cancelled.
	GTC TimeInForce = iota
	// GTD is GTC until the caller expires it.
	GTD
	// IOC (immediate or cancel) fills what crosses now and cancels the rest: it never rests.
	IOC
	// FOK (fill or kill) fills its whole quantity now or does nothing at all: it never rests.
	FOK
)

var tifNames = [...]string{GTC: "GTC", GTD: "GTD", IOC: "IOC", FOK: "FOK"}

func (t TimeInForce) String() string {
	if t <= FOK {
		return tifNames[t]
	}
	return fmt.Sprintf("TimeInForce(%d)", uint8(t))
}

// Rests reports whether an order with this time in force may rest in the book.
func (t TimeInForce) Rests() bool { return t <= GTD }

// SelfTrade is what self-trade prevention does when an order would meet a resting order of its own
// account. An order never trades with its own account.
type SelfTrade uint8

// Self-trade prevention modes. The zero value is CancelResting, the rule from before there was a
// choice.
const (
	// CancelResting cancels each own resting order met (Result.Cancelled) and matching goes on.
	CancelResting SelfTrade = iota
	// CancelIncoming cancels the incoming order's remainder at the first own resting order met:
	// fills made before stand and the resting order stays.
	CancelIncoming
)

func (m SelfTrade) String() string {
	switch m {
	case CancelResting:
		return "CANCEL_RESTING"
	case CancelIncoming:
		return "CANCEL_INCOMING"
	}
	return fmt.Sprintf("SelfTrade(%d)", uint8(m))
}

// CancelReason says why an order was cancelled. The engine itself gives only ReasonIOC, ReasonFOK
// and ReasonSelfTrade; the others are the caller's, defined here so that one type spells them all.
type CancelReason uint8

// Cancel reasons. The zero value, ReasonNone, is an order that was not cancelled.
const (
	ReasonNone CancelReason = iota
	// ReasonUser: its owner cancelled it.
	ReasonUser
	// ReasonIOC: the unfilled remainder of an IOC order.
	ReasonIOC
	// ReasonFOK: a FOK order that could not fill entirely.
	ReasonFOK
	// ReasonExpired: a GTD order reached its expiry.
	ReasonExpired
	// ReasonSelfTrade: self-trade prevention, under either mode.
	ReasonSelfTrade
	// ReasonMarketClosed: its market stopped trading.
	ReasonMarketClosed
	// ReasonHeartbeat: its account's dead-man switch tripped.
	ReasonHeartbeat
	// ReasonOrderGroup: its order group's fills within its window reached the group's limit.
	ReasonOrderGroup
)

var reasonNames = [...]string{
	ReasonUser:         "USER",
	ReasonIOC:          "IOC",
	ReasonFOK:          "FOK",
	ReasonExpired:      "EXPIRED",
	ReasonSelfTrade:    "SELF_TRADE",
	ReasonMarketClosed: "MARKET_CLOSED",
	ReasonHeartbeat:    "HEARTBEAT",
	ReasonOrderGroup:   "ORDER_GROUP",
}

// String is the API's name of the reason, and "" for ReasonNone, which the API leaves out.
func (c CancelReason) String() string {
	if c <= ReasonOrderGroup {
		return reasonNames[c]
	}
	return fmt.Sprintf("CancelReason(%d)", uint8(c))
}

// OrderID identifies an order. The caller assigns it and must keep it unique within a Book.
type OrderID uint64

// AccountID identifies the account that owns an order; self-trade prevention compares it.
type AccountID uint64

// Price limits, in cents. A winning share pays Payout.
const (
	MinPrice = 1
	MaxPrice = 99
	Payout   = 100
)

// MaxQuantity bounds an order's quantity so that no cash amount (price × quantity, summed over a
// book) can overflow an int64. Services impose their own, much smaller, limit on top.
const MaxQuantity = 1 << 40

// Errors returned by Book methods. A call that returns an error has changed nothing.
var (
	ErrInvalidSide     = errors.New("engine: side must be BUY or SELL")
	ErrInvalidOutcome  = errors.New("engine: outcome must be YES or NO")
	ErrInvalidPrice    = errors.New("engine: price must be an integer from 1 to 99")
	ErrInvalidQuantity = errors.New("engine: quantity must be greater than 0")
	ErrDuplicateOrder  = errors.New("engine: an order with this id is already in the book")
	ErrUnknownOrder    = errors.New("engine: no resting order with this id")
	ErrCrossedBook     = errors.New("engine: restored orders cross the book")

	ErrInvalidTimeInForce = errors.New("engine: time in force must be GTC, GTD, IOC or FOK")
	ErrInvalidSelfTrade   = errors.New("engine: self-trade mode must be CANCEL_RESTING or CANCEL_INCOMING")
	ErrPostOnlyMustRest   = errors.New("engine: a post-only order must be GTC or GTD")
	ErrPostOnlyWouldCross = errors.New("engine: a post-only order would cross the book")
)

// ParseSide reads "BUY" or "SELL".
func ParseSide(s string) (Side, bool) {
	switch s {
	case "BUY":
		return Buy, true
	case "SELL":
		return Sell, true
	}
	return 0, false
}

// ParseOutcome reads "YES" or "NO".
func ParseOutcome(s string) (Outcome, bool) {
	switch s {
	case "YES":
		return Yes, true
	case "NO":
		return No, true
	}
	return 0, false
}

// ParseStatus reads an order status as String spells it.
func ParseStatus(s string) (Status, bool) {
	for st := StatusOpen; st <= StatusPartiallyFilledCancelled; st++ {
		if statusNames[st] == s {
			return st, true
		}
	}
	return 0, false
}

// ParseTimeInForce reads a time in force as String spells it.
func ParseTimeInForce(s string) (TimeInForce, bool) {
	for t := GTC; t <= FOK; t++ {
		if tifNames[t] == s {
			return t, true
		}
	}
	return 0, false
}

// ParseSelfTrade reads "CANCEL_RESTING" or "CANCEL_INCOMING".
func ParseSelfTrade(s string) (SelfTrade, bool) {
	switch s {
	case "CANCEL_RESTING":
		return CancelResting, true
	case "CANCEL_INCOMING":
		return CancelIncoming, true
	}
	return 0, false
}

// ParseCancelReason reads a cancel reason as String spells it; "" is not one.
func ParseCancelReason(s string) (CancelReason, bool) {
	for c := ReasonUser; c <= ReasonOrderGroup; c++ {
		if reasonNames[c] == s {
			return c, true
		}
	}
	return 0, false
}
