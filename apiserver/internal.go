package apiserver

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/pmx-dev/pmx/auth"
	"github.com/pmx-dev/pmx/engine"
	"github.com/pmx-dev/pmx/market"
	"github.com/pmx-dev/pmx/shard"
	"github.com/pmx-dev/pmx/store"
)

// The internal API is how front API replicas reach the shards in distributed mode: a shard's
// Exchange methods over HTTP, guarded by a token the processes share. Errors travel as codes and
// come back as the shard package's own errors, so the front answers exactly as pmx dev does.

// Internal API paths.
const (
	internalPlace     = "/internal/v1/place"
	internalCancel    = "/internal/v1/cancel"
	internalCancelAll = "/internal/v1/cancel-all"
	internalBook      = "/internal/v1/book"
)

type placeWire struct {
	Account  int64     `json:"account"`
	Market   uuid.UUID `json:"market"`
	Side     string    `json:"side"`
	Outcome  string    `json:"outcome"`
	Price    int       `json:"price"`
	Quantity int64     `json:"quantity"`
}

// placedWire answers a placement: the order as the public API shows it, and its sequence number,
// which that shape leaves out and the front needs to cancel the order without reading it.
type placedWire struct {
	store.PlacedOrder
	Seq int64 `json:"seq"`
}

type cancelWire struct {
	Market uuid.UUID `json:"market"`
	Seq    int64     `json:"seq"`
}

type cancelAllWire struct {
	Account int64       `json:"account"`
	Markets []uuid.UUID `json:"markets"`
}

type internalError struct {
	Code string `json:"code"`
	// Status is, with order_not_open, what became of the order when the shard knows it (see
	// shard.NotOpenError).
	Status string `json:"status,omitempty"`
}

// wireErrors pairs each shard error with its code and status on the internal API.
var wireErrors = []struct {
	err    error
	code   string
	status int
}{
	{shard.ErrNotOwner, "not_owner", http.StatusMisdirectedRequest},
	{shard.ErrUnknownMarket, "unknown_market", http.StatusNotFound},
	{shard.ErrMarketNotOpen, "market_not_open", http.StatusConflict},
	{shard.ErrInsufficientFunds, "insufficient_funds", http.StatusConflict},
	{shard.ErrInsufficientShares, "insufficient_shares", http.StatusConflict},
	{shard.ErrOrderNotOpen, "order_not_open", http.StatusConflict},
	{market.ErrIllegalTransition, "illegal_transition", http.StatusConflict},
	{shard.ErrStopped, "stopped", http.StatusServiceUnavailable},
	{shard.ErrUnavailable, "unavailable", http.StatusServiceUnavailable},
}

