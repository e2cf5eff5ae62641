package domain

import "fmt"

// Kind is what sort of refusal an Error is, which the API answers with its status code.
type Kind uint8

const (
	// Invalid: the request cannot be carried out as sent (400).
	Invalid Kind = iota + 1
	// Forbidden: it names something of another account (403).
	Forbidden
)

// Error is a request the exchange refused, having changed nothing: a stable snake_case code, the
// request field at fault, and a sentence for the user saying what was wrong and what to do.
//
// Errors compare by code (errors.Is): OrderNotOpen("FILLED") is ErrOrderNotOpen.
type Error struct {
	Kind    Kind
	Code    string
	Field   string
	Message string
}

func (e *Error) Error() string { return e.Message }

// Is reports whether target is a refusal with the same code.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t.Code == e.Code
}

// The refusals of trading requests. Each is produced in one place: the shard, which holds the
// books, decides every one of them.
var (
	ErrUnknownMarket = &Error{Kind: Invalid, Code: "market_not_found", Field: "marketId",
		Message: "no market has this id; list markets with GET /markets"}
	ErrMarketNotOpen = &Error{Kind: Invalid, Code: "market_not_open", Field: "marketId",
		Message: "the market is not open for trading"}
	ErrInsufficientFunds = &Error{Kind: Invalid, Code: "insufficient_funds", Field: "quantity",
		Message: "not enough available cash: a BUY locks price × quantity cents"}
	ErrInsufficientShares = &Error{Kind: Invalid, Code: "insufficient_shares", Field: "quantity",
		Message: "not enough unlocked shares of this outcome to sell"}
	// ErrOrderNotOpen is an order that can no longer be cancelled; OrderNotOpen says which status
	// it is in, and is what the shard answers whenever it knows.
	ErrOrderNotOpen = &Error{Kind: Invalid, Code: "order_not_open", Field: "orderId",
		Message: "the order is no longer open: it was filled or cancelled"}
	ErrNotYourOrder = &Error{Kind: Forbidden, Code: "not_your_order", Field: "orderId",
		Message: "this order belongs to another account"}
)

// OrderNotOpen refuses to cancel an order in status, one that is not resting (FILLED, CANCELLED
// or PARTIALLY_FILLED_CANCELLED).
func OrderNotOpen(status string) *Error {
	return &Error{Kind: Invalid, Code: ErrOrderNotOpen.Code, Field: ErrOrderNotOpen.Field,
		Message: fmt.Sprintf("the order is %s: only OPEN and PARTIALLY_FILLED orders can be cancelled", status)}
}
