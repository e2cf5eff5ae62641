package marketpages

import (
	"context"
	"net/http"
	"net/url"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/pmx-dev/pmx/internal/apijson"
	"github.com/pmx-dev/pmx/internal/store"
)

// listPage is how many markets a page of the list shows, newest first: with the lifecycle
// channel, one trades subscription each is as many as a public feed connection may hold (100),
// so that every row on the page is live.
const listPage = 99

// candlesPerCall is the most intervals one candle read spans (GET /market/candles' bound).
const candlesPerCall = 1000

// day is the longest candle interval.
const day = 24 * time.Hour

type listRow struct {
	Market    apijson.Market
	LastPrice *int  // the last trade's YES price
	Volume    int64 // shares traded since the market opened
	Seq       int64 // the market's feed seq the row reflects: its trades are followed from there
}

type listView struct {
	Rows []listRow
	Next string // the next page's URL; "" on the last
}

// list shows a page of the markets, newest first, from the page's snapshot (listing).
func (p *pages) list(c *gin.Context) {
	after, ok := pageCursor(c)
	if !ok {
		p.render(c, http.StatusBadRequest, "message.html", &view{Title: "No such page",
			Error: "This page of the list has a broken address. Start again from the newest markets."})
		return
	}
	v, err := p.lists.get(c.Request.Context(), after)
	if err != nil {
		p.fail(c, err)
		return
	}
	p.render(c, http.StatusOK, "list.html", &view{Title: "Markets", Script: "list.js", List: v})
}

// listing reads a page of the list: its markets' rows and volumes in one statement
// (store.MarketList), so that each volume counts the trades up to its row's seq, from which the
// page follows the market's trades.
func (p *pages) listing(ctx context.Context, after *store.Cursor) (*listView, error) {
	rows, err := p.cfg.Store.MarketList(ctx, after, listPage+1)
	if err != nil {
		return nil, err
	}
	v := &listView{}
	if len(rows) > listPage {
		rows = rows[:listPage]
		last := rows[len(rows)-1]
		v.Next = "/markets?" + url.Values{"before": {last.CreatedAt.UTC().Format(time.RFC3339Nano)}, "beforeId": {last.ID.String()}}.Encode()
	}
	for i := range rows {
		v.Rows = append(v.Rows, listRow{Market: apijson.MarketOf(&rows[i].Market), LastPrice: rows[i].LastTradePrice,
			Volume: rows[i].Volume, Seq: rows[i].EventSeq})
	}
	return v, nil
}
