package exchangetest

import (
	"context"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/pmx-dev/pmx/apiserver"
)

// Grant is the play money a new account starts with (the default of every mode).
const Grant = 1_000_000

// RunSuite runs the contract suite against a target: every endpoint, status and error of the
// contract, the four kinds of match, self-trade prevention, price improvement, the lifecycle and
// settlement; then the invariants, and that every documented status was seen.
func RunSuite(t *testing.T, tg *Target) {
	for _, tc := range suiteTests {
		t.Run(tc.name, func(t *testing.T) { tc.run(t, tg) })
	}
	t.Run("OpenAPIDocumentServed", func(t *testing.T) {
		status, raw := tg.do(t, "GET", "/api/v1/openapi.yaml", "", nil, false)
		if status != http.StatusOK || !strings.HasPrefix(string(raw), "openapi: 3") {
			t.Fatalf("GET /api/v1/openapi.yaml: %d %.60s", status, raw)
		}
		if tg.AdminToken == "" {
			return // no admin API, so no document of it
		}
		status, raw = tg.do(t, "GET", "/admin/v1/openapi.yaml", "", nil, false)
		if status != http.StatusOK || !strings.Contains(string(raw), "title: pmx admin API") {
			t.Fatalf("GET /admin/v1/openapi.yaml: %d %.60s", status, raw)
		}
	})
	t.Run("MetricsServed", func(t *testing.T) { testMetricsServed(t, tg) })
	t.Run("Invariants", func(t *testing.T) { CheckInvariants(t, tg) })
	t.Run("EveryDocumentedAdminStatusSeen", func(t *testing.T) {
		if tg.AdminValidator == nil || !tg.AdminMarkets {
			t.Skip("the admin API's markets are not checked here")
		}
		// 429 (too_many_failures) takes 30 wrong tokens from the suite's address, which would lock
		// its other admin calls out: the abuse tests provoke it. 503 takes a shard that fails.
		// POST /markets 409 and the pauses' and fees' 409 (managed_by_operator) are a distributed
		// front's only, where testManagedByOperator sees them.
		missing := slices.DeleteFunc(tg.AdminValidator.Uncovered(), func(s string) bool {
			return strings.HasSuffix(s, " 429") || strings.HasSuffix(s, " 503") || s == "POST /markets 409" ||
				strings.HasSuffix(s, "/pause 409") || strings.HasSuffix(s, "/resume 409") || strings.HasSuffix(s, "/fees 409")
		})
		if len(missing) > 0 {
			t.Errorf("the suite never saw the admin API answer: %s", strings.Join(missing, ", "))
		}
	})
	t.Run("EveryDocumentedStatusSeen", func(t *testing.T) {
		// Accounts are never deleted, so GET /positions cannot answer 404.
		// Any call may be refused by the rate limits (429); testRateLimits sees it on one.
		// POST /order-groups 409 (too_many_order_groups) takes an account at the cap, 1,000 groups
		// on the suite's targets: TestOrderGroupCap sees it on an exchange with a cap of its own.
		missing := slices.DeleteFunc(tg.Validator.Uncovered(), func(s string) bool {
			return s == "GET /positions 404" || strings.HasSuffix(s, " 429") && s != "GET /account 429" || s == "POST /order-groups 409"
		})
		if len(missing) > 0 {
			t.Errorf("the suite never saw: %s", strings.Join(missing, ", "))
		}
	})
}

