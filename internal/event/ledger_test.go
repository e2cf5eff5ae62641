package event

import (
	"math/rand/v2"
	"testing"
)

// account is one trader's holdings in the simulated event.
type account struct {
	cash    int64
	yes, no []int64
}

// ledger simulates an event's markets the way the exchange moves money: a trade mints a pair (a
// YES buyer and a NO buyer pay 100 together), burns one (a YES seller and a NO seller take 100
// together) or moves shares between holders; a conversion applies Effect.
type ledger struct {
	n          int
	accounts   []*account
	collateral int64
	granted    int64
}

func newLedger(n, accounts int, grant int64) *ledger {
	l := &ledger{n: n}
	for range accounts {
		l.accounts = append(l.accounts, &account{cash: grant, yes: make([]int64, n), no: make([]int64, n)})
		l.granted += grant
	}
	return l
}

func (l *ledger) totals() Totals {
	t := Totals{YES: make([]int64, l.n), NO: make([]int64, l.n)}
	for _, a := range l.accounts {
		for i := range l.n {
			t.YES[i] += a.yes[i]
			t.NO[i] += a.no[i]
		}
	}
	return t
}

// step makes one random move that the exchange would allow, and says what it was.
func (l *ledger) step(r *rand.Rand) string {
	a, b := l.accounts[r.IntN(len(l.accounts))], l.accounts[r.IntN(len(l.accounts))]
	i, p, q := r.IntN(l.n), int64(1+r.IntN(99)), int64(1+r.IntN(20))
	switch r.IntN(4) {
	case 0: // a buys YES at p, b buys NO at 100 − p: a pair is minted
		if a.cash < p*q || b.cash < (Payout-p)*q || a == b && a.cash < Payout*q {
			return "skip"
		}
		a.cash -= p * q
		b.cash -= (Payout - p) * q
		a.yes[i] += q
		b.no[i] += q
		l.collateral += Payout * q
		return "mint"
	case 1: // a sells YES, b sells NO: a pair is burned
		if a.yes[i] < q || b.no[i] < q {
			return "skip"
		}
		a.yes[i] -= q
		b.no[i] -= q
		a.cash += p * q
		b.cash += (Payout - p) * q
		l.collateral -= Payout * q
		return "burn"
	case 2: // a sells shares of one side to b
		held := &a.yes
		if r.IntN(2) == 0 {
			held = &a.no
		}
		if (*held)[i] < q || b.cash < p*q {
			return "skip"
		}
		(*held)[i] -= q
		if held == &a.yes {
			b.yes[i] += q
		} else {
			b.no[i] += q
		}
		b.cash -= p * q
		a.cash += p * q
		return "transfer"
	default: // a converts NO shares of a random set of outcomes it holds
		var listed []int
		for _, k := range r.Perm(l.n)[:1+r.IntN(l.n)] {
			if a.no[k] >= q {
				listed = append(listed, k)
			}
		}
		if len(listed) == 0 {
			return "skip"
		}
		e := Conversion{Listed: listed, Quantity: q}.Effect(l.n)
		for k := range l.n {
			a.no[k] += e.NO[k]
			a.yes[k] += e.YES[k]
		}
		a.cash += e.Cash
		l.collateral -= e.Cash
		return "convert"
	}
}

func (l *ledger) check(t *testing.T, after string) {
	t.Helper()
	if err := l.totals().Check(l.collateral); err != nil {
		t.Fatalf("after %s: %v", after, err)
	}
	cash := l.collateral
	for _, a := range l.accounts {
		cash += a.cash
		if a.cash < 0 {
			t.Fatalf("after %s: an account's cash is %d", after, a.cash)
		}
		for k := range l.n {
			if a.yes[k] < 0 || a.no[k] < 0 {
				t.Fatalf("after %s: an account holds %d YES and %d NO of outcome %d", after, a.yes[k], a.no[k], k)
			}
		}
	}
	if cash != l.granted {
		t.Fatalf("after %s: cash and collateral sum to %d, but %d was granted", after, cash, l.granted)
	}
}

// TestLedgerProperty: any mix of trading and conversions keeps the ledger rule, and a resolution
// then pays out exactly the collateral, a void at most it with the rest kept.
func TestLedgerProperty(t *testing.T) {
	for seed := range uint64(300) {
		r := rand.New(rand.NewPCG(seed, 36))
		n := MinOutcomes + r.IntN(9)
		if seed%50 == 0 {
			n = MaxOutcomes
		}
		l := newLedger(n, 2+r.IntN(4), 10_000)
		counts := map[string]int{}
		for range 400 {
			what := l.step(r)
			counts[what]++
			l.check(t, what)
		}
		if counts["convert"] == 0 || counts["mint"] == 0 {
			t.Fatalf("seed %d: the walk never converted or minted (%v): the test proves nothing", seed, counts)
		}
		tot := l.totals()

		w := r.IntN(n)
		var paid int64
		for _, a := range l.accounts {
			paid += Payout * a.yes[w]
			for k := range n {
				if k != w {
					paid += Payout * a.no[k]
				}
			}
		}
		if paid != l.collateral {
			t.Fatalf("seed %d: resolving to outcome %d pays %d, but the exchange holds %d", seed, w, paid, l.collateral)
		}

		yes, no := VoidPayout(n)
		paid = 0
		for _, a := range l.accounts {
			for k := range n {
				paid += yes*a.yes[k] + no*a.no[k]
			}
		}
		total, rest, err := tot.Void()
		if err != nil {
			t.Fatalf("seed %d: %v", seed, err)
		}
		if total != paid || paid+rest != l.collateral || rest < 0 {
			t.Fatalf("seed %d: void pays holders %d (Void says %d) and keeps %d of %d", seed, paid, total, rest, l.collateral)
		}
	}
}
