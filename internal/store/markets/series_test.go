package markets

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/pmx-dev/pmx/internal/records"
	"github.com/pmx-dev/pmx/internal/store/db"
	"github.com/pmx-dev/pmx/internal/store/db/dbtest"
)

// TestSeries: a series is recorded once under its name (a second record updates it, keeping its
// id), its markets and an event's markets are linked to it, its live instances are listed soonest
// to close first, and an ended series is no longer listed.
func TestSeries(t *testing.T) {
	ctx := context.Background()
	rows := New(dbtest.New(t))
	now := time.Now().UTC().Truncate(time.Microsecond)
	next := now.Add(time.Hour)
	s := records.Series{ID: db.NewID(), Name: "rain", Kind: records.SeriesOfMarkets, Question: "Rain on {date}?",
		Category: "weather", Schedule: "0 18 * * *", TimeZone: "Europe/Paris", NextInstanceAt: &next, UpdatedAt: now}
	first, err := rows.RecordSeries(ctx, s)
	if err != nil || first.ID != s.ID || !first.CreatedAt.Equal(now) {
		t.Fatalf("RecordSeries: %+v, %v", first, err)
	}
	again := s
	again.ID, again.Schedule, again.UpdatedAt = db.NewID(), "0 19 * * *", now.Add(time.Minute)
	second, err := rows.RecordSeries(ctx, again)
	if err != nil || second.ID != s.ID || second.Schedule != "0 19 * * *" || !second.CreatedAt.Equal(now) {
		t.Fatalf("RecordSeries again: %+v, %v; want id %s kept", second, err, s.ID)
	}

	var ids []records.Market
	for i, closes := range []time.Time{now.Add(2 * time.Hour), now.Add(time.Hour)} {
		name := []string{"rain-b", "rain-a"}[i]
		m := records.Market{ID: db.NewID(), Name: &name, Question: "q", Category: "c", LabelA: "Yes", LabelB: "No", ClosesAt: &closes, CreatedAt: now}
		if _, err := rows.CreateMarket(ctx, m); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, m)
	}
	if err := rows.LinkSeries(ctx, s.ID, []uuid.UUID{ids[0].ID, ids[1].ID}, nil); err != nil {
		t.Fatal(err)
	}
	m, err := rows.Market(ctx, ids[0].ID)
	if err != nil || m.SeriesID == nil || *m.SeriesID != s.ID {
		t.Fatalf("linked market's series: %v, %v", m.SeriesID, err)
	}
	instances, err := rows.SeriesInstances(ctx, second)
	if err != nil || len(instances) != 2 || instances[0].Name != "rain-a" || instances[1].ID != ids[0].ID {
		t.Fatalf("SeriesInstances: %+v, %v", instances, err)
	}

	// An event's markets are linked with it.
	e := records.Event{ID: db.NewID(), Name: "cup", Question: "Who wins?", Category: "sport", CreatedAt: now}
	var markets []records.Market
	for _, key := range []string{"red", "blue"} {
		m := records.Market{ID: db.NewID(), Question: key, Category: "sport", LabelA: "Yes", LabelB: "No", CreatedAt: now}
		e.Outcomes = append(e.Outcomes, records.EventOutcome{Key: key, Label: key, MarketID: m.ID})
		markets = append(markets, m)
	}
	if _, err := rows.CreateEvent(ctx, e, markets); err != nil {
		t.Fatal(err)
	}
	events := records.Series{ID: db.NewID(), Name: "cups", Kind: records.SeriesOfEvents, Question: "Who wins on {date}?",
		Category: "sport", Schedule: "@weekly", TimeZone: "UTC", UpdatedAt: now}
	if _, err := rows.RecordSeries(ctx, events); err != nil {
		t.Fatal(err)
	}
	if err := rows.LinkSeries(ctx, events.ID, nil, []uuid.UUID{e.ID}); err != nil {
		t.Fatal(err)
	}
	for _, mk := range markets {
		if m, err := rows.Market(ctx, mk.ID); err != nil || m.SeriesID == nil || *m.SeriesID != events.ID {
			t.Errorf("event's market %s: series %v, %v", mk.ID, m.SeriesID, err)
		}
	}
	if got, err := rows.Event(ctx, e.ID); err != nil || got.SeriesID == nil || *got.SeriesID != events.ID {
		t.Errorf("the event: series %v, %v", got.SeriesID, err)
	}
	if page, err := rows.EventsPage(ctx, "", time.Time{}, uuid.Nil, 10); err != nil || len(page) != 1 || page[0].SeriesID == nil || *page[0].SeriesID != events.ID {
		t.Errorf("EventsPage: %+v, %v; want the event with its series", page, err)
	}
	if in, err := rows.SeriesInstances(ctx, events); err != nil || len(in) != 1 || in[0].ID != e.ID {
		t.Errorf("event series' instances: %+v, %v", in, err)
	}

	page, err := rows.SeriesPage(ctx, nil, 10)
	if err != nil || len(page) != 2 || page[0].ID != events.ID && page[1].ID != events.ID {
		t.Fatalf("SeriesPage: %+v, %v", page, err)
	}
	if err := rows.EndSeries(ctx, "rain", now); err != nil {
		t.Fatal(err)
	}
	if page, err := rows.SeriesPage(ctx, nil, 10); err != nil || len(page) != 1 || page[0].Name != "cups" {
		t.Errorf("SeriesPage after the end of rain: %+v, %v", page, err)
	}
	if _, err := rows.Series(ctx, db.NewID()); !errors.Is(err, db.ErrNotFound) {
		t.Errorf("Series of an id never made: %v", err)
	}
}