// ShardServer serves one shard's internal API, its health endpoints and /metrics (from reg, or a
// registry of its own when nil).
func ShardServer(sh *shard.Shard, st *store.Store, token string, log *slog.Logger, reg *prometheus.Registry) http.Handler {
	if reg == nil {
		reg = NewRegistry()
	}
	gin.SetMode(gin.ReleaseMode)
	e := gin.New()
	e.Use(gin.Recovery(), newHTTPMetrics(reg).middleware)
	e.GET("/metrics", metricsHandler(reg))
	e.GET("/healthz", func(c *gin.Context) { c.String(http.StatusOK, "ok\n") })
	e.GET("/readyz", func(c *gin.Context) {
		ctx, cancel := context.WithTimeout(c.Request.Context(), 2*time.Second)
		defer cancel()
		if err := st.Pool.Ping(ctx); err != nil {
			c.String(http.StatusServiceUnavailable, "database unreachable\n")
			return
		}
		c.String(http.StatusOK, "ok\n")
	})
	in := e.Group("/internal/v1", func(c *gin.Context) {
		if t, ok := bearer(c.Request); !ok || !auth.TokenMatches(t, token) {
			c.AbortWithStatusJSON(http.StatusUnauthorized, internalError{Code: "unauthorized"})
			return
		}
		c.Next()
	})
	answer := func(c *gin.Context, status int, v any, err error) {
		if err == nil {
			c.JSON(status, v)
			return
		}
		for _, w := range wireErrors {
			if errors.Is(err, w.err) {
				e := internalError{Code: w.code}
				if ne := (*shard.NotOpenError)(nil); errors.As(err, &ne) {
					e.Status = ne.Status
				}
				c.JSON(w.status, e)
				return
			}
		}
		log.Error("internal request failed", "path", c.Request.URL.Path, "err", err)
		c.JSON(http.StatusInternalServerError, internalError{Code: "internal"})
	}
	in.POST("/place", func(c *gin.Context) {
		var w placeWire
		if err := c.ShouldBindJSON(&w); err != nil {
			c.JSON(http.StatusBadRequest, internalError{Code: "bad_request"})
			return
		}
		side, ok1 := engine.ParseSide(w.Side)
		outcome, ok2 := engine.ParseOutcome(w.Outcome)
		if !ok1 || !ok2 {
			c.JSON(http.StatusBadRequest, internalError{Code: "bad_request"})
			return
		}
		placed, err := sh.Place(c.Request.Context(), shard.PlaceRequest{Account: w.Account, Market: w.Market,
			Side: side, Outcome: outcome, Price: w.Price, Quantity: w.Quantity})
		answer(c, http.StatusCreated, placedWire{PlacedOrder: placed, Seq: placed.Seq}, err)
	})
	in.POST("/cancel", func(c *gin.Context) {
		var w cancelWire
		if err := c.ShouldBindJSON(&w); err != nil {
			c.JSON(http.StatusBadRequest, internalError{Code: "bad_request"})
			return
		}
		o, err := sh.Cancel(c.Request.Context(), w.Market, w.Seq)
		answer(c, http.StatusOK, o, err)
	})
	in.POST("/cancel-all", func(c *gin.Context) {
		var w cancelAllWire
		if err := c.ShouldBindJSON(&w); err != nil || w.Markets == nil {
			c.JSON(http.StatusBadRequest, internalError{Code: "bad_request"})
			return
		}
		orders, err := sh.CancelAll(c.Request.Context(), w.Account, w.Markets)
		answer(c, http.StatusOK, orders, err)
	})
	in.GET("/book", func(c *gin.Context) {
		id, err := uuid.Parse(c.Query("market"))
		if err != nil {
			c.JSON(http.StatusBadRequest, internalError{Code: "bad_request"})
			return
		}
		snap, err := sh.OrderBook(c.Request.Context(), id)
		// The front routed here because Postgres names this shard the owner at this epoch; a shard
		// that holds the market under another epoch has not yet noticed a move.
		if epoch := c.Query("epoch"); err == nil && epoch != "" && epoch != strconv.FormatInt(snap.Epoch, 10) {
			err = shard.ErrNotOwner
		}
		answer(c, http.StatusOK, snap, err)
	})
	return e
}

// ErrOutcomeUnknown is a write the shard may or may not have carried out: its answer was lost.
var ErrOutcomeUnknown = errors.New("the shard did not answer; the request may have been carried out")

// shardClient calls one shard's internal API.
type shardClient struct {
	base  string // http://host:port
	token string
	http  *http.Client
}

// call posts (or gets, when in is nil) and decodes a success into out; an error answer becomes
// the shard error its code names.
func (c *shardClient) call(ctx context.Context, method, path string, in, out any) error {
	var body io.Reader
	if in != nil {
		raw, err := json.Marshal(in)
		if err != nil {
			return err
		}
		body = bytes.NewReader(raw)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, body)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+c.token)
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.http.Do(req)
	if err != nil {
		// A shard that could not be reached (it may have just died) never saw the request, and a
		// read can always be sent again: the caller re-routes. A write that failed any other way
		// (a reset connection, a timeout) may have been carried out before the answer was lost,
		// and sending it again could place an order twice.
		if op := (*net.OpError)(nil); in == nil || errors.As(err, &op) && op.Op == "dial" {
			return errors.Join(shard.ErrNotOwner, err)
		}
		return errors.Join(ErrOutcomeUnknown, err)
	}
	defer resp.Body.Close()
	dec := json.NewDecoder(resp.Body)
	if resp.StatusCode < 300 {
		return dec.Decode(out)
	}
	var e internalError
	_ = dec.Decode(&e)
	if e.Code == "order_not_open" && e.Status != "" {
		return &shard.NotOpenError{Status: e.Status}
	}
	for _, w := range wireErrors {
		if w.code == e.Code {
			return w.err
		}
	}
	return &internalCallError{status: resp.StatusCode, code: e.Code}
}

type internalCallError struct {
	status int
	code   string
}

func (e *internalCallError) Error() string {
	return "shard answered " + http.StatusText(e.status) + " (" + e.code + ")"
}
