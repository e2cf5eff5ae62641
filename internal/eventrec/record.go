// Package eventrec records events (package event's rules) in Postgres with their outcomes'
// markets, for the two callers that define events: the operator's Event controller and the
// standalone exchange's admin API. It is marketspec.Record's counterpart, and builds each outcome's
// market with marketspec.Validate and marketspec.Row so that an event's markets obey what kubectl apply
// would of a Market. It does no trading and no lifecycle change; the owning shard does those.
package eventrec

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/pmx-dev/pmx/api/v1alpha1"
	"github.com/pmx-dev/pmx/internal/domain"
	"github.com/pmx-dev/pmx/internal/event"
	"github.com/pmx-dev/pmx/internal/market/marketspec"
	"github.com/pmx-dev/pmx/internal/records"
	"github.com/pmx-dev/pmx/internal/store"
)

// Spec is what defines an event: the Event resource's spec fields and the admin API's request
// body, less the lifecycle intent (closed, resolution), which is not Record's business.
type Spec struct {
	Question    string          `json:"question"`
	Category    string          `json:"category"`
	Description string          `json:"description,omitempty"`
	URL         string          `json:"url,omitempty"`
	Outcomes    []event.Outcome `json:"outcomes"`
	ClosesAt    *time.Time      `json:"closesAt,omitempty"`
	ResolvesAt  *time.Time      `json:"resolvesAt,omitempty"`
}

// SpecOf is what an Event's spec defines of its event, in the form Record records: its text,
// outcomes and schedule (its pause and fee schedule are Pause's and SetFees', its lifecycle
// intent its owner's).
func SpecOf(s *v1alpha1.EventSpec) Spec {
	spec := Spec{Question: s.Question, Category: s.Category, Description: s.Description, URL: s.URL}
	for _, o := range s.Outcomes {
		spec.Outcomes = append(spec.Outcomes, event.Outcome{Key: o.Key, Label: o.Label})
	}
	if s.ClosesAt != nil {
		t := s.ClosesAt.Time
		spec.ClosesAt = &t
	}
	if s.ResolvesAt != nil {
		t := s.ResolvesAt.Time
		spec.ResolvesAt = &t
	}
	return spec
}

// ErrOutcomesChanged refuses an update that adds, removes, renames or reorders outcomes: each
// outcome's key names its market, whose shares people hold.
var ErrOutcomesChanged = &domain.Error{Kind: domain.Conflict, Code: "outcomes_fixed", Field: "outcomes",
	Message: "an event's outcome keys are fixed once it is created; only their labels may change"}

// MarketSpec is the spec of the market that trades outcome o of an event defined by spec: the
// event's text and schedule, its question naming the outcome (OutcomeQuestion).
func MarketSpec(spec Spec, o event.Outcome) v1alpha1.MarketSpec {
	ms := v1alpha1.MarketSpec{
		Question:    OutcomeQuestion(spec.Question, o.Label),
		Category:    spec.Category,
		Description: spec.Description,
		URL:         spec.URL,
		LabelA:      "Yes", LabelB: "No",
	}
	if spec.ClosesAt != nil {
		ms.ClosesAt = &metav1.Time{Time: *spec.ClosesAt}
	}
	if spec.ResolvesAt != nil {
		ms.ResolvesAt = &metav1.Time{Time: *spec.ResolvesAt}
	}
	return ms
}

// OutcomeQuestion is the question of the market of an event's outcome: the event's question, then
// the outcome's label after a dash, "Who wins the 2027 cup? — Green", which reads as the question
// with its answer whatever the question's form (the YES of the market is that answer). At most
// 445 + 3 + 50 characters, within a market's 500.
func OutcomeQuestion(question, label string) string { return question + " — " + label }

// Validate checks a spec: its outcomes by package event's rules, and each outcome's market by the
// Market CRD's (marketspec.Validate), which bound the text and schedule. The refusal is a
// *domain.Error or a *marketspec.SpecError.
func Validate(spec Spec) error {
	if err := event.Validate(spec.Outcomes); err != nil {
		return err
	}
	for _, o := range spec.Outcomes {
		ms := MarketSpec(spec, o)
		if err := marketspec.Validate(&ms); err != nil {
			return err
		}
	}
	return nil
}

