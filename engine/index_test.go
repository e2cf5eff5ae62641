package engine

import (
	"math/rand/v2"
	"testing"
)

// TestIDIndexAgainstMap checks the index against a Go map over random puts and deletes, with ids
// drawn from ranges that make long probe runs and wrap-around likely, through several growths.
func TestIDIndexAgainstMap(t *testing.T) {
	for _, spread := range []uint64{1, 16, 1 << 20, 1 << 63} {
		rng := rand.New(rand.NewPCG(spread, 3))
		x := newIDIndex(1)
		want := map[OrderID]int32{}
		for step := range 50_000 {
			id := OrderID(rng.Uint64N(4096) * spread)
			if s, ok := want[id]; ok {
				if got := x.get(id); got != s {
					t.Fatalf("spread %d step %d: get(%d) = %d, want %d", spread, step, id, got, s)
				}
				if rng.IntN(2) == 0 {
					x.del(id)
					delete(want, id)
				}
			} else {
				if got := x.get(id); got != nilSlot {
					t.Fatalf("spread %d step %d: get(%d) = %d for an absent id", spread, step, id, got)
				}
				s := int32(rng.IntN(1 << 20))
				x.put(id, s)
				want[id] = s
			}
			if x.n != len(want) {
				t.Fatalf("spread %d step %d: %d entries, want %d", spread, step, x.n, len(want))
			}
		}
		for id, s := range want {
			if got := x.get(id); got != s {
				t.Fatalf("spread %d at end: get(%d) = %d, want %d", spread, id, got, s)
			}
		}
	}
}
