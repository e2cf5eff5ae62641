package event

import (
	"errors"
	"strings"
	"testing"

	"github.com/pmx-dev/pmx/engine"
)

func outcomes(keys ...string) []Outcome {
	os := make([]Outcome, len(keys))
	for i, k := range keys {
		os[i] = Outcome{Key: k, Label: "Outcome " + k}
	}
	return os
}

func manyKeys(n int) []string {
	keys := make([]string, n)
	for i := range keys {
		keys[i] = "o" + strings.Repeat("x", i)
	}
	return keys
}

func TestValidate(t *testing.T) {
	for _, tc := range []struct {
		name     string
		outcomes []Outcome
		want     string // a fragment of the refusal, "" for none
	}{
		{"two", outcomes("yes-team", "no-team"), ""},
		{"fifty", outcomes(manyKeys(50)...), ""},
		{"one", outcomes("only"), "2 to 50 outcomes, not 1"},
		{"none", nil, "not 0"},
		{"fifty-one", outcomes(manyKeys(51)...), "not 51"},
		{"repeated key", outcomes("a", "b", "a"), `"a" is given twice`},
		{"upper case", outcomes("a", "B"), "not a DNS label"},
		{"leading dash", outcomes("a", "-b"), "not a DNS label"},
		{"trailing dash", outcomes("a", "b-"), "not a DNS label"},
		{"empty key", outcomes("a", ""), "not a DNS label"},
		{"dot", outcomes("a", "b.c"), "not a DNS label"},
		{"64 characters", outcomes("a", strings.Repeat("k", 64)), "not a DNS label"},
		{"63 characters", outcomes("a", strings.Repeat("k", 63)), ""},
		{"empty label", []Outcome{{Key: "a", Label: "A"}, {Key: "b"}}, `"b" needs a label`},
		{"long label", []Outcome{{Key: "a", Label: "A"}, {Key: "b", Label: strings.Repeat("l", MaxLabel+1)}}, `"b" needs a label`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := Validate(tc.outcomes)
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("got %v, want a refusal saying %q", err, tc.want)
			case tc.want != "" && !errors.Is(err, ErrInvalidOutcomes):
				t.Fatalf("refusal %v is not invalid_outcomes", err)
			}
		})
	}
}

func TestParseConversion(t *testing.T) {
	keys := []string{"red", "green", "blue", "gold"}
	for _, tc := range []struct {
		name     string
		listed   []string
		quantity int64
		want     []int
		err      error
	}{
		{"one", []string{"green"}, 5, []int{1}, nil},
		{"as requested", []string{"gold", "red"}, 1, []int{3, 0}, nil},
		{"all", []string{"red", "green", "blue", "gold"}, 2, []int{0, 1, 2, 3}, nil},
		{"largest quantity", []string{"red"}, engine.MaxQuantity, []int{0}, nil},
		{"empty", nil, 1, nil, ErrInvalidOutcomes},
		{"unknown", []string{"red", "purple"}, 1, nil, ErrInvalidOutcomes},
		{"repeated", []string{"red", "blue", "red"}, 1, nil, ErrInvalidOutcomes},
		{"more than the event has", []string{"red", "green", "blue", "gold", "red"}, 1, nil, ErrInvalidOutcomes},
		{"zero quantity", []string{"red"}, 0, nil, ErrInvalidQuantity},
		{"negative quantity", []string{"red"}, -3, nil, ErrInvalidQuantity},
		{"quantity too large", []string{"red"}, engine.MaxQuantity + 1, nil, ErrInvalidQuantity},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := ParseConversion(keys, tc.listed, tc.quantity)
			if !errors.Is(err, tc.err) || (tc.err == nil) != (err == nil) {
				t.Fatalf("err = %v, want %v", err, tc.err)
			}
			if err == nil && (len(c.Listed) != len(tc.want) || c.Quantity != tc.quantity) {
				t.Fatalf("got %+v, want listed %v", c, tc.want)
			}
			for i := range tc.want {
				if c.Listed[i] != tc.want[i] {
					t.Fatalf("listed %v, want %v", c.Listed, tc.want)
				}
			}
		})
	}
}