// suiteTests are the suite's tests, in the order RunSuite runs them.
var suiteTests = []struct {
	name string
	run  func(*testing.T, *Target)
}{
	{"Authentication", testAuthentication},
	{"Markets", testMarkets},
	{"AdminMarkets", testAdminMarkets},
	{"OrderBook", testOrderBook},
	{"Trades", testTrades},
	{"BadOrdersChangeNothing", testBadOrders},
	{"MatchKinds", testMatchKinds},
	{"SelfTradePrevention", testSelfTrade},
	{"PriceImprovement", testPriceImprovement},
	{"CancelOrder", testCancelOrder},
	{"CancelEverything", testCancelEverything},
	{"Positions", testPositions},
	{"OwnOrders", testOwnOrders},
	{"Lifecycle", testLifecycle},
	{"ClosesOnTime", testClosesOnTime},
	{"TimeInForce", testTimeInForce},
	{"SelfTradeModes", testSelfTradeModes},
	{"GoodTillDate", testGoodTillDate},
	{"FarTimes", testFarTimes},
	{"ClientOrderIDs", testClientOrderIDs},
	{"OpenOrderLimit", testOpenOrderLimit},
	{"Heartbeat", testHeartbeat},
	{"Amend", testAmend},
	{"BatchPlace", testBatchPlace},
	{"BatchCancel", testBatchCancel},
	{"QueuePositions", testQueuePositions}, // suite_queue.go
	{"MarketEvents", testMarketEvents},
	{"AccountEvents", testAccountEvents},
	{"AccountStreams", testAccountStreams},
	{"AccountFeedFollow", testAccountFeedFollow},
	{"Settlements", testSettlements},
	{"Fills", testFills},
	{"Candles", testCandles},
	{"FeedChannels", testFeedChannels},
	{"FeedFollow", testFeedFollow},
	{"FeedSessions", testFeedSessions},
	{"FeedKeyEnds", testFeedKeyEnds}, // suite_feedkeys.go
	{"RateLimits", testRateLimits},
	{"Keys", testKeys},
	{"RiskLimits", testRiskLimits},
	{"OrderGroups", testOrderGroups},
	{"EventLifecycle", testEventLifecycle},         // suite_events.go
	{"AdminEvents", testAdminEvents},               // suite_events.go
	{"EventSettlement", testEventSettlement},       // suite_events.go
	{"EventReads", testEventReads},                 // suite_eventreads.go
	{"EventLifecycleFeed", testEventLifecycleFeed}, // suite_eventreads.go
	{"Halts", testHalts},                           // suite_halts.go
	{"Fees", testFees},                             // suite_fees.go
	{"Series", testSeries},                         // suite_series.go
}

// RunSuiteTests runs the suite's tests of those names, in the suite's order, then the
// invariants: a part of the suite for a run that cannot afford all of it.
func RunSuiteTests(t *testing.T, tg *Target, names ...string) {
	for _, tc := range suiteTests {
		if slices.Contains(names, tc.name) {
			names = slices.DeleteFunc(names, func(n string) bool { return n == tc.name })
			t.Run(tc.name, func(t *testing.T) { tc.run(t, tg) })
		}
	}
	if len(names) > 0 {
		t.Fatalf("the suite has no tests named %v", names)
	}
	t.Run("Invariants", func(t *testing.T) { CheckInvariants(t, tg) })
}

func testAuthentication(t *testing.T, tg *Target) {
	m := tg.NewMarket(t, nil)
	id := m.ID.String()
	calls := []struct{ method, path string }{
		{"GET", "/markets"}, {"GET", "/market?marketId=" + id}, {"GET", "/market/order-book?marketId=" + id},
		{"GET", "/market/trades?marketId=" + id}, {"GET", "/market/events?marketId=" + id}, {"POST", "/order"}, {"GET", "/positions"},
		{"POST", "/cancel-order"}, {"POST", "/cancel-everything"}, {"GET", "/account"}, {"GET", "/orders"},
		{"GET", "/order?orderId=" + uuid.NewString()}, {"POST", "/heartbeat"}, {"POST", "/order/amend"},
		{"POST", "/orders/batch"}, {"POST", "/orders/cancel"}, {"GET", "/settlements"}, {"POST", "/ws-token"}, {"GET", "/account/limits"}, {"GET", "/account/keys"}, {"GET", "/account/events"}, {"GET", "/fills"}, {"GET", "/market/candles?marketId=" + id + "&interval=1m"},
	}
	revoked := &Client{T: tg, Key: "pmx_0123456789abcdef_" + strings.Repeat("A", 32)}
	for _, c := range calls {
		for _, who := range []*Client{tg.Anonymous(), {T: tg, Key: "not-a-key"}, revoked} {
			var body any
			if c.method == "POST" {
				body = OrderBody(m.ID, "BUY", "YES", 50, 1)
			}
			code := "invalid_api_key"
			if who.Key == "" {
				code = "missing_api_key"
			}
			who.ExpectError(t, c.method, c.path, body, http.StatusUnauthorized, code)
		}
	}
}

