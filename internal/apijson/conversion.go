package apijson

import (
	"time"

	"github.com/google/uuid"

	"github.com/pmx-dev/pmx/internal/records"
)

// Conversion is a conversion of an event's shares (POST /event/convert, and the converted event of
// the account's feed): Quantity NO shares of each of Outcomes became Quantity YES shares of each
// of the event's other outcomes and Cash cents.
type Conversion struct {
	ID              uuid.UUID `json:"id"`
	EventID         uuid.UUID `json:"eventId"`
	ClientRequestID string    `json:"clientRequestId,omitempty"`
	Outcomes        []string  `json:"outcomes"`
	Quantity        int64     `json:"quantity"`
	Cash            int64     `json:"cash"`
	CreatedAt       time.Time `json:"createdAt"`
}

// ConversionOf is the API's shape of a conversion's row.
func ConversionOf(c *records.Conversion) Conversion {
	w := Conversion{ID: c.ID, EventID: c.EventID, Outcomes: c.Outcomes, Quantity: c.Quantity, Cash: c.Cash, CreatedAt: c.CreatedAt}
	if c.ClientRequestID != nil {
		w.ClientRequestID = *c.ClientRequestID
	}
	return w
}
