package apiserver

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/google/uuid"

	"github.com/pmx-dev/pmx/engine"
	"github.com/pmx-dev/pmx/internal/apijson"
	"github.com/pmx-dev/pmx/internal/domain"
	"github.com/pmx-dev/pmx/internal/exchange"
	"github.com/pmx-dev/pmx/internal/kit/httpkit"
	"github.com/pmx-dev/pmx/internal/records"
	"github.com/pmx-dev/pmx/internal/store"
	"github.com/pmx-dev/pmx/internal/store/markets"
)

// Listing limits.
const (
	defaultTrades = 50
	maxTrades     = 500
	defaultOrders = 100
	maxOrders     = 500
	// GET /markets pages, when asked for with limit or cursor.
	defaultMarkets = 100
	maxMarkets     = 500
)

func (s *Server) listMarkets(c *gin.Context) error {
	var status domain.MarketStatus // "" for all
	if v, given := c.GetQuery("status"); given {
		var ok bool
		if status, ok = domain.ParseMarketStatus(v); !ok {
			return httpkit.FieldError("status", "invalid_value", "status must be one of OPEN, CLOSED, RESOLVED, CANCELED")
		}
	}
	_, paged := c.GetQuery("limit")
	_, hasCursor := c.GetQuery("cursor")
	if !paged && !hasCursor { // every market in one answer, as the contract has it
		markets, err := s.cfg.Store.Markets(c.Request.Context(), status)
		if err != nil {
			return err
		}
		c.JSON(http.StatusOK, gin.H{"markets": listOf(markets, MarketOf)})
		return nil
	}
	after, limit, err := queryPage(c, "GET /markets", defaultMarkets, maxMarkets)
	if err != nil {
		return err
	}
	markets, err := s.cfg.Store.MarketsPage(c.Request.Context(), status, after, limit)
	if err != nil {
		return err
	}
	next := nextCursor(markets, limit, func(m *records.Market) store.Cursor { return store.Cursor{CreatedAt: m.CreatedAt, ID: m.ID} })
	c.JSON(http.StatusOK, gin.H{"markets": listOf(markets, MarketOf), "nextCursor": next})
	return nil
}

// queryUUID reads a required UUID query parameter.
func queryUUID(c *gin.Context, name string) (uuid.UUID, error) {
	v, ok := c.GetQuery(name)
	if !ok || v == "" {
		return uuid.UUID{}, httpkit.FieldError(name, "missing_field", "the query parameter %s is required", name)
	}
	return parseUUID(name, v)
}

// queryLimit reads an optional limit in 1..hi.
// queryPage reads the cursor and limit of a list in cursor pages (list names it, for the cursor's
// error): where the page starts (nil: at the start) and how many rows it may hold.
func queryPage(c *gin.Context, list string, def, hi int) (*store.Cursor, int, error) {
	var after *store.Cursor
	if v, ok := c.GetQuery("cursor"); ok {
		cur, err := decodeCursor(v, list)
		if err != nil {
			return nil, 0, err
		}
		after = &cur
	}
	limit, err := queryLimit(c, def, hi)
	if err != nil {
		return nil, 0, err
	}
	return after, limit, nil
}

