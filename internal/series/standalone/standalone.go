// Package standalone lists series' instances in the standalone exchange (pmx dev), which has no
// operator: it does what the MarketSeries controller does there (controllers/), through the same
// rules (package series): at each of a series' times it records every instance due that is not
// recorded yet, under its name (marketspec.Record for a series of markets, eventrec.Record for one
// of events, so never twice, whatever restarts), gives it the template's fee schedule, and links
// it (an event with its markets) to the series.
package standalone

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/google/uuid"

	"github.com/pmx-dev/pmx/api/v1alpha1"
	"github.com/pmx-dev/pmx/internal/eventrec"
	"github.com/pmx-dev/pmx/internal/market/marketspec"
	"github.com/pmx-dev/pmx/internal/placement"
	"github.com/pmx-dev/pmx/internal/records"
	"github.com/pmx-dev/pmx/internal/series"
)

// Rows is what the lister asks of the database (*store.Store has it): markets' and events' rows,
// and the series' rows and links.
type Rows interface {
	marketspec.Rows
	eventrec.Rows
	eventrec.HaltRows
	RecordSeries(ctx context.Context, s records.Series) (records.Series, error)
	LinkSeries(ctx context.Context, series uuid.UUID, markets, events []uuid.UUID) error
}

// Lister lists the instances of a set of series as their schedules make them due.
type Lister struct {
	Store  Rows
	Logger *slog.Logger
	series []*series.Series
}

// New reads the MarketSeries manifests, refusing any whose spec cannot be followed; the error
// names the series and the field. A template of events is also checked by the rules of an event
// (eventrec.Validate, its fee schedule by the CRD's), which an Event's CRD would apply under the
// operator. A series' shardPool and placement are checked (series.New) and otherwise ignored, as
// a Market's or an Event's are here: this process serves every market itself, and logs so.
func New(st Rows, manifests []v1alpha1.MarketSeries, log *slog.Logger) (*Lister, error) {
	l := &Lister{Store: st, Logger: log}
	var errs []error
	for _, ms := range manifests {
		s, err := series.New(ms.Name, ms.Spec)
		if err == nil && s.IsEvent() {
			err = checkEvent(s)
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("series %q: %w", ms.Name, err))
			continue
		}
		placement.LogIgnored(log, "series", ms.Name, ms.Spec.ShardPool, string(ms.Spec.Placement))
		l.series = append(l.series, s)
	}
	return l, errors.Join(errs...)
}

// checkEvent checks the event a series of events lists, as of its instance of now (the outcomes
// and their text do not depend on the time; the times' order was series.New's).
func checkEvent(s *series.Series) error {
	spec := s.EventSpec(s.InstanceAt(time.Now()))
	if err := eventrec.Validate(eventrec.SpecOf(&spec)); err != nil {
		return fmt.Errorf("spec.event: %w", err)
	}
	if spec.Fees != nil {
		if err := spec.Fees.Check("spec.event.fees"); err != nil {
			return err
		}
	}
	return nil
}

