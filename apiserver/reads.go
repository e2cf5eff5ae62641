package apiserver

import (
	"net/http"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/google/uuid"

	"github.com/pmx-dev/pmx/httpkit"
	"github.com/pmx-dev/pmx/store"
	"github.com/pmx-dev/pmx/wire"
)

func fillOf(f *store.Fill) Fill { return wire.FillOf(f) }

// fills lists the account's fills, maker and taker, newest first, in cursor pages.
func (s *Server) fills(c *gin.Context) error {
	var market *uuid.UUID
	if v, ok := c.GetQuery("marketId"); ok {
		id, err := parseUUID("marketId", v)
		if err != nil {
			return err
		}
		market = &id
	}
	after, limit, err := queryPage(c, "GET /fills", defaultOrders, maxOrders)
	if err != nil {
		return err
	}
	rows, err := s.cfg.Store.Fills(c.Request.Context(), accountOf(c), market, after, limit)
	if err != nil {
		return err
	}
	next := nextCursor(rows, limit, func(f *store.Fill) store.Cursor { return store.Cursor{CreatedAt: f.CreatedAt, ID: f.TradeID} })
	c.JSON(http.StatusOK, gin.H{"fills": listOf(rows, fillOf), "nextCursor": next})
	return nil
}

// Candle intervals, and the most candles one call may span.
var candleIntervals = map[string]time.Duration{"1m": time.Minute, "5m": 5 * time.Minute, "1h": time.Hour, "1d": 24 * time.Hour}

const (
	maxCandles     = 1000
	defaultCandles = 100
)

func candleOf(c *store.Candle) Candle { return wire.CandleOf(c) }

// candles sums a market's trades up per interval, over a window of at most maxCandles intervals,
// from the minute and hour candles each batch keeps (store.Candles): a call never reads trades.
func (s *Server) candles(c *gin.Context) error {
	id, err := queryUUID(c, "marketId")
	if err != nil {
		return err
	}
	name := c.Query("interval")
	every, ok := candleIntervals[name]
	if !ok {
		return httpkit.FieldError("interval", "invalid_value", "interval must be one of 1m, 5m, 1h, 1d")
	}
	at := func(field string, def time.Time) (time.Time, error) {
		v, ok := c.GetQuery(field)
		if !ok {
			return def, nil
		}
		t, err := time.Parse(time.RFC3339Nano, v)
		if err != nil {
			return t, httpkit.FieldError(field, "invalid_value", "%s must be a time in RFC 3339 form, e.g. 2030-01-02T15:04:05Z", field)
		}
		return t.UTC(), nil
	}
	to, err := at("to", s.now())
	if err != nil {
		return err
	}
	from, err := at("from", to.Add(-defaultCandles*every))
	if err != nil {
		return err
	}
	if !from.Before(to) {
		return httpkit.FieldError("from", "out_of_range", "from must be before to")
	}
	if to.Sub(from) > maxCandles*every {
		return httpkit.FieldError("from", "out_of_range", "a call spans at most %d intervals (%s of %s candles): narrow from and to, or take a longer interval", maxCandles, maxCandles*every, name)
	}
	candles, err := s.ReadCandles(c.Request.Context(), id, every, from, to)
	if err != nil {
		return err
	}
	c.JSON(http.StatusOK, gin.H{"marketId": id, "interval": name, "from": from, "to": to, "candles": candles})
	return nil
}
