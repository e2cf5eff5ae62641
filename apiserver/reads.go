package apiserver

import (
	"net/http"
	"net/url"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/google/uuid"

	"github.com/pmx-dev/pmx/internal/apijson"
	"github.com/pmx-dev/pmx/internal/kit/httpkit"
	"github.com/pmx-dev/pmx/internal/records"
	"github.com/pmx-dev/pmx/internal/store"
)

func fillOf(f *records.Fill) Fill { return apijson.FillOf(f) }

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
	next := nextCursor(rows, limit, func(f *records.Fill) store.Cursor { return store.Cursor{CreatedAt: f.CreatedAt, ID: f.TradeID} })
	c.JSON(http.StatusOK, gin.H{"fills": listOf(rows, fillOf), "nextCursor": next})
	return nil
}

// Candle intervals, and the most candles one call may span.
var candleIntervals = map[string]time.Duration{"1m": time.Minute, "5m": 5 * time.Minute, "1h": time.Hour, "1d": 24 * time.Hour}

const (
	maxCandles     = 1000
	defaultCandles = 100
)

func candleOf(c *records.Candle) Candle { return apijson.CandleOf(c) }

// candleWindow is what a candles query asks for: the interval and the window, from before to.
type candleWindow struct {
	Interval string
	Every    time.Duration
	From, To time.Time
}

// candleWindowOf reads a candles query's interval, from and to (to defaults to now, from to
// defaultCandles intervals before to), and checks the window.
func candleWindowOf(q url.Values, now time.Time) (candleWindow, error) {
	w := candleWindow{Interval: q.Get("interval")}
	var ok bool
	if w.Every, ok = candleIntervals[w.Interval]; !ok {
		return w, httpkit.FieldError("interval", "invalid_value", "interval must be one of 1m, 5m, 1h, 1d")
	}
	at := func(field string, def time.Time) (time.Time, error) {
		if !q.Has(field) {
			return def, nil
		}
		return parseTime(field, q.Get(field))
	}
	var err error
	if w.To, err = at("to", now); err != nil {
		return w, err
	}
	if w.From, err = at("from", w.To.Add(-defaultCandles*w.Every)); err != nil {
		return w, err
	}
	if !w.From.Before(w.To) {
		return w, httpkit.FieldError("from", "out_of_range", "from must be before to")
	}
	if w.To.Sub(w.From) > maxCandles*w.Every {
		return w, httpkit.FieldError("from", "out_of_range", "a call spans at most %d intervals (%s of %s candles): narrow from and to, or take a longer interval", maxCandles, maxCandles*w.Every, w.Interval)
	}
	return w, nil
}

// candles sums a market's trades up per interval, over a window of at most maxCandles intervals,
// from the minute and hour candles each batch keeps (store.Candles): a call never reads trades.
func (s *Server) candles(c *gin.Context) error {
	id, err := queryUUID(c, "marketId")
	if err != nil {
		return err
	}
	w, err := candleWindowOf(c.Request.URL.Query(), s.now())
	if err != nil {
		return err
	}
	candles, err := s.ReadCandles(c.Request.Context(), id, w.Every, w.From, w.To)
	if err != nil {
		return err
	}
	c.JSON(http.StatusOK, gin.H{"marketId": id, "interval": w.Interval, "from": w.From, "to": w.To, "candles": candles})
	return nil
}