// Sync records, at now, each series and every instance of it due and not recorded yet, and
// links them. It returns when the next instance comes due (zero when none will) and the series'
// ids by name.
func (l *Lister) Sync(ctx context.Context, now time.Time) (time.Time, map[string]uuid.UUID, error) {
	var next time.Time
	ids := map[string]uuid.UUID{}
	for _, s := range l.series {
		plan, err := s.Plan(now)
		if err != nil {
			return next, ids, fmt.Errorf("series %q: %w", s.Name, err)
		}
		expr, zone := s.Schedule()
		kind := records.SeriesOfMarkets
		if s.IsEvent() {
			kind = records.SeriesOfEvents
		}
		row := records.Series{ID: uuid.New(), Name: s.Name, Kind: kind, Question: s.Question(),
			Category: s.Category(), Schedule: expr, TimeZone: zone, UpdatedAt: now.UTC()}
		if d := s.Description(); d != "" {
			row.Description = &d
		}
		if plan.Next.Name != "" {
			t := plan.Next.Time.UTC()
			row.NextInstanceAt = &t
		}
		if row, err = l.Store.RecordSeries(ctx, row); err != nil {
			return next, ids, fmt.Errorf("while recording series %q: %w", s.Name, err)
		}
		ids[s.Name] = row.ID
		var markets, events []uuid.UUID
		for _, due := range plan.Due {
			if s.IsEvent() {
				id, err := l.listEvent(ctx, s, due, now)
				if err != nil {
					return next, ids, fmt.Errorf("series %q: %w", s.Name, err)
				}
				events = append(events, id)
				continue
			}
			id, err := l.listMarket(ctx, s, due, now)
			if err != nil {
				return next, ids, fmt.Errorf("series %q: %w", s.Name, err)
			}
			markets = append(markets, id)
		}
		if err := l.Store.LinkSeries(ctx, row.ID, markets, events); err != nil {
			return next, ids, fmt.Errorf("while linking the instances of series %q: %w", s.Name, err)
		}
		if !plan.NextDueAt.IsZero() && (next.IsZero() || plan.NextDueAt.Before(next)) {
			next = plan.NextDueAt
		}
	}
	return next, ids, nil
}

// listMarket records the market of a series' instance due, unless it is recorded already, and
// returns its id. The template's fee schedule is given once, when it is created: the instance
// keeps it, as a Market the operator creates keeps its spec.
func (l *Lister) listMarket(ctx context.Context, s *series.Series, due series.Instance, now time.Time) (uuid.UUID, error) {
	if m, err := l.Store.MarketByName(ctx, due.Name); err == nil {
		return m.ID, nil
	}
	spec := s.MarketSpec(due)
	m, created, err := marketspec.Record(ctx, l.Store, uuid.Nil, due.Name, spec, now)
	if err != nil {
		return uuid.Nil, err
	}
	if created && spec.Fees != nil {
		if m, _, err = marketspec.SetFees(ctx, l.Store, m, spec.Fees, now); err != nil {
			return uuid.Nil, err
		}
	}
	if created {
		l.Logger.Info("series instance listed", "series", s.Name, "market", m.ID, "name", due.Name, "closesAt", due.ClosesAt)
	}
	return m.ID, nil
}

// listEvent records the event of a series' instance due, with its outcomes' markets, unless it
// is recorded already, and returns its id; as listMarket, with the event's fee schedule
// (eventrec.SetFees, as the operator's Event reconciler gives an Event its spec.fees).
func (l *Lister) listEvent(ctx context.Context, s *series.Series, due series.Instance, now time.Time) (uuid.UUID, error) {
	if e, err := l.Store.EventByName(ctx, due.Name); err == nil {
		return e.ID, nil
	}
	spec := s.EventSpec(due)
	e, created, err := eventrec.Record(ctx, l.Store, uuid.Nil, due.Name, eventrec.SpecOf(&spec), now)
	if err != nil {
		return uuid.Nil, err
	}
	if created && spec.Fees != nil {
		if e, _, err = eventrec.SetFees(ctx, l.Store, e, spec.Fees, now); err != nil {
			return uuid.Nil, err
		}
	}
	if created {
		l.Logger.Info("series instance listed", "series", s.Name, "event", e.ID, "name", due.Name, "outcomes", len(e.Outcomes), "closesAt", due.ClosesAt)
	}
	return e.ID, nil
}

// Run syncs at each time an instance comes due until ctx ends; a failed sync is logged and tried
// again a second later.
func (l *Lister) Run(ctx context.Context) {
	for {
		wait := time.Minute // at most: a bound on what a clock step can delay
		next, _, err := l.Sync(ctx, time.Now())
		switch {
		case ctx.Err() != nil:
			return
		case err != nil:
			l.Logger.Error("listing series' instances failed; retrying", "error", err)
			wait = time.Second
		case !next.IsZero():
			wait = min(wait, max(time.Until(next), 10*time.Millisecond))
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
	}
}
