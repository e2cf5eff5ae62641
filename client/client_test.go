package client_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	pmxv1 "github.com/pmx-dev/pmx/api/v1alpha1"
	"github.com/pmx-dev/pmx/apiserver"
	"github.com/pmx-dev/pmx/client"
	"github.com/pmx-dev/pmx/internal/exchangetest"
	"github.com/pmx-dev/pmx/internal/kit/ratelimit"
)

// newClient opens an account on tg and returns an SDK client of it at url (tg's own by default).
func newClient(t *testing.T, tg *exchangetest.Target, url string, opts ...client.Option) *client.Client {
	t.Helper()
	if url == "" {
		url = tg.URL
	}
	acct := tg.NewAccount(t, "sdk")
	c, err := client.New(url+"/api/v1", acct.Key, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func ptr[T any](v T) *T { return &v }

func order(market uuid.UUID, side client.Side, outcome client.Outcome, price, quantity int) client.PlaceOrderRequest {
	return client.PlaceOrderRequest{MarketID: market, Side: side, Outcome: outcome, Price: price, Quantity: quantity}
}

// TestEveryOperation calls each of the Client's operations against a real exchange and checks
// what it answers against what the exchange did.
func TestEveryOperation(t *testing.T) {
	ctx := context.Background()
	tg := exchangetest.StartDev(t)
	m := tg.NewMarket(t, nil).ID
	alice, bob := newClient(t, tg, ""), newClient(t, tg, "")

	markets, err := alice.Markets(ctx, nil)
	if err != nil || !containsMarket(markets.Markets, m) {
		t.Fatalf("Markets: %v, %+v: want market %s", err, markets, m)
	}
	page, err := alice.Markets(ctx, &client.ListMarketsParams{Limit: ptr(1)})
	if err != nil || len(page.Markets) != 1 {
		t.Fatalf("Markets in pages of 1: %v, %+v", err, page)
	}
	got, err := alice.Market(ctx, m)
	if err != nil || got.ID != m || got.Status != client.MarketStatusOPEN {
		t.Fatalf("Market: %v, %+v", err, got)
	}

	// alice rests a YES bid; its client order id is the SDK's.
	bid, err := alice.PlaceOrder(ctx, order(m, client.BUY, client.OutcomeYES, 60, 10))
	if err != nil || bid.Status != client.OrderStatusOPEN || bid.Replayed || bid.ClientOrderID == nil {
		t.Fatalf("PlaceOrder: %v, %+v", err, bid)
	}
	// Sent again with its client order id: a replay, not a second order.
	again := order(m, client.BUY, client.OutcomeYES, 60, 10)
	again.ClientOrderID = bid.ClientOrderID
	replay, err := alice.PlaceOrder(ctx, again)
	if err != nil || !replay.Replayed || replay.ID != bid.ID {
		t.Fatalf("PlaceOrder again: %v, %+v: want a replay of %s", err, replay, bid.ID)
	}
	byClientID, err := alice.OrderByClientOrderID(ctx, *bid.ClientOrderID)
	if err != nil || byClientID.ID != bid.ID {
		t.Fatalf("OrderByClientOrderID: %v, %+v", err, byClientID)
	}
	// Alone at its price: nothing ahead of it.
	pos, err := alice.QueuePosition(ctx, bid.ID)
	if err != nil || pos.OrderID != bid.ID || pos.Side != client.BUY || pos.Price != 60 || pos.AheadQuantity != 0 || pos.LevelQuantity != 10 {
		t.Fatalf("QueuePosition: %v, %+v", err, pos)
	}
	unknown := uuid.New()
	queues, err := alice.QueuePositions(ctx, []uuid.UUID{bid.ID, unknown})
	if err != nil || len(queues.Positions) != 1 || queues.Positions[0].OrderID != bid.ID || len(queues.Errors) != 1 ||
		queues.Errors[0].OrderID != unknown || queues.Errors[0].Details.Code != "order_not_found" {
		t.Fatalf("QueuePositions: %v, %+v", err, queues)
	}

	// bob takes 4 of it by buying NO at 40 (a YES ask at 60), then rests two NO bids in a batch.
	take, err := bob.PlaceOrder(ctx, order(m, client.BUY, client.OutcomeNO, 40, 4))
	if err != nil || take.Status != client.OrderStatusFILLED || len(take.Trades) != 1 || take.Trades[0].Quantity != 4 {
		t.Fatalf("taking order: %v, %+v", err, take)
	}
	batch, err := bob.PlaceOrders(ctx, []client.PlaceOrderRequest{
		order(m, client.BUY, client.OutcomeNO, 30, 5),
		order(m, client.BUY, client.OutcomeNO, 0, 5), // refused: no such price
		order(m, client.BUY, client.OutcomeNO, 25, 5),
	})
	if err != nil || len(batch) != 3 || batch[0].Placed == nil || batch[2].Placed == nil || batch[1].Err == nil {
		t.Fatalf("PlaceOrders: %v, %+v", err, batch)
	}
	if e := batch[1].Err; e.Status != http.StatusBadRequest || e.Field != "price" {
		t.Fatalf("the batch's refused placement: %+v, want a 400 naming price", e)
	}
	amended, err := bob.AmendOrder(ctx, client.AmendOrderJSONRequestBody{OrderID: &batch[0].Placed.ID, Price: ptr(31)})
	if err != nil || amended.Price != 31 || amended.ID != batch[0].Placed.ID {
		t.Fatalf("AmendOrder: %v, %+v", err, amended)
	}

	book, err := alice.OrderBook(ctx, m)
	if err != nil || len(book.OrderBookYes.Bids) != 1 || book.OrderBookYes.Bids[0].Price != 60 || book.OrderBookYes.Bids[0].Quantity != 6 ||
		len(book.OrderBookYes.Asks) != 2 || book.OrderBookYes.Asks[0].Price != 69 || book.Seq == 0 {
		t.Fatalf("OrderBook: %v, %+v", err, book)
	}
	trades, err := alice.Trades(ctx, m, 10)
	if err != nil || len(trades) != 1 || trades[0].Quantity != 4 {
		t.Fatalf("Trades: %v, %+v", err, trades)
	}
	events, err := alice.MarketEvents(ctx, m, 0, 0)
	if err != nil || len(events.Events) == 0 || events.Events[len(events.Events)-1].Seq != book.Seq {
		t.Fatalf("MarketEvents: %v, %+v: want events up to the book's seq %d", err, events, book.Seq)
	}
	candles, err := alice.Candles(ctx, client.GetCandlesParams{MarketID: m, Interval: "1m"})
	if err != nil || len(candles.Candles) != 1 || candles.Candles[0].Volume != 4 {
		t.Fatalf("Candles: %v, %+v", err, candles)
	}

	orders, err := bob.Orders(ctx, &client.ListOrdersParams{MarketID: &m})
	if err != nil || len(orders.Orders) != 3 {
		t.Fatalf("Orders: %v, %+v: want bob's 3", err, orders)
	}
	one, err := bob.Order(ctx, take.ID)
	if err != nil || one.Status != client.OrderStatusFILLED {
		t.Fatalf("Order: %v, %+v", err, one)
	}
	if fees, err := bob.AccountFees(ctx, nil, nil); err != nil || fees.Paid != 0 || fees.Net != 0 || !fees.Since.Before(fees.Until) {
		t.Fatalf("AccountFees in a market without fees: %v, %+v", err, fees)
	}
	fills, err := alice.Fills(ctx, nil)
	if err != nil || len(fills.Fills) != 1 || fills.Fills[0].Role != client.MAKER || fills.Fills[0].OrderID != bid.ID {
		t.Fatalf("Fills: %v, %+v", err, fills)
	}
	positions, err := alice.Positions(ctx)
	if err != nil || len(positions) != 1 {
		t.Fatalf("Positions: %v, %+v", err, positions)
	}
	account, err := alice.Account(ctx)
	if err != nil || account.Locked != 6*60 {
		t.Fatalf("Account: %v, %+v: want 360 locked for the rest of the bid", err, account)
	}
	accountEvents, err := alice.AccountEvents(ctx, "", 0)
	if err != nil || len(accountEvents.Events) != 2 || accountEvents.Events[1].Seq != 2 || accountEvents.Cursor == "" { // accepted, fill
		t.Fatalf("AccountEvents: %v, %+v", err, accountEvents)
	}
	if _, err := alice.Limits(ctx); err != nil {
		t.Fatalf("Limits: %v", err)
	}
	keys, err := alice.Keys(ctx)
	if err != nil || len(keys) != 1 || !keys[0].Current || keys[0].Scope != client.APIKeyScopeTrade || keys[0].ExpiresAt != nil {
		t.Fatalf("Keys: %v, %+v: want the one key, trade, without expiry", err, keys)
	}
	hb, err := bob.Heartbeat(ctx, 30*time.Second)
	if err != nil || !hb.Armed || hb.Deadline == nil {
		t.Fatalf("Heartbeat: %v, %+v", err, hb)
	}
	if hb, err := bob.Heartbeat(ctx, 0); err != nil || hb.Armed {
		t.Fatalf("Heartbeat(0): %v, %+v: want it disarmed", err, hb)
	}
	if tok, err := alice.WSToken(ctx); err != nil || tok.Token == "" {
		t.Fatalf("WSToken: %v, %+v", err, tok)
	}

	// Cancels, each way.
	if c, err := bob.CancelOrder(ctx, batch[0].Placed.ID); err != nil || c.ID != batch[0].Placed.ID {
		t.Fatalf("CancelOrder: %v, %+v", err, c)
	}
	if c, err := bob.CancelByClientOrderID(ctx, *batch[2].Placed.ClientOrderID); err != nil || c.ID != batch[2].Placed.ID {
		t.Fatalf("CancelByClientOrderID: %v, %+v", err, c)
	}
	rest, err := bob.PlaceOrder(ctx, order(m, client.SELL, client.OutcomeNO, 50, 2))
	if err != nil {
		t.Fatal(err)
	}
	cancelled, err := bob.CancelOrders(ctx, client.CancelOrdersJSONRequestBody{MarketID: &m})
	if err != nil || len(cancelled.Cancelled) != 1 || cancelled.Cancelled[0].ID != rest.ID {
		t.Fatalf("CancelOrders: %v, %+v", err, cancelled)
	}
	all, err := alice.CancelEverything(ctx)
	if err != nil || len(all) != 1 || all[0].ID != bid.ID {
		t.Fatalf("CancelEverything: %v, %+v", err, all)
	}

	tg.Markets.Resolve(t, m, "YES")
	settled, err := alice.Settlements(ctx, nil)
	if err != nil || len(settled.Settlements) != 1 || settled.Settlements[0].Payout != 400 {
		t.Fatalf("Settlements: %v, %+v: want 4 YES paid 400", err, settled)
	}
}

func containsMarket(ms []client.Market, id uuid.UUID) bool {
	for _, m := range ms {
		if m.ID == id {
			return true
		}
	}
	return false
}

// TestErrors checks that the API's refusals come back as *APIError with their status, code and
// field, and that a wrong key or server says so.
func TestErrors(t *testing.T) {
	ctx := context.Background()
	tg := exchangetest.StartDev(t)
	m := tg.NewMarket(t, nil).ID
	c := newClient(t, tg, "")

	_, err := c.PlaceOrder(ctx, order(m, client.BUY, client.OutcomeYES, 100, 1))
	var e *client.APIError
	if !errors.As(err, &e) || e.Status != http.StatusBadRequest || e.Field != "price" || e.Code == "" || e.Message == "" {
		t.Fatalf("a price of 100: %v, want a 400 naming price", err)
	}
	if _, err := c.Market(ctx, uuid.New()); !client.IsCode(err, "market_not_found") {
		t.Fatalf("an unknown market: %v, want market_not_found", err)
	}
	readOnly := tg.NewAccountWithKey(t, "sdk", map[string]any{"scope": "read"})
	reader, err := client.New(tg.URL+"/api/v1", readOnly.Key)
	if err != nil {
		t.Fatal(err)
	}
	_, err = reader.PlaceOrder(ctx, order(m, client.BUY, client.OutcomeYES, 50, 1))
	if !errors.As(err, &e) || e.Status != http.StatusForbidden || e.Code != "insufficient_scope" || e.Field != "trade" {
		t.Fatalf("a read key placing an order: %v, want a 403 insufficient_scope naming trade", err)
	}
	stranger, err := client.New(tg.URL+"/api/v1", "pmx_not-a-key")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := stranger.Account(ctx); !errors.As(err, &e) || e.Status != http.StatusUnauthorized {
		t.Fatalf("a wrong key: %v, want a 401", err)
	}
	if _, err := client.New("127.0.0.1:8080", "key"); err == nil {
		t.Fatal("a server without a scheme was taken")
	}
	if _, err := client.New(tg.URL+"/api/v1", ""); err == nil {
		t.Fatal("an empty key was taken")
	}
	wrongPath, err := client.New(tg.URL, "pmx_key")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := wrongPath.Account(ctx); !errors.As(err, &e) || e.Status != http.StatusNotFound {
		t.Fatalf("a server URL without /api/v1: %v, want a 404", err)
	}
}

// TestPlacementRetriedAfterLostAnswer loses the answer of a placement that pmx carried out: the
// Client sends it again with the same client order id and is answered by the order it made, and
// the account has that one order. A placement without a client order id, sent by the generated
// client, is not sent again: its error is returned.
func TestPlacementRetriedAfterLostAnswer(t *testing.T) {
	ctx := context.Background()
	tg := exchangetest.StartDev(t)
	m := tg.NewMarket(t, nil).ID
	px := startProxy(t, strings.TrimPrefix(tg.URL, "http://"))
	// A connection per request, so that the proxy loses exactly the answers it is told to.
	hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	c := newClient(t, tg, px.URL(), client.WithHTTP(hc))

	px.loseAnswers.Store(2)
	placed, err := c.PlaceOrder(ctx, order(m, client.BUY, client.OutcomeYES, 40, 3))
	if err != nil || !placed.Replayed {
		t.Fatalf("PlaceOrder through two lost answers: %v, %+v: want the replay of the order placed", err, placed)
	}
	orders, err := c.Orders(ctx, nil)
	if err != nil || len(orders.Orders) != 1 || orders.Orders[0].ID != placed.ID {
		t.Fatalf("orders after the retries: %v, %+v: want exactly %s", err, orders, placed.ID)
	}

	px.loseAnswers.Store(1)
	resp, err := c.ClientWithResponses.PlaceOrderWithResponse(ctx, order(m, client.BUY, client.OutcomeYES, 41, 3))
	if err == nil {
		t.Fatalf("a placement without a client order id was sent again after its answer was lost: %d", resp.StatusCode())
	}
	orders, err = c.Orders(ctx, nil)
	if err != nil || len(orders.Orders) != 2 {
		t.Fatalf("orders: %v, %+v: want the second placement once", err, orders)
	}
}

// countingTransport counts the answers of each status that pass through it.
type countingTransport struct {
	http.RoundTripper
	tooMany atomic.Int32
}

func (c *countingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := c.RoundTripper.RoundTrip(r)
	if err == nil && resp.StatusCode == http.StatusTooManyRequests {
		c.tooMany.Add(1)
	}
	return resp, err
}

// TestRateLimitBackOff checks that a Client waits out a 429 for its Retry-After and then
// succeeds, and that with no retries the 429 comes back as an APIError saying how long to wait.
func TestRateLimitBackOff(t *testing.T) {
	ctx := context.Background()
	tg := exchangetest.StartDev(t, func(c *apiserver.Config) { c.WriteLimit = ratelimit.Limit{Rate: 2, Burst: 2} })
	m := tg.NewMarket(t, nil).ID
	tr := &countingTransport{RoundTripper: http.DefaultTransport}
	c := newClient(t, tg, "", client.WithHTTP(&http.Client{Transport: tr, Timeout: 10 * time.Second}))
	for i := range 5 {
		if _, err := c.PlaceOrder(ctx, order(m, client.BUY, client.OutcomeYES, 10+i, 1)); err != nil {
			t.Fatalf("placement %d: %v", i, err)
		}
	}
	if tr.tooMany.Load() == 0 {
		t.Fatal("5 placements at a limit of 2 a second met no 429: the test tests nothing")
	}

	impatient := newClient(t, tg, "", client.WithRetries(client.Retry{Attempts: 1}))
	var err error
	for i := 0; i < 10 && err == nil; i++ {
		_, err = impatient.PlaceOrder(ctx, order(m, client.BUY, client.OutcomeYES, 10+i, 1))
	}
	var e *client.APIError
	if !errors.As(err, &e) || e.Status != http.StatusTooManyRequests || e.RetryAfter <= 0 {
		t.Fatalf("placing without retries past the limit: %v, want a 429 with its Retry-After", err)
	}
}

// TestOrderGroups makes a group, places into it, fills it to its limit, sees the trigger cancel its
// order and refuse the next (an *APIError with order_group_triggered), resets it, and deletes it
// once no order of it is open.
func TestOrderGroups(t *testing.T) {
	ctx := context.Background()
	tg := exchangetest.StartDev(t)
	m := tg.NewMarket(t, nil).ID
	alice, bob := newClient(t, tg, ""), newClient(t, tg, "")

	g, err := alice.CreateOrderGroup(ctx, 5, 60)
	if err != nil || g.FillLimit != 5 || g.WindowSeconds != 60 || g.Triggered {
		t.Fatalf("CreateOrderGroup: %v, %+v", err, g)
	}
	bid := order(m, client.BUY, client.OutcomeYES, 60, 10)
	bid.OrderGroupID = &g.ID
	placed, err := alice.PlaceOrder(ctx, bid)
	if err != nil || placed.OrderGroupID == nil || *placed.OrderGroupID != g.ID {
		t.Fatalf("PlaceOrder into the group: %v, %+v", err, placed)
	}
	if _, err := bob.PlaceOrder(ctx, order(m, client.BUY, client.OutcomeNO, 40, 5)); err != nil {
		t.Fatal(err)
	}
	got, err := alice.OrderGroup(ctx, g.ID)
	if err != nil || !got.Triggered || got.FilledInWindow != 5 {
		t.Fatalf("OrderGroup after 5 filled of 5: %v, %+v", err, got)
	}
	o, err := alice.Order(ctx, placed.ID)
	if err != nil || o.CancelReason == nil || *o.CancelReason != client.OrderCancelReasonORDERGROUP {
		t.Fatalf("the group's order after the trigger: %v, %+v", err, o)
	}
	var refused *client.APIError
	if _, err := alice.PlaceOrder(ctx, bid); !errors.As(err, &refused) || refused.Status != http.StatusConflict || refused.Code != "order_group_triggered" {
		t.Fatalf("PlaceOrder into a triggered group: %v, want 409 order_group_triggered", err)
	}
	if reset, err := alice.ResetOrderGroup(ctx, g.ID); err != nil || reset.Triggered || reset.FilledInWindow != 0 {
		t.Fatalf("ResetOrderGroup: %v, %+v", err, reset)
	}
	if groups, err := alice.OrderGroups(ctx); err != nil || len(groups) != 1 || groups[0].ID != g.ID {
		t.Fatalf("OrderGroups: %v, %+v", err, groups)
	}
	if page, err := alice.OrderGroupsPage(ctx, nil, 0); err != nil || len(page.OrderGroups) != 1 || page.OrderGroups[0].ID != g.ID || page.NextCursor != nil {
		t.Fatalf("OrderGroupsPage: %v, %+v", err, page)
	}
	again, err := alice.PlaceOrder(ctx, bid)
	if err != nil {
		t.Fatalf("PlaceOrder after the reset: %v", err)
	}
	if err := alice.DeleteOrderGroup(ctx, g.ID); !errors.As(err, &refused) || refused.Code != "order_group_has_open_orders" {
		t.Fatalf("DeleteOrderGroup with an order open in it: %v, want order_group_has_open_orders", err)
	}
	if _, err := alice.CancelOrder(ctx, again.ID); err != nil {
		t.Fatal(err)
	}
	if err := alice.DeleteOrderGroup(ctx, g.ID); err != nil {
		t.Fatalf("DeleteOrderGroup: %v", err)
	}
	if groups, err := alice.OrderGroups(ctx); err != nil || len(groups) != 0 {
		t.Fatalf("OrderGroups after the group was deleted: %v, %+v", err, groups)
	}
}

// TestEvents makes an event of three outcomes through the admin API, finds it in Events and reads
// it with Event, has alice buy NO of two outcomes from bob, converts them (a retry replayed, the
// conversion once on the account's feed and in AccountEvents; another, its answer lost twice,
// retried and converting once) and reads back her cash and YES of the third outcome; a conversion
// beyond her NO shares is an *APIError insufficient_shares.
func TestEvents(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	tg := exchangetest.StartDev(t)
	var made struct {
		ID       uuid.UUID `json:"id"`
		Outcomes []struct {
			Key      string    `json:"key"`
			MarketID uuid.UUID `json:"marketId"`
		} `json:"outcomes"`
	}
	tg.Admin(t, "POST", "/admin/v1/events", map[string]any{"question": "Which one wins", "category": "test",
		"outcomes": []map[string]any{{"key": "a", "label": "A"}, {"key": "b", "label": "B"}, {"key": "c", "label": "C"}}},
		http.StatusCreated, &made)
	acct := tg.NewAccount(t, "sdk")
	alice, err := client.New(tg.URL+"/api/v1", acct.Key)
	if err != nil {
		t.Fatal(err)
	}
	// lossy is alice through a proxy that can lose answers, a connection per request.
	px := startProxy(t, strings.TrimPrefix(tg.URL, "http://"))
	hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	lossy, err := client.New(px.URL()+"/api/v1", acct.Key, client.WithHTTP(hc))
	if err != nil {
		t.Fatal(err)
	}
	bob := newClient(t, tg, "")

	open := client.MarketStatusOPEN
	page, err := alice.Events(ctx, &open, nil, 0)
	if err != nil || len(page.Events) != 1 || page.Events[0].ID != made.ID || len(page.Events[0].Outcomes) != 3 || page.NextCursor != nil {
		t.Fatalf("Events: %v, %+v: want event %s alone", err, page, made.ID)
	}
	closed := client.MarketStatusCLOSED
	if page, err := alice.Events(ctx, &closed, nil, 0); err != nil || len(page.Events) != 0 {
		t.Fatalf("Events CLOSED: %v, %+v: want none", err, page)
	}

	// alice buys 3 NO of a and of b at 70; bob's YES bids at 30 rest first.
	for _, o := range made.Outcomes[:2] {
		if _, err := bob.PlaceOrder(ctx, order(o.MarketID, client.BUY, client.OutcomeYES, 30, 3)); err != nil {
			t.Fatal(err)
		}
		if p, err := alice.PlaceOrder(ctx, order(o.MarketID, client.BUY, client.OutcomeNO, 70, 3)); err != nil || p.Status != client.OrderStatusFILLED {
			t.Fatalf("buying NO of %s: %v, %+v", o.Key, err, p)
		}
	}
	if _, err := bob.PlaceOrder(ctx, order(made.Outcomes[2].MarketID, client.BUY, client.OutcomeYES, 20, 1)); err != nil {
		t.Fatal(err)
	}
	e, err := alice.Event(ctx, made.ID)
	if err != nil || e.ID != made.ID || e.Status != client.MarketStatusOPEN || len(e.Outcomes) != 3 {
		t.Fatalf("Event: %v, %+v", err, e)
	}
	// a and b traded at 30 with no book left; c has a bid at 20 and no ask: mid 60.
	for i, want := range []float32{50, 50, 60} {
		o := e.Outcomes[i]
		if o.Key != made.Outcomes[i].Key || o.MarketID != made.Outcomes[i].MarketID || o.YesMid != want {
			t.Errorf("outcome %d: %+v, want %s's market with a YES mid of %v", i, o, made.Outcomes[i].Key, want)
		}
	}
	if e.Outcomes[0].LastPrice == nil || *e.Outcomes[0].LastPrice != 30 || e.Outcomes[2].BestBid == nil || *e.Outcomes[2].BestBid != 20 {
		t.Errorf("Event's prices: %+v, want a's last price 30 and c's best bid 20", e.Outcomes)
	}
	if e.YesMidSum != 160 {
		t.Errorf("Event's yesMidSum %v, want 160", e.YesMidSum)
	}

	feed := alice.Feed(client.Subscription{Channel: client.ChannelOrders})
	converted := make(chan client.Conversion, 4)
	runErr := make(chan error, 1)
	go func() {
		runErr <- feed.Run(ctx, func(msg client.FeedMessage) error {
			for _, ev := range msg.AccountEvents {
				if ev.Type == client.AccountEventTypeConverted && ev.Conversion != nil {
					converted <- *ev.Conversion
				}
			}
			return nil
		})
	}()
	select {
	case <-feed.Ready():
	case err := <-runErr:
		t.Fatalf("the feed stopped before it was ready: %v", err)
	case <-ctx.Done():
		t.Fatal("the feed was not ready")
	}

	before, err := alice.Account(ctx)
	if err != nil {
		t.Fatal(err)
	}
	req := client.ConvertRequest{EventID: made.ID, Outcomes: []string{"a", "b"}, Quantity: 2}
	conv, err := alice.Convert(ctx, req)
	if err != nil || conv.Replayed || conv.Cash != 200 || conv.Quantity != 2 || conv.EventID != made.ID || conv.ClientRequestID == nil {
		t.Fatalf("Convert: %v, %+v: want 200 cents for 2 of a and b, with the SDK's clientRequestId", err, conv)
	}
	req.ClientRequestID = conv.ClientRequestID
	if again, err := alice.Convert(ctx, req); err != nil || !again.Replayed || again.ID != conv.ID {
		t.Fatalf("Convert again: %v, %+v: want a replay of %s", err, again, conv.ID)
	}
	// Its answer lost twice, a conversion is sent again with its clientRequestId and converts once.
	px.loseAnswers.Store(2)
	lost, err := lossy.Convert(ctx, client.ConvertRequest{EventID: made.ID, Outcomes: []string{"a", "b"}, Quantity: 1})
	if err != nil || !lost.Replayed || lost.Cash != 100 {
		t.Fatalf("Convert through two lost answers: %v, %+v: want the replay of the conversion made", err, lost)
	}
	for _, want := range []uuid.UUID{conv.ID, lost.ID} {
		select {
		case c := <-converted:
			if c.ID != want {
				t.Errorf("the feed's conversion %+v, want %s", c, want)
			}
		case <-ctx.Done():
			t.Fatalf("conversion %s was never on the account's feed", want)
		}
	}
	cancel()
	<-runErr
	ctx = context.Background()

	after, err := alice.Account(ctx)
	if err != nil || after.Available != before.Available+300 {
		t.Fatalf("Account after converting: %v, %+v: want %d cents available", err, after, before.Available+300)
	}
	held := map[string]int{}
	positions, err := alice.Positions(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range positions {
		held[p.MarketID.String()+"/"+string(p.Outcome)] = p.Quantity
	}
	for i, want := range map[int]map[client.Outcome]int{0: {client.OutcomeNO: 0}, 1: {client.OutcomeNO: 0}, 2: {client.OutcomeYES: 3}} {
		for outcome, n := range want {
			if got := held[made.Outcomes[i].MarketID.String()+"/"+string(outcome)]; got != n {
				t.Errorf("alice holds %d %s of %s after converting, want %d", got, outcome, made.Outcomes[i].Key, n)
			}
		}
	}
	events, err := alice.AccountEvents(ctx, "", 0)
	if err != nil {
		t.Fatal(err)
	}
	var seen []uuid.UUID
	for _, ev := range events.Events {
		if ev.Type == client.AccountEventTypeConverted && ev.Conversion != nil {
			seen = append(seen, ev.Conversion.ID)
		}
	}
	if len(seen) != 2 || seen[0] != conv.ID || seen[1] != lost.ID {
		t.Errorf("AccountEvents has conversions %v, want %s and %s, each once", seen, conv.ID, lost.ID)
	}

	var refused *client.APIError
	if _, err := alice.Convert(ctx, client.ConvertRequest{EventID: made.ID, Outcomes: []string{"a"}, Quantity: 5}); !errors.As(err, &refused) || refused.Code != "insufficient_shares" {
		t.Fatalf("converting more NO than held: %v, want insufficient_shares", err)
	}
	if _, err := alice.Event(ctx, uuid.New()); !errors.As(err, &refused) || refused.Status != http.StatusNotFound || refused.Code != "event_not_found" {
		t.Fatalf("Event of no event: %v, want 404 event_not_found", err)
	}
}

// TestSeries reads a series of markets, as pmx dev lists it, through the SDK: the list, the series
// with its instances, an instance's market naming its series, and an unknown series refused.
func TestSeries(t *testing.T) {
	ctx := context.Background()
	tg := exchangetest.StartDev(t)
	alice := newClient(t, tg, "")
	keep := int32(1)
	id, markets := exchangetest.DevSeries{T: tg}.Create(t, "sdk-series", pmxv1.MarketSeriesSpec{Schedule: "@daily", KeepListed: &keep,
		Market: &pmxv1.SeriesMarketTemplate{Question: "SDK series market of {date}?", Category: "test"}})
	page, err := alice.SeriesList(ctx, nil, 0)
	if err != nil || len(page.Series) != 1 || page.Series[0].ID != id || page.Series[0].Kind != client.SeriesKindMARKET || page.NextCursor != nil {
		t.Fatalf("SeriesList: %v, %+v: want series %s alone", err, page, id)
	}
	s, err := alice.Series(ctx, id)
	if err != nil || s.Name != "sdk-series" || len(s.Instances) != 1 || s.Instances[0].MarketID == nil || *s.Instances[0].MarketID != markets[0] {
		t.Fatalf("Series: %v, %+v: want its instance %v", err, s, markets)
	}
	m, err := alice.Market(ctx, markets[0])
	if err != nil || m.SeriesID == nil || *m.SeriesID != id {
		t.Fatalf("Market of the instance: %v, %+v", err, m)
	}
	var refused *client.APIError
	if _, err := alice.Series(ctx, uuid.New()); !errors.As(err, &refused) || refused.Status != http.StatusNotFound || refused.Code != "series_not_found" {
		t.Fatalf("Series of an unknown id: %v", err)
	}
}
