package records

import (
	"time"

	"github.com/google/uuid"

	"github.com/pmx-dev/pmx/internal/domain"
)

// SeriesKind is what each instance of a series is: a market or an event.
type SeriesKind string

const (
	SeriesOfMarkets SeriesKind = "MARKET"
	SeriesOfEvents  SeriesKind = "EVENT"
)

// Series is a series' row (package series holds the rules): a MarketSeries resource as the
// operator records it, its template's text with its placeholders, its schedule and the time of
// the next instance it will list.
type Series struct {
	ID             uuid.UUID
	Name           string
	Kind           SeriesKind
	Question       string
	Description    *string
	Category       string
	Schedule       string
	TimeZone       string
	NextInstanceAt *time.Time
	EndedAt        *time.Time
	CreatedAt      time.Time
	UpdatedAt      time.Time
}

// SeriesInstance is one instance of a series as the API lists it: a market of a series of
// markets, or an event of a series of events.
type SeriesInstance struct {
	ID         uuid.UUID // the market's or the event's
	Name       string
	Status     domain.MarketStatus
	ClosesAt   *time.Time
	ResolvesAt *time.Time
}
