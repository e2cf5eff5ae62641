package shardserver

import (
	"log/slog"
	"net/http"
	"strconv"

	"github.com/gin-gonic/gin"
	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/pmx-dev/pmx/internal/domain"
	"github.com/pmx-dev/pmx/internal/exchange"
	"github.com/pmx-dev/pmx/internal/feed"
	"github.com/pmx-dev/pmx/internal/kit/auth"
	"github.com/pmx-dev/pmx/internal/kit/httpkit"
	"github.com/pmx-dev/pmx/internal/shardproto"
	"github.com/pmx-dev/pmx/internal/store"
)

// Server serves one shard's internal API and its health endpoints. Its metrics are served by the
// process, on a listener of its own (httpkit.MetricsHandler), not here.
type Server struct {
	Shard exchange.Shard // a *shard.Shard, or the *shard.Set of pmx shard
	Store *store.Store   // for readiness
	// Token is what callers must send as their bearer token.
	Token  string
	Logger *slog.Logger
	// Metrics is where the server registers its metrics (default: a registry of its own), for the
	// process to serve on its metrics listener.
	Metrics prometheus.Registerer
	// Feed is the shard's bus of committed batches, streamed to the fronts (GET
	// /internal/v1/feed); Stopping, closed when the process stops, ends those streams.
	Feed     *feed.Bus
	Stopping <-chan struct{}
}