// Record stores an event spec under name (the Event resource's metadata.name, or the name the
// admin API was given): the event with that id (or, when id is uuid.Nil, with that name) takes
// the spec's text, labels and schedule, and so do its markets; when there is none, a new OPEN
// event is created with one OPEN market per outcome, and created is true. The event's Outcomes
// carry each outcome's market id. An update that changes the outcomes' keys is ErrOutcomesChanged.
func Record(ctx context.Context, st Rows, id uuid.UUID, name string, spec Spec, now time.Time) (e records.Event, created bool, err error) {
	if err := Validate(spec); err != nil {
		return e, false, fmt.Errorf("event %q: %w", name, err)
	}
	if id != uuid.Nil {
		e, err = st.Event(ctx, id)
	} else {
		e, err = st.EventByName(ctx, name)
	}
	now = now.UTC().Truncate(time.Microsecond)
	switch {
	case errors.Is(err, store.ErrNotFound):
		if id == uuid.Nil {
			id = uuid.New()
		}
		e = Row(id, name, spec, now)
		markets := make([]records.Market, len(spec.Outcomes))
		for i := range spec.Outcomes {
			e.Outcomes[i].MarketID = uuid.New()
			markets[i] = marketRow(e, spec, i, now)
		}
		if e, err = st.CreateEvent(ctx, e, markets); err != nil {
			return e, false, fmt.Errorf("while creating event %q: %w", name, err)
		}
		return e, true, nil
	case err != nil:
		return e, false, fmt.Errorf("while reading event %q: %w", name, err)
	}
	if len(e.Outcomes) != len(spec.Outcomes) {
		return e, false, fmt.Errorf("event %q: %w", name, ErrOutcomesChanged)
	}
	updated := Row(e.ID, e.Name, spec, now)
	markets := make([]records.Market, len(spec.Outcomes))
	for i := range spec.Outcomes {
		if spec.Outcomes[i].Key != e.Outcomes[i].Key {
			return e, false, fmt.Errorf("event %q: %w", name, ErrOutcomesChanged)
		}
		updated.Outcomes[i].MarketID = e.Outcomes[i].MarketID
		markets[i] = marketRow(updated, spec, i, now)
	}
	if err := st.UpdateEventText(ctx, updated, markets, now); err != nil {
		return e, false, fmt.Errorf("while updating event %q: %w", name, err)
	}
	if e, err = st.Event(ctx, e.ID); err != nil {
		return e, false, fmt.Errorf("while reading event %q: %w", name, err)
	}
	return e, false, nil
}

// Row is the stored form of an event defined by spec, its outcomes' MarketID not yet set.
func Row(id uuid.UUID, name string, spec Spec, now time.Time) records.Event {
	optional := func(s string) *string {
		if s == "" {
			return nil
		}
		return &s
	}
	at := func(t *time.Time) *time.Time {
		if t == nil {
			return nil
		}
		u := t.UTC().Truncate(time.Microsecond)
		return &u
	}
	e := records.Event{
		ID: id, Name: name, Question: spec.Question, Category: spec.Category,
		Description: optional(spec.Description), URL: optional(spec.URL), Status: domain.MarketOpen,
		ClosesAt: at(spec.ClosesAt), ResolvesAt: at(spec.ResolvesAt), CreatedAt: now, UpdatedAt: now,
	}
	for _, o := range spec.Outcomes {
		e.Outcomes = append(e.Outcomes, records.EventOutcome{Key: o.Key, Label: o.Label})
	}
	return e
}

// marketRow is the row of the market of e's outcome i, named after the event and the outcome
// (the name the operator gives the outcome's Market resource).
func marketRow(e records.Event, spec Spec, i int, now time.Time) records.Market {
	name := MarketName(e.Name, e.Outcomes[i].Key)
	ms := MarketSpec(spec, event.Outcome{Key: e.Outcomes[i].Key, Label: e.Outcomes[i].Label})
	_ = marketspec.Validate(&ms) // checked by Validate; this applies the defaults
	m := marketspec.Row(e.Outcomes[i].MarketID, ms, &name, now)
	key := e.Outcomes[i].Key
	m.EventID, m.OutcomeKey = &e.ID, &key
	return m
}

// MarketName is the name of the market (and Market resource) of an event's outcome: the event's
// name and the outcome's key.
func MarketName(event, key string) string { return event + "-" + key }
