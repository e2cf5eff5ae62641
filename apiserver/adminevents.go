package apiserver

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http"

	"github.com/gin-gonic/gin"
	"github.com/google/uuid"

	"github.com/pmx-dev/pmx/internal/apijson"
	"github.com/pmx-dev/pmx/internal/domain"
	"github.com/pmx-dev/pmx/internal/event"
	"github.com/pmx-dev/pmx/internal/eventrec"
	"github.com/pmx-dev/pmx/internal/exchange"
	"github.com/pmx-dev/pmx/internal/kit/httpkit"
	"github.com/pmx-dev/pmx/internal/records"
)

// The admin API's events (pmx dev without Kubernetes): POST /admin/v1/events records one with its
// outcomes' markets as the Event resource would (eventrec.Record), and close, reopen, cancel and
// resolve move all of its markets on their shard (exchange.EventLifecycle).

// Event, EventOutcome and EventOf are in package apijson, which the event pages share.
type (
	Event        = apijson.Event
	EventOutcome = apijson.EventOutcome
)

// EventOf is an event's row as the API answers with it.
func EventOf(e *records.Event) Event { return apijson.EventOf(e) }

// eventBody is POST /admin/v1/events's body: the Event resource's spec fields, and a name.
type eventBody struct {
	Name string `json:"name"`
	eventrec.Spec
}

func (s *Server) createEvent(c *gin.Context) error {
	if s.operatorManaged() {
		return exchange.ErrManagedByOperator
	}
	body, err := readBody(c.Request)
	if err != nil {
		return err
	}
	var b eventBody
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&b); err != nil {
		var typ *json.UnmarshalTypeError
		if errors.As(err, &typ) {
			return httpkit.FieldError(typ.Field, "invalid_type", "%s must be a %s", typ.Field, typ.Type.String())
		}
		return httpkit.FieldError("", "invalid_value", "%v (the body is an event: question, category, outcomes [{key, label}], and optionally name, description, url, closesAt, resolvesAt as RFC 3339 times)", err)
	}
	id := uuid.New()
	if b.Name == "" {
		b.Name = id.String()
	}
	if _, err := s.cfg.Store.EventByName(c.Request.Context(), b.Name); err == nil {
		return &httpkit.Error{Status: http.StatusConflict, Code: "name_taken", Field: "name",
			Message: "an event already has this name; choose another"}
	}
	e, _, err := eventrec.Record(c.Request.Context(), s.cfg.Store, id, b.Name, b.Spec, s.now())
	if err != nil {
		return marketSpecError(err)
	}
	c.JSON(http.StatusCreated, EventOf(&e))
	return nil
}

// eventTransition answers POST /admin/v1/events/{id}/close, reopen and cancel.
func (s *Server) eventTransition(action domain.MarketAction) func(*gin.Context) error {
	return func(c *gin.Context) error { return s.applyEvent(c, domain.EventAction{Action: action}) }
}

// resolveEvent answers POST /admin/v1/events/{id}/resolve {"outcome": key}.
func (s *Server) resolveEvent(c *gin.Context) error {
	obj, err := readObject(c.Request)
	if err != nil {
		return err
	}
	outcome, err := obj.string("outcome")
	if err != nil {
		return err
	}
	if !event.ValidKey(outcome) {
		return httpkit.FieldError("outcome", "invalid_outcomes", "outcome must be one of the event's outcome keys")
	}
	return s.applyEvent(c, domain.EventAction{Action: domain.ResolveYes, Outcome: outcome})
}

func (s *Server) applyEvent(c *gin.Context, a domain.EventAction) error {
	id, err := parseUUID("id", c.Param("id"))
	if err != nil {
		return err
	}
	ctx := c.Request.Context()
	if err := s.cfg.Exchange.TransitionEvent(ctx, id, a); err != nil {
		return err
	}
	e, err := s.cfg.Store.Event(ctx, id)
	if err != nil {
		return err
	}
	c.JSON(http.StatusOK, EventOf(&e))
	return nil
}
