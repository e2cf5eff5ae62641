package apijson

import (
	"time"

	"github.com/google/uuid"

	"github.com/pmx-dev/pmx/internal/records"
)

// Series is a series as GET /series lists it (a MarketSeries resource's record): its template's
// question and category, with the {date} and {time} placeholders each instance fills in, its
// schedule and the scheduled time of the next instance to be listed.
type Series struct {
	ID             uuid.UUID  `json:"id"`
	Name           string     `json:"name"`
	Kind           string     `json:"kind"` // MARKET or EVENT: what each instance is
	Question       string     `json:"question"`
	Description    *string    `json:"description"`
	Category       string     `json:"category"`
	Schedule       string     `json:"schedule"`
	TimeZone       string     `json:"timeZone"`
	NextInstanceAt *time.Time `json:"nextInstanceAt"`
	CreatedAt      time.Time  `json:"createdAt"`
	UpdatedAt      time.Time  `json:"updatedAt"`
}

// SeriesOf is the API's shape of a series' row.
func SeriesOf(s *records.Series) Series {
	return Series{ID: s.ID, Name: s.Name, Kind: string(s.Kind), Question: s.Question, Description: s.Description,
		Category: s.Category, Schedule: s.Schedule, TimeZone: s.TimeZone, NextInstanceAt: s.NextInstanceAt,
		CreatedAt: s.CreatedAt, UpdatedAt: s.UpdatedAt}
}

// SeriesInstance is one instance of a series not settled yet: a market (marketId) of a series of
// markets, or an event (eventId) of a series of events.
type SeriesInstance struct {
	MarketID   *uuid.UUID `json:"marketId,omitempty"`
	EventID    *uuid.UUID `json:"eventId,omitempty"`
	Name       string     `json:"name"`
	Status     string     `json:"status"`
	ClosesAt   *time.Time `json:"closesAt"`
	ResolvesAt *time.Time `json:"resolvesAt"`
}

// SeriesDetail is GET /series/{id}'s answer: the series and its instances not settled yet,
// soonest to close first.
type SeriesDetail struct {
	Series
	Instances []SeriesInstance `json:"instances"`
}

// SeriesDetailOf is the API's shape of a series and its live instances.
func SeriesDetailOf(s *records.Series, instances []records.SeriesInstance) SeriesDetail {
	d := SeriesDetail{Series: SeriesOf(s), Instances: make([]SeriesInstance, len(instances))}
	for i, in := range instances {
		id := in.ID
		out := SeriesInstance{Name: in.Name, Status: string(in.Status), ClosesAt: in.ClosesAt, ResolvesAt: in.ResolvesAt}
		if s.Kind == records.SeriesOfEvents {
			out.EventID = &id
		} else {
			out.MarketID = &id
		}
		d.Instances[i] = out
	}
	return d
}
