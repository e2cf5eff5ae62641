// Package history records what a test's clients asked the exchange and what it answered, and
// checks that history, after the run, against the log Postgres holds (orders, and trades in seq
// order with their batch's time): test support, like internal/exchangetest's helpers.
//
// The invariants in SQL and the book comparisons see the end state only. Check sees the answers:
// a fill reported at a price or quantity the log does not have, an acknowledged placement that is
// not the order Postgres holds, a cancel answered CANCELLED for an order that then filled, the
// retries of one clientOrderId answered with two orders, a client reading an order's state older
// than one it already saw. Each check and what it compares is on Check.
//
// A test wraps each request its clients send with a Recorder (Begin, then End with the status and
// body), which is safe for concurrent use and changes nothing the client does.
//
// The linearizability part — each order's operations (its placement, amends, cancels and reads,
// and the fills the log records) against a sequential model of the order's status and filled
// quantity, in an order consistent with their real-time windows — uses Porcupine
// (github.com/anishathalye/porcupine): it is the well-kept, widely used Go checker (Jepsen's
// Knossos algorithm, with P-compositionality), small, with no dependencies, and it checks one
// partition (here one order) at a time, which keeps the search tiny. The model and why its fills
// are sound with the batch's clock are on linearizeOrder.
//
// Not checked yet: a resting order a taker passed over altogether (a better price, or an earlier
// order at its price, left untouched while the taker met a worse one: that needs the book at the
// batch, which the log does not keep), and the operations the crash test does not send
// (conversions, reads of books and positions). Check reads the orders and trades of the markets the history names, so it suits a
// test's few thousand orders, not a load test's millions.
package history

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/pmx-dev/pmx/internal/apijson"
)

// Kind is what an operation did.
type Kind string

// The operations a history holds.
const (
	Place  Kind = "place"  // POST /order (a replay of a client order id included)
	Amend  Kind = "amend"  // POST /order/amend
	Cancel Kind = "cancel" // a cancel of one order
	Read   Kind = "read"   // a read of one order's state
)

// Request is what an operation asked: the order's fields for a placement; the order (by id or by
// client order id) and its new price and quantity for an amend; the order for a cancel or a read.
type Request struct {
	MarketID      uuid.UUID `json:"marketId"`
	OrderID       uuid.UUID `json:"orderId"`
	Side          string    `json:"side"`
	Outcome       string    `json:"outcome"`
	Price         int       `json:"price"`
	Quantity      int64     `json:"quantity"`
	ClientOrderID string    `json:"clientOrderId"`
	TimeInForce   string    `json:"timeInForce"`
}

func (r Request) String() string {
	var f []string
	for _, kv := range []struct {
		k    string
		v    any
		zero bool
	}{{"market", r.MarketID, r.MarketID == uuid.Nil}, {"order", r.OrderID, r.OrderID == uuid.Nil}, {"clientOrderId", r.ClientOrderID, r.ClientOrderID == ""},
		{"side", r.Side, r.Side == ""}, {"outcome", r.Outcome, r.Outcome == ""}, {"price", r.Price, r.Price == 0},
		{"quantity", r.Quantity, r.Quantity == 0}, {"tif", r.TimeInForce, r.TimeInForce == ""}} {
		if !kv.zero {
			f = append(f, fmt.Sprintf("%s=%v", kv.k, kv.v))
		}
	}
	return "{" + strings.Join(f, " ") + "}"
}

// RequestOf is the request a JSON body (a map, or a struct with the API's field names) asks.
func RequestOf(body any) Request {
	var r Request
	raw, err := json.Marshal(body)
	if err == nil {
		err = json.Unmarshal(raw, &r)
	}
	if err != nil {
		panic(fmt.Sprintf("history: a request body that is not the API's: %v", err))
	}
	return r
}

