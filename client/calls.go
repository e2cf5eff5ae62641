package client

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/google/uuid"
)

// Names for the generated answers' shapes, as the methods below return them.
type (
	// OrderBookAnswer is a market's book in both views and the seq it reflects.
	OrderBookAnswer = GetOrderBook200JSONResponseBody
	// MarketsPage is a page of markets; NextCursor is set only when the request asked for pages.
	MarketsPage = ListMarkets200JSONResponseBody
	// OrdersPage is a page of the account's orders, newest first.
	OrdersPage = ListOrders200JSONResponseBody
	// FillsPage is a page of the account's fills, newest first.
	FillsPage = ListFills200JSONResponseBody
	// SettlementsPage is a page of what settled markets paid the account.
	SettlementsPage = ListSettlements200JSONResponseBody
	// MarketEventsPage is a market's events after a seq.
	MarketEventsPage = GetMarketEvents200JSONResponseBody
	// AccountEventsPage is the account's events after a cursor, and the cursor after them.
	AccountEventsPage = GetAccountEvents200JSONResponseBody
	// Candles is a market's OHLC per interval.
	Candles = GetCandles200JSONResponseBody
	// Limits is the account's rate limits and what is left of them.
	Limits = GetAccountLimits200JSONResponseBody
	// CancelOrdersAnswer is what a batch cancel cancelled, and why it left the others.
	CancelOrdersAnswer = CancelOrders200JSONResponseBody
	// EventsPage is a page of events, newest first; NextCursor is nil on the last page.
	EventsPage = ListEvents200JSONResponseBody
	// SeriesPage is a page of series (recurring markets), newest first; NextCursor is nil on the
	// last page.
	SeriesPage = ListSeries200JSONResponseBody
	// QueuePositionsAnswer is where several resting orders stand in their queues, and why the
	// others have no place.
	QueuePositionsAnswer = GetQueuePositions200JSONResponseBody
)

// Markets lists markets (params may be nil: every market, as the contract has it).
func (c *Client) Markets(ctx context.Context, params *ListMarketsParams) (*MarketsPage, error) {
	r, err := c.ListMarketsWithResponse(ctx, params)
	if err != nil {
		return nil, err
	}
	return value(r.HTTPResponse, r.Body, r.JSON200)
}

// Market returns one market.
func (c *Client) Market(ctx context.Context, id uuid.UUID) (*Market, error) {
	r, err := c.GetMarketWithResponse(ctx, &GetMarketParams{MarketID: id})
	if err != nil {
		return nil, err
	}
	return value(r.HTTPResponse, r.Body, r.JSON201) // the contract answers 201 here
}

// OrderBook returns a market's book in both views.
func (c *Client) OrderBook(ctx context.Context, market uuid.UUID) (*OrderBookAnswer, error) {
	r, err := c.GetOrderBookWithResponse(ctx, &GetOrderBookParams{MarketID: market})
	if err != nil {
		return nil, err
	}
	return value(r.HTTPResponse, r.Body, r.JSON200)
}

// Trades returns a market's latest trades, newest first; limit 0 takes the server's default.
func (c *Client) Trades(ctx context.Context, market uuid.UUID, limit int) ([]Trade, error) {
	r, err := c.ListMarketTradesWithResponse(ctx, &ListMarketTradesParams{MarketID: market, Limit: optional(limit)})
	if err != nil {
		return nil, err
	}
	t, err := value(r.HTTPResponse, r.Body, r.JSON200)
	if err != nil {
		return nil, err
	}
	return *t, nil
}

// MarketEvents returns a market's events after seq after, at most limit (0: the server's default).
func (c *Client) MarketEvents(ctx context.Context, market uuid.UUID, after int, limit int) (*MarketEventsPage, error) {
	r, err := c.GetMarketEventsWithResponse(ctx, &GetMarketEventsParams{MarketID: market, After: &after, Limit: optional(limit)})
	if err != nil {
		return nil, err
	}
	return value(r.HTTPResponse, r.Body, r.JSON200)
}

