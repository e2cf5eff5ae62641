package apijson

import (
	"time"

	"github.com/google/uuid"

	"github.com/pmx-dev/pmx/engine"
	"github.com/pmx-dev/pmx/internal/records"
)

// The public reads' shapes of markets, books, trades and candles: written by the API server's
// handlers and by the market pages (package marketpages), which embed the very JSON the API
// answers for their script to start from.

// Market is a YES/NO market.
type Market struct {
	ID          uuid.UUID  `json:"id"`
	URL         *string    `json:"url"`
	Question    string     `json:"question"`
	Description *string    `json:"description"`
	Category    string     `json:"category"`
	Status      string     `json:"status"`
	ClosesAt    *time.Time `json:"closesAt"`
	ResolvesAt  *time.Time `json:"resolvesAt"`
	Resolved    bool       `json:"resolved"`
	Outcome     *string    `json:"outcome"` // the resolution, YES or NO; null until resolved
	LabelA      string     `json:"labelA"`
	LabelB      string     `json:"labelB"`
	CreatedAt   time.Time  `json:"createdAt"`
	UpdatedAt   time.Time  `json:"updatedAt"`

	// A market of an event (package event) answers one of its outcomes: the event and the
	// outcome's key. Absent for a market of its own.
	EventID    *uuid.UUID `json:"eventId,omitempty"`
	OutcomeKey *string    `json:"outcomeKey,omitempty"`

	// Halted, while trading in the market is halted (docs/architecture.md §4, "Halts"), says by
	// what: "market" (its own pause), "event" (its event's) or "exchange". Absent otherwise.
	Halted string `json:"halted,omitempty"`
	// A market listed by a series (GET /series), or whose event was: the series. Absent for
	// any other.
	SeriesID *uuid.UUID `json:"seriesId,omitempty"`
	// Fees is the fee schedule an order placed now carries: the market's own, else its event's;
	// both rates 0 in a market without fees (docs/fees.md).
	Fees Fees `json:"fees"`
}

// Fees is a fee schedule (engine.Fees): a taker and a maker rate in basis points of P × (1 − P)
// per share; a negative maker rate is a rebate.
type Fees struct {
	TakerBps int `json:"takerBps"`
	MakerBps int `json:"makerBps"`
}

// FeesOf is the API's shape of a schedule.
func FeesOf(f engine.Fees) Fees { return Fees{TakerBps: f.Taker, MakerBps: f.Maker} }

// MarketOf is the API's shape of a market's row.
func MarketOf(m *records.Market) Market {
	return Market{ID: m.ID, URL: m.URL, Question: m.Question, Description: m.Description, Category: m.Category,
		Status: string(m.Status), ClosesAt: m.ClosesAt, ResolvesAt: m.ResolvesAt, Resolved: m.Resolved, Outcome: m.Outcome,
		LabelA: m.LabelA, LabelB: m.LabelB, CreatedAt: m.CreatedAt, UpdatedAt: m.UpdatedAt,
		EventID: m.EventID, OutcomeKey: m.OutcomeKey, Halted: string(m.Halted), SeriesID: m.SeriesID, Fees: FeesOf(m.Fees)}
}

// Trade is an execution, seen from the taker's side.
type Trade struct {
	ID        uuid.UUID `json:"id"`
	MarketID  uuid.UUID `json:"marketId"`
	Outcome   string    `json:"outcome"`
	Side      string    `json:"side"`
	Price     int       `json:"price"`
	Quantity  int64     `json:"quantity"`
	YesPrice  int       `json:"yesPrice"`
	CreatedAt time.Time `json:"createdAt"`
}

// TradeOf is the API's shape of a trade's row.
func TradeOf(t *records.Trade) Trade {
	return Trade{ID: t.ID, MarketID: t.MarketID, Outcome: t.Outcome, Side: t.Side, Price: t.Price,
		Quantity: t.Quantity, YesPrice: t.YesPrice, CreatedAt: t.CreatedAt}
}

// Candle is one interval of a market's trades: the YES price's open, high, low and close, and
// the shares traded.
type Candle struct {
	Start  time.Time `json:"start"`
	Open   int       `json:"open"`
	High   int       `json:"high"`
	Low    int       `json:"low"`
	Close  int       `json:"close"`
	Volume int64     `json:"volume"`
	Trades int64     `json:"trades"`
}

// CandleOf is the API's shape of a candle.
func CandleOf(c *records.Candle) Candle {
	return Candle{Start: c.Start.UTC(), Open: c.Open, High: c.High, Low: c.Low, Close: c.Close, Volume: c.Volume, Trades: c.Trades}
}

// BookView is one outcome's view of a book: its best levels a side and its last trade price.
type BookView struct {
	Bids           []engine.Level `json:"bids"`
	Asks           []engine.Level `json:"asks"`
	LastTradePrice *int           `json:"lastTradePrice"`
}

// OrderBook is the answer of GET /market/order-book: both views, and the feed's seq they reflect.
type OrderBook struct {
	Yes BookView `json:"orderBookYes"`
	No  BookView `json:"orderBookNo"`
	Seq int64    `json:"seq"`
}

// ViewOf shows a view's best levels levels a side.
func ViewOf(v *engine.View, levels int) BookView {
	b := BookView{Bids: v.Bids[:min(len(v.Bids), levels)], Asks: v.Asks[:min(len(v.Asks), levels)]}
	if b.Bids == nil {
		b.Bids = []engine.Level{}
	}
	if b.Asks == nil {
		b.Asks = []engine.Level{}
	}
	if v.LastTradePrice != 0 {
		p := v.LastTradePrice
		b.LastTradePrice = &p
	}
	return b
}
