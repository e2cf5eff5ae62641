// Package apiserver is pmx's HTTP front: the public API (/api/v1) bots trade through, the admin
// API (/admin/v1), health endpoints and the OpenAPI document, with the developer settings pages
// (package settings) and the public market pages (package marketpages) mounted beside them. It counts its requests in a metrics registry but does
// not serve it: the process serves /metrics on a listener of its own (httpkit.MetricsHandler). Handlers are thin: they decode and validate, call
// the Exchange (the in-process shard, or in distributed mode shardclient.Router) or the store, and
// encode. Every error answer is mapped in one place (errors.go).
package apiserver

import (
	"context"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/pmx-dev/pmx/internal/domain"
	"github.com/pmx-dev/pmx/internal/exchange"
	"github.com/pmx-dev/pmx/internal/feed"
	"github.com/pmx-dev/pmx/internal/kit/addrlimit"
	"github.com/pmx-dev/pmx/internal/kit/clientaddr"
	"github.com/pmx-dev/pmx/internal/kit/httpkit"
	"github.com/pmx-dev/pmx/internal/kit/ratelimit"
	"github.com/pmx-dev/pmx/internal/pages/marketpages"
	"github.com/pmx-dev/pmx/internal/pages/settings"
)

// Exchange executes market writes and serves books (exchange.Exchange): the standalone exchange's
// shards, or the distributed front's router to them.
type Exchange = exchange.Exchange

// Config configures the server.
type Config struct {
	// Store is what the front asks of the database (storage.go).
	Store    Store
	Exchange Exchange
	Logger   *slog.Logger
	// AdminToken guards /admin/v1; empty disables the admin API.
	AdminToken string
	// Grant is the play money, in cents, a new account starts with (default 1,000,000).
	Grant int64
	// MaxQuantity is the largest order quantity accepted (default 1,000,000).
	MaxQuantity int64
	// MaxOrderGroups is the most order groups an account may keep (default DefaultMaxOrderGroups).
	MaxOrderGroups int
	// Now is the clock (default time.Now).
	Now func() time.Time
	// Metrics is where the server registers its metrics (default: a registry of its own), for the
	// process to serve on its metrics listener; the server itself does not serve them.
	Metrics prometheus.Registerer
	// OrderCacheSize is how many of the orders placed through this server it remembers, so that
	// cancelling one of them needs no read from Postgres (default 1<<18, about 32 MB when full;
	// negative disables it).
	OrderCacheSize int
	// Feed configures the WebSocket feed (GET /api/v1/ws).
	Feed FeedConfig
	// TrustedProxies are the proxies whose X-Forwarded-For names the client (package clientaddr):
	// the address that per-address limits count and keys' allowlists check. The zero value
	// trusts none: the client is the TCP peer.
	TrustedProxies clientaddr.Proxies
	// ReadLimit and WriteLimit are each account's rate limits (package ratelimit); a zero Rate
	// lifts one. New does not fill in defaults: the processes' flags do (ratelimit.DefaultRead,
	// ratelimit.DefaultWrite).
	ReadLimit, WriteLimit ratelimit.Limit
}

// Server serves the exchange's HTTP API.
type Server struct {
	cfg     Config
	log     *slog.Logger
	engine  *gin.Engine
	keys    keyCache
	keyRead *keyReads // the keys the cache misses, read together (keyreads.go)
	keyUse  *keyUse
	orders  *orderCache // nil when disabled
	limiter *ratelimit.Limiter
	// authFailures counts failed authentications per client address, authFailed all of them
	// (auth.go).
	authFailures *addrlimit.Limiter
	authFailed   *prometheus.CounterVec

	stopListen context.CancelFunc
	listening  chan struct{}

	// The live feed: the hub, and the context and count of the WebSocket connections and the
	// hub's sweep, which Close ends.
	hub         *feed.Hub
	feedMetrics *feedMetrics
	wsLimits    *wsLimits // the public feed's, per client address
	presence    *presence
	feedCtx     context.Context
	stopFeed    context.CancelFunc
	feedConns   sync.WaitGroup
	feedMu      sync.Mutex // orders feedConns.Add after Close's Wait
	feedClosed  bool
}