func testMarkets(t *testing.T, tg *Target) {
	c := tg.NewAccount(t, "markets")
	older := tg.NewMarket(t, map[string]any{"question": "Older?", "description": "d", "url": "https://example.com/x",
		"labelA": "Up", "labelB": "Down", "closesAt": "2099-01-01T00:00:00Z", "resolvesAt": "2099-01-02T00:00:00Z"})
	newer := tg.NewMarket(t, nil)
	var list struct{ Markets []apiserver.Market }
	c.Expect(t, "GET", "/markets", nil, http.StatusOK, &list)
	pos := func(id uuid.UUID) int {
		return slices.IndexFunc(list.Markets, func(m apiserver.Market) bool { return m.ID == id })
	}
	if pos(newer.ID) < 0 || pos(older.ID) < 0 || pos(newer.ID) > pos(older.ID) {
		t.Fatalf("markets not newest first: newer at %d, older at %d", pos(newer.ID), pos(older.ID))
	}
	var got apiserver.Market
	c.Expect(t, "GET", "/market?marketId="+older.ID.String(), nil, http.StatusCreated, &got) // 201: the contract
	if got.Question != "Older?" || got.LabelA != "Up" || got.Status != "OPEN" || got.Resolved || got.URL == nil || got.ClosesAt == nil {
		t.Fatalf("GET /market = %+v", got)
	}
	tg.Markets.Close(t, older.ID)
	c.Expect(t, "GET", "/markets?status=CLOSED", nil, http.StatusOK, &list)
	if pos(older.ID) < 0 || pos(newer.ID) >= 0 {
		t.Fatalf("status=CLOSED lists %v", list.Markets)
	}
	c.Expect(t, "GET", "/markets?status=OPEN", nil, http.StatusOK, &list)
	if pos(newer.ID) < 0 || pos(older.ID) >= 0 {
		t.Fatal("status=OPEN is wrong")
	}
	c.ExpectError(t, "GET", "/markets?status=open", nil, http.StatusBadRequest, "invalid_value")
	testMarketPages(t, c, older.ID, newer.ID)
	c.ExpectError(t, "GET", "/market", nil, http.StatusBadRequest, "missing_field")
	c.ExpectError(t, "GET", "/market?marketId=42", nil, http.StatusBadRequest, "invalid_uuid")
	c.ExpectError(t, "GET", "/market?marketId="+uuid.NewString(), nil, http.StatusNotFound, "market_not_found")

	tg.Admin(t, "POST", "/admin/v1/accounts", map[string]any{"name": c.Name}, http.StatusConflict, nil)
	tg.Admin(t, "POST", "/admin/v1/accounts", map[string]any{"name": ""}, http.StatusBadRequest, nil)
}

