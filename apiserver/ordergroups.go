package apiserver

import (
	"errors"
	"net/http"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/google/uuid"

	"github.com/pmx-dev/pmx/internal/kit/httpkit"
	"github.com/pmx-dev/pmx/internal/store"
)

// Order groups (POST, GET /api/v1/order-groups, GET /order-groups/{id}, POST
// /order-groups/{id}/reset). The front only keeps them in Postgres: the shards decide every order
// of a group and count its fills (internal/shard/groups.go), reading the group with their batches,
// and the database holds at commit what they decided (migration 027), so a reset needs no message
// to any shard.

const (
	// maxFillLimit bounds a group's fillLimit: exact in every JSON reader (2^53 − 1).
	maxFillLimit = 1<<53 - 1
	// maxWindowSeconds bounds a group's rolling window: a day.
	maxWindowSeconds = 24 * 60 * 60
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

func orderGroupOf(g *store.OrderGroup) OrderGroup {
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
	g, err := s.cfg.Store.CreateOrderGroup(c.Request.Context(), accountOf(c), limit, int(window))
	if err != nil {
		return err
	}
	c.JSON(http.StatusCreated, orderGroupOf(&g))
	return nil
}

// listOrderGroups lists the caller's order groups, newest first.
func (s *Server) listOrderGroups(c *gin.Context) error {
	groups, err := s.cfg.Store.OrderGroups(c.Request.Context(), accountOf(c))
	if err != nil {
		return err
	}
	out := make([]OrderGroup, len(groups))
	for i := range groups {
		out[i] = orderGroupOf(&groups[i])
	}
	c.JSON(http.StatusOK, out)
	return nil
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

func answerOrderGroup(c *gin.Context, g store.OrderGroup, err error) error {
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
