package shardproto

import (
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/google/uuid"

	"github.com/pmx-dev/pmx/engine"
	"github.com/pmx-dev/pmx/internal/domain"
	"github.com/pmx-dev/pmx/internal/exchange"
)

// The internal API checks every request as strictly as the public API checks its own, with the
// same rules (engine.Order.Validate for an order, domain.ValidClientOrderID for a client order
// id): the token is shared by every front, so whatever holds it is no more trusted than a client,
// and a request the shard cannot carry out must be refused before it joins a batch, where it would
// fail the batch and every other request in it. The fronts only send requests they validated, so
// a refusal here is a caller that is not a front, or a bug in one.
//
// A refused request is answered 400 in the API's error shape ("error", "details" with the code and
// the field, named as the internal protocol's JSON names it), and travels to a front as a
// refusal (domain.Invalid). In the many-at-once calls a refused request is its own result's error
// and the others are carried out.

// Bounds of the internal API's requests.
const (
	// MaxBody bounds a request body: a place-many of MaxMany placements is ~40 KB.
	MaxBody = 1 << 20
	// MaxMany bounds the requests of one many-at-once call: a front sends at most the public API's
	// batch (20 orders, 100 cancels) to one shard at once.
	MaxMany = 100
	// maxPlacement bounds a placement's fingerprint, which a front writes (~130 bytes).
	maxPlacement = 256
)

// invalid is a refused internal request: field is its JSON name.
func Invalid(field, format string, args ...any) *domain.Error {
	return &domain.Error{Kind: domain.Invalid, Code: "invalid_value", Field: field, Message: fmt.Sprintf(format, args...)}
}

// engineFields names the field of each error engine.Order.Validate returns.
var engineFields = []struct {
	err   error
	field string
}{
	{engine.ErrInvalidSide, "Side"}, {engine.ErrInvalidOutcome, "Outcome"}, {engine.ErrInvalidPrice, "Price"},
	{engine.ErrInvalidQuantity, "Quantity"}, {engine.ErrInvalidTimeInForce, "TimeInForce"},
	{engine.ErrInvalidSelfTrade, "SelfTrade"}, {engine.ErrPostOnlyMustRest, "PostOnly"},
}

// checkOrder refuses what engine.Order.Validate refuses, naming the field. The quantity's bound is
// the engine's (engine.MaxQuantity): the service's smaller limit (--max-quantity) is the fronts'
// setting, which a shard does not know.
func checkOrder(o engine.Order) *domain.Error {
	err := o.Validate()
	if err == nil {
		return nil
	}
	for _, f := range engineFields {
		if errors.Is(err, f.err) {
			msg := strings.TrimPrefix(err.Error(), "engine: ")
			if f.err == engine.ErrInvalidQuantity {
				msg = fmt.Sprintf("quantity must be from 1 to %d", int64(engine.MaxQuantity))
			}
			return Invalid(f.field, "%s", msg)
		}
	}
	return Invalid("", "%s", strings.TrimPrefix(err.Error(), "engine: "))
}

func checkAccount(account int64) *domain.Error {
	if account <= 0 {
		return Invalid("Account", "the account must be an account id, from 1")
	}
	return nil
}

func checkMarket(field string, id uuid.UUID) *domain.Error {
	if id == uuid.Nil {
		return Invalid(field, "the market must be a market's id, not the nil UUID")
	}
	return nil
}

func checkSeq(seq int64) *domain.Error {
	if seq <= 0 {
		return Invalid("Seq", "the order must be named by its sequence number, from 1")
	}
	return nil
}

// checkOrderRef checks what names an order: its account, its market and its sequence number.
func checkOrderRef(account int64, market uuid.UUID, seq int64) *domain.Error {
	if e := checkAccount(account); e != nil {
		return e
	}
	if e := checkMarket("Market", market); e != nil {
		return e
	}
	return checkSeq(seq)
}