// testAdminMarkets checks the admin API's refusals: bad markets and illegal transitions; where
// Market resources manage the markets, every creation and transition, changing nothing.
func testAdminMarkets(t *testing.T, tg *Target) {
	if !tg.AdminMarkets {
		testManagedByOperator(t, tg)
		return
	}
	m := tg.NewMarket(t, nil)
	tg.Markets.Close(t, m.ID)
	var e ErrorBody
	tg.Admin(t, "POST", "/admin/v1/markets", map[string]any{"category": "x"}, http.StatusBadRequest, &e)
	if e.Details.Field != "question" {
		t.Errorf("a market without a question: %+v", e)
	}
	tg.Admin(t, "POST", "/admin/v1/markets", map[string]any{"question": "q", "category": "c",
		"closesAt": "2099-01-02T00:00:00Z", "resolvesAt": "2099-01-01T00:00:00Z"}, http.StatusBadRequest, &e)
	// What Postgres cannot store is a 400 naming the field, not a 500; a key given twice (or in
	// two cases, which encoding/json would match to one field) is refused, not decided by the last.
	for _, tc := range []struct{ body, code, field string }{
		{`{"question":"Will it\u0000?","category":"c"}`, "invalid_value", "question"},
		{`{"question":"q","category":"c","labelB":"No\u0000"}`, "invalid_value", "labelB"},
		{`{"question":"q","description":"\u0000","category":"c"}`, "invalid_value", "description"},
		{`{"question":"q","category":"c","question":"r"}`, "duplicate_key", "question"},
		{`{"question":"q","category":"c","Question":"r"}`, "duplicate_key", "question"},
	} {
		tg.Admin(t, "POST", "/admin/v1/markets", tc.body, http.StatusBadRequest, &e)
		if e.Details.Code != tc.code || e.Details.Field != tc.field {
			t.Errorf("%s: %+v, want %s on %s", tc.body, e, tc.code, tc.field)
		}
	}
	tg.Admin(t, "POST", "/admin/v1/accounts", `{"name":"twice-named-1","name":"twice-named-2"}`, http.StatusBadRequest, &e)
	if e.Details.Code != "duplicate_key" {
		t.Errorf("an account named twice: %+v", e)
	}
	tg.Admin(t, "POST", "/admin/v1/markets/"+m.ID.String()+"/close", nil, http.StatusConflict, &e)
	if e.Details.Code != "illegal_transition" {
		t.Errorf("closing a closed market: %+v", e)
	}
	tg.Admin(t, "POST", "/admin/v1/markets/"+uuid.NewString()+"/close", nil, http.StatusNotFound, nil)
	tg.Markets.Resolve(t, m.ID, "NO")
	for _, action := range []string{"resolve", "cancel", "close", "reopen"} {
		tg.Admin(t, "POST", "/admin/v1/markets/"+m.ID.String()+"/"+action, map[string]any{"outcome": "YES"}, http.StatusConflict, &e)
		if e.Details.Code != "illegal_transition" {
			t.Fatalf("%s after resolution: %+v", action, e)
		}
	}
	tg.Admin(t, "POST", "/admin/v1/markets/"+m.ID.String()+"/resolve", map[string]any{"outcome": "MAYBE"}, http.StatusBadRequest, nil)

	// Every route's refusals of the token and of the market id, and the transitions not seen above.
	o := tg.NewMarket(t, nil)
	tg.Markets.Close(t, o.ID)
	tg.Admin(t, "POST", "/admin/v1/markets/"+o.ID.String()+"/reopen", nil, http.StatusOK, nil)
	tg.Admin(t, "POST", "/admin/v1/markets/"+o.ID.String()+"/cancel", nil, http.StatusOK, nil)
	for _, route := range []string{"/accounts", "/markets", "/markets/" + o.ID.String() + "/close"} {
		tg.AdminAs(t, "", "POST", "/admin/v1"+route, map[string]any{"name": "nobody"}, http.StatusUnauthorized, &e)
		if e.Details.Code != "invalid_admin_token" {
			t.Errorf("POST %s without the token: %+v", route, e)
		}
	}
	tg.AdminAs(t, "Bearer not-the-admin-token", "POST", "/admin/v1/accounts", map[string]any{"name": "nobody"}, http.StatusUnauthorized, nil)
	for _, action := range []string{"close", "reopen", "cancel", "resolve"} {
		body := map[string]any{"outcome": "YES"}
		tg.AdminAs(t, "", "POST", "/admin/v1/markets/"+o.ID.String()+"/"+action, body, http.StatusUnauthorized, nil)
		tg.Admin(t, "POST", "/admin/v1/markets/42/"+action, body, http.StatusBadRequest, &e)
		if e.Details.Code != "invalid_uuid" || e.Details.Field != "id" {
			t.Errorf("%s a market of id 42: %+v", action, e)
		}
		tg.Admin(t, "POST", "/admin/v1/markets/"+uuid.NewString()+"/"+action, body, http.StatusNotFound, &e)
		if e.Details.Code != "market_not_found" {
			t.Errorf("%s an unknown market: %+v", action, e)
		}
	}
}

