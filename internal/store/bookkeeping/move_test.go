package bookkeeping

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/google/uuid"

	"github.com/pmx-dev/pmx/internal/pgtest"
	"github.com/pmx-dev/pmx/internal/records"
	"github.com/pmx-dev/pmx/internal/store/db"
	"github.com/pmx-dev/pmx/internal/store/db/dbtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// register registers each shard name, live from now on.
func register(t *testing.T, st *Book, names ...string) {
	t.Helper()
	for _, name := range names {
		if _, err := st.Register(context.Background(), name, name+":8090", ""); err != nil {
			t.Fatal(err)
		}
	}
}

// TestMove checks the rebalancing move: all the markets move under a new epoch, or none does —
// none when one of them is no longer the named shard's, or is no longer OPEN.
func TestMove(t *testing.T) {
	ctx := context.Background()
	st := New(dbtest.New(t))
	register(t, st, "a", "b", "c")
	var ids []uuid.UUID
	for range 3 {
		m := records.Market{ID: dbtest.Market(t, st.Pool, nil)}
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
	st := New(dbtest.New(t))
	register(t, st, "a", "b")
	var ids []uuid.UUID
	var epochs []int64
	for range 3 {
		m := records.Market{ID: dbtest.Market(t, st.Pool, nil)}
		o, err := st.Assign(ctx, m.ID, "a")
		if err != nil {
			t.Fatal(err)
		}
		ids, epochs = append(ids, m.ID), append(epochs, o.Epoch)
	}
	owner := func(i int) db.Ownership {
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
	for i, want := range []db.Ownership{{Shard: "b", Epoch: epochs[0] + 1}, {Shard: "b", Epoch: epochs[1] + 1}, {Shard: "a", Epoch: epochs[2]}} {
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

// TestMoveRefuses checks what Move and HandOver refuse with nothing moved (issue 51): a target that
// is not a live shard — never registered, stopping, its heartbeat lapsed — and some of an event's
// markets without the others. The whole event moves.
func TestMoveRefuses(t *testing.T) {
	ctx := context.Background()
	st := New(dbtest.New(t))
	register(t, st, "a", "b", "stopping", "stale")
	if err := st.Drain(ctx, "stopping"); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Pool.Exec(ctx, `update shards set heartbeat_at = now() - interval '1 minute' where name = 'stale'`); err != nil {
		t.Fatal(err)
	}
	markets := dbtest.Event(t, st.Pool, "cup", "red", "blue", "green")
	lone := dbtest.Market(t, st.Pool, nil)
	ids := []uuid.UUID{markets[0], markets[1], markets[2], lone}
	epochs := make([]int64, len(ids))
	for i, id := range ids {
		o, err := st.Assign(ctx, id, "a")
		if err != nil {
			t.Fatal(err)
		}
		epochs[i] = o.Epoch
	}
	// unmoved fails t unless every market is still a's under the epoch it had.
	unmoved := func(what string) {
		t.Helper()
		for i, id := range ids {
			if o, err := st.Owner(ctx, id); err != nil || o.Shard != "a" || o.Epoch != epochs[i] {
				t.Fatalf("%s: market %d is %s's at epoch %d (%v), want a's at %d", what, i, o.Shard, o.Epoch, err, epochs[i])
			}
		}
	}
	moves := map[string]func(ids []uuid.UUID, epochs []int64, to string) (bool, error){
		"Move": func(ids []uuid.UUID, _ []int64, to string) (bool, error) { return st.Move(ctx, ids, "a", to) },
		"HandOver": func(ids []uuid.UUID, epochs []int64, to string) (bool, error) {
			return st.HandOver(ctx, ids, epochs, "a", to)
		},
	}
	for name, move := range moves {
		for _, c := range []struct {
			what   string
			n      int // the first n of ids
			to     string
			refuse error
		}{
			{"to a name no shard registered", 1, "nobody", ErrTargetNotLive},
			{"to a stopping shard", 1, "stopping", ErrTargetNotLive},
			{"to a shard whose heartbeat lapsed", 1, "stale", ErrTargetNotLive},
			{"to a shard not live, the whole event", 3, "nobody", ErrTargetNotLive},
			{"one of the event's three markets", 1, "b", ErrSplitsEvent},
			{"two of the event's three markets", 2, "b", ErrSplitsEvent},
		} {
			what := fmt.Sprintf("%s %s", name, c.what)
			moved, err := move(ids[:c.n], epochs[:c.n], c.to)
			if moved || !errors.Is(err, c.refuse) {
				t.Errorf("%s: moved %v (%v), want refused with %v", what, moved, err, c.refuse)
			}
			unmoved(what)
		}
	}
	// The lone market on its own, and the whole event with it, go.
	if moved, err := st.HandOver(ctx, ids[3:], epochs[3:], "a", "b"); err != nil || !moved {
		t.Fatalf("HandOver of a market of no event: moved %v (%v)", moved, err)
	}
	if moved, err := st.Move(ctx, ids[:3], "a", "b"); err != nil || !moved {
		t.Fatalf("Move of the whole event: moved %v (%v)", moved, err)
	}
	if moved, err := st.HandOver(ctx, ids[:3], []int64{epochs[0] + 1, epochs[1] + 1, epochs[2] + 1}, "b", "a"); err != nil || !moved {
		t.Fatalf("HandOver of the whole event back: moved %v (%v)", moved, err)
	}
}
