package shardproto

import (
	"encoding/json"
	"time"

	"github.com/google/uuid"

	"github.com/pmx-dev/pmx/engine"
	"github.com/pmx-dev/pmx/internal/domain"
	"github.com/pmx-dev/pmx/internal/exchange"
	"github.com/pmx-dev/pmx/internal/feed"
	"github.com/pmx-dev/pmx/internal/records"
)

// Version 1 of the internal protocol: its messages, and their conversions to and from the types
// the processes work with, all in this one file. Version 1 is frozen as the builds before the
// protocol had a version sent it: the JSON names are the Go field names those builds had, the
// enums their numbers (engine.Side 1 BUY, 2 SELL; engine.Outcome 1 YES, 2 NO; engine.TimeInForce
// 0 GTC, 1 GTD, 2 IOC, 3 FOK; engine.SelfTrade 0 CANCEL_RESTING, 1 CANCEL_INCOMING; engine.Status
// 1 OPEN to 5 PARTIALLY_FILLED_CANCELLED; engine.CancelReason 0 none, 1 USER; domain.Kind 1
// Invalid, 2 Forbidden, 3 Conflict, 4 NotFound). Renaming a field of the process's types changes nothing
// here; renaming one here, or renumbering an enum, fails TestV1Golden. A change the older
// build could not read is version 2 (docs/architecture.md §9).

// PlaceV1 is a placement (POST /internal/v1/place, and each of place-many's).
type PlaceV1 struct {
	Account       int64     `json:"Account"`
	Market        uuid.UUID `json:"Market"`
	Side          uint8     `json:"Side"`
	Outcome       uint8     `json:"Outcome"`
	Price         int       `json:"Price"`
	Quantity      int64     `json:"Quantity"`
	TimeInForce   uint8     `json:"TimeInForce"`
	ExpiresAt     time.Time `json:"ExpiresAt"`
	PostOnly      bool      `json:"PostOnly"`
	SelfTrade     uint8     `json:"SelfTrade"`
	ClientOrderID string    `json:"ClientOrderID"`
	Placement     string    `json:"Placement"`
	// OrderGroupID is an addition to version 1 (issue 37), left out when zero so that a placement
	// in no group is the bytes it always was; a shard of the release before ignores it.
	OrderGroupID *uuid.UUID `json:"OrderGroupID,omitempty"`
}

func PlaceToV1(r exchange.PlaceRequest) PlaceV1 {
	return PlaceV1{Account: r.Account, Market: r.Market, Side: uint8(r.Side), Outcome: uint8(r.Outcome), Price: r.Price,
		Quantity: r.Quantity, TimeInForce: uint8(r.TimeInForce), ExpiresAt: r.ExpiresAt, PostOnly: r.PostOnly,
		SelfTrade: uint8(r.SelfTrade), ClientOrderID: r.ClientOrderID, Placement: r.Placement, OrderGroupID: optionalID(r.OrderGroupID)}
}

// optionalID is nil for the zero id.
func optionalID(id uuid.UUID) *uuid.UUID {
	if id == uuid.Nil {
		return nil
	}
	return &id
}

func (w PlaceV1) Request() exchange.PlaceRequest {
	return exchange.PlaceRequest{Account: w.Account, Market: w.Market, Side: engine.Side(w.Side), Outcome: engine.Outcome(w.Outcome),
		Price: w.Price, Quantity: w.Quantity, TimeInForce: engine.TimeInForce(w.TimeInForce), ExpiresAt: w.ExpiresAt,
		PostOnly: w.PostOnly, SelfTrade: engine.SelfTrade(w.SelfTrade), ClientOrderID: w.ClientOrderID, Placement: w.Placement,
		OrderGroupID: deref(w.OrderGroupID)}
}

// deref is the zero id for nil.
func deref(id *uuid.UUID) uuid.UUID {
	if id == nil {
		return uuid.Nil
	}
	return *id
}

// CancelV1 is a cancel (POST /internal/v1/cancel, and each of cancel-many's).
type CancelV1 struct {
	Account int64     `json:"Account"`
	Market  uuid.UUID `json:"Market"`
	Seq     int64     `json:"Seq"`
	Reason  uint8     `json:"Reason"`
}

func CancelToV1(r exchange.CancelRequest) CancelV1 {
	return CancelV1{Account: r.Account, Market: r.Market, Seq: r.Seq, Reason: uint8(r.Reason)}
}

