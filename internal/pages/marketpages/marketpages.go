// Package marketpages serves the public market pages of the front API: /markets, every market
// with its status, last price and volume, and /markets/{id}, one market's question and
// description, status and times, its book as a depth chart and as a ladder in YES and NO views,
// a price chart from its candles and its recent trades. Both follow the live feed and change as
// the market does, without a reload. The event pages are their kin (events.go): /events, every
// event with its status, and /events/{id}, each outcome's YES price as a probability bar linking
// to the outcome's market page; the same layout, headers, limits, reads and feed.
//
// Why they are what they are:
//   - Public and read-only. People look at a market before they trust it, so the pages need no
//     account and no API key, and offer nothing to change: no forms, no cookies. Anything they
//     show, GET /api/v1 shows a key's holder too.
//   - One truth. The pages read through the API server's own reads (Reads: the very methods
//     behind GET /market, /market/order-book, /market/trades and /market/candles) and its JSON
//     shapes (package apijson), and embed that JSON for their script to start from; so a page can
//     never show a market otherwise than the API does. The list shows the markets' rows as GET
//     /markets does (apijson.MarketOf); a market's last price is its last trade's
//     YES price (what GET /market/order-book calls lastTradePrice), its volume the shares traded
//     in it since it opened, the sum of the volumes of GET /market/candles?interval=1d over its
//     life, read with its row in one statement (store.MarketList).
//   - Bounded cost. The pages need no account, so nothing else limits who asks: each page of the
//     list is read from Postgres at most once a second, however many ask for it (snapshot.go),
//     and each client address may load pagesPerSecond pages (429 with Retry-After, on a page
//     that says when to come back). A market's page reads one market's row, book, last trades
//     and at most a chart's candles; an event's page, GET /event's read (the event's row and
//     each outcome's book top, at most 50); the events list is shared a second at a time as the
//     markets list is.
//   - Live from the same feed. The browser has no key, so it follows GET /api/v1/ws/public: the
//     same WebSocket, protocol, hub and limits as /api/v1/ws, with the market channels only (book,
//     trades, ticker, lifecycle; apiserver/ws.go). A market page follows its market's book channel
//     (every event, gapless by seq) and trades channel (resumed from the seq of the book it was
//     rendered with, so that no trade is missed between the render and the subscription); the
//     list follows lifecycle (statuses, new markets) and its newest markets' trades (last price,
//     volume). The script checks every book event's seq follows the last; on a gap or a lost
//     connection it reconnects and resumes from the last seq it applied, and starts again from a
//     snapshot only if the feed no longer keeps those events. A market's page and an event's also
//     follow lifecycle for their halted badge (rendered hidden while trading goes on); as that
//     channel is live only, once subscribed they read themselves again for what halts them now,
//     so that no change between the render and the subscription is missed (static/feed.js).
//   - No build step, no CDN, no dependency. Server-rendered HTML from embedded templates, one
//     stylesheet, plain JavaScript; the depth and price charts are hand-written SVG (a few dozen
//     lines each, where a charting library would be tens of kilobytes to vendor and review).
//   - Strict headers. A Content-Security-Policy allows only this origin's script, style and
//     WebSocket; the page's data is a JSON block the script reads, never inline script.
package marketpages

import (
	"context"
	"embed"
	"fmt"
	"html/template"
	"net/http"
	"strconv"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/google/uuid"

	"github.com/pmx-dev/pmx/internal/apijson"
	"github.com/pmx-dev/pmx/internal/kit/addrlimit"
	"github.com/pmx-dev/pmx/internal/kit/httpkit"
	"github.com/pmx-dev/pmx/internal/pages/pagekit"
	"github.com/pmx-dev/pmx/internal/records"
)

//go:embed templates/*.html static/*
var files embed.FS

// Reads is what the pages read of the front API: the reads its handlers answer with (package
// apiserver, Server.ReadMarket and the others), so that the pages show what the API shows.
type Reads interface {
	// ReadMarket reads a market and its row; store.ErrNotFound when there is none.
	ReadMarket(ctx context.Context, id uuid.UUID) (apijson.Market, records.Market, error)
	// ReadOrderBook reads a market's book as GET /market/order-book answers it.
	ReadOrderBook(ctx context.Context, id uuid.UUID) (apijson.OrderBook, error)
	// ReadTrades lists a market's last trades, newest first, as GET /market/trades does.
	ReadTrades(ctx context.Context, id uuid.UUID, limit int) ([]apijson.Trade, error)
	// ReadCandles reads a market's candles, as GET /market/candles does.
	ReadCandles(ctx context.Context, id uuid.UUID, every time.Duration, from, to time.Time) ([]apijson.Candle, error)
	// ReadEvent reads an event with its outcomes' YES prices as GET /event answers it;
	// store.ErrNotFound when there is none.
	ReadEvent(ctx context.Context, id uuid.UUID) (apijson.EventDetail, error)
}

// Config configures the pages.
type Config struct {
	// Store is what the lists read of the database (storage.go).
	Store Store
	Reads Reads
	// Now is the clock (default time.Now).
	Now func() time.Time
}

type pages struct {
	cfg    Config
	kit    *pagekit.Pages
	lists  *snapshots[*listView]
	events *snapshots[*eventsView]
	limit  *addrlimit.Limiter
}