// Handler builds the server's routes.
func (s Server) Handler() http.Handler {
	reg := s.Metrics
	if reg == nil {
		reg = httpkit.NewRegistry()
	}
	log := s.Logger
	if log == nil {
		log = slog.Default()
	}
	sh := s.Shard
	gin.SetMode(gin.ReleaseMode)
	e := gin.New()
	e.Use(gin.Recovery(), httpkit.HTTPMetrics(reg))
	httpkit.Health(e, s.Store)
	refusedVersions := shardproto.NewRefusedCounter(reg)
	in := e.Group("/internal/v1", func(c *gin.Context) {
		if t, ok := httpkit.Bearer(c.Request); !ok || !auth.TokenMatches(t, s.Token) {
			httpkit.CloseUnread(c)
			c.AbortWithStatusJSON(http.StatusUnauthorized, shardproto.APIShape(shardproto.ErrorV1{Code: "unauthorized"},
				"send the internal token (pmx's --internal-token) as Authorization: Bearer <token>"))
			return
		}
		// Every answer is in the version the request came in; one this shard does not speak is
		// refused before its body is read.
		v, ok := shardproto.VersionOf(c.Request.Header)
		if !ok || !shardproto.SpeaksVersion(v) {
			ve := &shardproto.VersionError{Peer: "a caller (" + c.ClientIP() + ")", PeerSpeak: []int{v}, Speaks: shardproto.Speaks}
			if !ok {
				ve.Header = c.Request.Header.Get(shardproto.ProtocolHeader)
			}
			refusedVersions.Inc()
			log.Error("refused an internal request in a protocol version this shard does not speak",
				"path", c.Request.URL.Path, "request_version", c.Request.Header.Get(shardproto.ProtocolHeader), "speaks", shardproto.Versions(shardproto.Speaks), "err", ve)
			httpkit.CloseUnread(c)
			c.Header(shardproto.ProtocolHeader, strconv.Itoa(shardproto.ProtocolVersion))
			w := shardproto.APIShape(shardproto.ErrorV1{Code: shardproto.CodeUnsupportedProtocol, Speaks: shardproto.Speaks}, ve.Error())
			c.AbortWithStatusJSON(http.StatusBadRequest, w)
			return
		}
		c.Header(shardproto.ProtocolHeader, strconv.Itoa(v))
		c.Next()
	})
	answer := func(c *gin.Context, status int, v any, err error) {
		if err == nil && v == nil {
			c.Status(status)
			return
		}
		if err == nil {
			c.JSON(status, v)
			return
		}
		status, w, ok := shardproto.ErrorOf(err)
		if !ok {
			log.Error("internal request failed", "path", c.Request.URL.Path, "err", err)
		}
		c.JSON(status, w)
	}
	// resultError is one result's error of a many-at-once call, nil for none.
	resultError := func(c *gin.Context, err error) *shardproto.ErrorV1 {
		if err == nil {
			return nil
		}
		_, w, ok := shardproto.ErrorOf(err)
		if !ok {
			log.Error("internal request failed", "path", c.Request.URL.Path, "err", err)
		}
		return &w
	}
	// Every request is checked (validate.go) before the shard sees it; in the many-at-once calls
	// only the requests that pass go to the shard, each refused one is its own result's error.
	in.POST("/place", func(c *gin.Context) {
		var w shardproto.PlaceV1
		if !bind(c, &w) {
			return
		}
		r := w.Request()
		if e := shardproto.CheckPlace(&r); e != nil {
			refuse(c, e)
			return
		}
		placed, err := sh.Place(c.Request.Context(), r)
		answer(c, http.StatusCreated, shardproto.PlacedToV1(placed), err)
	})
	in.POST("/cancel", func(c *gin.Context) {
		var w shardproto.CancelV1
		if !bind(c, &w) {
			return
		}
		r := w.Request()
		if e := shardproto.CheckCancel(&r); e != nil {
			refuse(c, e)
			return
		}
		o, err := sh.Cancel(c.Request.Context(), r)
		answer(c, http.StatusOK, shardproto.OrderToV1(o), err)
	})
	in.POST("/amend", func(c *gin.Context) {
		var w shardproto.AmendV1
		if !bind(c, &w) {
			return
		}
		r := w.Request()
		if e := shardproto.CheckAmend(&r); e != nil {
			refuse(c, e)
			return
		}
		amended, err := sh.Amend(c.Request.Context(), r)
		answer(c, http.StatusOK, shardproto.PlacedToV1(amended), err)
	})
	in.POST("/place-many", func(c *gin.Context) {
		var ws []shardproto.PlaceV1
		if !bindMany(c, &ws) {
			return
		}
		rs := make([]exchange.PlaceRequest, len(ws))
		for i, w := range ws {
			rs[i] = w.Request()
		}
		out := make([]shardproto.PlaceResultV1, len(rs))
		ok, idx := splitValid(rs, shardproto.CheckPlace, func(i int, e *domain.Error) { out[i].Error = shardproto.RefusalResult(e) })
		var results []exchange.PlaceResult
		if len(ok) > 0 {
			results = sh.PlaceMany(c.Request.Context(), ok)
		}
		for j, i := range idx {
			if out[i].Error = resultError(c, results[j].Err); out[i].Error == nil {
				placed := shardproto.PlacedToV1(results[j].Placed)
				out[i].Placed = &placed
			}
		}
		c.JSON(http.StatusOK, out)
	})
	in.POST("/cancel-many", func(c *gin.Context) {
		var ws []shardproto.CancelV1
		if !bindMany(c, &ws) {
			return
		}
		rs := make([]exchange.CancelRequest, len(ws))
		for i, w := range ws {
			rs[i] = w.Request()
		}
		out := make([]shardproto.CancelResultV1, len(rs))
		ok, idx := splitValid(rs, shardproto.CheckCancel, func(i int, e *domain.Error) { out[i].Error = shardproto.RefusalResult(e) })
		var results []exchange.CancelResult
		if len(ok) > 0 {
			results = sh.CancelMany(c.Request.Context(), ok)
		}
		for j, i := range idx {
			if out[i].Error = resultError(c, results[j].Err); out[i].Error == nil {
				o := shardproto.OrderToV1(results[j].Order)
				out[i].Order = &o
			}
		}
		c.JSON(http.StatusOK, out)
	})
	in.POST("/cancel-all", func(c *gin.Context) {
		var w shardproto.CancelAllV1
		if !bind(c, &w) {
			return
		}
		if e := shardproto.CheckCancelAll(&w); e != nil {
			refuse(c, e)
			return
		}
		orders, err := sh.CancelAll(c.Request.Context(), w.Account, w.Markets)
		answer(c, http.StatusOK, shardproto.OrdersToV1(orders), err)
	})
	// A lifecycle change, from the operator: the shard that owns the market carries it out, as
	// pmx dev's shard does (cancelling resting orders, settling), so the market keeps its owner
	// and epoch.
	in.POST("/transition", func(c *gin.Context) {
		var w shardproto.TransitionV1
		if !bind(c, &w) {
			return
		}
		action, e := shardproto.CheckTransition(&w)
		if e != nil {
			refuse(c, e)
			return
		}
		answer(c, http.StatusNoContent, nil, sh.Transition(c.Request.Context(), w.Market, action))
	})
	// An event's lifecycle change, from the operator (events.go): all its markets in one batch.
	in.POST("/event-transition", func(c *gin.Context) {
		var w shardproto.EventTransitionV1
		if !bind(c, &w) {
			return
		}
		action, e := shardproto.CheckEventTransition(&w)
		if e != nil {
			refuse(c, e)
			return
		}
		answer(c, http.StatusNoContent, nil, transitionEvent(c.Request.Context(), sh, w.Event, action))
	})
	// A conversion of an event's shares, from the front (convert.go).
	in.POST("/convert", func(c *gin.Context) {
		var w shardproto.ConvertV1
		if !bind(c, &w) {
			return
		}
		if e := shardproto.CheckConvert(&w); e != nil {
			refuse(c, e)
			return
		}
		out, err := convertOn(c.Request.Context(), sh, &w)
		answer(c, http.StatusOK, out, err)
	})
	// The planned handoff's calls, from the operator (handoff.go).
	handoffRoutes(in, sh, answer)
	in.GET("/feed", streamFeed(s.Feed, s.Stopping))
	in.GET("/book", func(c *gin.Context) {
		market := c.Query("market")
		id, err := uuid.Parse(market)
		if err != nil || len(market) != 36 || id == uuid.Nil {
			refuse(c, shardproto.Invalid("market", "market must be a market's id, a UUID like 123e4567-e89b-12d3-a456-426614174000"))
			return
		}
		epoch, hasEpoch := c.GetQuery("epoch")
		want, err := strconv.ParseInt(epoch, 10, 64)
		if hasEpoch && (err != nil || want < 0) {
			refuse(c, shardproto.Invalid("epoch", "epoch must be the market's epoch, a whole number from 0"))
			return
		}
		if !hasEpoch {
			want = anyEpoch
		}
		snap, err := bookAt(c.Request.Context(), sh, id, want)
		if err != nil {
			answer(c, 0, nil, err)
			return
		}
		answer(c, http.StatusOK, shardproto.SnapshotToV1(snap), nil)
	})
	// Many books at once, for an event's read (books.go): each market's answer is what GET /book
	// answers for it.
	in.POST("/books", func(c *gin.Context) {
		var w shardproto.BooksV1
		if !bind(c, &w) {
			return
		}
		if e := shardproto.CheckBooks(&w); e != nil {
			refuse(c, e)
			return
		}
		out := make([]shardproto.BookResultV1, len(w.Markets))
		for i, id := range w.Markets {
			snap, err := bookAt(c.Request.Context(), sh, id, w.Epochs[i])
			if out[i].Error = resultError(c, err); out[i].Error == nil {
				book := shardproto.SnapshotToV1(snap)
				out[i].Book = &book
			}
		}
		c.JSON(http.StatusOK, out)
	})
	return e
}