func (w CancelV1) Request() exchange.CancelRequest {
	return exchange.CancelRequest{Account: w.Account, Market: w.Market, Seq: w.Seq, Reason: engine.CancelReason(w.Reason)}
}

// AmendV1 is an amend (POST /internal/v1/amend).
type AmendV1 struct {
	Account   int64     `json:"Account"`
	Market    uuid.UUID `json:"Market"`
	Seq       int64     `json:"Seq"`
	Side      uint8     `json:"Side"`
	Outcome   uint8     `json:"Outcome"`
	Price     int       `json:"Price"`
	Remaining int64     `json:"Remaining"`
}

func AmendToV1(r exchange.AmendRequest) AmendV1 {
	return AmendV1{Account: r.Account, Market: r.Market, Seq: r.Seq, Side: uint8(r.Side), Outcome: uint8(r.Outcome),
		Price: r.Price, Remaining: r.Remaining}
}

func (w AmendV1) Request() exchange.AmendRequest {
	return exchange.AmendRequest{Account: w.Account, Market: w.Market, Seq: w.Seq, Side: engine.Side(w.Side),
		Outcome: engine.Outcome(w.Outcome), Price: w.Price, Remaining: w.Remaining}
}

// CancelAllV1 is a cancel of an account's orders in markets (POST /internal/v1/cancel-all).
type CancelAllV1 struct {
	Account int64       `json:"account"`
	Markets []uuid.UUID `json:"markets"`
}

// TransitionV1 is a market's lifecycle change (POST /internal/v1/transition), which the operator
// sends to the market's owner. The builds before the protocol had a version have no such call
// (they answer 404): the operator waits for the shards' upgrade.
type TransitionV1 struct {
	Market uuid.UUID `json:"market"`
	Action string    `json:"action"`
}

// v1Actions spell each lifecycle action on the wire.
var v1Actions = []struct {
	action domain.MarketAction
	wire   string
}{
	{domain.CloseMarket, "close"}, {domain.ReopenMarket, "reopen"}, {domain.ResolveYes, "resolve YES"},
	{domain.ResolveNo, "resolve NO"}, {domain.CancelMarket, "cancel"},
}

func TransitionToV1(id uuid.UUID, a domain.MarketAction) TransitionV1 {
	w := TransitionV1{Market: id, Action: string(a)}
	for _, wa := range v1Actions {
		if wa.action == a {
			w.Action = wa.wire
		}
	}
	return w
}

// action is the transition's action; ok is false for a spelling version 1 does not have.
func (w TransitionV1) MarketAction() (a domain.MarketAction, ok bool) {
	for _, wa := range v1Actions {
		if wa.wire == w.Action {
			return wa.action, true
		}
	}
	return "", false
}

// OrderV1 is an order as a shard answers with it: the whole row, with its sequence number and
// account (records.Order).
type OrderV1 struct {
	ID             uuid.UUID  `json:"ID"`
	MarketID       uuid.UUID  `json:"MarketID"`
	Side           string     `json:"Side"`
	Outcome        string     `json:"Outcome"`
	Price          int        `json:"Price"`
	Quantity       int64      `json:"Quantity"`
	FilledQuantity int64      `json:"FilledQuantity"`
	Status         uint8      `json:"Status"`
	CreatedAt      time.Time  `json:"CreatedAt"`
	UpdatedAt      time.Time  `json:"UpdatedAt"`
	Seq            int64      `json:"Seq"`
	AccountID      int64      `json:"AccountID"`
	TimeInForce    string     `json:"TimeInForce"`
	ExpiresAt      *time.Time `json:"ExpiresAt"`
	PostOnly       bool       `json:"PostOnly"`
	SelfTrade      string     `json:"SelfTrade"`
	ClientOrderID  *string    `json:"ClientOrderID"`
	Placement      *string    `json:"Placement"`
	CancelReason   *string    `json:"CancelReason"`
	Priority       int64      `json:"Priority"`
	OrderGroupID   *uuid.UUID `json:"OrderGroupID,omitempty"` // an addition to version 1, as PlaceV1's
	// TakerFeeBps and MakerFeeBps, the schedule the order carries (issue 55), are an addition to
	// version 1, left out when zero.
	TakerFeeBps int `json:"TakerFeeBps,omitempty"`
	MakerFeeBps int `json:"MakerFeeBps,omitempty"`
}

