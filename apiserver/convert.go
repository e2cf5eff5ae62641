package apiserver

import (
	"encoding/json"
	"math"
	"net/http"

	"github.com/gin-gonic/gin"
	"github.com/google/uuid"

	"github.com/pmx-dev/pmx/internal/apijson"
	"github.com/pmx-dev/pmx/internal/domain"
	"github.com/pmx-dev/pmx/internal/event"
	"github.com/pmx-dev/pmx/internal/exchange"
	"github.com/pmx-dev/pmx/internal/kit/httpkit"
)

// convert is POST /event/convert: the caller's NO shares of the listed outcomes of an event become
// YES of the others and cash (event.Conversion), decided and written by the shard owning the
// event's markets (exchange.Converter). 201 with the conversion; a retry with the same
// clientRequestId answers 200 with the conversion it made, changing nothing.
func (s *Server) convert(c *gin.Context) error {
	obj, err := readObject(c.Request)
	if err != nil {
		return err
	}
	req := exchange.ConvertRequest{Account: accountOf(c)}
	if req.Event, err = obj.uuid("eventId"); err != nil {
		return err
	}
	raw, err := obj.raw("outcomes")
	if err != nil {
		return err
	}
	if json.Unmarshal(raw, &req.Outcomes) != nil {
		return httpkit.FieldError("outcomes", event.ErrInvalidOutcomes.Code, "outcomes must be an array of the event's outcome keys, as GET /event lists them")
	}
	// Every fault of the quantity is invalid_quantity, whatever it is: the conversion's rule
	// (event.ParseConversion) names the range.
	if req.Quantity, err = obj.integer("quantity", math.MinInt64, math.MaxInt64); err != nil {
		if !obj.has("quantity") {
			return err
		}
		return event.ErrInvalidQuantity
	}
	if req.Quantity > s.cfg.MaxQuantity {
		return event.ErrInvalidQuantity
	}
	if obj.has("clientRequestId") {
		if req.ClientRequestID, err = obj.string("clientRequestId"); err != nil {
			return err
		}
		if !domain.ValidClientOrderID(req.ClientRequestID) {
			return httpkit.FieldError("clientRequestId", "invalid_value", "clientRequestId must be %s", domain.ClientOrderIDRule)
		}
	}
	ctx := c.Request.Context()
	var before uuid.UUID // a retry is answered 200: the conversion existed before this request
	if req.ClientRequestID != "" {
		if prev, err := s.cfg.Store.ConversionByRequest(ctx, req.Account, req.ClientRequestID); err == nil {
			before = prev.ID
		}
	}
	row, err := s.cfg.Exchange.Convert(ctx, req)
	if err != nil {
		return err
	}
	status := http.StatusCreated
	if before != uuid.Nil && row.ID == before {
		c.Header("Idempotent-Replayed", "true")
		status = http.StatusOK
	}
	c.JSON(status, apijson.ConversionOf(&row))
	return nil
}

// Conversion is the answer of POST /event/convert and the converted event's conversion.
type Conversion = apijson.Conversion
