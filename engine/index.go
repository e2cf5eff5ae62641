package engine

// idIndex maps the id of every resting order to its slot: an open-addressing hash table with
// linear probing and backward-shift deletion. It replaces a Go map on the hot path, where the map's
// generic hashing cost about 40% of a submission (BenchmarkRealisticStream, see README).
// It grows by doubling at half load, so a book in steady state never allocates.
type idIndex struct {
	entries []indexEntry
	mask    uint64
	shift   uint
	n       int
}

type indexEntry struct {
	id   OrderID
	slot int32 // slot + 1; 0 marks an empty entry, so any id (0 included) can be stored
}

func newIDIndex(capacity int) idIndex {
	size := 16
	for size < 2*capacity {
		size *= 2
	}
	var x idIndex
	x.init(size)
	return x
}

func (x *idIndex) init(size int) {
	x.entries = make([]indexEntry, size)
	x.mask = uint64(size - 1)
	x.shift = 64
	for s := size; s > 1; s >>= 1 {
		x.shift--
	}
}

// home is the entry an id hashes to: Fibonacci hashing spreads sequential ids evenly.
func (x *idIndex) home(id OrderID) uint64 { return (uint64(id) * 0x9E3779B97F4A7C15) >> x.shift }

// get returns the slot of id, or nilSlot.
func (x *idIndex) get(id OrderID) int32 {
	for i := x.home(id); ; i = (i + 1) & x.mask {
		e := &x.entries[i]
		if e.slot == 0 {
			return nilSlot
		}
		if e.id == id {
			return e.slot - 1
		}
	}
}

// put records the slot of an id that is not in the index.
func (x *idIndex) put(id OrderID, slot int32) {
	if 2*(x.n+1) > len(x.entries) {
		x.grow()
	}
	i := x.home(id)
	for x.entries[i].slot != 0 {
		i = (i + 1) & x.mask
	}
	x.entries[i] = indexEntry{id: id, slot: slot + 1}
	x.n++
}

// del removes id, which must be present, then shifts later entries of its probe run back so that
// lookups never need tombstones.
func (x *idIndex) del(id OrderID) {
	i := x.home(id)
	for x.entries[i].id != id || x.entries[i].slot == 0 {
		i = (i + 1) & x.mask
	}
	for j := (i + 1) & x.mask; x.entries[j].slot != 0; j = (j + 1) & x.mask {
		// An entry may fill the hole at i only if its home is not cyclically in (i, j].
		if h := x.home(x.entries[j].id); (j-h)&x.mask >= (j-i)&x.mask {
			x.entries[i] = x.entries[j]
			i = j
		}
	}
	x.entries[i] = indexEntry{}
	x.n--
}

func (x *idIndex) grow() {
	old := x.entries
	x.init(2 * len(old))
	for _, e := range old {
		if e.slot != 0 {
			i := x.home(e.id)
			for x.entries[i].slot != 0 {
				i = (i + 1) & x.mask
			}
			x.entries[i] = e
		}
	}
}

// add adds delta to the number an index used as a counter keeps for id in its slot, and removes id
// when the number comes to 0: per-account counts of resting orders (Book.OpenOrders), at the cost
// of a probe where a Go map cost a submission a third of its time.
func (x *idIndex) add(id OrderID, delta int32) {
	for i := x.home(id); ; i = (i + 1) & x.mask {
		e := &x.entries[i]
		if e.slot == 0 {
			break
		}
		if e.id == id {
			if n := e.slot - 1 + delta; n != 0 {
				e.slot = n + 1
			} else {
				x.del(id)
			}
			return
		}
	}
	x.put(id, delta)
}