// Answer is what the exchange answered.
type Answer struct {
	HTTP  int    // the status code; 0 when no answer came (Err says why)
	Err   string // the transport's error, when no answer came
	Code  string // details.code of an error's body
	Order *apijson.Order
	// Fills are the trades a placement's or an amend's answer reported, in order; FillsReported
	// says whether it reported them at all.
	Fills         []apijson.Trade
	FillsReported bool
}

// Op is one operation of one client: its request, when it was sent (Call) and when its answer
// came (Return), both by the test's clock, and the answer.
type Op struct {
	Client  string    // the client's name, which orders the reads it saw
	Account uuid.UUID // the account the client trades for
	Kind    Kind
	Req     Request
	Call    time.Time
	Return  time.Time
	Ans     Answer
}

// Acked reports whether the exchange answered the operation with an order (2xx).
func (o *Op) Acked() bool { return o.Ans.HTTP/100 == 2 && o.Ans.Order != nil }

// Unknown reports whether the operation's outcome is unknown: no answer, or a 5xx (503
// outcome_unknown, and 503 unavailable, which a front may answer with a write under way).
func (o *Op) Unknown() bool { return o.Ans.HTTP == 0 || o.Ans.HTTP >= 500 }

func (o *Op) String() string {
	ans := fmt.Sprintf("%d %s", o.Ans.HTTP, o.Ans.Code)
	switch {
	case o.Ans.HTTP == 0:
		ans = "no answer: " + o.Ans.Err
	case o.Ans.Order != nil:
		ans = fmt.Sprintf("%d order %s %s filled %d of %d at %d", o.Ans.HTTP, o.Ans.Order.ID, o.Ans.Order.Status,
			o.Ans.Order.FilledQuantity, o.Ans.Order.Quantity, o.Ans.Order.Price)
	}
	return fmt.Sprintf("%s's %s %s [%s, %s] → %s", o.Client, o.Kind, o.Req,
		o.Call.Format("15:04:05.000000"), o.Return.Format("15:04:05.000000"), ans)
}

// Recorder collects a run's operations; it is safe for concurrent use.
type Recorder struct {
	mu  sync.Mutex
	ops []Op
}

// Pending is an operation sent and not yet answered.
type Pending struct {
	r  *Recorder
	op Op
}

// Begin records that a client sends an operation, now.
func (r *Recorder) Begin(client string, account uuid.UUID, kind Kind, req Request) *Pending {
	return &Pending{r: r, op: Op{Client: client, Account: account, Kind: kind, Req: req, Call: time.Now()}}
}

// End records the operation's answer, now: the response's status and body, or the error that
// stood for them.
func (p *Pending) End(resp *http.Response, body []byte, err error) {
	op := p.op
	op.Return = time.Now()
	switch {
	case err != nil && resp == nil:
		op.Ans.Err = err.Error()
	default:
		op.Ans = answerOf(resp.StatusCode, body)
		if err != nil { // the body could not be read: the status stands, the body does not
			op.Ans.Err = err.Error()
		}
	}
	p.r.mu.Lock()
	p.r.ops = append(p.r.ops, op)
	p.r.mu.Unlock()
}

// answerOf reads an answer's body: an order (with the trades a placement or an amend made, when
// it lists them) or an error.
func answerOf(status int, body []byte) Answer {
	a := Answer{HTTP: status}
	if status/100 != 2 {
		var e struct {
			Details struct {
				Code string `json:"code"`
			} `json:"details"`
		}
		if json.Unmarshal(body, &e) == nil {
			a.Code = e.Details.Code
		}
		return a
	}
	var o struct {
		apijson.Order
		Trades *[]apijson.Trade `json:"trades"`
	}
	if json.Unmarshal(body, &o) != nil || o.ID == uuid.Nil {
		return a
	}
	a.Order = &o.Order
	if o.Trades != nil {
		a.Fills, a.FillsReported = *o.Trades, true
	}
	return a
}

// History returns the operations answered so far, in the order their answers came.
func (r *Recorder) History() []Op {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Op(nil), r.ops...)
}
