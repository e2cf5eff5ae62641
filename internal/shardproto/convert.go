package shardapi

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/google/uuid"

	"github.com/pmx-dev/pmx/internal/domain"
	"github.com/pmx-dev/pmx/internal/exchange"
	"github.com/pmx-dev/pmx/internal/records"
	"github.com/pmx-dev/pmx/internal/store"
)

// internalConvert converts an account's shares of an event on the shard that owns the event's
// markets (exchange.Converter). It is new in version 1, as an optional call: a shard of the
// release before conversions answers 404, which the front answers as unavailable.
const internalConvert = "/internal/v1/convert"

// convertV1 is a conversion's request (exchange.ConvertRequest).
type convertV1 struct {
	Account         int64     `json:"account"`
	Event           uuid.UUID `json:"event"`
	Outcomes        []string  `json:"outcomes"`
	Quantity        int64     `json:"quantity"`
	ClientRequestID string    `json:"clientRequestId,omitempty"`
}

// conversionV1 is a conversion's row (records.Conversion).
type conversionV1 struct {
	ID              uuid.UUID `json:"id"`
	Event           uuid.UUID `json:"event"`
	Account         int64     `json:"account"`
	ClientRequestID *string   `json:"clientRequestId,omitempty"`
	Outcomes        []string  `json:"outcomes"`
	Quantity        int64     `json:"quantity"`
	Cash            int64     `json:"cash"`
	CreatedAt       time.Time `json:"createdAt"`
}

func conversionToWire(c records.Conversion) conversionV1 {
	return conversionV1{ID: c.ID, Event: c.EventID, Account: c.AccountID, ClientRequestID: c.ClientRequestID,
		Outcomes: c.Outcomes, Quantity: c.Quantity, Cash: c.Cash, CreatedAt: c.CreatedAt}
}

func (w *conversionV1) conversion() records.Conversion {
	return records.Conversion{ID: w.ID, EventID: w.Event, AccountID: w.Account, ClientRequestID: w.ClientRequestID,
		Outcomes: w.Outcomes, Quantity: w.Quantity, Cash: w.Cash, CreatedAt: w.CreatedAt}
}

// checkConvert checks what the shard cannot check itself; the outcomes and the quantity are the
// shard's to refuse (event.ParseConversion), with the codes the API documents.
func checkConvert(w *convertV1) *domain.Error {
	switch {
	case w.Account <= 0:
		return invalid("account", "account must be an account's id")
	case w.Event == uuid.Nil:
		return invalid("event", "event must be an event's id, a UUID")
	}
	return nil
}

// convertOn carries a conversion out on this process's shards.
func convertOn(ctx context.Context, sh exchange.Shard, w *convertV1) (conversionV1, error) {
	c, err := sh.Convert(ctx, exchange.ConvertRequest{Account: w.Account, Event: w.Event, Outcomes: w.Outcomes,
		Quantity: w.Quantity, ClientRequestID: w.ClientRequestID})
	return conversionToWire(c), err
}

// Convert, in the front, sends a conversion to the shard owning the event's markets: the owner of
// its first outcome's market, which refuses unless it owns them all (the operator schedules an
// event's markets together). A market that is not OPEN is the event's not being open.
func (r *Router) Convert(ctx context.Context, req exchange.ConvertRequest) (records.Conversion, error) {
	e, err := r.Store.Event(ctx, req.Event)
	if errors.Is(err, store.ErrNotFound) {
		return records.Conversion{}, domain.ErrEventNotFound
	} else if err != nil {
		return records.Conversion{}, err
	}
	w := convertV1{Account: req.Account, Event: req.Event, Outcomes: req.Outcomes, Quantity: req.Quantity,
		ClientRequestID: req.ClientRequestID}
	var out conversionV1
	err = r.onOwner(ctx, e.Outcomes[0].MarketID, false, domain.ErrEventNotOpen, func(rt route) error {
		out = conversionV1{}
		return rt.client.call(ctx, http.MethodPost, internalConvert, w, &out)
	})
	if errors.Is(err, errOlderPeer) {
		return records.Conversion{}, fmt.Errorf("the event's shard cannot convert yet: %w: %w", exchange.ErrUnavailable, err)
	}
	if err != nil {
		return records.Conversion{}, err
	}
	return out.conversion(), nil
}
