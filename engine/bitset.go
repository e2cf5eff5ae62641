package engine

import "math/bits"

// bitset marks the non-empty levels of one side of the book, so that the best level and the next
// one out are found with one or two word operations instead of a scan over 99 levels.
// Bit k stands for key k; only bits 1..99 are ever set.
type bitset [2]uint64

func (s *bitset) set(p int)   { s[p>>6] |= 1 << uint(p&63) }
func (s *bitset) clear(p int) { s[p>>6] &^= 1 << uint(p&63) }

// best is the highest marked price, or 0 when there is none.
func (s *bitset) best() int { return s.prev(Payout) }

// prev is the highest marked price below p, or 0 when there is none.
func (s *bitset) prev(p int) int {
	if p > 64 {
		if m := s[1] & (1<<uint(p-64) - 1); m != 0 {
			return 127 - bits.LeadingZeros64(m)
		}
		p = 64
	}
	// For p == 64 the shift yields 0 and the mask becomes all ones.
	if m := s[0] & (1<<uint(p) - 1); m != 0 {
		return 63 - bits.LeadingZeros64(m)
	}
	return 0
}
