package marketpages_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pmx-dev/pmx/apiserver"
	"github.com/pmx-dev/pmx/internal/exchangetest"
	"github.com/pmx-dev/pmx/internal/pgtest"
	"github.com/pmx-dev/pmx/internal/store"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// get fetches a page without credentials and returns its status, headers and body.
func get(t *testing.T, tg *exchangetest.Target, path string) (int, http.Header, string) {
	t.Helper()
	resp, err := tg.HTTP.Get(tg.URL + path)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, resp.Header, string(body)
}

// TestPages serves the list, a market and the refusals over real HTTP, without a key.
func TestPages(t *testing.T) {
	tg := exchangetest.StartDev(t)
	m := tg.NewMarket(t, map[string]any{"question": "Will <b>tags</b> & quotes \" stay text?", "category": "meta"})
	alice, bob := tg.NewAccount(t, "alice"), tg.NewAccount(t, "bob")
	alice.Place(t, m.ID, "BUY", "YES", 40, 10)
	bob.Place(t, m.ID, "BUY", "NO", 60, 4) // a YES ask at 40: 4 shares trade at 40

	status, h, body := get(t, tg, "/markets")
	if status != http.StatusOK || !strings.HasPrefix(h.Get("Content-Type"), "text/html") {
		t.Fatalf("GET /markets: %d %s", status, h.Get("Content-Type"))
	}
	if csp := h.Get("Content-Security-Policy"); !strings.Contains(csp, "script-src 'self'") || !strings.Contains(csp, "connect-src 'self'") {
		t.Fatalf("GET /markets: Content-Security-Policy %q", csp)
	}
	for _, want := range []string{`data-market="` + m.ID.String() + `"`, "Will &lt;b&gt;tags&lt;/b&gt; &amp; quotes &#34; stay text?",
		`data-price="40"`, `data-volume="4"`} {
		if !strings.Contains(body, want) {
			t.Fatalf("GET /markets does not hold %s:\n%s", want, body)
		}
	}

	status, _, body = get(t, tg, "/markets/"+m.ID.String())
	if status != http.StatusOK {
		t.Fatalf("GET /markets/{id}: %d", status)
	}
	for _, want := range []string{`id="page-data"`, `"orderBookYes"`, `id="ladder"`, `data-interval="1m"`, "Will &lt;b&gt;tags&lt;/b&gt;"} {
		if !strings.Contains(body, want) {
			t.Fatalf("the market page does not hold %s:\n%s", want, body)
		}
	}
	// The badge is there for the script to show live, hidden while the market may trade.
	if !strings.Contains(body, `class="status hidden" id="halted" data-status="HALTED" data-halted=""`) {
		t.Fatalf("the market page does not hide the halted badge of a market that trades:\n%s", body)
	}
	tg.Markets.Pause(t, m.ID, true)
	if _, _, paused := get(t, tg, "/markets/"+m.ID.String()); !strings.Contains(paused, `class="status" id="halted" data-status="HALTED" data-halted="market"`) {
		t.Fatalf("the page of a paused market does not show it halted:\n%s", paused)
	}
	tg.Markets.Pause(t, m.ID, false)
	if !strings.Contains(body, `id="fees" data-taker-bps="0" data-maker-bps="0"`) {
		t.Fatalf("the page of a market without fees does not say so:\n%s", body)
	}
	tg.Markets.SetFees(t, m.ID, &apiserver.Fees{TakerBps: 700, MakerBps: -175})
	if _, _, fees := get(t, tg, "/markets/"+m.ID.String()); !strings.Contains(fees, "taker 700 bp, maker -175 bp") {
		t.Fatalf("the page of a market with fees does not show its schedule:\n%s", fees)
	}
	if strings.Contains(body, "<b>tags</b>") {
		t.Fatal("the market page shows the question's markup unescaped")
	}

	for _, id := range []string{"not-a-market", uuid.NewString()} {
		status, _, body := get(t, tg, "/markets/"+id)
		if status != http.StatusNotFound || !strings.Contains(body, "No market has the id") || !strings.Contains(body, `href="/markets"`) {
			t.Fatalf("GET /markets/%s: %d\n%s", id, status, body)
		}
	}
	for _, before := range []string{"yesterday", "9999-12-31T23:59:59-23:59", "1969-12-31T23:59:59Z"} {
		// The last two are valid RFC 3339, out of the range of times pmx takes (domain.CheckTime).
		q := url.Values{"before": {before}, "beforeId": {uuid.NewString()}}.Encode()
		if status, _, _ := get(t, tg, "/markets?"+q); status != http.StatusBadRequest {
			t.Fatalf("GET /markets with a broken page address (before=%s): %d, want 400", before, status)
		}
	}
	for _, f := range []string{"feed.js", "list.js", "market.js", "pages.css"} {
		if status, _, _ := get(t, tg, "/market-pages/"+f); status != http.StatusOK {
			t.Fatalf("GET /market-pages/%s: %d", f, status)
		}
	}
	if status, _, _ := get(t, tg, "/market-pages/nothing.js"); status != http.StatusNotFound {
		t.Fatalf("GET /market-pages/nothing.js: %d, want 404", status)
	}
	// The bare address is the list's.
	once := &http.Client{Timeout: time.Minute, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := once.Get(tg.URL + "/")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusFound || resp.Header.Get("Location") != "/markets" {
		t.Fatalf("GET /: %d to %q, want 302 to /markets", resp.StatusCode, resp.Header.Get("Location"))
	}
}

// TestPublicFeed follows a market without a key, and is refused the account's channels and
// cancelOnDisconnect; the keyed feed is unchanged.
func TestPublicFeed(t *testing.T) {
	tg := exchangetest.StartDev(t)
	m := tg.NewMarket(t, map[string]any{"question": "Public feed?"})
	f := tg.DialPublicFeed(t)
	f.Send(t, map[string]any{"op": "subscribe", "id": 1, "channel": "book", "marketId": m.ID})
	f.Expect(t, "subscribed", "")
	snap := f.Expect(t, "snapshot", "")
	f.Send(t, map[string]any{"op": "subscribe", "id": 2, "channel": "lifecycle"})
	f.Expect(t, "subscribed", "")
	for i, ch := range []string{"orders", "fills"} {
		f.Send(t, map[string]any{"op": "subscribe", "id": 3 + i, "channel": ch})
		if e := f.Expect(t, "error", "key_required"); !strings.Contains(e.Message, "/api/v1/ws") {
			t.Fatalf("refusing %s: %q does not say where to go", ch, e.Message)
		}
	}
	tg.NewAccount(t, "carol").Place(t, m.ID, "BUY", "NO", 30, 5)
	ev := f.Expect(t, "events", "")
	if ev.Events[0].Seq != snap.Seq+1 || ev.Events[0].Side != "ask" || ev.Events[0].Price != 70 {
		t.Fatalf("after the snapshot at %d, the events %s", snap.Seq, ev.Raw)
	}

	resp, err := tg.HTTP.Get(tg.URL + "/api/v1/ws/public?cancelOnDisconnect=true")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest {
		t.Fatalf("the public feed with cancelOnDisconnect: %d, want 400", resp.StatusCode)
	}
}

// TestPublicFeedLimits holds a public connection to its subscribe rate: after a first burst of
// 100, 10 a second.
func TestPublicFeedLimits(t *testing.T) {
	tg := exchangetest.StartDev(t)
	f := tg.DialPublicFeed(t)
	// Subscriptions to markets that do not exist are refused and hold nothing, but spend the
	// allowance; sent at once, most of those beyond 100 are refused as too frequent.
	const sent = 150
	start := time.Now()
	for i := range sent {
		f.Send(t, map[string]any{"op": "subscribe", "id": i + 1, "channel": "ticker", "marketId": uuid.New()})
	}
	allowed, limited := 0, 0
	for range sent {
		m := f.Next(t, 30*time.Second)
		switch {
		case m.Type == "error" && m.Code == "unknown_market":
			allowed++
		case m.Type == "error" && m.Code == "rate_limited":
			limited++
			if !strings.Contains(m.Message, "wait") {
				t.Fatalf("rate_limited says %q: not what to do", m.Message)
			}
		default:
			t.Fatalf("got %s", m.Raw)
		}
	}
	elapsed := time.Since(start)
	if most := 100 + int(elapsed.Seconds()*10) + 1; allowed > most || allowed < 100 {
		t.Fatalf("%d of %d subscribes in %s were let through, want 100 to %d", allowed, sent, elapsed, most)
	}
	if allowed+limited != sent {
		t.Fatalf("%d let through and %d refused of %d", allowed, limited, sent)
	}
}

// queryCounter counts the statements a pool sends that mention a table.
type queryCounter struct {
	table string
	n     atomic.Int64
}

func (q *queryCounter) TraceQueryStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	if strings.Contains(d.SQL, q.table) {
		q.n.Add(1)
	}
	return ctx
}