// Candles returns a market's candles.
func (c *Client) Candles(ctx context.Context, params GetCandlesParams) (*Candles, error) {
	r, err := c.GetCandlesWithResponse(ctx, &params)
	if err != nil {
		return nil, err
	}
	return value(r.HTTPResponse, r.Body, r.JSON200)
}

// Account returns the account's cash, available and locked.
func (c *Client) Account(ctx context.Context) (*Account, error) {
	r, err := c.GetAccountWithResponse(ctx)
	if err != nil {
		return nil, err
	}
	return value(r.HTTPResponse, r.Body, r.JSON200)
}

// AccountEvents returns the account's events after the cursor after (a page's Cursor, a feed
// message's or its subscription's; "": from the oldest event kept), at most limit (0: the
// server's default), and the cursor after them.
func (c *Client) AccountEvents(ctx context.Context, after string, limit int) (*AccountEventsPage, error) {
	params := &GetAccountEventsParams{Limit: optional(limit)}
	if after != "" {
		params.After = &after
	}
	r, err := c.GetAccountEventsWithResponse(ctx, params)
	if err != nil {
		return nil, err
	}
	return value(r.HTTPResponse, r.Body, r.JSON200)
}

// Limits returns the account's rate limits and what is left of them.
func (c *Client) Limits(ctx context.Context) (*Limits, error) {
	r, err := c.GetAccountLimitsWithResponse(ctx)
	if err != nil {
		return nil, err
	}
	return value(r.HTTPResponse, r.Body, r.JSON200)
}

// Keys lists the account's API keys, revoked ones included, newest first: each one's scope,
// expiry, address allowlist and last use, never its secret. Current marks the client's own.
func (c *Client) Keys(ctx context.Context) ([]APIKey, error) {
	r, err := c.ListAccountKeysWithResponse(ctx)
	if err != nil {
		return nil, err
	}
	k, err := value(r.HTTPResponse, r.Body, r.JSON200)
	if err != nil {
		return nil, err
	}
	return k.Keys, nil
}

// CreateKey makes another key of the account, with a key of scope keys, and returns it: APIKey is
// the whole key, shown this once (the exchange keeps only its hash), and Key the key as Keys lists
// it. Every field of req may be left out: a key of scope trade, taking the expiry and address
// allowlist of the key that makes it. A key never makes one that may do more than itself: asking
// for a wider scope, a later expiry or a wider allowlist is an *APIError with code
// exceeds_own_key, Field naming which; a client without scope keys gets insufficient_scope.
func (c *Client) CreateKey(ctx context.Context, req NewKeyRequest) (*NewKey, error) {
	r, err := c.CreateAccountKeyWithResponse(ctx, req)
	if err != nil {
		return nil, err
	}
	return value(r.HTTPResponse, r.Body, r.JSON201)
}

// RevokeKey revokes one of the account's keys (its ID as Keys lists it; the client's own key
// included), with a key of scope keys: every request with it is refused from then on, on every
// replica of the API. A key that is not an active key of the account is an *APIError with code
// key_not_found.
func (c *Client) RevokeKey(ctx context.Context, id uuid.UUID) error {
	r, err := c.RevokeAccountKeyWithResponse(ctx, id)
	if err != nil {
		return err
	}
	if r.StatusCode() != http.StatusNoContent {
		return errorOf(r.StatusCode(), r.Body, r.HTTPResponse.Header)
	}
	return nil
}

// AccountFees returns what the account's fills paid in fees, and were paid in rebates, over the
// period from since (inclusive) to until (exclusive); nil: the server's default (the 30 days
// before now). A call spans at most 366 days.
func (c *Client) AccountFees(ctx context.Context, since, until *time.Time) (*AccountFees, error) {
	r, err := c.GetAccountFeesWithResponse(ctx, &GetAccountFeesParams{Since: since, Until: until})
	if err != nil {
		return nil, err
	}
	return value(r.HTTPResponse, r.Body, r.JSON200)
}

