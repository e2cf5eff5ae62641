package marketpages

import (
	"errors"
	"net/http"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/google/uuid"

	"github.com/pmx-dev/pmx/internal/apijson"
	"github.com/pmx-dev/pmx/internal/store"
)

// recentTrades is how many trades a market page lists (GET /market/trades' default).
const recentTrades = 50

// chartPoints is about how many candles the price chart aims to show: the page takes the
// shortest of the API's intervals that spans the market's life in at most this many.
const chartPoints = 120

// intervals are GET /market/candles' intervals, shortest first.
var intervals = []struct {
	name  string
	every time.Duration
}{{"1m", time.Minute}, {"5m", 5 * time.Minute}, {"1h", time.Hour}, {"1d", day}}

// marketData is what a market page's script starts from: the API's answers, in its shapes, and
// the candle query the chart shows (GET /market/candles?interval=&from=&to=).
type marketData struct {
	Market   apijson.Market    `json:"market"`
	Book     apijson.OrderBook `json:"book"`
	Trades   []apijson.Trade   `json:"trades"`
	Candles  []apijson.Candle  `json:"candles"`
	Interval string            `json:"interval"`
	Seconds  int64             `json:"intervalSeconds"`
	From     time.Time         `json:"from"`
	To       time.Time         `json:"to"`
}

// market shows one market.
func (p *pages) market(c *gin.Context) {
	raw := c.Param("id")
	id, err := uuid.Parse(raw)
	if err != nil {
		p.notFound(c, raw)
		return
	}
	ctx := c.Request.Context()
	m, _, err := p.cfg.Reads.ReadMarket(ctx, id)
	if errors.Is(err, store.ErrNotFound) {
		p.notFound(c, raw)
		return
	}
	if err != nil {
		p.fail(c, err)
		return
	}
	// The book first: the trades read after it hold every trade up to its seq, from which the
	// script follows the trades channel (a trade in both is shown once, by its id).
	book, err := p.cfg.Reads.ReadOrderBook(ctx, id)
	if err != nil {
		p.fail(c, err)
		return
	}
	trades, err := p.cfg.Reads.ReadTrades(ctx, id, recentTrades)
	if err != nil {
		p.fail(c, err)
		return
	}
	d := marketData{Market: m, Book: book, Trades: trades, To: p.now()}
	name, every, from := chartWindow(m.CreatedAt, d.To)
	d.Interval, d.Seconds, d.From = name, int64(every/time.Second), from
	if d.Candles, err = p.cfg.Reads.ReadCandles(ctx, id, every, from, d.To); err != nil {
		p.fail(c, err)
		return
	}
	p.render(c, http.StatusOK, "market.html", &view{Title: m.Question, Script: "market.js", Data: d,
		Market: &d})
}

// chartWindow is the price chart's candle query: the shortest interval that spans the market's
// life (created to now) in at most chartPoints candles, or a day; from the market's creation, or
// as far back as one call of GET /market/candles reaches.
func chartWindow(created, now time.Time) (name string, every time.Duration, from time.Time) {
	age := now.Sub(created)
	name, every = intervals[len(intervals)-1].name, intervals[len(intervals)-1].every
	for _, i := range intervals {
		if age <= chartPoints*i.every {
			name, every = i.name, i.every
			break
		}
	}
	from = created.UTC()
	if age > candlesPerCall*every {
		from = now.Add(-candlesPerCall * every)
	}
	return name, every, from
}

// notFound answers an id that is no market's with a page that says so.
func (p *pages) notFound(c *gin.Context, id string) {
	p.render(c, http.StatusNotFound, "message.html", &view{Title: "No such market",
		Error: "No market has the id “" + id + "”. It may be mistyped; every market is listed on the markets page."})
}
