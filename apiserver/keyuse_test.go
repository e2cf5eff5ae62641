package apiserver

import (
	"slices"
	"testing"
	"time"

	"github.com/google/uuid"
)

// TestKeyUse checks when keys' uses fall due to be written: a key's first use at once, later ones
// once keyUseEvery has passed since its last write, each key on its own clock, and always the
// latest use noted.
func TestKeyUse(t *testing.T) {
	u := newKeyUse()
	a, b := uuid.New(), uuid.New()
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	due := func(now time.Time, want ...uuid.UUID) {
		t.Helper()
		ids, _ := u.take(now, false)
		slices.SortFunc(ids, func(x, y uuid.UUID) int { return slices.Compare(x[:], y[:]) })
		slices.SortFunc(want, func(x, y uuid.UUID) int { return slices.Compare(x[:], y[:]) })
		if !slices.Equal(ids, want) {
			t.Fatalf("at %v: due %v, want %v", now.Sub(t0), ids, want)
		}
	}
	woke := func() bool {
		select {
		case <-u.wake:
			return true
		default:
			return false
		}
	}
	u.note(a, t0)
	if !woke() {
		t.Fatal("a key's first use did not wake the writer")
	}
	due(t0, a)
	u.note(a, t0.Add(time.Second))
	u.note(a, t0.Add(2*time.Second))
	u.note(b, t0.Add(2*time.Second))
	if !woke() {
		t.Fatal("another key's first use did not wake the writer")
	}
	due(t0.Add(2*time.Second), b) // a was written 2 s ago: it waits for its minute
	due(t0.Add(keyUseEvery - time.Millisecond))
	ids, at := u.take(t0.Add(keyUseEvery), false)
	if !slices.Equal(ids, []uuid.UUID{a}) || !at[0].Equal(t0.Add(2*time.Second)) {
		t.Fatalf("after a minute: %v at %v, want a at its latest use", ids, at)
	}
	u.note(b, t0.Add(3*time.Second))
	ids, _ = u.take(t0.Add(4*time.Second), true) // Close writes everything left
	if !slices.Equal(ids, []uuid.UUID{b}) {
		t.Fatalf("the final write: %v, want b", ids)
	}
	if len(u.pending) != 0 {
		t.Fatalf("%d uses left after the final write", len(u.pending))
	}
}