// RiskLimits returns the account's self-set risk limits (nil: none) and what it uses of them.
func (c *Client) RiskLimits(ctx context.Context) (*RiskLimits, error) {
	r, err := c.GetRiskLimitsWithResponse(ctx)
	if err != nil {
		return nil, err
	}
	return value(r.HTTPResponse, r.Body, r.JSON200)
}

// SetRiskLimits replaces the account's risk limits; nil removes one. maxPosition caps, per market
// and outcome, the shares held plus those of open BUY orders; maxLockedCash the cents the open
// orders lock across all markets. An order that could pass one is refused: an *APIError with code
// risk_limit_exceeded and Field naming the limit.
func (c *Client) SetRiskLimits(ctx context.Context, maxPosition, maxLockedCash *int64) (*RiskLimits, error) {
	r, err := c.SetRiskLimitsWithResponse(ctx, SetRiskLimitsJSONRequestBody{MaxPosition: maxPosition, MaxLockedCash: maxLockedCash})
	if err != nil {
		return nil, err
	}
	return value(r.HTTPResponse, r.Body, r.JSON200)
}

// CreateOrderGroup makes an order group: orders placed with its id (PlaceOrderRequest.OrderGroupID)
// belong to it, and once the shares they fill within windowSeconds reach fillLimit, the group's
// resting orders are cancelled (cancelReason ORDER_GROUP) and it refuses orders (an *APIError with
// code order_group_triggered) until ResetOrderGroup.
func (c *Client) CreateOrderGroup(ctx context.Context, fillLimit int64, windowSeconds int) (*OrderGroup, error) {
	r, err := c.CreateOrderGroupWithResponse(ctx, CreateOrderGroupJSONRequestBody{FillLimit: fillLimit, WindowSeconds: windowSeconds})
	if err != nil {
		return nil, err
	}
	return value(r.HTTPResponse, r.Body, r.JSON201)
}

// OrderGroups lists every order group of the account's, newest first (at most as many as the
// server lets an account keep, 1,000 by default).
func (c *Client) OrderGroups(ctx context.Context) ([]OrderGroup, error) {
	r, err := c.ListOrderGroupsWithResponse(ctx, nil)
	if err != nil {
		return nil, err
	}
	g, err := value(r.HTTPResponse, r.Body, r.JSON200)
	if err != nil {
		return nil, err
	}
	return g.AsOrderGroupList()
}

// OrderGroupsPage lists the account's order groups, newest first, a page at a time: from cursor
// (nil: the first page), at most limit (0: the server's default). Pass the page's NextCursor for
// the next; it is nil on the last page.
func (c *Client) OrderGroupsPage(ctx context.Context, cursor *string, limit int) (*OrderGroupPage, error) {
	if cursor == nil && limit == 0 {
		limit = defaultOrderGroupsPage // a page is asked for by limit or cursor
	}
	r, err := c.ListOrderGroupsWithResponse(ctx, &ListOrderGroupsParams{Cursor: cursor, Limit: optional(limit)})
	if err != nil {
		return nil, err
	}
	g, err := value(r.HTTPResponse, r.Body, r.JSON200)
	if err != nil {
		return nil, err
	}
	page, err := g.AsOrderGroupPage()
	if err != nil {
		return nil, err
	}
	return &page, nil
}

// defaultOrderGroupsPage is the server's page size of GET /order-groups, asked for explicitly on
// the first page when the caller gives neither cursor nor limit.
const defaultOrderGroupsPage = 100

// OrderGroup returns one of the account's order groups: its fills in the window and whether it is
// triggered.
func (c *Client) OrderGroup(ctx context.Context, id uuid.UUID) (*OrderGroup, error) {
	r, err := c.GetOrderGroupWithResponse(ctx, id)
	if err != nil {
		return nil, err
	}
	return value(r.HTTPResponse, r.Body, r.JSON200)
}