// Close stops the server's background work (the key revocation listener and last-use writer, the
// feed's sweep) and closes its WebSocket connections (code 1001: clients reconnect and resume
// elsewhere).
func (s *Server) Close() {
	s.stopListen()
	<-s.listening
	s.feedMu.Lock()
	s.feedClosed = true
	s.feedMu.Unlock()
	s.stopFeed()
	s.feedConns.Wait()
}

// Feed is the server's live feed hub, for the process to give it the shards' committed batches
// (Hub.Ingest).
func (s *Server) Feed() *feed.Hub { return s.hub }

// New builds the server's routes.
func New(cfg Config) *Server {
	if cfg.Grant == 0 {
		cfg.Grant = 1_000_000
	}
	if cfg.MaxQuantity == 0 {
		cfg.MaxQuantity = 1_000_000
	}
	if cfg.MaxOrderGroups <= 0 {
		cfg.MaxOrderGroups = DefaultMaxOrderGroups
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Metrics == nil {
		cfg.Metrics = httpkit.NewRegistry()
	}
	if cfg.OrderCacheSize == 0 {
		cfg.OrderCacheSize = defaultOrderCacheSize
	}
	gin.SetMode(gin.ReleaseMode)
	s := &Server{cfg: cfg, log: cfg.Logger.With("component", "api"), engine: gin.New(),
		orders: newOrderCache(cfg.OrderCacheSize)}
	s.keys.init()
	s.keyRead = newKeyReads(&s.keys, cfg.Store.KeysByPrefix)
	s.keyUse = newKeyUse()
	s.limiter = ratelimit.New(cfg.Store, cfg.ReadLimit, cfg.WriteLimit)
	s.authFailures = addrlimit.New(authFailureRate, authFailureBurst)
	s.authFailed = newAuthMetrics(cfg.Metrics)
	ctx, stop := context.WithCancel(context.Background())
	s.stopListen = stop
	s.listening = make(chan struct{})
	go func() {
		defer close(s.listening)
		var used sync.WaitGroup
		used.Go(func() { s.keyUse.run(ctx, cfg.Store, s.now, s.log) })
		used.Go(func() { s.sweepSigned(ctx) })
		used.Go(func() { s.expireOrderGroups(ctx) })
		s.keys.listen(ctx, cfg.Store, s.log)
		used.Wait()
	}()
	s.cfg.Feed.defaults()
	s.hub = feed.NewHub(s.feedLog(), s.log, cfg.Feed.Ring)
	s.feedMetrics = newFeedMetrics(cfg.Metrics, s.hub)
	s.wsLimits = newWSLimits()
	s.feedCtx, s.stopFeed = context.WithCancel(context.Background())
	s.feedConns.Go(func() { s.hub.Run(s.feedCtx) })
	s.presence = newPresence(cfg.Store, s.log)
	s.feedConns.Go(func() { s.presence.run(s.feedCtx) })
	s.feedConns.Go(func() { s.keys.watchFeeds(s.feedCtx, cfg.Store, s.now, s.log) })
	s.engine.ContextWithFallback = true
	// The client address is clientaddr.Of's alone; gin's ClientIP, which by default believes any
	// X-Forwarded-For, is not used, and is kept to the peer's address should anything call it.
	s.engine.ForwardedByClientIP = false
	s.engine.HandleMethodNotAllowed = true
	s.engine.Use(s.recover, s.clientAddr, httpkit.WithLogger(s.log), httpkit.HTTPMetrics(cfg.Metrics))
	s.engine.NoRoute(func(c *gin.Context) {
		httpkit.AbortUnread(c, httpkit.NewError(http.StatusNotFound, "not_found", "no such endpoint: %s %s", c.Request.Method, c.Request.URL.Path))
	})
	s.engine.NoMethod(func(c *gin.Context) {
		httpkit.AbortUnread(c, httpkit.NewError(http.StatusMethodNotAllowed, "method_not_allowed", "%s is not allowed on %s", c.Request.Method, c.Request.URL.Path))
	})

	httpkit.Health(s.engine, cfg.Store)

	v1 := s.engine.Group("/api/v1")
	v1.GET("/openapi.yaml", func(c *gin.Context) { c.Data(http.StatusOK, "application/yaml", OpenAPIDocument) })
	v1.GET("/asyncapi.yaml", func(c *gin.Context) { c.Data(http.StatusOK, "application/yaml", AsyncAPIDocument) })
	v1.GET("/ws", s.refuseTokenCancel, s.authenticateWS, s.require(wsScope), s.wsCancelScope, s.rateLimit, s.serveWS)
	v1.GET("/ws/public", s.servePublicWS) // the market channels, without a key (ws.go)
	s.keyed(v1)                           // every endpoint that takes an API key, with the scope it needs (routes.go)

	if cfg.AdminToken != "" {
		// The document holds no secret: served without the token, like the public API's.
		s.engine.GET("/admin/v1/openapi.yaml", func(c *gin.Context) { c.Data(http.StatusOK, "application/yaml", AdminOpenAPIDocument) })
		admin := s.engine.Group("/admin/v1", s.authenticateAdmin)
		admin.POST("/accounts", handler(s.createAccount))
		admin.POST("/accounts/:id/keys", handler(s.adminCreateKey)) // keys.go
		admin.POST("/markets", handler(s.createMarket))
		admin.POST("/markets/:id/close", handler(s.transition(domain.CloseMarket)))
		admin.POST("/markets/:id/reopen", handler(s.transition(domain.ReopenMarket)))
		admin.POST("/markets/:id/cancel", handler(s.transition(domain.CancelMarket)))
		admin.POST("/markets/:id/resolve", handler(s.resolve))
		admin.POST("/markets/:id/pause", handler(s.pauseMarket(true))) // halts.go
		admin.POST("/markets/:id/resume", handler(s.pauseMarket(false)))
		admin.PUT("/markets/:id/fees", handler(s.setFees(false, false))) // fees.go
		admin.DELETE("/markets/:id/fees", handler(s.setFees(false, true)))
		admin.POST("/events", handler(s.createEvent)) // adminevents.go
		admin.POST("/events/:id/close", handler(s.eventTransition(domain.CloseMarket)))
		admin.POST("/events/:id/reopen", handler(s.eventTransition(domain.ReopenMarket)))
		admin.POST("/events/:id/cancel", handler(s.eventTransition(domain.CancelMarket)))
		admin.POST("/events/:id/resolve", handler(s.resolveEvent))
		admin.POST("/events/:id/pause", handler(s.pauseEvent(true)))
		admin.POST("/events/:id/resume", handler(s.pauseEvent(false)))
		admin.PUT("/events/:id/fees", handler(s.setFees(true, false)))
		admin.DELETE("/events/:id/fees", handler(s.setFees(true, true)))
		admin.GET("/halt", handler(s.exchangeHalt))
		admin.PUT("/halt", handler(s.setExchangeHalt))
	}
	settings.Register(s.engine, settings.Config{Store: cfg.Store, Accounts: s, Grant: cfg.Grant, Now: cfg.Now})
	marketpages.Register(s.engine, marketpages.Config{Store: cfg.Store, Reads: s, Now: cfg.Now})
	return s
}

// clientAddr resolves the request's client address once, for every rule after it (clientaddr.Of).
func (s *Server) clientAddr(c *gin.Context) {
	c.Request = s.cfg.TrustedProxies.With(c.Request)
	c.Next()
}

// every runs f every d until ctx ends: the loop of each of a front's background sweeps.
func every(ctx context.Context, d time.Duration, f func()) {
	tick := time.NewTicker(d)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		f()
	}
}

// now is the server's clock at the database's precision.
func (s *Server) now() time.Time { return s.cfg.Now().UTC().Truncate(time.Microsecond) }

// Handler is the server's http.Handler.
func (s *Server) Handler() http.Handler { return s.engine }

// recover turns a panic in a handler into a logged 500.
func (s *Server) recover(c *gin.Context) {
	defer func() {
		if r := recover(); r != nil {
			if r == http.ErrAbortHandler {
				panic(r)
			}
			s.log.Error("handler panicked", "method", c.Request.Method, "path", c.Request.URL.Path, "panic", r)
			writeError(c, httpkit.NewError(http.StatusInternalServerError, "internal", "the exchange failed to answer; try again later"))
		}
	}()
	c.Next()
}
