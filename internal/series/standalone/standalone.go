// Package standalone lists series' instances in the standalone exchange (pmx dev), which has no
// operator: it does what the MarketSeries controller does there (controllers/), through the same
// rules (package series): at each of a series' times it records every instance due that is not
// recorded yet, under its name (marketspec.Record, so never twice, whatever restarts), and links
// it to the series. Only series of markets: a series of events needs the operator.
package standalone

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/google/uuid"

	"github.com/pmx-dev/pmx/api/v1alpha1"
	"github.com/pmx-dev/pmx/internal/market/marketspec"
	"github.com/pmx-dev/pmx/internal/records"
	"github.com/pmx-dev/pmx/internal/series"
)

// Rows is what the lister asks of the database (*store.Store has it): markets' rows, and the
// series' rows and links.
type Rows interface {
	marketspec.Rows
	RecordSeries(ctx context.Context, s records.Series) (records.Series, error)
	LinkSeries(ctx context.Context, series uuid.UUID, markets, events []uuid.UUID) error
}

// Lister lists the instances of a set of series as their schedules make them due.
type Lister struct {
	Store  Rows
	Logger *slog.Logger
	series []*series.Series
}

// New reads the MarketSeries manifests, refusing any whose spec cannot be followed or that lists
// events; the error names the series and the field.
func New(st Rows, manifests []v1alpha1.MarketSeries, log *slog.Logger) (*Lister, error) {
	l := &Lister{Store: st, Logger: log}
	var errs []error
	for _, ms := range manifests {
		s, err := series.New(ms.Name, ms.Spec)
		switch {
		case err != nil:
			errs = append(errs, fmt.Errorf("series %q: %w", ms.Name, err))
		case s.IsEvent():
			errs = append(errs, fmt.Errorf("series %q: pmx dev lists series of markets only; a series of events needs the operator (leave it out here)", ms.Name))
		default:
			l.series = append(l.series, s)
		}
	}
	return l, errors.Join(errs...)
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
		row := records.Series{ID: uuid.New(), Name: s.Name, Kind: records.SeriesOfMarkets, Question: s.Question(),
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
		var markets []uuid.UUID
		for _, due := range plan.Due {
			m, err := l.Store.MarketByName(ctx, due.Name)
			if err != nil {
				var created bool
				spec := s.MarketSpec(due)
				if m, created, err = marketspec.Record(ctx, l.Store, uuid.Nil, due.Name, spec, now); err != nil {
					return next, ids, fmt.Errorf("series %q: %w", s.Name, err)
				}
				if created && spec.Fees != nil { // the template's schedule, given once: the instance keeps it
					if m, _, err = marketspec.SetFees(ctx, l.Store, m, spec.Fees, now); err != nil {
						return next, ids, fmt.Errorf("series %q: %w", s.Name, err)
					}
				}
				if created {
					l.Logger.Info("series instance listed", "series", s.Name, "market", m.ID, "name", due.Name, "closesAt", due.ClosesAt)
				}
			}
			markets = append(markets, m.ID)
		}
		if err := l.Store.LinkSeries(ctx, row.ID, markets, nil); err != nil {
			return next, ids, fmt.Errorf("while linking the instances of series %q: %w", s.Name, err)
		}
		if !plan.NextDueAt.IsZero() && (next.IsZero() || plan.NextDueAt.Before(next)) {
			next = plan.NextDueAt
		}
	}
	return next, ids, nil
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