func queryLimit(c *gin.Context, def, hi int) (int, error) {
	v, ok := c.GetQuery("limit")
	if !ok {
		return def, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 || n > hi {
		return 0, httpkit.FieldError("limit", "out_of_range", "limit must be a whole number from 1 to %d", hi)
	}
	return n, nil
}

// getMarket answers 201, not 200: the contract says so.
func (s *Server) getMarket(c *gin.Context) error {
	id, err := queryUUID(c, "marketId")
	if err != nil {
		return err
	}
	m, _, err := s.ReadMarket(c.Request.Context(), id)
	if errors.Is(err, store.ErrNotFound) {
		return &httpkit.Error{Status: http.StatusNotFound, Code: "market_not_found", Field: "marketId", Message: "no market has this id"}
	}
	if err != nil {
		return err
	}
	c.JSON(http.StatusCreated, m)
	return nil
}

func (s *Server) orderBook(c *gin.Context) error {
	id, err := queryUUID(c, "marketId")
	if err != nil {
		return err
	}
	book, err := s.ReadOrderBook(c.Request.Context(), id)
	if err != nil {
		return err
	}
	c.JSON(http.StatusOK, book)
	return nil
}

func (s *Server) trades(c *gin.Context) error {
	id, err := queryUUID(c, "marketId")
	if err != nil {
		return err
	}
	limit, err := queryLimit(c, defaultTrades, maxTrades)
	if err != nil {
		return err
	}
	trades, err := s.ReadTrades(c.Request.Context(), id, limit)
	if err != nil {
		return err
	}
	c.JSON(http.StatusOK, trades)
	return nil
}

func (s *Server) placeOrder(c *gin.Context) error {
	body, err := readBody(c.Request)
	if err != nil {
		return err
	}
	r, err := decodeOrder(body, s.cfg.MaxQuantity, time.Now())
	if err != nil {
		return err
	}
	placed, replayed, err := s.place(c.Request.Context(), accountOf(c), &r)
	if err != nil {
		return err
	}
	if replayed != nil {
		c.Header("Idempotent-Replayed", "true")
		c.JSON(http.StatusOK, orderOf(replayed))
		return nil
	}
	c.JSON(http.StatusCreated, placedOf(&placed))
	return nil
}

// place places an order for account, or, when the placement repeats an earlier one's client order
// id, finds that order: replayed is then the order as it stands now and nothing was placed. The
// same id with other parameters is domain.ErrClientOrderIDReused.
//
// An id is looked up before the placement, which answers a retry without troubling the shard;
// but only the shard's batch decides (store.Begin.ClientOrderIDs): two placements of one id racing
// each other both miss here, and the one the shard refuses (ErrClientOrderIDTaken) is answered
// with the other's order once that has committed — which it has by the time the shard answers.
func (s *Server) place(ctx context.Context, account int64, r *orderRequest) (placed records.PlacedOrder, replayed *records.Order, err error) {
	if r.ClientOrderID != "" {
		if replayed, err = s.replay(ctx, account, r); replayed != nil || err != nil {
			return placed, replayed, err
		}
	}
	if r.pastExpiry != nil {
		return placed, nil, r.pastExpiry
	}
	placed, err = s.cfg.Exchange.Place(ctx, r.request(account))
	return s.placed(ctx, account, r, placed, err)
}

// placed finishes a placement once the exchange has answered it: a client order id the shard
// found taken is answered with its order (or refused as reused); a resting order is remembered.
func (s *Server) placed(ctx context.Context, account int64, r *orderRequest, placed records.PlacedOrder, err error) (records.PlacedOrder, *records.Order, error) {
	if errors.Is(err, domain.ErrClientOrderIDTaken) {
		replayed, err := s.replay(ctx, account, r)
		if replayed == nil && err == nil {
			err = fmt.Errorf("the shard found client order id %q taken, but no order of account %d has it", r.ClientOrderID, account)
		}
		return placed, replayed, err
	}
	if err != nil {
		return placed, nil, err
	}
	// Remember a resting order for its cancel; one filled at once can never be cancelled.
	if placed.Status.Resting() {
		s.orders.put(placed.ID, orderFacts{market: r.Market, seq: placed.Seq, side: r.Side, outcome: r.Outcome})
	}
	return placed, nil, nil
}

// replay returns the account's order with the placement's client order id, if there is one and
// it was placed with the same parameters; with other parameters it is ErrClientOrderIDReused.
func (s *Server) replay(ctx context.Context, account int64, r *orderRequest) (*records.Order, error) {
	o, err := s.cfg.Store.OrderByClientID(ctx, account, r.ClientOrderID)
	if errors.Is(err, store.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	if o.Placement == nil || *o.Placement != r.placement() {
		return nil, domain.ErrClientOrderIDReused
	}
	return &o, nil
}

func (s *Server) positions(c *gin.Context) error {
	ctx := c.Request.Context()
	positions, err := s.cfg.Store.Positions(ctx, accountOf(c))
	if err != nil {
		return err
	}
	if len(positions) == 0 {
		// Only an account with nothing may have gone: check then, not on every read.
		if _, err := s.cfg.Store.Account(ctx, accountOf(c)); errors.Is(err, store.ErrNotFound) {
			return httpkit.NewError(http.StatusNotFound, "account_not_found", "the account of this API key no longer exists")
		} else if err != nil {
			return err
		}
	}
	c.JSON(http.StatusOK, gin.H{"positions": listOf(positions, positionOf)})
	return nil
}

// ownOrder finds an order of the caller: 404 when there is none with the id, 403 when it is
// another account's.
func (s *Server) ownOrder(c *gin.Context, id uuid.UUID) (records.Order, error) {
	o, err := s.cfg.Store.Order(c.Request.Context(), id)
	if errors.Is(err, store.ErrNotFound) {
		return o, errOrderNotFound
	}
	if err != nil {
		return o, err
	}
	if o.AccountID != accountOf(c) {
		return o, domain.ErrNotYourOrder
	}
	return o, nil
}

// factsOf is what the order cache would remember of an order read from Postgres.
func factsOf(o *records.Order) orderFacts {
	side, _ := engine.ParseSide(o.Side)
	outcome, _ := engine.ParseOutcome(o.Outcome)
	return orderFacts{market: o.MarketID, seq: o.Seq, side: side, outcome: outcome}
}

var errOrderNotFound = &httpkit.Error{Status: http.StatusNotFound, Code: "order_not_found", Field: "orderId", Message: "no order has this id"}

// cancelOrder finds where the order lives (namedOrder) and sends the cancel there with the
// caller's account: the shard decides whether the order is the caller's and still open.
func (s *Server) cancelOrder(c *gin.Context) error {
	obj, err := readObject(c.Request)
	if err != nil {
		return err
	}
	id, f, err := s.namedOrder(c, obj)
	if err != nil {
		return err
	}
	cancelled, err := s.cfg.Exchange.Cancel(c.Request.Context(), exchange.CancelRequest{Account: accountOf(c), Market: f.market, Seq: f.seq})
	if err == nil || errors.Is(err, domain.ErrOrderNotOpen) {
		s.orders.forget(id) // it can never be cancelled again
	}
	if err != nil {
		return err
	}
	c.JSON(http.StatusOK, orderOf(&cancelled))
	return nil
}

// namedOrder reads the order a body names, by orderId or by clientOrderId (one of them), and finds
// where it lives.
func (s *Server) namedOrder(c *gin.Context, obj object) (uuid.UUID, orderFacts, error) {
	if !obj.has("clientOrderId") {
		id, err := obj.uuid("orderId")
		if err != nil {
			return id, orderFacts{}, err
		}
		f, err := s.orderFacts(c.Request.Context(), id)
		return id, f, err
	}
	if obj.has("orderId") {
		return uuid.UUID{}, orderFacts{}, errOrderIDAndClientID
	}
	clientID, err := obj.string("clientOrderId")
	if err != nil {
		return uuid.UUID{}, orderFacts{}, err
	}
	o, err := s.orderByClientID(c, clientID)
	if err != nil {
		return uuid.UUID{}, orderFacts{}, err
	}
	return o.ID, factsOf(&o), nil
}

// orderFacts finds where an order lives: its market and sequence number, remembered for the orders
// this server placed, else read from Postgres (errOrderNotFound when no order has the id). Whose it
// is, the shard decides.
func (s *Server) orderFacts(ctx context.Context, id uuid.UUID) (orderFacts, error) {
	if f, cached := s.orders.get(id); cached {
		return f, nil
	}
	o, err := s.cfg.Store.Order(ctx, id)
	if errors.Is(err, store.ErrNotFound) {
		return orderFacts{}, errOrderNotFound
	}
	if err != nil {
		return orderFacts{}, err
	}
	return factsOf(&o), nil
}

// cancelEverything takes no body (an empty POST); whatever is sent is ignored.
func (s *Server) cancelEverything(c *gin.Context) error {
	ctx := c.Request.Context()
	markets, err := s.cfg.Store.RestingMarkets(ctx, accountOf(c))
	if err != nil {
		return err
	}
	var cancelled []records.Order
	if len(markets) > 0 {
		if cancelled, err = s.cfg.Exchange.CancelAll(ctx, accountOf(c), markets); err != nil {
			return err
		}
	}
	c.JSON(http.StatusOK, listOf(cancelled, orderOf)) // nothing cancelled is [], not null
	return nil
}

func (s *Server) account(c *gin.Context) error {
	a, err := s.cfg.Store.Account(c.Request.Context(), accountOf(c))
	if errors.Is(err, store.ErrNotFound) {
		return httpkit.NewError(http.StatusNotFound, "account_not_found", "the account of this API key no longer exists")
	}
	if err != nil {
		return err
	}
	c.JSON(http.StatusOK, accountOfRow(&a))
	return nil
}

func (s *Server) listOrders(c *gin.Context) error {
	f := markets.OrderFilter{Account: accountOf(c)}
	if v, ok := c.GetQuery("marketId"); ok {
		id, err := parseUUID("marketId", v)
		if err != nil {
			return err
		}
		f.Market = &id
	}
	if v, ok := c.GetQuery("status"); ok {
		st, valid := engine.ParseStatus(v)
		if !valid {
			return httpkit.FieldError("status", "invalid_value", "status must be one of OPEN, PARTIALLY_FILLED, FILLED, CANCELLED, PARTIALLY_FILLED_CANCELLED")
		}
		f.Status = st
	}
	var err error
	if f.After, f.Limit, err = queryPage(c, "GET /orders", defaultOrders, maxOrders); err != nil {
		return err
	}
	orders, err := s.cfg.Store.Orders(c.Request.Context(), f)
	if err != nil {
		return err
	}
	next := nextCursor(orders, f.Limit, func(o *records.Order) store.Cursor { return store.Cursor{CreatedAt: o.CreatedAt, ID: o.ID} })
	c.JSON(http.StatusOK, gin.H{"orders": listOf(orders, orderOf), "nextCursor": next})
	return nil
}

// nextCursor is the nextCursor of a page of rows: nil unless the page is full (limit rows), else
// the position of its last row, as at says it.
func nextCursor[R any](rows []R, limit int, at func(*R) store.Cursor) *string {
	if len(rows) == 0 || len(rows) < limit {
		return nil
	}
	return encodeCursor(at(&rows[len(rows)-1]))
}

// encodeCursor is the nextCursor of a full page whose last row is at cur.
func encodeCursor(cur store.Cursor) *string {
	text := strconv.FormatInt(cur.CreatedAt.UnixMicro(), 10) + "." + cur.ID.String()
	if cur.Outcome != "" {
		text += "." + cur.Outcome
	}
	s := base64.RawURLEncoding.EncodeToString([]byte(text))
	return &s
}

// decodeCursor reads the cursor of a listing, from a nextCursor of the same listing (list names it
// in the error).
func decodeCursor(v, list string) (store.Cursor, error) {
	bad := httpkit.FieldError("cursor", "invalid_cursor", "cursor must be a nextCursor value from a previous %s", list)
	raw, err := base64.RawURLEncoding.DecodeString(v)
	if err != nil {
		return store.Cursor{}, bad
	}
	micros, rest, ok := strings.Cut(string(raw), ".")
	id, outcome, _ := strings.Cut(rest, ".")
	us, err1 := strconv.ParseInt(micros, 10, 64)
	u, err2 := uuid.Parse(id)
	// Only a forged cursor can lie before Postgres's first timestamptz, where it would fail the
	// query; every int64 above it is within Postgres's range, to 294276 AD. Only the settlements'
	// cursors name an outcome, and only theirs must.
	settlements := list == listSettlements
	if !ok || err1 != nil || err2 != nil || us < minTimestamptz || settlements != (outcome == "YES" || outcome == "NO") ||
		!settlements && outcome != "" {
		return store.Cursor{}, bad
	}
	return store.Cursor{CreatedAt: time.UnixMicro(us).UTC(), ID: u, Outcome: outcome}, nil
}

// listSettlements names GET /settlements for decodeCursor, whose cursors carry an outcome.
const listSettlements = "GET /settlements"

// settlements lists what the account was paid when markets it held settled, newest first, in
// cursor pages: per market and outcome held, the quantity and the payout.
func (s *Server) settlements(c *gin.Context) error {
	after, limit, err := queryPage(c, listSettlements, defaultOrders, maxOrders)
	if err != nil {
		return err
	}
	rows, err := s.cfg.Store.Settlements(c.Request.Context(), accountOf(c), after, limit)
	if err != nil {
		return err
	}
	next := nextCursor(rows, limit, func(r *records.AccountSettlement) store.Cursor {
		return store.Cursor{CreatedAt: r.SettledAt, ID: r.MarketID, Outcome: r.Outcome}
	})
	c.JSON(http.StatusOK, gin.H{"settlements": listOf(rows, apijson.SettlementOf), "nextCursor": next})
	return nil
}

// minTimestamptz is Postgres's earliest timestamptz, 4714-11-24 00:00 UTC BC, in microseconds
// from the Unix epoch.
const minTimestamptz = -210_866_803_200_000_000

func (s *Server) getOrder(c *gin.Context) error {
	var o records.Order
	if clientID, ok := c.GetQuery("clientOrderId"); ok {
		if _, both := c.GetQuery("orderId"); both {
			return errOrderIDAndClientID
		}
		var err error
		if o, err = s.orderByClientID(c, clientID); err != nil {
			return err
		}
	} else {
		id, err := queryUUID(c, "orderId")
		if err != nil {
			return err
		}
		if o, err = s.ownOrder(c, id); err != nil {
			return err
		}
	}
	c.JSON(http.StatusOK, orderOf(&o))
	return nil
}

var errOrderIDAndClientID = httpkit.FieldError("clientOrderId", "invalid_value", "give orderId or clientOrderId, not both")

// orderByClientID finds the caller's order with a client order id: 404 when it has none.
func (s *Server) orderByClientID(c *gin.Context, clientID string) (records.Order, error) {
	if !domain.ValidClientOrderID(clientID) {
		return records.Order{}, httpkit.FieldError("clientOrderId", "invalid_value", "clientOrderId must be %s", domain.ClientOrderIDRule)
	}
	o, err := s.cfg.Store.OrderByClientID(c.Request.Context(), accountOf(c), clientID)
	if errors.Is(err, store.ErrNotFound) {
		return o, &httpkit.Error{Status: http.StatusNotFound, Code: "order_not_found", Field: "clientOrderId", Message: "none of your orders has this clientOrderId"}
	}
	return o, err
}

// Heartbeat timeouts: a switch that fires within a second of its deadline needs a few seconds of
// slack to be useful, and one left armed for longer than five minutes is forgotten, not kept.
const (
	minHeartbeat = 5
	maxHeartbeat = 300
)

// heartbeat arms, re-arms or (with 0) disarms the account's dead-man switch. The deadline is
// kept in Postgres, so whichever front a heartbeat reaches, every shard sees it; each shard
// cancels the orders it holds once it passes (internal/shard/heartbeat.go).
func (s *Server) heartbeat(c *gin.Context) error {
	obj, err := readObject(c.Request)
	if err != nil {
		return err
	}
	timeout, err := obj.integer("timeoutSeconds", 0, maxHeartbeat)
	if err != nil {
		return err
	}
	if timeout != 0 && timeout < minHeartbeat {
		return httpkit.FieldError("timeoutSeconds", "out_of_range", "timeoutSeconds must be 0 (to disarm) or from %d to %d", minHeartbeat, maxHeartbeat)
	}
	hb, err := s.cfg.Store.ArmHeartbeat(c.Request.Context(), accountOf(c), time.Duration(timeout)*time.Second)
	if err != nil {
		return err
	}
	c.JSON(http.StatusOK, Heartbeat{Armed: hb.Armed, Deadline: hb.Deadline})
	return nil
}

// amendOrder changes the price or the remaining quantity of one of the caller's resting orders,
// named by orderId or clientOrderId; the shard decides the rest as it does for a cancel.
func (s *Server) amendOrder(c *gin.Context) error {
	obj, err := readObject(c.Request)
	if err != nil {
		return err
	}
	// The shard decides whether the order is the caller's and still resting, as for a cancel.
	_, f, err := s.namedOrder(c, obj)
	if err != nil {
		return err
	}
	var price, remaining int64
	if obj.has("price") {
		if price, err = obj.integer("price", engine.MinPrice, engine.MaxPrice); err != nil {
			return err
		}
	}
	if obj.has("quantity") {
		if remaining, err = obj.integer("quantity", 1, s.cfg.MaxQuantity); err != nil {
			return err
		}
	}
	if price == 0 && remaining == 0 {
		return httpkit.FieldError("price", "missing_field", "give the new price, the new remaining quantity, or both")
	}
	amended, err := s.cfg.Exchange.Amend(c.Request.Context(), exchange.AmendRequest{Account: accountOf(c), Market: f.market, Seq: f.seq,
		Side: f.side, Outcome: f.outcome, Price: int(price), Remaining: remaining})
	if err != nil {
		return err
	}
	c.JSON(http.StatusOK, placedOf(&amended))
	return nil
}