func testOrderBook(t *testing.T, tg *Target) {
	m := tg.NewMarket(t, nil)
	a, b := tg.NewAccount(t, "book"), tg.NewAccount(t, "book")
	// 12 bid levels (BUY YES 20..31) and 12 ask levels (BUY NO 40..29, i.e. YES asks 60..71).
	for i := range 12 {
		a.Place(t, m.ID, "BUY", "YES", 20+i, i+1)
		b.Place(t, m.ID, "BUY", "NO", 40-i, 10)
	}
	a.Place(t, m.ID, "BUY", "YES", 31, 3) // a second order on the best bid
	book := a.Book(t, m.ID)
	if len(book.Yes.Bids) != 10 || len(book.Yes.Asks) != 10 || len(book.No.Bids) != 10 || len(book.No.Asks) != 10 {
		t.Fatalf("levels: %d/%d/%d/%d, want 10 each", len(book.Yes.Bids), len(book.Yes.Asks), len(book.No.Bids), len(book.No.Asks))
	}
	if book.Yes.Bids[0] != (Level{31, 15, 15}) || book.Yes.Bids[1] != (Level{30, 11, 26}) || book.Yes.Asks[0] != (Level{60, 10, 10}) || book.Yes.Asks[9] != (Level{69, 10, 100}) {
		t.Fatalf("YES view: %+v", book.Yes)
	}
	for i := range 10 {
		if y, n := book.Yes.Asks[i], book.No.Bids[i]; n != (Level{100 - y.Price, y.Quantity, y.Total}) {
			t.Errorf("NO bid %v does not mirror YES ask %v", n, y)
		}
		if y, n := book.Yes.Bids[i], book.No.Asks[i]; n != (Level{100 - y.Price, y.Quantity, y.Total}) {
			t.Errorf("NO ask %v does not mirror YES bid %v", n, y)
		}
	}
	if book.Yes.LastTradePrice != nil || book.No.LastTradePrice != nil {
		t.Fatal("a last trade price before any trade")
	}
	b.Place(t, m.ID, "BUY", "NO", 70, 1) // a YES ask at 30: mints one pair at the best bid, YES 31
	book = a.Book(t, m.ID)
	if book.Yes.LastTradePrice == nil || *book.Yes.LastTradePrice != 31 || book.No.LastTradePrice == nil || *book.No.LastTradePrice != 69 {
		t.Fatalf("last trade prices %v / %v, want 31 / 69", book.Yes.LastTradePrice, book.No.LastTradePrice)
	}
	if book.Yes.Bids[0] != (Level{31, 14, 14}) {
		t.Fatalf("best bid after the trade: %v", book.Yes.Bids[0])
	}
	a.ExpectError(t, "GET", "/market/order-book?marketId=nope", nil, http.StatusBadRequest, "invalid_uuid")
	a.ExpectError(t, "GET", "/market/order-book", nil, http.StatusBadRequest, "missing_field")
	a.ExpectError(t, "GET", "/market/order-book?marketId="+uuid.NewString(), nil, http.StatusBadRequest, "market_not_found")
}

// testMarketPages walks GET /markets a page at a time (limit and cursor, a pmx addition): pages
// are newest first without a repeat, both markets are on one of them, the last says so with a
// null nextCursor, and the answer without limit or cursor has no nextCursor at all. Other tests
// may add markets meanwhile: newer ones, before the first cursor, which the walk never meets.
func testMarketPages(t *testing.T, c *Client, older, newer uuid.UUID) {
	if raw := c.Expect(t, "GET", "/markets", nil, http.StatusOK, nil); strings.Contains(string(raw), "nextCursor") {
		t.Fatal("GET /markets without limit or cursor answers a nextCursor")
	}
	seen := map[uuid.UUID]bool{}
	var last *apiserver.Market
	path := "/markets?limit=2"
	for pages := 0; ; pages++ {
		if pages > 10_000 {
			t.Fatal("GET /markets pages do not end")
		}
		var page struct {
			Markets    []apiserver.Market
			NextCursor *string
		}
		raw := c.Expect(t, "GET", path, nil, http.StatusOK, &page)
		if len(page.Markets) > 2 || !strings.Contains(string(raw), `"nextCursor"`) {
			t.Fatalf("GET %s: %s", path, raw)
		}
		for i := range page.Markets {
			m := &page.Markets[i]
			if seen[m.ID] || last != nil && (m.CreatedAt.After(last.CreatedAt) || m.CreatedAt.Equal(last.CreatedAt) && m.ID.String() > last.ID.String()) {
				t.Fatalf("GET %s: market %s repeated or out of order", path, m.ID)
			}
			seen[m.ID], last = true, m
		}
		if page.NextCursor == nil {
			break
		}
		path = "/markets?limit=2&cursor=" + *page.NextCursor
	}
	if !seen[older] || !seen[newer] {
		t.Fatalf("the pages of GET /markets miss market %s or %s", older, newer)
	}
	c.ExpectError(t, "GET", "/markets?limit=0", nil, http.StatusBadRequest, "out_of_range")
	c.ExpectError(t, "GET", "/markets?cursor=!!", nil, http.StatusBadRequest, "invalid_cursor")
}

