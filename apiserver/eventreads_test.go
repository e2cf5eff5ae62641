package apiserver

import "testing"

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
