package apiserver

import (
	"fmt"
	"net/http"

	"github.com/gin-gonic/gin"

	"github.com/pmx-dev/pmx/internal/kit/auth"
	"github.com/pmx-dev/pmx/internal/kit/httpkit"
)

// route is one keyed /api/v1 endpoint and the scope a key needs to call it.
type route struct {
	method, path string
	scope        auth.Scope
	handle       func(*gin.Context) error
}

// routes are the keyed /api/v1 endpoints, each with the scope it needs: the one table that says
// what a key of each scope may do (package auth orders the scopes). New registers every keyed
// route from it, and TestEveryRouteHasAScope fails on a keyed route registered any other way, so a
// new endpoint cannot be added without choosing its scope. The rule: reads need read; what can
// only take risk away (cancels, the dead-man switch's heartbeat) needs cancel; what can add it
// needs trade; what makes or revokes keys needs keys. POST /ws-token needs only read: the token it returns connects to the feed with
// its key's rights (authenticateWS). The feed itself, GET /ws, is registered apart (its chain
// takes a ws-token too) and also needs read; cancelOnDisconnect needs cancel (wsCancelScope).
func (s *Server) routes() []route {
	return []route{
		{"GET", "/account", auth.ScopeRead, s.account},
		{"GET", "/account/events", auth.ScopeRead, s.accountFeedMessages},
		{"GET", "/account/keys", auth.ScopeRead, s.accountKeys},
		{"GET", "/account/limits", auth.ScopeRead, s.accountLimits},
		{"GET", "/account/risk-limits", auth.ScopeRead, s.riskLimits},
		{"GET", "/account/fees", auth.ScopeRead, s.accountFees},
		{"GET", "/fills", auth.ScopeRead, s.fills},
		{"GET", "/market", auth.ScopeRead, s.getMarket},
		{"GET", "/market/candles", auth.ScopeRead, s.candles},
		{"GET", "/market/events", auth.ScopeRead, s.marketFeedMessages},
		{"GET", "/market/order-book", auth.ScopeRead, s.orderBook},
		{"GET", "/market/trades", auth.ScopeRead, s.trades},
		{"GET", "/markets", auth.ScopeRead, s.listMarkets},
		{"GET", "/order", auth.ScopeRead, s.getOrder},
		{"GET", "/orders", auth.ScopeRead, s.listOrders},
		{"GET", "/order/queue-position", auth.ScopeRead, s.queuePosition},
		{"GET", "/orders/queue-positions", auth.ScopeRead, s.queuePositions},
		{"GET", "/positions", auth.ScopeRead, s.positions},
		{"GET", "/settlements", auth.ScopeRead, s.settlements},
		{"POST", "/ws-token", auth.ScopeRead, s.wsToken},

		{"POST", "/cancel-order", auth.ScopeCancel, s.cancelOrder},
		{"POST", "/cancel-everything", auth.ScopeCancel, s.cancelEverything},
		{"POST", "/orders/cancel", auth.ScopeCancel, s.cancelBatch},
		{"POST", "/heartbeat", auth.ScopeCancel, s.heartbeat},

		{"POST", "/order", auth.ScopeTrade, s.placeOrder},
		{"POST", "/order/amend", auth.ScopeTrade, s.amendOrder},
		{"POST", "/orders/batch", auth.ScopeTrade, s.placeBatch},
		{"PUT", "/account/risk-limits", auth.ScopeTrade, s.setRiskLimits},

		// Events' public reads (eventreads.go).
		{"GET", "/events", auth.ScopeRead, s.listEvents},
		{"GET", "/event", auth.ScopeRead, s.getEvent},

		// Series' public reads (seriesreads.go): one series by its id in the path, as an order
		// group is, since the list and the one would otherwise share the path /series.
		{"GET", "/series", auth.ScopeRead, s.listSeries},
		{"GET", "/series/:id", auth.ScopeRead, s.getSeries},

		// Order groups (ordergroups.go): reads need read; making one and resetting one need trade,
		// since a reset lets a group that stopped a bot trade again.
		{"GET", "/order-groups", auth.ScopeRead, s.listOrderGroups},
		{"GET", "/order-groups/:id", auth.ScopeRead, s.getOrderGroup},
		{"POST", "/order-groups", auth.ScopeTrade, s.createOrderGroup},
		{"POST", "/order-groups/:id/reset", auth.ScopeTrade, s.resetOrderGroup},
		{"DELETE", "/order-groups/:id", auth.ScopeTrade, s.deleteOrderGroup},

		// Conversion of an event's shares (convert.go): it trades, so it needs trade.
		{"POST", "/event/convert", auth.ScopeTrade, s.convert},

		// Making and revoking the account's keys (keys.go), as its settings page does: keys, the
		// scope above trade, since a key that makes keys can do whatever a key it makes can.
		{"POST", "/account/keys", auth.ScopeKeys, s.createKey},
		{"DELETE", "/account/keys/:id", auth.ScopeKeys, s.revokeKey},
	}
}

// wsScope is what GET /api/v1/ws needs of a key.
const wsScope = auth.ScopeRead

// wsCancelScope refuses a feed connection that asks for cancelOnDisconnect with a key that may
// not cancel: closing it would cancel the account's orders. Before the rate limit, as require.
func (s *Server) wsCancelScope(c *gin.Context) {
	if have := scopeOf(c); c.Query("cancelOnDisconnect") == "true" && !have.Allows(auth.ScopeCancel) {
		s.refuseScope(c, insufficientScope(have, auth.ScopeCancel, "cancelOnDisconnect"))
		return
	}
	c.Next()
}

// keyed registers the keyed routes on v1: each authenticates its key, checks its scope, then
// spends its rate limit, so that a request refused for its scope spends nothing.
func (s *Server) keyed(v1 gin.IRoutes) {
	for _, r := range s.routes() {
		v1.Handle(r.method, r.path, s.authenticate, s.require(r.scope), s.rateLimit, handler(r.handle))
	}
}

// require refuses a request whose key's scope does not allow need: 403 insufficient_scope, its
// details' field naming the scope needed (as risk limits' refusals name the limit), before
// anything is read or done.
func (s *Server) require(need auth.Scope) gin.HandlerFunc {
	return func(c *gin.Context) {
		if have := scopeOf(c); !have.Allows(need) {
			s.refuseScope(c, insufficientScope(have, need, c.Request.Method+" "+c.FullPath()))
			return
		}
		c.Next()
	}
}

// refuseScope answers a scope refusal as every answer to an account is answered: with the
// RateLimit headers of the bucket the request would have spent from, as this front knows it
// (Limiter.Known: nothing is spent, and nothing asked of Postgres), on a connection kept alive.
// Unlike a refusal of a missing or wrong credential (httpkit.AbortUnread), the key is right, so
// the server reads the rest of the body as for any answer, and the client's next request reuses
// the connection: a bot with the wrong key for one call keeps its connection for the others.
func (s *Server) refuseScope(c *gin.Context, e *httpkit.Error) {
	setRateHeaders(c, s.limiter.Known(accountOf(c), kindOf(c.Request)))
	httpkit.Abort(c, e)
}

func insufficientScope(have, need auth.Scope, what string) *httpkit.Error {
	return &httpkit.Error{Status: http.StatusForbidden, Code: "insufficient_scope", Field: string(need),
		Message: fmt.Sprintf("this API key's scope is %s, and %s needs %s: nothing was done; use a key with scope %s (made on the developer settings page, /settings)",
			have, what, need, need)}
}