func (q *queryCounter) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

// TestListReadsShared loads the list many times at once and counts the statements the exchange
// sent for the markets' volumes (the candles table; issue 34: one per market per request, and
// more while markets traded): the requests share one read of the page, or two where they span
// the second a read is reused.
func TestListReadsShared(t *testing.T) {
	volumes := &queryCounter{table: "candles_1h"}
	tg := exchangetest.StartDev(t, func(c *apiserver.Config) {
		cfg := c.Store.(*store.Store).Pool.Config() // the harness hands the front the aggregate
		cfg.ConnConfig.Tracer = volumes
		pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(pool.Close)
		c.Store = store.New(pool)
	})
	alice, bob := tg.NewAccount(t, "alice"), tg.NewAccount(t, "bob")
	for i := range 5 {
		m := tg.NewMarket(t, map[string]any{"question": fmt.Sprintf("Shared %d?", i)})
		alice.Place(t, m.ID, "BUY", "YES", 40, 10)
		bob.Place(t, m.ID, "BUY", "NO", 60, 1+i)
	}
	const requests = 16 // within one address's burst
	before := volumes.n.Load()
	start := time.Now()
	var wg sync.WaitGroup
	for range requests {
		wg.Go(func() {
			if status, _, body := get(t, tg, "/markets"); status != http.StatusOK || !strings.Contains(body, `data-volume="5"`) {
				t.Errorf("GET /markets: %d\n%s", status, body)
			}
		})
	}
	wg.Wait()
	read, took := volumes.n.Load()-before, time.Since(start)
	if most := int64(took/time.Second) + 1; read < 1 || read > most {
		t.Fatalf("%d lists at once in %v sent %d statements for volumes, want 1 to %d", requests, took, read, most)
	}
}

