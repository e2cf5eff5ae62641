package records

import (
	"time"

	"github.com/google/uuid"

	"github.com/pmx-dev/pmx/engine"
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

	Paused bool        // the event is paused, and every market of it with it (migration 033)
	Halted domain.Halt // what halts it as read: its pause or the exchange's halt
	// Fees is its fee schedule (migration 035), which its markets without one of their own take;
	// the zero Fees for none.
	Fees engine.Fees
	// SeriesID is the series (MarketSeries) that listed the event (migration 034; linked by
	// LinkSeries, with its markets); nil for none.
	SeriesID *uuid.UUID
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

// Halts are every halt in the exchange as of one version, which every change of one raises
// (migration 033): the exchange's, the events paused and the markets paused on their own.
//
// The fee schedules (migration 035) are trading rules read and versioned with them: Fees holds the
// markets' own schedules and EventFees the events'.
type Halts struct {
	Version   int64
	Exchange  bool
	Markets   map[uuid.UUID]bool
	Events    map[uuid.UUID]bool
	Fees      map[uuid.UUID]engine.Fees
	EventFees map[uuid.UUID]engine.Fees
}

// FeesOf is the schedule an order placed in the market id, of event (nil for a market of its own),
// carries: the market's own, else its event's, else none.
func (h *Halts) FeesOf(id uuid.UUID, event *uuid.UUID) engine.Fees {
	if f, ok := h.Fees[id]; ok {
		return f
	}
	if event != nil {
		return h.EventFees[*event]
	}
	return engine.Fees{}
}

// Of is what halts the market id, of event (nil for a market of its own).
func (h *Halts) Of(id uuid.UUID, event *uuid.UUID) domain.Halt {
	return domain.Of(h.Exchange, event != nil && h.Events[*event], h.Markets[id])
}
