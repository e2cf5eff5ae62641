package controllers

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/google/uuid"

	pmxv1 "github.com/pmx-dev/pmx/api/v1alpha1"
	"github.com/pmx-dev/pmx/internal/market/marketspec"
	"github.com/pmx-dev/pmx/internal/records"
	"github.com/pmx-dev/pmx/internal/store/bookkeeping"
	"github.com/pmx-dev/pmx/internal/storetest"
)

// TestArrivals follows the Rebalancer's view of the live shards pass by pass: the shards there at
// its first pass are not owed anything; a new name joined; a name live again after a pass without
// it, or a new process under a live name (a restart no pass saw the lapse of), returned; a shard
// owed markets stops being so when it is no longer live.
func TestArrivals(t *testing.T) {
	t0 := time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)
	sh := func(name string, started time.Time) bookkeeping.Shard {
		return bookkeeping.Shard{Name: name, StartedAt: started}
	}
	b := &Rebalancer{}
	passes := []struct {
		live []bookkeeping.Shard
		want map[string]arrival
	}{
		{[]bookkeeping.Shard{sh("a", t0), sh("b", t0)}, map[string]arrival{}},
		{[]bookkeeping.Shard{sh("a", t0), sh("b", t0), sh("c", t0)}, map[string]arrival{"c": shardJoined}},
		{[]bookkeeping.Shard{sh("a", t0), sh("c", t0)}, map[string]arrival{"c": shardJoined}},
		{[]bookkeeping.Shard{sh("a", t0), sh("b", t0.Add(time.Minute)), sh("c", t0)}, map[string]arrival{"b": shardReturned, "c": shardJoined}},
		{[]bookkeeping.Shard{sh("a", t0.Add(2*time.Minute)), sh("b", t0.Add(time.Minute))}, map[string]arrival{"a": shardReturned, "b": shardReturned}},
	}
	for i, p := range passes {
		got := map[string]arrival{}
		for _, s := range b.arrivals(p.live) {
			if s.arrival != "" {
				got[s.name] = s.arrival
			}
		}
		if len(got) != len(p.want) {
			t.Errorf("pass %d: owed %v, want %v", i, got, p.want)
			continue
		}
		for n, a := range p.want {
			if got[n] != a {
				t.Errorf("pass %d: owed %v, want %v", i, got, p.want)
			}
		}
	}
}

// TestUnits groups OPEN markets into what moves as one: each market of its own, and each event's
// markets together, counting the latest move of any of them and the load their owner reported
// (another shard's report of a market it no longer owns is not counted); a unit not wholly on one
// shard, or past its closesAt, is left out.
func TestUnits(t *testing.T) {
	shard := func(s string) *string { return &s }
	ev1, ev2 := uuid.New(), uuid.New()
	moved := time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)
	rows := []records.Market{
		{ID: uuid.New(), Shard: shard("a")},
		{ID: uuid.New()}, // unowned: the reconciler's to schedule
		{ID: uuid.New(), Shard: shard("a"), EventID: &ev1},
		{ID: uuid.New(), Shard: shard("a"), EventID: &ev1},
		{ID: uuid.New(), Shard: shard("a"), EventID: &ev2},
		{ID: uuid.New(), Shard: shard("b"), EventID: &ev2},    // following its sibling after a failover
		{ID: uuid.New(), Shard: shard("a"), ClosesAt: &moved}, // closing
	}
	b := &Rebalancer{Moves: &MoveLog{}}
	b.Moves.Record(moved, rows[3].ID)
	loads := map[string]map[uuid.UUID]float64{"a": {rows[0].ID: 1.5, rows[2].ID: 2, rows[3].ID: 0.5}, "b": {rows[2].ID: 7}}
	units, byID := b.units(moved.Add(time.Second), rows, loads)
	if len(byID) != len(rows) {
		t.Errorf("%d rows by id, want %d", len(byID), len(rows))
	}
	if len(units) != 2 {
		t.Fatalf("units %+v, want the market on a and event 1", units)
	}
	if u := units[0]; u.event || u.key != rows[0].ID.String() || u.shard != "a" || !u.movedAt.IsZero() || u.load != 1.5 {
		t.Errorf("the market of its own: %+v", u)
	}
	if u := units[1]; !u.event || u.key != ev1.String() || u.shard != "a" || u.size() != 2 ||
		!slices.Equal(u.markets, []uuid.UUID{rows[2].ID, rows[3].ID}) || !u.movedAt.Equal(moved) || u.load != 2.5 {
		t.Errorf("event 1: %+v, want its two markets on a, moved at %v, with the load a reported of them", u, moved)
	}
}

// TestRebalanceWaitsForDraining runs passes against a real store with every market on shard a and
// shard b empty: while b drains (a stopping process handing its markets to the others) no move is
// made, though the spread is off; once a process registered under b's name takes markets again,
// the pass moves one onto it.
func TestRebalanceWaitsForDraining(t *testing.T) {
	ctx := context.Background()
	st := storetest.New(t)
	for _, name := range []string{"a", "b"} {
		if _, err := st.Register(ctx, name, name+":1", ""); err != nil {
			t.Fatal(err)
		}
	}
	for range 4 {
		m, err := marketspec.Create(ctx, st, pmxv1.MarketSpec{Question: "Spread?", Category: "test", LabelA: "Yes", LabelB: "No"}, nil, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		if _, err := st.Assign(ctx, m.ID, "a"); err != nil {
			t.Fatal(err)
		}
	}
	var moves []string
	b := &Rebalancer{Store: st, ShardTTL: time.Minute, Moves: &MoveLog{}, Clock: realClock{},
		Policy: RebalancePolicy{Margin: 0.2, Interval: time.Nanosecond, Cooldown: time.Nanosecond, MaxFraction: 1},
		Move: func(_ context.Context, markets []uuid.UUID, from, to string) (bool, error) {
			moves = append(moves, from+"->"+to)
			return false, nil // nothing moved: the pass stops there, and the test counts the tries
		}}
	if err := st.Drain(ctx, "b"); err != nil {
		t.Fatal(err)
	}
	if err := b.pass(ctx); err != nil {
		t.Fatal(err)
	}
	if len(moves) != 0 {
		t.Fatalf("moved %v while b drains", moves)
	}
	if _, err := st.Register(ctx, "b", "b:2", ""); err != nil { // b's pod back: it takes markets again
		t.Fatal(err)
	}
	if err := b.pass(ctx); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(moves, []string{"a->b"}) {
		t.Errorf("moves %v once b takes markets again, want one a->b", moves)
	}
}
