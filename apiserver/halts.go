package apiserver

import (
	"errors"
	"net/http"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/google/uuid"

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
	return s.changeRow(false, func(c *gin.Context, id uuid.UUID) error {
		_, err := s.cfg.Store.SetMarketPaused(c.Request.Context(), id, paused, s.now())
		return err
	})
}

// pauseEvent answers POST /admin/v1/events/{id}/pause and /resume.
func (s *Server) pauseEvent(paused bool) func(*gin.Context) error {
	return s.changeRow(true, func(c *gin.Context, id uuid.UUID) error {
		_, err := s.cfg.Store.SetEventPaused(c.Request.Context(), id, paused, s.now())
		return err
	})
}

// changeRow is an admin change of one market's (or, events, one event's) row in pmx dev — a
// pause, a fee schedule — which answers with the market or the event as it is afterwards. Where
// the operator manages markets and events it is 409 managed_by_operator; an id that is not a
// UUID is 400, one no row has 404 (change returns store.ErrNotFound).
func (s *Server) changeRow(events bool, change func(c *gin.Context, id uuid.UUID) error) func(*gin.Context) error {
	what := "market"
	if events {
		what = "event"
	}
	return func(c *gin.Context) error {
		if s.operatorManaged() {
			return exchange.ErrManagedByOperator
		}
		id, err := parseUUID("id", c.Param("id"))
		if err != nil {
			return err
		}
		if err := change(c, id); errors.Is(err, store.ErrNotFound) {
			return &httpkit.Error{Status: http.StatusNotFound, Code: what + "_not_found", Field: "id", Message: "no " + what + " has this id"}
		} else if err != nil {
			return err
		}
		ctx := c.Request.Context()
		if events {
			e, err := s.cfg.Store.Event(ctx, id)
			if err != nil {
				return err
			}
			c.JSON(http.StatusOK, EventOf(&e))
			return nil
		}
		m, err := s.cfg.Store.Market(ctx, id)
		if err != nil {
			return err
		}
		c.JSON(http.StatusOK, MarketOf(&m))
		return nil
	}
}
