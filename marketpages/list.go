package marketpages

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/google/uuid"

	"github.com/pmx-dev/pmx/domain"
	"github.com/pmx-dev/pmx/store"
	"github.com/pmx-dev/pmx/wire"
)

// listPage is how many markets a page of the list shows, newest first: with the lifecycle
// channel, one trades subscription each is as many as a public feed connection may hold (100),
// so that every row on the page is live.
const listPage = 99

// candlesPerCall is the most intervals one candle read spans (GET /market/candles' bound).
const candlesPerCall = 1000

// day is the candle interval a market's volume is summed from.
const day = 24 * time.Hour

type listRow struct {
	Market    wire.Market
	LastPrice *int  // the last trade's YES price
	Volume    int64 // shares traded since the market opened
	Seq       int64 // the market's feed seq the row reflects: its trades are followed from there
}

type listView struct {
	Rows []listRow
	Next string // the next page's URL; "" on the last
}

// list shows a page of the markets, newest first.
func (p *pages) list(c *gin.Context) {
	ctx := c.Request.Context()
	var after *store.Cursor
	if v := c.Query("before"); v != "" {
		at, terr := time.Parse(time.RFC3339Nano, v)
		id, ierr := uuid.Parse(c.Query("beforeId"))
		if terr != nil || ierr != nil {
			p.render(c, http.StatusBadRequest, "message.html", &view{Title: "No such page",
				Error: "This page of the list has a broken address. Start again from the newest markets."})
			return
		}
		after = &store.Cursor{CreatedAt: at, ID: id}
	}
	rows, err := p.cfg.Store.MarketsPage(ctx, "", after, listPage+1)
	if err != nil {
		p.fail(c, err)
		return
	}
	v := &listView{}
	if len(rows) > listPage {
		rows = rows[:listPage]
		last := rows[len(rows)-1]
		v.Next = "/markets?" + url.Values{"before": {last.CreatedAt.UTC().Format(time.RFC3339Nano)}, "beforeId": {last.ID.String()}}.Encode()
	}
	volumes, err := p.volumes(ctx, rows, func() ([]store.Market, error) { return p.cfg.Store.MarketsPage(ctx, "", after, listPage) })
	if err != nil {
		p.fail(c, err)
		return
	}
	for i := range rows {
		v.Rows = append(v.Rows, listRow{Market: wire.MarketOf(&rows[i]), LastPrice: rows[i].LastTradePrice,
			Volume: volumes[i], Seq: rows[i].EventSeq})
	}
	p.render(c, http.StatusOK, "list.html", &view{Title: "Markets", Script: "list.js", List: v})
}

// volumes reads each market's volume as of its row's seq, so that the page, which follows the
// market's trades from that seq, counts each trade once: rows read before the volumes are read
// again (reread: the same page of rows), and a market whose seq moved on meanwhile has its row and
// volume read again, up to a few times (a market trading without pause keeps its last reading,
// which may count a trade of that moment twice until the page is reloaded).
func (p *pages) volumes(ctx context.Context, rows []store.Market, reread func() ([]store.Market, error)) ([]int64, error) {
	volumes := make([]int64, len(rows))
	for i := range rows {
		v, err := p.volume(ctx, &rows[i])
		if err != nil {
			return nil, err
		}
		volumes[i] = v
	}
	for range 3 {
		again, err := reread()
		if err != nil {
			return nil, err
		}
		now := make(map[uuid.UUID]*store.Market, len(again))
		for i := range again {
			now[again[i].ID] = &again[i]
		}
		changed := false
		for i := range rows {
			a, ok := now[rows[i].ID]
			if !ok || a.EventSeq == rows[i].EventSeq {
				continue
			}
			changed = true
			rows[i] = *a
			if volumes[i], err = p.volume(ctx, &rows[i]); err != nil {
				return nil, err
			}
		}
		if !changed {
			break
		}
	}
	return volumes, nil
}

// volume is the shares traded in a market since it opened: the sum of its day candles, read as
// GET /market/candles?interval=1d reads them, a call's worth of days at a time from the day it
// was created.
func (p *pages) volume(ctx context.Context, m *store.Market) (int64, error) {
	now := p.now()
	var total int64
	for from := m.CreatedAt.UTC().Truncate(day); from.Before(now); from = from.Add(candlesPerCall * day) {
		to := from.Add(candlesPerCall * day)
		if to.After(now) {
			to = now
		}
		candles, err := p.cfg.Reads.ReadCandles(ctx, m.ID, day, from, to)
		if err != nil && !errors.Is(err, domain.ErrUnknownMarket) {
			return 0, err
		}
		for _, c := range candles {
			total += c.Volume
		}
	}
	return total, nil
}
