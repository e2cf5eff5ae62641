package shardproto

import (
	"time"

	"github.com/google/uuid"

	"github.com/pmx-dev/pmx/internal/domain"
	"github.com/pmx-dev/pmx/internal/records"
)

// PathConvert converts an account's shares of an event on the shard that owns the event's
// markets (exchange.Converter). It is new in version 1, as an optional call: a shard of the
// release before conversions answers 404, which the front answers as unavailable.
const PathConvert = "/internal/v1/convert"

// ConvertV1 is a conversion's request (exchange.ConvertRequest).
type ConvertV1 struct {
	Account         int64     `json:"account"`
	Event           uuid.UUID `json:"event"`
	Outcomes        []string  `json:"outcomes"`
	Quantity        int64     `json:"quantity"`
	ClientRequestID string    `json:"clientRequestId,omitempty"`
}

// ConversionV1 is a conversion's row (records.Conversion).
type ConversionV1 struct {
	ID              uuid.UUID `json:"id"`
	Event           uuid.UUID `json:"event"`
	Account         int64     `json:"account"`
	ClientRequestID *string   `json:"clientRequestId,omitempty"`
	Outcomes        []string  `json:"outcomes"`
	Quantity        int64     `json:"quantity"`
	Cash            int64     `json:"cash"`
	CreatedAt       time.Time `json:"createdAt"`
}

func ConversionToV1(c records.Conversion) ConversionV1 {
	return ConversionV1{ID: c.ID, Event: c.EventID, Account: c.AccountID, ClientRequestID: c.ClientRequestID,
		Outcomes: c.Outcomes, Quantity: c.Quantity, Cash: c.Cash, CreatedAt: c.CreatedAt}
}

func (w *ConversionV1) Conversion() records.Conversion {
	return records.Conversion{ID: w.ID, EventID: w.Event, AccountID: w.Account, ClientRequestID: w.ClientRequestID,
		Outcomes: w.Outcomes, Quantity: w.Quantity, Cash: w.Cash, CreatedAt: w.CreatedAt}
}

// CheckConvert checks what the shard cannot check itself; the outcomes and the quantity are the
// shard's to refuse (event.ParseConversion), with the codes the API documents.
func CheckConvert(w *ConvertV1) *domain.Error {
	switch {
	case w.Account <= 0:
		return Invalid("account", "account must be an account's id")
	case w.Event == uuid.Nil:
		return Invalid("event", "event must be an event's id, a UUID")
	}
	return nil
}
