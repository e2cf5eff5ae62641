package apiserver

import (
	"context"
	"errors"
	"time"

	"github.com/google/uuid"

	"github.com/pmx-dev/pmx/internal/apijson"
	"github.com/pmx-dev/pmx/internal/domain"
	"github.com/pmx-dev/pmx/internal/exchange"
	"github.com/pmx-dev/pmx/internal/records"
	"github.com/pmx-dev/pmx/internal/store"
)

// The public reads of a market, its book, trades and candles, in the API's shapes: the handlers
// of GET /market, /market/order-book, /market/trades and /market/candles answer with them,
// and the market pages (package marketpages, which reaches them through its Reads interface)
// show them, so that a page and the API can never disagree on what a market holds.

// ReadMarket reads one market, with its row (for what the API does not show: the last trade
// price, the feed's seq); store.ErrNotFound when there is none.
func (s *Server) ReadMarket(ctx context.Context, id uuid.UUID) (Market, records.Market, error) {
	m, err := s.cfg.Store.Market(ctx, id)
	if err != nil {
		return Market{}, m, err
	}
	return MarketOf(&m), m, nil
}

// ReadOrderBook reads a market's book from the shard that owns it: both views, each side's best
// exchange.DepthLevels levels, and the seq it reflects; domain.ErrUnknownMarket when there is none.
func (s *Server) ReadOrderBook(ctx context.Context, id uuid.UUID) (OrderBook, error) {
	snap, err := s.cfg.Exchange.OrderBook(ctx, id)
	if err != nil {
		return OrderBook{}, err
	}
	return orderBookOf(snap), nil
}

// orderBookOf is a shard's book in the API's shape.
func orderBookOf(snap *exchange.Snapshot) OrderBook {
	return OrderBook{Yes: apijson.ViewOf(&snap.Depth.Yes, exchange.DepthLevels), No: apijson.ViewOf(&snap.Depth.No, exchange.DepthLevels), Seq: snap.Seq}
}

// ReadTrades lists a market's last trades, newest first, at most limit; domain.ErrUnknownMarket
// when there is no such market.
func (s *Server) ReadTrades(ctx context.Context, id uuid.UUID, limit int) ([]Trade, error) {
	trades, err := s.cfg.Store.Trades(ctx, id, limit)
	if err != nil {
		return nil, err
	}
	if len(trades) == 0 {
		// A market with trades exists; only an empty answer needs telling apart from no market.
		if _, err := s.cfg.Store.Market(ctx, id); errors.Is(err, store.ErrNotFound) {
			return nil, domain.ErrUnknownMarket
		} else if err != nil {
			return nil, err
		}
	}
	return listOf(trades, tradeOf), nil
}

// ReadCandles sums a market's trades up per interval of every, UTC-aligned, from the interval
// that holds from to those that begin before to, from the minute and hour candles each batch
// keeps (store.Candles): it never reads trades. domain.ErrUnknownMarket when there is no such
// market. The caller bounds the window (GET /market/candles: maxCandles intervals).
func (s *Server) ReadCandles(ctx context.Context, id uuid.UUID, every time.Duration, from, to time.Time) ([]Candle, error) {
	if _, err := s.cfg.Store.Market(ctx, id); errors.Is(err, store.ErrNotFound) {
		return nil, domain.ErrUnknownMarket
	} else if err != nil {
		return nil, err
	}
	rows, err := s.cfg.Store.Candles(ctx, id, every, from, to)
	if err != nil {
		return nil, err
	}
	return listOf(rows, candleOf), nil
}
