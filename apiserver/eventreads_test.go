package apiserver

import (
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/pmx-dev/pmx/engine"
	"github.com/pmx-dev/pmx/internal/event"
	"github.com/pmx-dev/pmx/internal/eventrec"
	"github.com/pmx-dev/pmx/internal/exchange"
	"github.com/pmx-dev/pmx/internal/pgtest"
	"github.com/pmx-dev/pmx/internal/shard"
	"github.com/pmx-dev/pmx/internal/shardclient"
	"github.com/pmx-dev/pmx/internal/shardserver"
	"github.com/pmx-dev/pmx/internal/store"
)

func TestYesMid(t *testing.T) {
	p := func(v int) *int { return &v }
	for _, tc := range []struct {
		name     string
		bid, ask *int
		want     float64
	}{
		{"two-sided", p(40), p(45), 42.5},
		{"two-sided, whole", p(40), p(42), 41},
		{"a lone bid counts the ask at 100", p(40), nil, 70},
		{"a lone ask counts the bid at 0", nil, p(40), 20},
		{"an empty book is 50", nil, nil, 50},
		{"the extremes", p(98), p(99), 98.5},
		{"a lone ask at 1", nil, p(1), 0.5},
		{"a lone bid at 99", p(99), nil, 99.5},
	} {
		if got := YesMid(tc.bid, tc.ask); got != tc.want {
			t.Errorf("%s: YesMid = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// TestEventReadCostIsFlat reads an event of 2 outcomes and one of 50 through the distributed
// front's router, against a real shard process's internal API and Postgres (issue 51): each read
// costs the same — the event's row and its markets' owners, two Postgres round trips of the
// front's pool, and one call to the shard that owns the markets — whatever the number of outcomes.
// Read one by one, each outcome cost an owner and an address read and a call of its own: 101
// round trips and 50 calls for the event of 50.
func TestEventReadCostIsFlat(t *testing.T) {
	ctx := t.Context()
	url := pgtest.NewDatabase(t, pgtest.Shared(t))
	open := func() *store.Store {
		st, err := store.Open(ctx, url)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(st.Close)
		return st
	}
	st, front := open(), open() // the shard's, and the front's, whose round trips are counted
	if _, _, err := st.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.NewTextHandler(testLog{t}, &slog.HandlerOptions{Level: slog.LevelWarn}))
	sh := shard.New(shard.Config{Store: st, Name: "shard-1", Logger: log})
	t.Cleanup(sh.Stop)
	var calls atomic.Int64 // the front's calls to the shard
	h := shardserver.Server{Shard: sh, Store: st, Token: "internal-token", Logger: log}.Handler()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	if _, err := st.Register(ctx, "shard-1", strings.TrimPrefix(srv.URL, "http://"), ""); err != nil {
		t.Fatal(err)
	}
	s := &Server{cfg: Config{Store: front, Exchange: &shardclient.Router{Store: front, Token: "internal-token"}}}
	account, err := st.CreateAccount(ctx, "bidder", 1_000_000, time.Now())
	if err != nil {
		t.Fatal(err)
	}

	type cost struct{ roundTrips, calls int64 }
	read := func(outcomes int) cost {
		t.Helper()
		spec := eventrec.Spec{Question: fmt.Sprintf("Which of %d?", outcomes), Category: "test"}
		for i := range outcomes {
			spec.Outcomes = append(spec.Outcomes, event.Outcome{Key: fmt.Sprintf("o%d", i), Label: fmt.Sprintf("Outcome %d", i)})
		}
		e, _, err := eventrec.Record(ctx, st, uuid.Nil, fmt.Sprintf("of-%d", outcomes), spec, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range e.Outcomes {
			if _, err := st.Assign(ctx, o.MarketID, "shard-1"); err != nil {
				t.Fatal(err)
			}
		}
		// A bid on the last outcome, for the read to show; the shard loads every market on its
		// first read, which is not the front's cost.
		last := e.Outcomes[outcomes-1].MarketID
		if _, err := sh.Place(ctx, exchange.PlaceRequest{Account: account.ID, Market: last, Side: engine.Buy, Outcome: engine.Yes, Price: 30, Quantity: 1}); err != nil {
			t.Fatal(err)
		}
		if _, err := s.ReadEvent(ctx, e.ID); err != nil {
			t.Fatal(err)
		}
		acquired, called := front.Pool.Stat().AcquireCount(), calls.Load()
		d, err := s.ReadEvent(ctx, e.ID)
		if err != nil {
			t.Fatal(err)
		}
		c := cost{roundTrips: front.Pool.Stat().AcquireCount() - acquired, calls: calls.Load() - called}
		if len(d.Outcomes) != outcomes || d.Outcomes[outcomes-1].BestBid == nil || *d.Outcomes[outcomes-1].BestBid != 30 ||
			d.Outcomes[0].BestBid != nil {
			t.Fatalf("the event of %d outcomes read as %+v", outcomes, d)
		}
		t.Logf("an event of %d outcomes: %d Postgres round trips of the front, %d calls to the shard", outcomes, c.roundTrips, c.calls)
		return c
	}
	two, fifty := read(2), read(50)
	if two != fifty || fifty.calls != 1 || fifty.roundTrips > 2 {
		t.Errorf("an event of 2 outcomes costs %+v, one of 50 %+v: want both the same, one call to the one shard and at most 2 round trips", two, fifty)
	}
}