// ResetOrderGroup lets a triggered group take orders again and restarts its count. It needs a
// key with the trade scope.
func (c *Client) ResetOrderGroup(ctx context.Context, id uuid.UUID) (*OrderGroup, error) {
	r, err := c.ResetOrderGroupWithResponse(ctx, id)
	if err != nil {
		return nil, err
	}
	return value(r.HTTPResponse, r.Body, r.JSON200)
}

// DeleteOrderGroup deletes one of the account's groups that no open order is in (409
// order_group_has_open_orders while one is), to make room under the most an account keeps.
func (c *Client) DeleteOrderGroup(ctx context.Context, id uuid.UUID) error {
	r, err := c.DeleteOrderGroupWithResponse(ctx, id)
	if err != nil {
		return err
	}
	if r.StatusCode() != http.StatusNoContent {
		return errorOf(r.StatusCode(), r.Body, r.HTTPResponse.Header)
	}
	return nil
}

// Events lists events, newest first: those of status (nil: every status), from cursor (nil: the
// first page), at most limit (0: the server's default). Pass the page's NextCursor for the next.
func (c *Client) Events(ctx context.Context, status *MarketStatus, cursor *string, limit int) (*EventsPage, error) {
	r, err := c.ListEventsWithResponse(ctx, &ListEventsParams{Status: status, Cursor: cursor, Limit: optional(limit)})
	if err != nil {
		return nil, err
	}
	return value(r.HTTPResponse, r.Body, r.JSON200)
}

// Event returns one event with each outcome's market, best YES bid and ask, last price and YES
// mid, and the mids' sum (about 100 when the outcomes are priced consistently).
func (c *Client) Event(ctx context.Context, id uuid.UUID) (*EventDetail, error) {
	r, err := c.GetEventWithResponse(ctx, &GetEventParams{EventID: id})
	if err != nil {
		return nil, err
	}
	return value(r.HTTPResponse, r.Body, r.JSON200)
}

// SeriesList lists series (recurring markets), newest first, from cursor (nil: the first page),
// at most limit (0: the server's default). Pass the page's NextCursor for the next.
func (c *Client) SeriesList(ctx context.Context, cursor *string, limit int) (*SeriesPage, error) {
	r, err := c.ListSeriesWithResponse(ctx, &ListSeriesParams{Cursor: cursor, Limit: optional(limit)})
	if err != nil {
		return nil, err
	}
	return value(r.HTTPResponse, r.Body, r.JSON200)
}

// Series returns one series with its instances not settled yet, soonest to close first: the
// first OPEN one trades now, the others are listed ahead. A market's SeriesID names its series.
func (c *Client) Series(ctx context.Context, id uuid.UUID) (*SeriesDetail, error) {
	r, err := c.GetSeriesWithResponse(ctx, id)
	if err != nil {
		return nil, err
	}
	return value(r.HTTPResponse, r.Body, r.JSON200)
}

// Converted is a conversion's answer. A conversion sent again with its clientRequestId (by the
// Client's retries, or by the caller) is answered by the conversion already made (Replayed), which
// changed the account once.
type Converted struct {
	Conversion
	Replayed bool
}

// Convert turns Quantity NO shares of each of k of an event's outcomes into Quantity YES shares of
// each of its other outcomes and (k − 1) × 100 × Quantity cents. It gets a fresh clientRequestId
// when it has none, so that the Client's retries cannot convert twice. A refusal is an *APIError:
// insufficient_shares (shares locked by open SELL orders do not count), invalid_outcomes,
// event_not_open, event_not_found, client_request_id_reused.
func (c *Client) Convert(ctx context.Context, req ConvertRequest) (*Converted, error) {
	if req.ClientRequestID == nil || *req.ClientRequestID == "" {
		id := uuid.NewString()
		req.ClientRequestID = &id
	}
	r, err := c.ConvertEventSharesWithResponse(ctx, req)
	if err != nil {
		return nil, err
	}
	if r.StatusCode() == http.StatusOK && r.JSON200 != nil {
		return &Converted{Conversion: *r.JSON200, Replayed: true}, nil
	}
	v, err := value(r.HTTPResponse, r.Body, r.JSON201)
	if err != nil {
		return nil, err
	}
	return &Converted{Conversion: *v}, nil
}