func OrderToV1(o records.Order) OrderV1 {
	return OrderV1{ID: o.ID, MarketID: o.MarketID, Side: o.Side, Outcome: o.Outcome, Price: o.Price, Quantity: o.Quantity,
		FilledQuantity: o.FilledQuantity, Status: uint8(o.Status), CreatedAt: o.CreatedAt, UpdatedAt: o.UpdatedAt, Seq: o.Seq,
		AccountID: o.AccountID, TimeInForce: o.TimeInForce, ExpiresAt: o.ExpiresAt, PostOnly: o.PostOnly, SelfTrade: o.SelfTrade,
		ClientOrderID: o.ClientOrderID, Placement: o.Placement, CancelReason: o.CancelReason, Priority: o.Priority,
		OrderGroupID: o.OrderGroupID, TakerFeeBps: o.Fees.Taker, MakerFeeBps: o.Fees.Maker}
}

func (w OrderV1) Order() records.Order {
	return records.Order{ID: w.ID, MarketID: w.MarketID, Side: w.Side, Outcome: w.Outcome, Price: w.Price, Quantity: w.Quantity,
		FilledQuantity: w.FilledQuantity, Status: engine.Status(w.Status), CreatedAt: w.CreatedAt, UpdatedAt: w.UpdatedAt, Seq: w.Seq,
		AccountID: w.AccountID, TimeInForce: w.TimeInForce, ExpiresAt: w.ExpiresAt, PostOnly: w.PostOnly, SelfTrade: w.SelfTrade,
		ClientOrderID: w.ClientOrderID, Placement: w.Placement, CancelReason: w.CancelReason, Priority: w.Priority,
		OrderGroupID: w.OrderGroupID, Fees: engine.Fees{Taker: w.TakerFeeBps, Maker: w.MakerFeeBps}}
}

func OrdersToV1(os []records.Order) []OrderV1 {
	if os == nil {
		return nil // null, as the builds before sent no orders
	}
	out := make([]OrderV1, len(os))
	for i, o := range os {
		out[i] = OrderToV1(o)
	}
	return out
}

func OrdersOf(ws []OrderV1) []records.Order {
	if ws == nil {
		return nil
	}
	out := make([]records.Order, len(ws))
	for i, w := range ws {
		out[i] = w.Order()
	}
	return out
}

// tradeV1 is a fill of a placed or amended order, from the taker's side (records.Trade).
type tradeV1 struct {
	ID        uuid.UUID `json:"ID"`
	MarketID  uuid.UUID `json:"MarketID"`
	Outcome   string    `json:"Outcome"`
	Side      string    `json:"Side"`
	Price     int       `json:"Price"`
	Quantity  int64     `json:"Quantity"`
	YesPrice  int       `json:"YesPrice"`
	CreatedAt time.Time `json:"CreatedAt"`
	Fee       int64     `json:"Fee,omitempty"` // the taker's fee (issue 55): an addition to version 1, left out when zero
}

// PlacedV1 is an order just placed or amended with its fills: the order's fields and Trades, in
// one object (records.PlacedOrder embeds records.Order).
type PlacedV1 struct {
	OrderV1
	Trades []tradeV1 `json:"Trades"`
}

func PlacedToV1(p records.PlacedOrder) PlacedV1 {
	w := PlacedV1{OrderV1: OrderToV1(p.Order)}
	if p.Trades != nil {
		w.Trades = make([]tradeV1, len(p.Trades))
		for i, t := range p.Trades {
			w.Trades[i] = tradeV1{ID: t.ID, MarketID: t.MarketID, Outcome: t.Outcome, Side: t.Side, Price: t.Price,
				Quantity: t.Quantity, YesPrice: t.YesPrice, CreatedAt: t.CreatedAt, Fee: t.Fee}
		}
	}
	return w
}

func (w PlacedV1) Placed() records.PlacedOrder {
	p := records.PlacedOrder{Order: w.Order()}
	if w.Trades != nil {
		p.Trades = make([]records.Trade, len(w.Trades))
		for i, t := range w.Trades {
			p.Trades[i] = records.Trade{ID: t.ID, MarketID: t.MarketID, Outcome: t.Outcome, Side: t.Side, Price: t.Price,
				Quantity: t.Quantity, YesPrice: t.YesPrice, CreatedAt: t.CreatedAt, Fee: t.Fee}
		}
	}
	return p
}

// SnapshotV1 is a market's book (GET /internal/v1/book; exchange.Snapshot).
type SnapshotV1 struct {
	Status string  `json:"Status"`
	Epoch  int64   `json:"Epoch"`
	Seq    int64   `json:"Seq"`
	Depth  depthV1 `json:"Depth"`
}