// TestPagesLimitedPerAddress floods the pages from one address until it is refused, with a page
// that says when to come back and a Retry-After, while another address is still served.
func TestPagesLimitedPerAddress(t *testing.T) {
	tg := exchangetest.StartDev(t)
	m := tg.NewMarket(t, map[string]any{"question": "Flooded?"})
	host := strings.TrimPrefix(tg.URL, "http://")
	from := func(ip string) *http.Client {
		tr := &http.Transport{DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
			d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}}
			return d.DialContext(ctx, network, host)
		}}
		t.Cleanup(tr.CloseIdleConnections)
		return &http.Client{Transport: tr, Timeout: time.Minute}
	}
	flood := from("127.0.0.2")
	refused := 0
	for i := range 200 {
		path := "/markets"
		if i%2 == 1 {
			path = "/markets/" + m.ID.String()
		}
		resp, err := flood.Get(tg.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			continue
		}
		if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") == "" ||
			!strings.Contains(string(body), "Wait") || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/html") {
			t.Fatalf("GET %s, flooded: %d, Retry-After %q\n%s", path, resp.StatusCode, resp.Header.Get("Retry-After"), body)
		}
		refused++
	}
	if refused < 200-2*20 {
		t.Fatalf("%d of 200 pages asked for at once from one address were refused, want most", refused)
	}
	for _, path := range []string{"/markets", "/markets/" + m.ID.String()} {
		resp, err := from("127.0.0.3").Get(tg.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("GET %s from another address during the flood: %d", path, resp.StatusCode)
		}
	}
}