// Positions returns the account's holdings.
func (c *Client) Positions(ctx context.Context) ([]Position, error) {
	r, err := c.ListPositionsWithResponse(ctx)
	if err != nil {
		return nil, err
	}
	p, err := value(r.HTTPResponse, r.Body, r.JSON200)
	if err != nil {
		return nil, err
	}
	return p.Positions, nil
}

// Orders lists the account's orders (params may be nil).
func (c *Client) Orders(ctx context.Context, params *ListOrdersParams) (*OrdersPage, error) {
	r, err := c.ListOrdersWithResponse(ctx, params)
	if err != nil {
		return nil, err
	}
	return value(r.HTTPResponse, r.Body, r.JSON200)
}

// Order returns one of the account's orders by its id.
func (c *Client) Order(ctx context.Context, id uuid.UUID) (*Order, error) {
	return c.getOrder(ctx, &GetOrderParams{OrderID: &id})
}

// OrderByClientOrderID returns one of the account's orders by the client order id it was placed
// with.
func (c *Client) OrderByClientOrderID(ctx context.Context, clientOrderID string) (*Order, error) {
	return c.getOrder(ctx, &GetOrderParams{ClientOrderID: &clientOrderID})
}

// QueuePosition returns where one of the account's resting orders stands in its price level's
// queue: the shares ahead of it and the level's, in the order's own terms.
func (c *Client) QueuePosition(ctx context.Context, id uuid.UUID) (*QueuePosition, error) {
	r, err := c.GetQueuePositionWithResponse(ctx, &GetQueuePositionParams{OrderID: id})
	if err != nil {
		return nil, err
	}
	return value(r.HTTPResponse, r.Body, r.JSON200)
}

// QueuePositions returns where up to 100 of the account's orders stand in their queues; each
// order without a place is in Errors, with what QueuePosition would have answered for it.
func (c *Client) QueuePositions(ctx context.Context, ids []uuid.UUID) (*QueuePositionsAnswer, error) {
	s := make([]string, len(ids))
	for i, id := range ids {
		s[i] = id.String()
	}
	r, err := c.GetQueuePositionsWithResponse(ctx, &GetQueuePositionsParams{OrderIds: strings.Join(s, ",")})
	if err != nil {
		return nil, err
	}
	return value(r.HTTPResponse, r.Body, r.JSON200)
}

func (c *Client) getOrder(ctx context.Context, params *GetOrderParams) (*Order, error) {
	r, err := c.GetOrderWithResponse(ctx, params)
	if err != nil {
		return nil, err
	}
	return value(r.HTTPResponse, r.Body, r.JSON200)
}

// Fills lists the account's fills (params may be nil).
func (c *Client) Fills(ctx context.Context, params *ListFillsParams) (*FillsPage, error) {
	r, err := c.ListFillsWithResponse(ctx, params)
	if err != nil {
		return nil, err
	}
	return value(r.HTTPResponse, r.Body, r.JSON200)
}

// Settlements lists what settled markets paid the account (params may be nil).
func (c *Client) Settlements(ctx context.Context, params *ListSettlementsParams) (*SettlementsPage, error) {
	r, err := c.ListSettlementsWithResponse(ctx, params)
	if err != nil {
		return nil, err
	}
	return value(r.HTTPResponse, r.Body, r.JSON200)
}