type depthV1 struct {
	Yes viewV1 `json:"Yes"`
	No  viewV1 `json:"No"`
}

type viewV1 struct {
	Bids           []levelV1 `json:"Bids"`
	Asks           []levelV1 `json:"Asks"`
	LastTradePrice int       `json:"LastTradePrice"`
}

type levelV1 struct {
	Price    int   `json:"price"`
	Quantity int64 `json:"quantity"`
	Total    int64 `json:"total"`
}

func SnapshotToV1(s *exchange.Snapshot) SnapshotV1 {
	view := func(v engine.View) viewV1 {
		levels := func(ls []engine.Level) []levelV1 {
			if ls == nil {
				return nil
			}
			out := make([]levelV1, len(ls))
			for i, l := range ls {
				out[i] = levelV1{Price: l.Price, Quantity: l.Quantity, Total: l.Total}
			}
			return out
		}
		return viewV1{Bids: levels(v.Bids), Asks: levels(v.Asks), LastTradePrice: v.LastTradePrice}
	}
	return SnapshotV1{Status: string(s.Status), Epoch: s.Epoch, Seq: s.Seq, Depth: depthV1{Yes: view(s.Depth.Yes), No: view(s.Depth.No)}}
}

func (w SnapshotV1) Snapshot() exchange.Snapshot {
	view := func(v viewV1) engine.View {
		levels := func(ls []levelV1) []engine.Level {
			if ls == nil {
				return nil
			}
			out := make([]engine.Level, len(ls))
			for i, l := range ls {
				out[i] = engine.Level{Price: l.Price, Quantity: l.Quantity, Total: l.Total}
			}
			return out
		}
		return engine.View{Bids: levels(v.Bids), Asks: levels(v.Asks), LastTradePrice: v.LastTradePrice}
	}
	return exchange.Snapshot{Status: domain.MarketStatus(w.Status), Epoch: w.Epoch, Seq: w.Seq,
		Depth: engine.Depth{Yes: view(w.Depth.Yes), No: view(w.Depth.No)}}
}

// refusalV1 is a refusal by the exchange's rules, as the shard decided it (*domain.Error).
type refusalV1 struct {
	Kind    uint8  `json:"Kind"`
	Code    string `json:"Code"`
	Field   string `json:"Field"`
	Message string `json:"Message"`
}

func RefusalToV1(e *domain.Error) *refusalV1 {
	if e == nil {
		return nil
	}
	return &refusalV1{Kind: uint8(e.Kind), Code: e.Code, Field: e.Field, Message: e.Message}
}

func (w *refusalV1) Refusal() *domain.Error {
	return &domain.Error{Kind: domain.Kind(w.Kind), Code: w.Code, Field: w.Field, Message: w.Message}
}

// FeedBatchV1 is one line of a shard's stream of committed batches (GET /internal/v1/feed;
// feed.Batch). The events are Postgres's JSON as it is, whose shape the database keeps.
type FeedBatchV1 struct {
	Account int64           `json:"account,omitempty"`
	Holder  string          `json:"holder,omitempty"` // an account's batch: the holder whose stream it is in (left out: "", what a shard before it sends)
	Market  uuid.UUID       `json:"marketId"`
	First   int64           `json:"first"`
	Last    int64           `json:"last"`
	Status  string          `json:"status,omitempty"`
	Events  json.RawMessage `json:"events"`
	// An account's batch: the epoch its shard held each market of its events with (left out by a
	// shard before it: the front reads every market as moved, and Postgres for their order).
	Epochs map[uuid.UUID]int64 `json:"epochs,omitempty"`
}

func FeedBatchToV1(b feed.Batch) FeedBatchV1 {
	return FeedBatchV1{Account: b.Account, Holder: b.Holder, Market: b.Market, First: b.First, Last: b.Last, Status: b.Status, Events: b.Events, Epochs: b.Epochs}
}

func (w FeedBatchV1) Batch() feed.Batch {
	return feed.Batch{Account: w.Account, Holder: w.Holder, Market: w.Market, First: w.First, Last: w.Last, Status: w.Status, Events: w.Events, Epochs: w.Epochs}
}

// The answers of the many-at-once calls: one result per request, in order, each the answer or
// its error.
type PlaceResultV1 struct {
	Placed *PlacedV1 `json:"placed,omitempty"`
	Error  *ErrorV1  `json:"error,omitempty"`
}

type CancelResultV1 struct {
	Order *OrderV1 `json:"order,omitempty"`
	Error *ErrorV1 `json:"error,omitempty"`
}
