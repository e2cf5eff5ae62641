package store

import (
	"context"
	"testing"

	"github.com/google/uuid"

	"github.com/pmx-dev/pmx/internal/records"
)

// TestMove checks the rebalancing move: all the markets move under a new epoch, or none does —
// none when one of them is no longer the named shard's, or is no longer OPEN.
func TestMove(t *testing.T) {
	ctx := context.Background()
	st := newTestStore(t)
	var ids []uuid.UUID
	for range 3 {
		m, err := st.CreateMarket(ctx, records.Market{ID: NewID(), Question: "Moves?", Category: "test", Status: "OPEN", LabelA: "Yes", LabelB: "No"})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := st.Assign(ctx, m.ID, "a"); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, m.ID)
	}
	owners := func() (shards []string, epochs []int64) {
		t.Helper()
		for _, id := range ids {
			o, err := st.Owner(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			shards, epochs = append(shards, o.Shard), append(epochs, o.Epoch)
		}
		return shards, epochs
	}
	check := func(what string, moved, want bool, err error, shards ...string) {
		t.Helper()
		got, _ := owners()
		if err != nil || moved != want || len(got) != len(shards) {
			t.Fatalf("%s: moved %v (%v), want %v", what, moved, err, want)
		}
		for i := range got {
			if got[i] != shards[i] {
				t.Errorf("%s: owners %v, want %v", what, got, shards)
				break
			}
		}
	}

	_, before := owners()
	moved, err := st.Move(ctx, ids[:2], "a", "b")
	check("two of a's markets to b", moved, true, err, "b", "b", "a")
	if _, after := owners(); after[0] != before[0]+1 || after[1] != before[1]+1 || after[2] != before[2] {
		t.Errorf("epochs %v after the move, %v before: want the moved ones one higher", after, before)
	}

	moved, err = st.Move(ctx, ids, "b", "c") // the third is a's
	check("markets of two owners", moved, false, err, "b", "b", "a")

	if _, err := st.Pool.Exec(ctx, `update markets set status = 'CLOSED' where id = $1`, ids[1]); err != nil {
		t.Fatal(err)
	}
	moved, err = st.Move(ctx, ids[:2], "b", "c")
	check("a market no longer OPEN", moved, false, err, "b", "b", "a")

	moved, err = st.Move(ctx, ids[:1], "b", "c")
	check("one market", moved, true, err, "c", "b", "a")
}

// TestHandOver checks the planned handoff's move: the owner's markets go to the new shard under
// the next epoch, all or none — none when one of them is held under an epoch that is no longer
// its own (the owner lost it meanwhile), is another shard's, or is no longer OPEN.
func TestHandOver(t *testing.T) {
	ctx := context.Background()
	st := newTestStore(t)
	var ids []uuid.UUID
	var epochs []int64
	for range 3 {
		m, err := st.CreateMarket(ctx, records.Market{ID: NewID(), Question: "Handed?", Category: "test", Status: "OPEN", LabelA: "Yes", LabelB: "No"})
		if err != nil {
			t.Fatal(err)
		}
		o, err := st.Assign(ctx, m.ID, "a")
		if err != nil {
			t.Fatal(err)
		}
		ids, epochs = append(ids, m.ID), append(epochs, o.Epoch)
	}
	owner := func(i int) Ownership {
		t.Helper()
		o, err := st.Owner(ctx, ids[i])
		if err != nil {
			t.Fatal(err)
		}
		return o
	}
	for _, c := range []struct {
		name   string
		ids    []uuid.UUID
		epochs []int64
		from   string
		want   bool
	}{
		{"a stale epoch", ids[:2], []int64{epochs[0], epochs[1] - 1}, "a", false},
		{"another shard's", ids[:2], epochs[:2], "c", false},
		{"two of a's", ids[:2], epochs[:2], "a", true},
		{"the same epochs again", ids[:2], epochs[:2], "a", false}, // b holds them under the next
	} {
		moved, err := st.HandOver(ctx, c.ids, c.epochs, c.from, "b")
		if err != nil || moved != c.want {
			t.Fatalf("%s: moved %v (%v), want %v", c.name, moved, err, c.want)
		}
	}
	for i, want := range []Ownership{{Shard: "b", Epoch: epochs[0] + 1}, {Shard: "b", Epoch: epochs[1] + 1}, {Shard: "a", Epoch: epochs[2]}} {
		if o := owner(i); o.Shard != want.Shard || o.Epoch != want.Epoch {
			t.Errorf("market %d: owner %s at epoch %d, want %s at %d", i, o.Shard, o.Epoch, want.Shard, want.Epoch)
		}
	}
	if _, err := st.Pool.Exec(ctx, `update markets set status = 'CLOSED' where id = $1`, ids[2]); err != nil {
		t.Fatal(err)
	}
	if moved, err := st.HandOver(ctx, ids[2:], epochs[2:], "a", "b"); err != nil || moved {
		t.Errorf("a market no longer OPEN: moved %v (%v), want false", moved, err)
	}
	if _, err := st.HandOver(ctx, ids[:1], nil, "a", "b"); err == nil {
		t.Error("a handoff without the epochs: no error")
	}
}