// Placed is a placement's answer: the order as it stands after it, with the fills it made. A
// placement sent again with its clientOrderId (by the Client's retries, or by the caller) is
// answered by the order as it stands then, without fills (Replayed): the account's feed and
// GET /fills have them.
type Placed struct {
	PlacedOrder
	Replayed bool
}

// PlaceOrder places one order. It gets a fresh clientOrderId when it has none, so that the
// Client's retries cannot place it twice.
func (c *Client) PlaceOrder(ctx context.Context, o PlaceOrderRequest) (*Placed, error) {
	r, err := c.PlaceOrderWithResponse(ctx, withClientOrderID(o))
	if err != nil {
		return nil, err
	}
	if r.StatusCode() == http.StatusOK && r.JSON200 != nil {
		return &Placed{PlacedOrder: placedOf(*r.JSON200), Replayed: true}, nil
	}
	p, err := value(r.HTTPResponse, r.Body, r.JSON201)
	if err != nil {
		return nil, err
	}
	return &Placed{PlacedOrder: *p}, nil
}

func placedOf(o Order) PlacedOrder {
	return PlacedOrder{ID: o.ID, MarketID: o.MarketID, Side: o.Side, Outcome: o.Outcome, Price: o.Price,
		Quantity: o.Quantity, FilledQuantity: o.FilledQuantity, Status: o.Status, CreatedAt: o.CreatedAt,
		UpdatedAt: o.UpdatedAt, TimeInForce: o.TimeInForce, ExpiresAt: o.ExpiresAt, PostOnly: o.PostOnly,
		ClientOrderID: o.ClientOrderID, CancelReason: (*PlacedOrderCancelReason)(o.CancelReason)}
}

// BatchPlacement is one placement of a batch: Placed, or refused with Err.
type BatchPlacement struct {
	Placed *Placed
	Err    *APIError
}

// PlaceOrders places 1 to 20 orders in one request, each answered on its own, in order. Each gets
// a fresh clientOrderId when it has none.
func (c *Client) PlaceOrders(ctx context.Context, orders []PlaceOrderRequest) ([]BatchPlacement, error) {
	body := PlaceOrdersJSONRequestBody{Orders: make([]PlaceOrderRequest, len(orders))}
	for i, o := range orders {
		body.Orders[i] = withClientOrderID(o)
	}
	r, err := c.PlaceOrdersWithResponse(ctx, body)
	if err != nil {
		return nil, err
	}
	if _, err := value(r.HTTPResponse, r.Body, r.JSON201); err != nil {
		return nil, err
	}
	// The generated BatchResult leaves order untyped (a PlacedOrder or, replayed, an Order).
	var results struct {
		Results []struct {
			Status  int             `json:"status"`
			Order   json.RawMessage `json:"order"`
			Error   string          `json:"error"`
			Details ErrorDetails    `json:"details"`
		} `json:"results"`
	}
	if err := json.Unmarshal(r.Body, &results); err != nil {
		return nil, fmt.Errorf("reading the batch's answer: %w", err)
	}
	if len(results.Results) != len(orders) {
		return nil, fmt.Errorf("the batch's answer has %d results for %d orders", len(results.Results), len(orders))
	}
	out := make([]BatchPlacement, len(orders))
	for i, res := range results.Results {
		if res.Status != http.StatusCreated && res.Status != http.StatusOK {
			e := &APIError{Status: res.Status, Code: res.Details.Code, Message: res.Error}
			if res.Details.Field != nil {
				e.Field = *res.Details.Field
			}
			out[i].Err = e
			continue
		}
		p := &Placed{Replayed: res.Status == http.StatusOK}
		if err := json.Unmarshal(res.Order, &p.PlacedOrder); err != nil {
			return nil, fmt.Errorf("reading the batch's order %d: %w", i, err)
		}
		out[i].Placed = p
	}
	return out, nil
}

