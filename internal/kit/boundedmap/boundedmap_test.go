package boundedmap

import (
	"math/rand/v2"
	"testing"
)

func TestEvictsOldestFirst(t *testing.T) {
	m := New[int, string](3)
	for i := range 5 {
		m.Put(i, string(rune('a'+i)))
	}
	if m.Len() != 3 {
		t.Fatalf("Len %d, want 3", m.Len())
	}
	for i := range 5 {
		v, ok := m.Get(i)
		if want := i >= 2; ok != want || ok && v != string(rune('a'+i)) {
			t.Errorf("Get(%d) = %q, %v; want present %v", i, v, ok, want)
		}
	}
}

func TestPutAgainKeepsPlace(t *testing.T) {
	m := New[int, int](2)
	m.Put(1, 1)
	m.Put(2, 2)
	m.Put(1, 10) // updated, still the oldest
	m.Put(3, 3)
	if _, ok := m.Get(1); ok {
		t.Error("key 1 survived: an update took a new place")
	}
	if v, _ := m.Get(2); v != 2 {
		t.Errorf("Get(2) = %d", v)
	}
}

func TestDelete(t *testing.T) {
	m := New[int, int](2)
	m.Put(1, 1)
	m.Delete(1)
	if _, ok := m.Get(1); ok || m.Len() != 0 {
		t.Fatal("deleted key still there")
	}
	m.Put(2, 2)
	m.Put(3, 3) // takes the place of 1, which was deleted: 2 stays
	if _, ok := m.Get(2); !ok || m.Len() != 2 {
		t.Fatalf("Len %d, want 2 and key 2 kept", m.Len())
	}
}

// TestBounded checks the invariants under random use against a model: never more than the
// capacity, and every key held is one of the last capacity keys put.
func TestBounded(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, size := range []int{1, 2, 7, 64} {
		m := New[int, int](size)
		var order []int // distinct keys in the order they first took a place
		for range 5000 {
			k := rng.IntN(3 * size)
			switch rng.IntN(4) {
			case 0:
				m.Delete(k)
			default:
				if _, ok := m.Get(k); !ok {
					order = append(order, k)
				}
				m.Put(k, k)
			}
			if m.Len() > size || cap(m.ring) > size {
				t.Fatalf("size %d: Len %d, ring capacity %d", size, m.Len(), cap(m.ring))
			}
		}
		recent := map[int]bool{}
		for _, k := range order[max(0, len(order)-size):] {
			recent[k] = true
		}
		for k := range m.index {
			if !recent[k] {
				t.Fatalf("size %d: key %d held, but not among the last %d put", size, k, size)
			}
		}
	}
}
