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

// Kind says what a match between a bid and an ask does to the shares of a market (DESIGN §3).
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