// testMetricsServed checks that the exchange serves /metrics on its metrics listener, counting the
// requests the suite made, and not on the API's port, where it is an unknown path like any other.
func testMetricsServed(t *testing.T, tg *Target) {
	if status, raw := tg.do(t, "GET", "/metrics", "", nil, false); status != http.StatusNotFound {
		t.Errorf("GET /metrics on the API's port: %d %.300s, want 404 (metrics have a listener of their own)", status, raw)
	}
	urls := slices.DeleteFunc(append([]string{tg.MetricsURL}, tg.MetricsURLs...), func(u string) bool { return u == "" })
	if len(urls) == 0 {
		t.Fatal("the target has no MetricsURL")
	}
	const placed = `pmx_http_requests_total{code="201",method="POST",route="/api/v1/order"}`
	counted := false
	for _, url := range urls {
		resp, err := tg.HTTP.Get(url + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		raw, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil || resp.StatusCode != http.StatusOK || !strings.Contains(string(raw), "# TYPE ") {
			t.Fatalf("GET %s/metrics: %d %.300s (%v)", url, resp.StatusCode, raw, err)
		}
		counted = counted || strings.Contains(string(raw), placed)
	}
	if !counted {
		t.Errorf("no metrics listener of %v counted the suite's placements (%s)", urls, placed)
	}
}

// testManagedByOperator checks that where markets and events are the operator's resources the
// admin API creates neither (a row it wrote would be scheduled by nobody) and moves none: each is
// a 409 managed_by_operator, and nothing is written.
func testManagedByOperator(t *testing.T, tg *Target) {
	m := tg.NewMarket(t, nil)
	question := "Made through the admin API where the operator manages markets " + uuid.NewString() + "?"
	name := "admin-made-" + uuid.NewString()[:8]
	fees := map[string]any{"takerBps": 700, "makerBps": 0}
	for _, r := range []struct {
		method, path string
		body         any
	}{
		{"POST", "/admin/v1/markets", map[string]any{"question": question, "category": "c"}},
		{"POST", "/admin/v1/events", map[string]any{"name": name, "question": question, "category": "c",
			"outcomes": []map[string]any{{"key": "a", "label": "A"}, {"key": "b", "label": "B"}}}},
		{"POST", "/admin/v1/markets/" + m.ID.String() + "/close", nil},
		{"POST", "/admin/v1/markets/" + m.ID.String() + "/pause", nil},
		{"POST", "/admin/v1/events/" + uuid.NewString() + "/pause", nil},
		{"PUT", "/admin/v1/markets/" + m.ID.String() + "/fees", fees},
		{"DELETE", "/admin/v1/markets/" + m.ID.String() + "/fees", nil},
		{"PUT", "/admin/v1/events/" + uuid.NewString() + "/fees", fees},
		{"DELETE", "/admin/v1/events/" + uuid.NewString() + "/fees", nil},
	} {
		var e ErrorBody
		tg.Admin(t, r.method, r.path, r.body, http.StatusConflict, &e)
		if e.Details.Code != "managed_by_operator" {
			t.Errorf("%s %s: %+v, want managed_by_operator", r.method, r.path, e)
		}
	}
	ctx := context.Background()
	var markets, events int
	if err := tg.Store.Pool.QueryRow(ctx, `select count(*) from markets where question = $1`, question).Scan(&markets); err != nil {
		t.Fatal(err)
	}
	if err := tg.Store.Pool.QueryRow(ctx, `select count(*) from events where name = $1`, name).Scan(&events); err != nil {
		t.Fatal(err)
	}
	if markets != 0 || events != 0 {
		t.Errorf("refused creations wrote %d markets and %d events", markets, events)
	}
	if got, err := tg.Store.Market(ctx, m.ID); err != nil || got.Status != "OPEN" || got.OwnFees {
		t.Errorf("a refused close left the market %s, with fees of its own %v (%v)", got.Status, got.OwnFees, err)
	}
}
