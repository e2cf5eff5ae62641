// Package boundedmap is a map that holds at most a fixed number of keys: once full, putting a new
// key forgets the oldest one (first in, first out). pmx uses it for what it remembers only to
// save a read from Postgres — the orders a front placed, the orders that left a shard's books —
// where forgetting costs a read and nothing else.
package boundedmap

// Map holds at most its capacity of keys. Its zero value is not usable: make one with New. It is
// not safe for concurrent use.
type Map[K comparable, V any] struct {
	index map[K]V
	// ring holds the keys in the order they were put; once it is full, next is the oldest.
	ring []K
	next int
	size int
}

// New returns a map of at most capacity keys (at least one). It allocates as keys are put.
func New[K comparable, V any](capacity int) *Map[K, V] {
	return &Map[K, V]{index: make(map[K]V), size: max(capacity, 1)}
}

// Put sets the value of k. A new key takes the place of the oldest one when the map is full; a key
// already there keeps its place.
func (m *Map[K, V]) Put(k K, v V) {
	if _, ok := m.index[k]; ok {
		m.index[k] = v
		return
	}
	if len(m.ring) < m.size {
		if len(m.ring) == cap(m.ring) { // grow by doubling, to exactly size at most
			r := make([]K, len(m.ring), min(max(2*cap(m.ring), 8), m.size))
			copy(r, m.ring)
			m.ring = r
		}
		m.ring = append(m.ring, k)
	} else {
		delete(m.index, m.ring[m.next])
		m.ring[m.next] = k
		if m.next++; m.next == m.size {
			m.next = 0
		}
	}
	m.index[k] = v
}

// Get returns the value of k.
func (m *Map[K, V]) Get(k K) (V, bool) {
	v, ok := m.index[k]
	return v, ok
}

// Delete forgets k. Its place in the order is reused when the ring comes round to it; should k be
// put again before then, it is forgotten that little bit early.
func (m *Map[K, V]) Delete(k K) { delete(m.index, k) }

// Len is the number of keys held.
func (m *Map[K, V]) Len() int { return len(m.index) }

// Cap is the most keys the map holds.
func (m *Map[K, V]) Cap() int { return m.size }
