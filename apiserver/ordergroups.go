package apiserver

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/google/uuid"

	"github.com/pmx-dev/pmx/internal/kit/httpkit"
	"github.com/pmx-dev/pmx/internal/store"
	"github.com/pmx-dev/pmx/internal/store/batches"
)

// Order groups (POST, GET /api/v1/order-groups, GET and DELETE /order-groups/{id}, POST
// /order-groups/{id}/reset). The front only keeps them in Postgres: the shards decide every order
// of a group and count its fills (internal/shard/groups.go), reading the group with their batches,
// and the database holds at commit what they decided (migration 027), so a reset needs no message
// to any shard.

const (
	// maxFillLimit bounds a group's fillLimit: exact in every JSON reader (2^53 − 1).
	maxFillLimit = 1<<53 - 1
	// maxWindowSeconds bounds a group's rolling window: a day.
	maxWindowSeconds = 24 * 60 * 60
	// DefaultMaxOrderGroups is the default of Config.MaxOrderGroups: the groups an account keeps
	// cost every GET /order-groups without paging and a row each in Postgres, so they are
	// bounded, as an account's open orders in a market are.
	DefaultMaxOrderGroups = 1000
	// GET /order-groups pages, when asked for with limit or cursor.
	defaultOrderGroups = 100
	maxOrderGroups     = 500
	// orderGroupExpiry is how often a front deletes the groups idle for store.OrderGroupIdle.
	orderGroupExpiry = time.Minute
)

// OrderGroup is an order group as the API shows it: its limit and window, the shares its orders
// filled within the window ending now (since it was made or last reset), and whether it is
// triggered (then it takes no orders until it is reset).
type OrderGroup struct {
	ID             uuid.UUID  `json:"id"`
	FillLimit      int64      `json:"fillLimit"`
	WindowSeconds  int        `json:"windowSeconds"`
	FilledInWindow int64      `json:"filledInWindow"`
	Triggered      bool       `json:"triggered"`
	TriggeredAt    *time.Time `json:"triggeredAt"`
	CountedFrom    time.Time  `json:"countedFrom"`
	CreatedAt      time.Time  `json:"createdAt"`
}

func orderGroupOf(g *batches.OrderGroup) OrderGroup {
	out := OrderGroup{ID: g.ID, FillLimit: g.FillLimit, WindowSeconds: g.WindowSeconds, FilledInWindow: g.Filled,
		Triggered: g.TriggeredAt != nil, CountedFrom: g.CountedFrom.UTC(), CreatedAt: g.CreatedAt.UTC()}
	if g.TriggeredAt != nil {
		at := g.TriggeredAt.UTC()
		out.TriggeredAt = &at
	}
	return out
}

// createOrderGroup makes an order group of the caller's: 201 with it.
func (s *Server) createOrderGroup(c *gin.Context) error {
	obj, err := readObject(c.Request)
	if err != nil {
		return err
	}
	limit, err := obj.integer("fillLimit", 1, maxFillLimit)
	if err != nil {
		return err
	}
	window, err := obj.integer("windowSeconds", 1, maxWindowSeconds)
	if err != nil {
		return err
	}
	g, err := s.cfg.Store.CreateOrderGroup(c.Request.Context(), accountOf(c), limit, int(window), s.cfg.MaxOrderGroups)
	if errors.Is(err, store.ErrTooManyOrderGroups) {
		return &httpkit.Error{Status: http.StatusConflict, Code: "too_many_order_groups",
			Message: fmt.Sprintf("the account keeps %d order groups, the most it may: place into one of them (GET /order-groups lists them), or delete one no open order is in (DELETE /order-groups/{id}); a group with no open order in which nothing happened for %s is deleted",
				s.cfg.MaxOrderGroups, idleText)}
	}
	if err != nil {
		return err
	}
	c.JSON(http.StatusCreated, orderGroupOf(&g))
	return nil
}

// idleText is store.OrderGroupIdle as the API's messages say it.
var idleText = fmt.Sprintf("%d hours", int(store.OrderGroupIdle/time.Hour))

