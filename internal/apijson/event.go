package apijson

import (
	"time"

	"github.com/google/uuid"

	"github.com/pmx-dev/pmx/engine"
	"github.com/pmx-dev/pmx/internal/records"
)

// The public reads' shapes of events (GET /events, GET /event): here beside the markets' so that
// the event pages (package marketpages) embed the very JSON the API answers, as the market pages
// do.

// EventHeader is what every answer about an event says of it before its outcomes.
type EventHeader struct {
	ID          uuid.UUID  `json:"id"`
	Name        string     `json:"name"`
	Question    string     `json:"question"`
	Category    string     `json:"category"`
	Description *string    `json:"description,omitempty"`
	URL         *string    `json:"url,omitempty"`
	Status      string     `json:"status"`
	Resolution  *string    `json:"resolution,omitempty"`
	ClosesAt    *time.Time `json:"closesAt,omitempty"`
	ResolvesAt  *time.Time `json:"resolvesAt,omitempty"`
	CreatedAt   time.Time  `json:"createdAt"`
	// Halted, while trading in the event's markets is halted, says by what: "event" (its pause) or
	// "exchange". Absent otherwise.
	Halted string `json:"halted,omitempty"`
	// Fees is the event's fee schedule, which its markets without one of their own carry; absent
	// when it has none.
	Fees *Fees `json:"fees,omitempty"`
	// SeriesID is the series that listed the event (GET /series/{id}); absent for an event no
	// series listed.
	SeriesID *uuid.UUID `json:"seriesId,omitempty"`
}

// EventHeaderOf is an event's row's header as the API answers with it.
func EventHeaderOf(e *records.Event) EventHeader {
	return EventHeader{ID: e.ID, Name: e.Name, Question: e.Question, Category: e.Category, Description: e.Description,
		URL: e.URL, Status: string(e.Status), Resolution: e.Resolution, ClosesAt: e.ClosesAt, ResolvesAt: e.ResolvesAt,
		CreatedAt: e.CreatedAt, Halted: string(e.Halted), Fees: eventFees(e), SeriesID: e.SeriesID}
}

func eventFees(e *records.Event) *Fees {
	if e.Fees == (engine.Fees{}) {
		return nil
	}
	f := FeesOf(e.Fees)
	return &f
}

// Event is an event as the API answers with it.
type Event struct {
	EventHeader
	Outcomes []EventOutcome `json:"outcomes"`
}

// EventOutcome is one of an event's outcomes and its market.
type EventOutcome struct {
	Key      string    `json:"key"`
	Label    string    `json:"label"`
	MarketID uuid.UUID `json:"marketId"`
}

// EventOf is an event's row as the API answers with it.
func EventOf(e *records.Event) Event {
	out := Event{EventHeader: EventHeaderOf(e), Outcomes: make([]EventOutcome, len(e.Outcomes))}
	for i, o := range e.Outcomes {
		out.Outcomes[i] = EventOutcome(o)
	}
	return out
}

// EventDetail is GET /event's answer: an event, its outcomes in order with their YES prices, and
// the sum of the outcomes' YES mids.
type EventDetail struct {
	EventHeader
	Outcomes []OutcomeDetail `json:"outcomes"`
	// YesMidSum is the sum of the outcomes' YesMid: 100 when the books price the outcomes as
	// exactly exclusive and exhaustive; above or below, one side of the event is dear.
	YesMidSum float64 `json:"yesMidSum"`
}

// OutcomeDetail is one of an event's outcomes, its market and that market's YES prices: the best
// bid and ask (null on an empty side) and the last trade's price (null before any).
type OutcomeDetail struct {
	Key       string    `json:"key"`
	Label     string    `json:"label"`
	MarketID  uuid.UUID `json:"marketId"`
	BestBid   *int      `json:"bestBid"`
	BestAsk   *int      `json:"bestAsk"`
	LastPrice *int      `json:"lastPrice"`
	YesMid    float64   `json:"yesMid"`
}
