package domain

import "fmt"

// Kind is what sort of refusal an Error is, which the API answers with its status code.
type Kind uint8

const (
	// Invalid: the request cannot be carried out as sent (400).
	Invalid Kind = iota + 1
	// Forbidden: it names something of another account (403).
	Forbidden
	// Conflict: it contradicts an earlier request (409).
	Conflict
	// NotFound: it names something that does not exist, where the API answers 404 (events).
	NotFound
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
	ErrPostOnlyWouldCross = &Error{Kind: Invalid, Code: "post_only_would_cross", Field: "postOnly",
		Message: "a post-only order must not trade on arrival, and this one would meet a resting order: lower a BUY's price or raise a SELL's"}
	ErrClientOrderIDReused = &Error{Kind: Conflict, Code: "client_order_id_reused", Field: "clientOrderId",
		Message: "this clientOrderId was given to a placement with other parameters; a client order id names one order for ever, so choose a new one"}
	// ErrClientOrderIDTaken is a placement whose client order id an order already has (or one
	// earlier in the same batch): the front then answers with that order, or ErrClientOrderIDReused.
	ErrClientOrderIDTaken = &Error{Kind: Conflict, Code: "client_order_id_taken", Field: "clientOrderId",
		Message: "an order already has this clientOrderId"}
	// ErrOrderGroupNotFound is a placement into an order group that does not exist or belongs to
	// another account (which is not told apart, as GET /order-groups/{id} does not).
	ErrOrderGroupNotFound = &Error{Kind: Invalid, Code: "order_group_not_found", Field: "orderGroupId",
		Message: "the account has no order group with this id; make one with POST /order-groups, list them with GET /order-groups"}
	// ErrOrderGroupTriggered is a placement into a group whose fills reached its limit.
	ErrOrderGroupTriggered = &Error{Kind: Conflict, Code: "order_group_triggered", Field: "orderGroupId",
		Message: "this order group's fills within its window reached its fillLimit, so its orders were cancelled and it takes no new ones: look at what filled, then POST /order-groups/{id}/reset to trade in it again"}
)

// TooManyOpenOrders refuses a placement that would rest one order more than the limit of open
// orders an account may have in one market.
func TooManyOpenOrders(limit int) *Error {
	return &Error{Kind: Invalid, Code: "too_many_open_orders", Field: "marketId",
		Message: fmt.Sprintf("the account has %d open orders in this market, the most it may have: cancel some, or use IOC or FOK, which never rest", limit)}
}

// OrderNotOpen refuses to cancel an order in status, one that is not resting (FILLED, CANCELLED
// or PARTIALLY_FILLED_CANCELLED).
func OrderNotOpen(status string) *Error {
	return &Error{Kind: Invalid, Code: ErrOrderNotOpen.Code, Field: ErrOrderNotOpen.Field,
		Message: fmt.Sprintf("the order is %s: only OPEN and PARTIALLY_FILLED orders can be cancelled or amended", status)}
}

// RiskLimitCode is the code of a refusal by an account's self-set risk limits.
const RiskLimitCode = "risk_limit_exceeded"

// ErrRiskLimitExceeded compares equal (errors.Is) to every refusal by a risk limit.
var ErrRiskLimitExceeded = &Error{Kind: Invalid, Code: RiskLimitCode}

// PositionLimitExceeded refuses an order that would take the account's position in one outcome
// of a market, if every open BUY order of it there filled, from used past its limit (the field
// maxPosition of PUT /account/risk-limits).
func PositionLimitExceeded(limit, used, adding int64, outcome string) *Error {
	return &Error{Kind: Invalid, Code: RiskLimitCode, Field: "maxPosition",
		Message: fmt.Sprintf("the order could take the account's %s position in this market to %d shares (%d held or on open BUY orders, %d more), over its maxPosition of %d: buy less, cancel BUY orders, or raise the limit with PUT /account/risk-limits",
			outcome, used+adding, used, adding, limit)}
}

// LockedCashLimitExceeded refuses an order that would take the cash the account's open orders
// lock, across all markets, from used past its limit (maxLockedCash).
func LockedCashLimitExceeded(limit, used, adding int64) *Error {
	return &Error{Kind: Invalid, Code: RiskLimitCode, Field: "maxLockedCash",
		Message: fmt.Sprintf("the order would lock %d cents more, taking the account's locked cash from %d to %d, over its maxLockedCash of %d: buy less, cancel BUY orders, or raise the limit with PUT /account/risk-limits",
			adding, used, used+adding, limit)}
}
