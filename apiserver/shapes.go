package apiserver

import (
	"github.com/pmx-dev/pmx/internal/apijson"
	"github.com/pmx-dev/pmx/internal/records"
)

// The public API's JSON shapes, as the API contract (openapi.yaml) defines them, are package
// apijson's, which the shards' account feeds and the market pages share. They are named here too
// for Go clients and tests that read the API.
type (
	Order         = apijson.Order
	Fill          = apijson.Fill
	Settlement    = apijson.Settlement
	Market        = apijson.Market
	Fees          = apijson.Fees
	Trade         = apijson.Trade
	Candle        = apijson.Candle
	BookView      = apijson.BookView
	OrderBook     = apijson.OrderBook
	Heartbeat     = apijson.Heartbeat
	PlacedOrder   = apijson.PlacedOrder
	Position      = apijson.Position
	Account       = apijson.Account
	QueuePosition = apijson.QueuePosition
)

// MarketOf is the API's shape of a market's row.
func MarketOf(m *records.Market) Market { return apijson.MarketOf(m) }

func orderOf(o *records.Order) Order               { return apijson.OrderOf(o) }
func placedOf(p *records.PlacedOrder) PlacedOrder  { return apijson.PlacedOf(p) }
func tradeOf(t *records.Trade) Trade               { return apijson.TradeOf(t) }
func positionOf(p *records.Position) Position      { return apijson.PositionOf(p) }
func accountOfRow(a *records.Account) Account      { return apijson.AccountOf(a) }
func listOf[R, S any](rows []R, of func(*R) S) []S { return apijson.ListOf(rows, of) }