// Each client address may load pagesPerSecond pages (the lists', markets' and events'), in bursts of
// pagesBurst: a person reading them, even one opening a dozen markets in tabs at once, never
// meets it (a page follows the feed and is not reloaded to stay current), while a flood from one
// address costs at most that many reads of Postgres a second (issue 34). Their static files are
// not counted: they read nothing, and a page loads several.
const (
	pagesPerSecond = 10
	pagesBurst     = 20
)

// Register adds the pages to r: /markets, /markets/{id}, /events, /events/{id} and their static
// files; and / sends a browser to /markets, the exchange's front page, rather than a JSON 404.
func Register(r gin.IRouter, cfg Config) {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	p := newPages(cfg)
	g := r.Group("/markets", p.headers, p.limited)
	g.GET("", p.list)
	g.GET("/:id", p.market)
	e := r.Group("/events", p.headers, p.limited)
	e.GET("", p.eventList)
	e.GET("/:id", p.event)
	r.GET("/market-pages/:file", p.kit.ServeStatic)
	r.GET("/", func(c *gin.Context) { c.Redirect(http.StatusFound, "/markets") })
}

func newPages(cfg Config) *pages {
	kit, err := pagekit.New(files, "/market-pages/", template.FuncMap{"iso": iso, "price": price, "quantity": quantity, "mid": mid})
	if err != nil {
		panic(err) // the files are embedded: only a broken build gets here
	}
	p := &pages{cfg: cfg, kit: kit, limit: addrlimit.New(pagesPerSecond, pagesBurst)}
	p.lists = newSnapshots(p.listing)
	p.events = newSnapshots(p.eventListing)
	return p
}

// now is the pages' clock at the database's precision.
func (p *pages) now() time.Time { return p.cfg.Now().UTC().Truncate(time.Microsecond) }

// view is what every template is given.
type view struct {
	Title  string
	Script string // the page's script, a static file's name; none for a message
	Error  string // a message page's text
	Data   any    // the JSON the script starts from
	List   *listView
	Market *marketData
	// Section is the set of pages the page belongs to, "events" or the markets' (""): the
	// navigation marks it, and a message page links back to its list.
	Section string
	Events  *eventsView
	Event   *eventView
}

// render writes a page, whole, or none of it and a 500.
func (p *pages) render(c *gin.Context, status int, name string, v *view) {
	if err := p.kit.Render(c, status, name, v); err != nil {
		httpkit.Logger(c).Error("could not render a market page", "page", name, "err", err)
		c.String(http.StatusInternalServerError, "pmx could not show this page; try again in a moment\n")
	}
}

// fail answers an unexpected error with a page that says so, and logs it.
func (p *pages) fail(c *gin.Context, err error) {
	httpkit.Logger(c).Error("market page failed", "path", c.Request.URL.Path, "err", err)
	p.render(c, http.StatusInternalServerError, "message.html", &view{Title: "Something went wrong",
		Error: "pmx could not read this market just now. Reload the page in a moment."})
}

// headers sets what every page carries: a Content-Security-Policy that allows only this origin's
// script, stylesheet and WebSocket (the live feed), and no framing; pages are public and change
// with every trade, so a cache must ask again before it shows one.
func (p *pages) headers(c *gin.Context) {
	h := c.Writer.Header()
	h.Set("Content-Security-Policy", "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; "+
		"connect-src 'self'; form-action 'none'; frame-ancestors 'none'; base-uri 'none'")
	h.Set("X-Frame-Options", "DENY")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "same-origin")
	h.Set("Cache-Control", "no-cache")
	c.Next()
}

// limited refuses a page to an address that asked for more than pagesPerSecond, with a page that
// says when to come back.
func (p *pages) limited(c *gin.Context) {
	ok, wait := p.limit.Allow(addrlimit.Key(c.Request), 1, time.Now())
	if ok {
		c.Next()
		return
	}
	after := addrlimit.RetryAfter(wait)
	c.Header("Retry-After", strconv.Itoa(after))
	p.render(c, http.StatusTooManyRequests, "message.html", &view{Title: "Too many pages at once",
		Error: fmt.Sprintf("This address asked for more pages in a few seconds than anyone reads. "+
			"Wait %s, then reload; pages you have open stay live meanwhile.", seconds(after))})
	c.Abort()
}

// seconds says a number of seconds in words.
func seconds(n int) string {
	if n == 1 {
		return "a second"
	}
	return fmt.Sprintf("%d seconds", n)
}

// iso is a time as the API writes it (RFC 3339, UTC), for a <time datetime>; "" for none.
func iso(t any) string {
	switch t := t.(type) {
	case time.Time:
		return t.UTC().Format(time.RFC3339Nano)
	case *time.Time:
		if t == nil {
			return ""
		}
		return t.UTC().Format(time.RFC3339Nano)
	}
	return ""
}

// price shows a price in cents, "—" for none.
func price(p *int) string {
	if p == nil {
		return "—"
	}
	return fmt.Sprintf("%d¢", *p)
}

// quantity shows a number of shares with thousands separators.
func quantity(n int64) string {
	s := fmt.Sprint(n)
	if n < 0 {
		return "-" + quantity(-n)
	}
	var b []byte
	for i := range len(s) {
		if i > 0 && (len(s)-i)%3 == 0 {
			b = append(b, ',')
		}
		b = append(b, s[i])
	}
	return string(b)
}
