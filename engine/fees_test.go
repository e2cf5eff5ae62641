package engine

import (
	"math/big"
	"math/rand/v2"
	"testing"
)

func TestFee(t *testing.T) {
	for _, tt := range []struct {
		rate, price int
		q           int64
		want        int64
	}{
		{0, 50, 100, 0},
		{700, 50, 100, 175},  // Kalshi's example: 0.07 × 100 × 0.5 × 0.5 = $1.75
		{700, 50, 1, 2},      // 1.75 cents rounds up
		{700, 1, 1, 1},       // 0.0693 cents: a fee is never rounded to nothing
		{700, 99, 1, 1},      // the same at the other edge: P × (1 − P) is symmetric
		{700, 30, 10, 15},    // 0.07 × 10 × 0.3 × 0.7 × 100 = 14.7
		{-350, 50, 100, -87}, // a rebate: 87.5 rounds down, towards the exchange
		{-350, 50, 1, 0},     // 0.875 cents of rebate pays nothing
		{MaxFeeRate, 50, 4, 100},
		{MaxFeeRate, 1, 1, 1}, // 0.99 cents: never more than the share's price
		{1, 50, 1_000_000, 2500},
		{MaxFeeRate, 50, MaxQuantity, 25 * MaxQuantity}, // no overflow at the largest quantity
	} {
		if got := Fee(tt.rate, tt.price, tt.q); got != tt.want {
			t.Errorf("Fee(%d, %d, %d) = %d, want %d", tt.rate, tt.price, tt.q, got, tt.want)
		}
	}
}

// TestFeeExact checks Fee against exact rational arithmetic over random rates, prices and
// quantities up to MaxQuantity.
func TestFeeExact(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for range 20_000 {
		rate := rng.IntN(2*MaxFeeRate+1) - MaxFeeRate
		p := MinPrice + rng.IntN(MaxPrice)
		q := 1 + rng.Int64N(MaxQuantity)
		if rng.IntN(2) == 0 {
			q = 1 + rng.Int64N(1000)
		}
		n := new(big.Int).Mul(big.NewInt(int64(rate)*int64(p)*int64(Payout-p)), big.NewInt(q))
		want := new(big.Int)
		if rate >= 0 {
			want.Add(n, big.NewInt(feeScale-1)).Quo(want, big.NewInt(feeScale)) // ceil, n ≥ 0
		} else {
			want.Quo(n, big.NewInt(feeScale)) // truncation towards zero: the rebate's floor
		}
		if got := Fee(rate, p, q); got != want.Int64() {
			t.Fatalf("Fee(%d, %d, %d) = %d, want %d", rate, p, q, got, want)
		}
	}
}

// TestFeeBounds checks what the locks rely on: a fill's fee never exceeds the reserve per share
// times its shares; a BUY taker filled at or below its limit pays price and fee within its lock;
// a SELL's fee never exceeds what it is paid; a rebate never exceeds the taker's fee of the fill.
func TestFeeBounds(t *testing.T) {
	for rate := 0; rate <= MaxFeeRate; rate += 7 {
		for limit := MinPrice; limit <= MaxPrice; limit++ {
			for _, q := range []int64{1, 3, 17, 1000} {
				if Fee(rate, limit, q) > q*feeReserve(rate, limit) {
					t.Fatalf("rate %d, price %d, %d shares: fee %d over the reserve %d", rate, limit, q, Fee(rate, limit, q), q*feeReserve(rate, limit))
				}
				lock := q * (int64(limit) + feeReserve(rate, limit))
				for e := MinPrice; e <= limit; e++ {
					if paid := int64(e)*q + Fee(rate, e, q); paid > lock {
						t.Fatalf("rate %d: a BUY at limit %d filled %d at %d pays %d, locked %d", rate, limit, q, e, paid, lock)
					}
				}
				if Fee(rate, limit, q) > int64(limit)*q {
					t.Fatalf("rate %d: a SELL of %d at %d pays fee %d over its proceeds", rate, q, limit, Fee(rate, limit, q))
				}
				for _, maker := range []int{-rate, -rate / 2} {
					if Fee(rate, limit, q)+Fee(maker, limit, q) < 0 {
						t.Fatalf("taker %d, maker %d at %d × %d: the exchange pays more than it takes", rate, maker, limit, q)
					}
				}
			}
		}
	}
}

func TestFeesValidate(t *testing.T) {
	for _, tt := range []struct {
		f    Fees
		want error
	}{
		{Fees{}, nil},
		{Fees{Taker: 700, Maker: 0}, nil},
		{Fees{Taker: 700, Maker: -700}, nil},
		{Fees{Taker: 700, Maker: 700}, nil},
		{Fees{Taker: MaxFeeRate}, nil},
		{Fees{Taker: -1}, ErrInvalidTakerFee},
		{Fees{Taker: MaxFeeRate + 1}, ErrInvalidTakerFee},
		{Fees{Taker: 700, Maker: -701}, ErrInvalidMakerFee},
		{Fees{Taker: 700, Maker: 701}, ErrInvalidMakerFee},
		{Fees{Maker: -1}, ErrInvalidMakerFee},
	} {
		if got := tt.f.Validate(); got != tt.want {
			t.Errorf("%+v.Validate() = %v, want %v", tt.f, got, tt.want)
		}
	}
}

// TestFeeSettlement follows one fill through the legs: a taker BUY improved below its limit, a
// resting SELL paid a rebate, and the exchange's take.
func TestFeeSettlement(t *testing.T) {
	b := New(4)
	l := newLedger()
	l.grant(1, 10_000)
	l.grant(2, 10_000)
	l.grant(3, 10_000)
	// Account 3 sells 10 YES to account 2 with no fee, so that account 2 has shares to rest a SELL.
	l.trade(t, b, Order{ID: 1, Account: 3, Side: Buy, Outcome: No, Price: 60, Quantity: 10})
	l.trade(t, b, Order{ID: 2, Account: 2, Side: Buy, Outcome: Yes, Price: 40, Quantity: 10})
	fees := Fees{Taker: 700, Maker: -350}
	l.trade(t, b, Order{ID: 3, Account: 2, Side: Sell, Outcome: Yes, Price: 30, Quantity: 10, Fees: fees})
	r := l.trade(t, b, Order{ID: 4, Account: 1, Side: Buy, Outcome: Yes, Price: 50, Quantity: 10, Fees: fees})
	if len(r.Fills) != 1 {
		t.Fatalf("fills %+v, want one", r.Fills)
	}
	f := r.Fills[0]
	// Taker: 10 at 30, fee ⌈0.07 × 10 × 0.3 × 0.7 × 100⌉ = 15; it locked 10 × (50 + 2) = 520.
	if f.Taker.Fee != 15 || f.Taker.CashLocked != -520 || f.Taker.Cash != 520-300-15 {
		t.Errorf("taker leg %+v, want fee 15, locked −520, cash back 205", f.Taker)
	}
	// Maker: a rebate of ⌊0.035 × 10 × 0.21 × 100⌋ = 7 on top of the 300 it is paid.
	if f.Maker.Fee != -7 || f.Maker.Cash != 307 {
		t.Errorf("maker leg %+v, want fee −7, cash 307", f.Maker)
	}
	if l.exchange != 8 {
		t.Errorf("the exchange holds %d, want 15 − 7 = 8", l.exchange)
	}
}