// AmendOrder changes an order's price and/or remaining quantity at once.
func (c *Client) AmendOrder(ctx context.Context, a AmendOrderJSONRequestBody) (*PlacedOrder, error) {
	r, err := c.AmendOrderWithResponse(ctx, a)
	if err != nil {
		return nil, err
	}
	return value(r.HTTPResponse, r.Body, r.JSON200)
}

// CancelOrder cancels one of the account's orders by its id.
func (c *Client) CancelOrder(ctx context.Context, id uuid.UUID) (*CancelledOrder, error) {
	return c.cancelOrder(ctx, CancelOrderJSONRequestBody{OrderID: &id})
}

// CancelByClientOrderID cancels one of the account's orders by its client order id.
func (c *Client) CancelByClientOrderID(ctx context.Context, clientOrderID string) (*CancelledOrder, error) {
	return c.cancelOrder(ctx, CancelOrderJSONRequestBody{ClientOrderID: &clientOrderID})
}

func (c *Client) cancelOrder(ctx context.Context, body CancelOrderJSONRequestBody) (*CancelledOrder, error) {
	r, err := c.CancelOrderWithResponse(ctx, body)
	if err != nil {
		return nil, err
	}
	return value(r.HTTPResponse, r.Body, r.JSON200)
}

// CancelOrders cancels up to 100 orders by id, or a market's (optionally one side and outcome).
func (c *Client) CancelOrders(ctx context.Context, body CancelOrdersJSONRequestBody) (*CancelOrdersAnswer, error) {
	r, err := c.CancelOrdersWithResponse(ctx, body)
	if err != nil {
		return nil, err
	}
	return value(r.HTTPResponse, r.Body, r.JSON200)
}

// CancelEverything cancels every open order of the account.
func (c *Client) CancelEverything(ctx context.Context) ([]CancelledOrder, error) {
	r, err := c.CancelEverythingWithResponse(ctx)
	if err != nil {
		return nil, err
	}
	v, err := value(r.HTTPResponse, r.Body, r.JSON200)
	if err != nil {
		return nil, err
	}
	return *v, nil
}

// Heartbeat arms (or renews) the dead-man switch: unless renewed within timeout (5 s to 300 s),
// every open order the account placed before the deadline is cancelled. 0 disarms it.
func (c *Client) Heartbeat(ctx context.Context, timeout time.Duration) (*Heartbeat, error) {
	r, err := c.HeartbeatWithResponse(ctx, HeartbeatJSONRequestBody{TimeoutSeconds: int(timeout / time.Second)})
	if err != nil {
		return nil, err
	}
	return value(r.HTTPResponse, r.Body, r.JSON200)
}

// WSToken returns a single-use token that opens the feed without the API key (for browsers).
func (c *Client) WSToken(ctx context.Context) (*WsToken, error) {
	r, err := c.CreateWsTokenWithResponse(ctx)
	if err != nil {
		return nil, err
	}
	return value(r.HTTPResponse, r.Body, r.JSON201)
}

// optional is nil for 0 (the server's default), else &n.
func optional(n int) *int {
	if n == 0 {
		return nil
	}
	return &n
}

// ChooseMarket returns the market a bot was told to trade: the id given, if it is one, or with
// none given, the first open market.
func ChooseMarket(ctx context.Context, c *Client, given string) (uuid.UUID, error) {
	if given != "" {
		id, err := uuid.Parse(given)
		if err != nil {
			return uuid.UUID{}, fmt.Errorf("%q is not a market id: list them with GET /api/v1/markets", given)
		}
		return id, nil
	}
	open := MarketStatusOPEN
	page, err := c.Markets(ctx, &ListMarketsParams{Status: &open, Limit: optional(1)})
	if err != nil {
		return uuid.UUID{}, fmt.Errorf("listing the open markets: %w", err)
	}
	if len(page.Markets) == 0 {
		return uuid.UUID{}, fmt.Errorf("no open market at %s: create one, or give a market id", c.server)
	}
	return page.Markets[0].ID, nil
}