func TestConversionEffect(t *testing.T) {
	for _, tc := range []struct {
		name    string
		n       int
		listed  []int
		q       int64
		no, yes []int64
		cash    int64
	}{
		{"one of two: NO of a is YES of b", 2, []int{0}, 3, []int64{-3, 0}, []int64{0, 3}, 0},
		{"two of two: a pair back to cash", 2, []int{1, 0}, 4, []int64{-4, -4}, []int64{0, 0}, 400},
		{"one of four", 4, []int{2}, 1, []int64{0, 0, -1, 0}, []int64{1, 1, 0, 1}, 0},
		{"three of four", 4, []int{0, 1, 3}, 2, []int64{-2, -2, 0, -2}, []int64{0, 0, 2, 0}, 400},
		{"all of five", 5, []int{0, 1, 2, 3, 4}, 1, []int64{-1, -1, -1, -1, -1}, []int64{0, 0, 0, 0, 0}, 400},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := Conversion{Listed: tc.listed, Quantity: tc.q}.Effect(tc.n)
			for i := range tc.n {
				if e.NO[i] != tc.no[i] || e.YES[i] != tc.yes[i] {
					t.Fatalf("effect %+v, want NO %v YES %v", e, tc.no, tc.yes)
				}
			}
			if e.Cash != tc.cash {
				t.Fatalf("cash %d, want %d", e.Cash, tc.cash)
			}
		})
	}
}

func TestVoidPayout(t *testing.T) {
	for _, tc := range []struct {
		n       int
		yes, no int64
	}{
		{2, 50, 50}, {3, 33, 66}, {4, 25, 75}, {7, 14, 84}, {50, 2, 98},
	} {
		if yes, no := VoidPayout(tc.n); yes != tc.yes || no != tc.no {
			t.Errorf("VoidPayout(%d) = %d, %d; want %d, %d", tc.n, yes, no, tc.yes, tc.no)
		}
	}
	// A void never pays more than the collateral: for every n, a set of complete pairs in every
	// market (the ledger's starting point) is paid at most what it cost, the rest kept.
	for n := MinOutcomes; n <= MaxOutcomes; n++ {
		tot := Totals{YES: make([]int64, n), NO: make([]int64, n)}
		for i := range n {
			tot.YES[i], tot.NO[i] = 1, 1
		}
		paid, rest, err := tot.Void()
		if err != nil {
			t.Fatalf("n=%d: %v", n, err)
		}
		if paid+rest != int64(n)*Payout || rest < 0 || (100%n == 0) != (rest == 0) {
			t.Errorf("n=%d: void paid %d and left %d of %d", n, paid, rest, n*Payout)
		}
	}
}

// TestConversionBeforeVoid checks the consequence docs/architecture.md §3 states (issue 51): a
// unit of NO shares of k outcomes, converted before a void, gets (k − 1) × (100 − n × ⌊100/n⌋)
// cents more than it would have been paid in the void, exactly what the exchange's remainder
// loses; the event still pays every holder left at most what it keeps.
func TestConversionBeforeVoid(t *testing.T) {
	for n := MinOutcomes; n <= MaxOutcomes; n++ {
		yes, no := VoidPayout(n)
		before := Totals{YES: make([]int64, n), NO: make([]int64, n)} // a pair in every market
		for i := range n {
			before.YES[i], before.NO[i] = 1, 1
		}
		_, kept, err := before.Void()
		if err != nil {
			t.Fatal(err)
		}
		for k := 1; k <= n; k++ {
			listed := make([]int, k)
			for i := range listed {
				listed[i] = i
			}
			e := Conversion{Listed: listed, Quantity: 1}.Effect(n)
			after := Totals{YES: make([]int64, n), NO: make([]int64, n)}
			var held, converted int64 // what the void pays the converter, without and with converting
			for i := range n {
				after.YES[i], after.NO[i] = before.YES[i]+e.YES[i], before.NO[i]+e.NO[i]
				held += -e.NO[i] * no
				converted += e.YES[i] * yes
			}
			converted += e.Cash
			gain := int64(k-1) * (Payout - int64(n)*yes)
			if converted-held != gain {
				t.Fatalf("n=%d k=%d: converting gains %d cents over the void, want %d", n, k, converted-held, gain)
			}
			if err := after.Check(int64(n)*Payout - e.Cash); err != nil {
				t.Fatalf("n=%d k=%d: %v", n, k, err)
			}
			_, left, err := after.Void()
			if err != nil || left != kept-gain || left < 0 {
				t.Fatalf("n=%d k=%d: the remainder is %d after the conversion (%v), want %d less %d", n, k, left, err, kept, gain)
			}
		}
	}
}

func TestCheckRefusesAnUnbalancedLedger(t *testing.T) {
	tot := Totals{YES: []int64{2, 1, 1}, NO: []int64{1, 1, 1}}
	if err := tot.Check(300); err == nil || !strings.Contains(err.Error(), "if outcome 0 won") {
		t.Fatalf("Check = %v, want the world where outcome 0 wins named", err)
	}
	if _, _, err := tot.Void(); err == nil {
		t.Fatal("Void paid out a ledger that does not balance")
	}
}
