package marketpages

import (
	"context"
	"time"

	"github.com/google/uuid"

	"github.com/pmx-dev/pmx/internal/domain"
	"github.com/pmx-dev/pmx/internal/records"
	"github.com/pmx-dev/pmx/internal/store"
	"github.com/pmx-dev/pmx/internal/store/markets"
)

// The pages name what they read of the database as the small interface below rather than taking
// the whole store: the front (package apiserver) hands them its store, which has it. A market's
// or an event's own page reads through the front's reads (Reads); only the two shared lists read
// the store themselves (snapshot.go).

// Store is everything the pages ask of the database (Config.Store).
type Store interface {
	ListReads
}

// ListReads are the reads of the markets' and the events' lists, a page at a time, newest first.
type ListReads interface {
	// MarketList reads a page of the markets list after the cursor (nil: the first page), each
	// market with the shares traded in it.
	MarketList(ctx context.Context, after *store.Cursor, limit int) ([]markets.ListedMarket, error)
	// EventsPage reads a page of the events with the given status ("": any), after the event
	// created at afterAt with id afterID (the zero values: the first page).
	EventsPage(ctx context.Context, status domain.MarketStatus, afterAt time.Time, afterID uuid.UUID, limit int) ([]records.Event, error)
}
