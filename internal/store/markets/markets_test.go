package markets

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/pmx-dev/pmx/internal/pgtest"
	"github.com/pmx-dev/pmx/internal/records"
	"github.com/pmx-dev/pmx/internal/store/db"
	"github.com/pmx-dev/pmx/internal/store/db/dbtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// TestMarketsAndEvents: a market and an event with its outcomes' markets are read back as they
// were made; a market made twice is db.ErrConflict, and one never made db.ErrNotFound.
func TestMarketsAndEvents(t *testing.T) {
	ctx := context.Background()
	rows := New(dbtest.New(t))
	now := time.Now().UTC().Truncate(time.Microsecond)
	m := records.Market{ID: db.NewID(), Question: "Will it rain?", Category: "weather", LabelA: "Yes", LabelB: "No", CreatedAt: now}
	if _, err := rows.CreateMarket(ctx, m); err != nil {
		t.Fatal(err)
	}
	if _, err := rows.CreateMarket(ctx, m); !errors.Is(err, db.ErrConflict) {
		t.Errorf("the same market made twice: %v, want db.ErrConflict", err)
	}
	got, err := rows.Market(ctx, m.ID)
	if err != nil || got.Question != m.Question || got.Status != "OPEN" || !got.CreatedAt.Equal(now) {
		t.Errorf("Market: %+v, %v; want %q, OPEN, created at %v", got, err, m.Question, now)
	}
	if _, err := rows.Market(ctx, db.NewID()); !errors.Is(err, db.ErrNotFound) {
		t.Errorf("Market of an id never made: %v, want db.ErrNotFound", err)
	}

	e := records.Event{ID: db.NewID(), Name: "cup", Question: "Who wins?", Category: "sport", CreatedAt: now}
	var markets []records.Market
	for _, key := range []string{"red", "blue"} {
		m := records.Market{ID: db.NewID(), Question: "Who wins: " + key + "?", Category: "sport", LabelA: "Yes", LabelB: "No", CreatedAt: now}
		e.Outcomes = append(e.Outcomes, records.EventOutcome{Key: key, Label: key, MarketID: m.ID})
		markets = append(markets, m)
	}
	if _, err := rows.CreateEvent(ctx, e, markets); err != nil {
		t.Fatal(err)
	}
	read, err := rows.EventByName(ctx, "cup")
	if err != nil || read.ID != e.ID || len(read.Outcomes) != 2 || read.Status != "OPEN" {
		t.Fatalf("EventByName: %+v, %v", read, err)
	}
	ms, err := rows.EventMarkets(ctx, read)
	if err != nil || len(ms) != 2 {
		t.Fatalf("EventMarkets: %v, %v", ms, err)
	}
	for i, m := range ms {
		if m.ID != markets[i].ID || m.EventID == nil || *m.EventID != e.ID {
			t.Errorf("the event's market %d is %+v, want %s of event %s", i, m, markets[i].ID, e.ID)
		}
	}
}