// CheckPlace checks a placement.
func CheckPlace(r *exchange.PlaceRequest) *domain.Error {
	if e := checkAccount(r.Account); e != nil {
		return e
	}
	if e := checkMarket("Market", r.Market); e != nil {
		return e
	}
	if e := checkOrder(engine.Order{Side: r.Side, Outcome: r.Outcome, Price: r.Price, Quantity: r.Quantity,
		TimeInForce: r.TimeInForce, PostOnly: r.PostOnly, SelfTrade: r.SelfTrade}); e != nil {
		return e
	}
	switch {
	case r.TimeInForce == engine.GTD && r.ExpiresAt.IsZero():
		return Invalid("ExpiresAt", "a GTD order needs its expiry")
	case r.TimeInForce != engine.GTD && !r.ExpiresAt.IsZero():
		return Invalid("ExpiresAt", "an expiry is only for GTD orders")
	}
	// The account event that records the order carries its expiry in JSON, and a time JSON cannot
	// carry (a year past 9999 in UTC) would fail the whole batch: the API's bound, domain.CheckTime.
	if r.TimeInForce == engine.GTD {
		if err := domain.CheckTime("ExpiresAt", r.ExpiresAt); err != nil {
			var e *domain.Error
			errors.As(err, &e)
			return e
		}
	}
	if r.ClientOrderID != "" && !domain.ValidClientOrderID(r.ClientOrderID) {
		return Invalid("ClientOrderID", "a client order id must be %s", domain.ClientOrderIDRule)
	}
	// The fingerprint is stored as text: Postgres refuses a NUL or invalid UTF-8 in it, and
	// would fail the batch.
	if len(r.Placement) > maxPlacement || !utf8.ValidString(r.Placement) || strings.ContainsRune(r.Placement, 0) {
		return Invalid("Placement", "the placement's fingerprint must be at most %d bytes of UTF-8 text without NUL", maxPlacement)
	}
	return nil
}

// CheckCancel checks a cancel. A front cancels for its user only; the other reasons are the
// shard's own (expiry, heartbeat, the market's close).
func CheckCancel(r *exchange.CancelRequest) *domain.Error {
	if e := checkOrderRef(r.Account, r.Market, r.Seq); e != nil {
		return e
	}
	if r.Reason != engine.ReasonNone && r.Reason != engine.ReasonUser {
		return Invalid("Reason", "a cancel through the internal API is its owner's: Reason must be 0 or %d (USER)", engine.ReasonUser)
	}
	return nil
}

// CheckAmend checks an amend as the public API does: a new price, a new remaining quantity, or
// both (0 keeps one), with the order's side and outcome.
func CheckAmend(r *exchange.AmendRequest) *domain.Error {
	if e := checkOrderRef(r.Account, r.Market, r.Seq); e != nil {
		return e
	}
	if r.Price == 0 && r.Remaining == 0 {
		return Invalid("Price", "give the new price, the new remaining quantity, or both")
	}
	// Validate the amended order with the values the amend keeps standing in for themselves.
	o := engine.Order{Side: r.Side, Outcome: r.Outcome, Price: r.Price, Quantity: r.Remaining}
	if o.Price == 0 {
		o.Price = engine.MinPrice
	}
	if o.Quantity == 0 {
		o.Quantity = 1
	}
	if e := checkOrder(o); e != nil {
		if e.Field == "Quantity" {
			e.Field = "Remaining"
		}
		return e
	}
	return nil
}

// CheckTransition checks a lifecycle change and returns its action.
func CheckTransition(w *TransitionV1) (domain.MarketAction, *domain.Error) {
	if e := checkMarket("market", w.Market); e != nil {
		return "", e
	}
	a, ok := w.MarketAction()
	if !ok {
		return "", Invalid("action", "the action must be one of close, reopen, resolve YES, resolve NO, cancel")
	}
	return a, nil
}

// CheckCancelAll checks a cancel of all of an account's orders in markets.
func CheckCancelAll(w *CancelAllV1) *domain.Error {
	if e := checkAccount(w.Account); e != nil {
		return e
	}
	if len(w.Markets) == 0 || len(w.Markets) > MaxMany {
		return Invalid("markets", "name from 1 to %d markets", MaxMany)
	}
	for _, id := range w.Markets {
		if e := checkMarket("markets", id); e != nil {
			return e
		}
	}
	return nil
}
