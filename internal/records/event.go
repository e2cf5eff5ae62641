package records

import (
	"time"

	"github.com/google/uuid"

	"github.com/pmx-dev/pmx/internal/domain"
)

// Event is an event's row: a question whose outcomes are each traded as a market of their own
// (package event holds the rules). Status moves as a market's does, all of the event's markets
// with it; Resolution is the winning outcome's key once RESOLVED.
type Event struct {
	ID          uuid.UUID
	Name        string
	Question    string
	Category    string
	Description *string
	URL         *string
	Outcomes    []EventOutcome // in the event's order
	Status      domain.MarketStatus
	Resolution  *string
	ClosesAt    *time.Time
	ResolvesAt  *time.Time
	CreatedAt   time.Time
	UpdatedAt   time.Time
}

// EventOutcome is one of an event's outcomes and the market that trades it.
type EventOutcome struct {
	Key      string    `json:"key"`
	Label    string    `json:"label"`
	MarketID uuid.UUID `json:"marketId"`
}

// Conversion is a conversion's row (event.Conversion): Quantity NO shares of each of Outcomes
// turned into YES of the event's other outcomes and Cash cents.
type Conversion struct {
	ID              uuid.UUID
	EventID         uuid.UUID
	AccountID       int64
	ClientRequestID *string
	Outcomes        []string
	Quantity        int64
	Cash            int64
	CreatedAt       time.Time
}