// listOrderGroups lists the caller's order groups, newest first: without limit or cursor all of
// them (at most MaxOrderGroups) as a bare array, as the contract had it before pages; with either,
// one page of them and a nextCursor, as GET /markets.
func (s *Server) listOrderGroups(c *gin.Context) error {
	_, paged := c.GetQuery("limit")
	_, hasCursor := c.GetQuery("cursor")
	if !paged && !hasCursor {
		groups, err := s.cfg.Store.OrderGroups(c.Request.Context(), accountOf(c))
		if err != nil {
			return err
		}
		c.JSON(http.StatusOK, orderGroupsOf(groups))
		return nil
	}
	after, limit, err := queryPage(c, "GET /order-groups", defaultOrderGroups, maxOrderGroups)
	if err != nil {
		return err
	}
	groups, err := s.cfg.Store.OrderGroupsPage(c.Request.Context(), accountOf(c), after, limit)
	if err != nil {
		return err
	}
	next := nextCursor(groups, limit, func(g *batches.OrderGroup) store.Cursor { return store.Cursor{CreatedAt: g.CreatedAt, ID: g.ID} })
	c.JSON(http.StatusOK, gin.H{"orderGroups": orderGroupsOf(groups), "nextCursor": next})
	return nil
}

func orderGroupsOf(groups []batches.OrderGroup) []OrderGroup {
	out := make([]OrderGroup, len(groups))
	for i := range groups {
		out[i] = orderGroupOf(&groups[i])
	}
	return out
}

// getOrderGroup shows one of the caller's order groups; another account's is 404, as no group.
func (s *Server) getOrderGroup(c *gin.Context) error {
	id, err := parseUUID("id", c.Param("id"))
	if err != nil {
		return err
	}
	g, err := s.cfg.Store.OrderGroupOf(c.Request.Context(), accountOf(c), id)
	return answerOrderGroup(c, g, err)
}

// deleteOrderGroup deletes one of the caller's groups that no open order is in: 204. It is how an
// account at MaxOrderGroups makes room at once, rather than waiting for idle groups to expire.
// It needs the trade scope, as making one does.
func (s *Server) deleteOrderGroup(c *gin.Context) error {
	id, err := parseUUID("id", c.Param("id"))
	if err != nil {
		return err
	}
	err = s.cfg.Store.DeleteOrderGroup(c.Request.Context(), accountOf(c), id)
	if errors.Is(err, store.ErrGroupHasOpenOrders) {
		return &httpkit.Error{Status: http.StatusConflict, Code: "order_group_has_open_orders", Field: "id",
			Message: "an open order is in this order group, so it stays: cancel the group's open orders (GET /orders lists them), then delete it"}
	}
	if err != nil {
		return answerOrderGroup(c, batches.OrderGroup{}, err)
	}
	c.Status(http.StatusNoContent)
	return nil
}

// resetOrderGroup lets a triggered group take orders again and forgets the fills counted so far.
// It needs the trade scope: it re-enables trading.
func (s *Server) resetOrderGroup(c *gin.Context) error {
	id, err := parseUUID("id", c.Param("id"))
	if err != nil {
		return err
	}
	g, err := s.cfg.Store.ResetOrderGroup(c.Request.Context(), accountOf(c), id)
	return answerOrderGroup(c, g, err)
}

// expireOrderGroups deletes the groups with no open order in which nothing happened for
// store.OrderGroupIdle, every orderGroupExpiry until ctx ends. Every front does it: a group two
// fronts find at once is deleted by one, skipped by the other (expire_order_groups).
func (s *Server) expireOrderGroups(ctx context.Context) {
	every(ctx, orderGroupExpiry, func() {
		if n, err := s.cfg.Store.ExpireOrderGroups(ctx, s.now().Add(-store.OrderGroupIdle)); err != nil && ctx.Err() == nil {
			s.log.Warn("could not delete idle order groups; trying again in a minute", "err", err)
		} else if n > 0 {
			s.log.Debug("deleted idle order groups", "groups", n)
		}
	})
}

func answerOrderGroup(c *gin.Context, g batches.OrderGroup, err error) error {
	if errors.Is(err, store.ErrNotFound) {
		return &httpkit.Error{Status: http.StatusNotFound, Code: "order_group_not_found", Field: "id",
			Message: "the account has no order group with this id; list them with GET /order-groups"}
	}
	if err != nil {
		return err
	}
	c.JSON(http.StatusOK, orderGroupOf(&g))
	return nil
}
