package apiserver

import (
	"errors"
	"net/http"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/pmx-dev/pmx/internal/exchange"
	"github.com/pmx-dev/pmx/internal/kit/httpkit"
	"github.com/pmx-dev/pmx/internal/store"
)

// The admin API's halts (docs/architecture.md §4, "Halts"): the whole exchange's (GET and PUT
// /admin/v1/halt), in both modes; and a market's or an event's pause (POST
// /admin/v1/markets/{id}/pause and /resume, /admin/v1/events/{id}/pause and /resume), in pmx dev
// only: in distributed mode they are the Market's and Event's spec.paused, which the operator
// writes. Each is a row in Postgres the shards check every placement and amend against
// (internal/shard/halts.go), so a halt is in force on every shard once its answer is sent.

// ExchangeHalt is GET and PUT /admin/v1/halt's answer.
type ExchangeHalt struct {
	Halted bool      `json:"halted"`
	Since  time.Time `json:"since"` // when it last changed
}

func (s *Server) exchangeHalt(c *gin.Context) error {
	halted, since, err := s.cfg.Store.ExchangeHalt(c.Request.Context())
	if err != nil {
		return err
	}
	c.JSON(http.StatusOK, ExchangeHalt{Halted: halted, Since: since.UTC()})
	return nil
}

// setExchangeHalt answers PUT /admin/v1/halt {"halted": true|false}.
func (s *Server) setExchangeHalt(c *gin.Context) error {
	obj, err := readObject(c.Request)
	if err != nil {
		return err
	}
	if err := obj.oneKeyPerField([]string{"halted"}); err != nil {
		return err
	}
	if !obj.has("halted") {
		return httpkit.FieldError("halted", "missing_field", "halted is required: true halts trading on the whole exchange, false resumes it")
	}
	halted, err := obj.boolean("halted")
	if err != nil {
		return err
	}
	ctx := c.Request.Context()
	changed, err := s.cfg.Store.SetExchangeHalted(ctx, halted, s.now())
	if err != nil {
		return err
	}
	if changed {
		s.log.Warn("the exchange's halt changed", "halted", halted)
	}
	return s.exchangeHalt(c)
}

// pauseMarket answers POST /admin/v1/markets/{id}/pause and /resume.
func (s *Server) pauseMarket(paused bool) func(*gin.Context) error {
	return func(c *gin.Context) error {
		if s.operatorManaged() {
			return exchange.ErrManagedByOperator
		}
		id, err := parseUUID("id", c.Param("id"))
		if err != nil {
			return err
		}
		ctx := c.Request.Context()
		if _, err := s.cfg.Store.SetMarketPaused(ctx, id, paused, s.now()); err != nil {
			if errors.Is(err, store.ErrNotFound) {
				return &httpkit.Error{Status: http.StatusNotFound, Code: "market_not_found", Field: "id", Message: "no market has this id"}
			}
			return err
		}
		m, err := s.cfg.Store.Market(ctx, id)
		if err != nil {
			return err
		}
		c.JSON(http.StatusOK, MarketOf(&m))
		return nil
	}
}

// pauseEvent answers POST /admin/v1/events/{id}/pause and /resume.
func (s *Server) pauseEvent(paused bool) func(*gin.Context) error {
	return func(c *gin.Context) error {
		if s.operatorManaged() {
			return exchange.ErrManagedByOperator
		}
		id, err := parseUUID("id", c.Param("id"))
		if err != nil {
			return err
		}
		ctx := c.Request.Context()
		if _, err := s.cfg.Store.SetEventPaused(ctx, id, paused, s.now()); err != nil {
			if errors.Is(err, store.ErrNotFound) {
				return &httpkit.Error{Status: http.StatusNotFound, Code: "event_not_found", Field: "id", Message: "no event has this id"}
			}
			return err
		}
		e, err := s.cfg.Store.Event(ctx, id)
		if err != nil {
			return err
		}
		c.JSON(http.StatusOK, EventOf(&e))
		return nil
	}
}
