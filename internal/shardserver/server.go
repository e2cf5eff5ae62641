package shardserver

import (
	"log/slog"
	"net/http"
	"strconv"

	"github.com/gin-gonic/gin"
	"github.com/prometheus/client_golang/prometheus"

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

// route is one call of the internal API: the shard's handler of its path (shardproto's Path
// constants, which the client sends to).
type route struct {
	method, path string
	handle       gin.HandlerFunc
}

// routes are the internal API's calls, the one table of what a shard serves; Handler registers
// each behind the token and the protocol's version. Every request is checked (shardproto's
// validate.go) before the shard sees it; in the many-at-once calls only the requests that pass go
// to the shard, each refused one is its own result's error.
func (h *handlers) routes() []route {
	return []route{
		{http.MethodPost, shardproto.PathPlace, h.place},
		{http.MethodPost, shardproto.PathCancel, h.cancel},
		{http.MethodPost, shardproto.PathAmend, h.amend},
		{http.MethodPost, shardproto.PathPlaceMany, h.placeMany},
		{http.MethodPost, shardproto.PathCancelMany, h.cancelMany},
		{http.MethodPost, shardproto.PathCancelAll, h.cancelAll},
		// A lifecycle change, from the operator: the shard that owns the market carries it out,
		// as pmx dev's shard does (cancelling resting orders, settling), so the market keeps its
		// owner and epoch.
		{http.MethodPost, shardproto.PathTransition, h.transition},
		// An event's lifecycle change, from the operator: all its markets in one batch.
		{http.MethodPost, shardproto.PathEventTransition, h.eventTransition},
		// A conversion of an event's shares, from the front.
		{http.MethodPost, shardproto.PathConvert, h.convert},
		// The planned handoff's calls, from the operator (shardproto's handoff.go).
		{http.MethodPost, shardproto.PathHandoff, h.handOff},
		{http.MethodPost, shardproto.PathTakeOver, h.takeOver},
		{http.MethodGet, shardproto.PathFeed, streamFeed(h.feed, h.stopping)},
		{http.MethodGet, shardproto.PathBook, h.book},
		// Many books at once, for an event's read: each market's answer is what GET /book
		// answers for it.
		{http.MethodPost, shardproto.PathBooks, h.books},
		// Where an account's resting orders of one market stand in its book's queue, from the
		// front: each order's answer on its own.
		{http.MethodPost, shardproto.PathQueuePositions, h.queuePositions},
	}
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
	gin.SetMode(gin.ReleaseMode)
	e := gin.New()
	e.Use(gin.Recovery(), httpkit.HTTPMetrics(reg))
	httpkit.Health(e, s.Store)
	refusedVersions := shardproto.NewRefusedCounter(reg)
	in := e.Group("", func(c *gin.Context) {
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
	h := &handlers{sh: s.Shard, log: log, feed: s.Feed, stopping: s.Stopping}
	for _, r := range h.routes() {
		in.Handle(r.method, r.path, r.handle)
	}
	return e
}
