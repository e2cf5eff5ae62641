package engine

import (
	"errors"
	"reflect"
	"testing"
)

// ord builds an order tersely: ord(id, account, "BUY", "YES", price, qty).
func ord(id OrderID, account AccountID, side, outcome string, price int, qty int64) Order {
	o := Order{ID: id, Account: account, Price: price, Quantity: qty, Side: Sell, Outcome: No}
	if side == "BUY" {
		o.Side = Buy
	}
	if outcome == "YES" {
		o.Outcome = Yes
	}
	return o
}

// submitAll submits orders in turn and returns the last result; it fails the test on any error.
func submitAll(t *testing.T, b *Book, orders ...Order) *Result {
	t.Helper()
	var r Result
	for _, o := range orders {
		if err := b.Submit(o, &r); err != nil {
			t.Fatalf("submit %+v: %v", o, err)
		}
	}
	return &r
}

func TestMatchKinds(t *testing.T) {
	// The maker rests first; the taker crosses it exactly at the maker's price.
	tests := []struct {
		name         string
		maker, taker Order
		kind         Kind
		yes          int
		makerLeg     Leg
		takerLeg     Leg
		pairs        int64
	}{
		{
			name:  "BUY YES takes SELL YES: YES share moves",
			maker: ord(1, 1, "SELL", "YES", 60, 10), taker: ord(2, 2, "BUY", "YES", 60, 10),
			kind: TransferYes, yes: 60,
			makerLeg: Leg{Price: 60, Cash: 600, Shares: -10, SharesLocked: -10},
			takerLeg: Leg{Price: 60, CashLocked: -600, Shares: 10},
		},
		{
			name:  "BUY NO takes SELL NO: NO share moves",
			maker: ord(1, 1, "SELL", "NO", 30, 10), taker: ord(2, 2, "BUY", "NO", 30, 10),
			kind: TransferNo, yes: 70,
			makerLeg: Leg{Price: 30, Cash: 300, Shares: -10, SharesLocked: -10},
			takerLeg: Leg{Price: 30, CashLocked: -300, Shares: 10},
		},
		{
			name:  "BUY NO takes BUY YES: a pair is minted",
			maker: ord(1, 1, "BUY", "YES", 65, 10), taker: ord(2, 2, "BUY", "NO", 35, 10),
			kind: Mint, yes: 65, pairs: 10,
			makerLeg: Leg{Price: 65, CashLocked: -650, Shares: 10},
			takerLeg: Leg{Price: 35, CashLocked: -350, Shares: 10},
		},
		{
			name:  "SELL YES takes SELL NO: a pair is burned",
			maker: ord(1, 1, "SELL", "NO", 45, 10), taker: ord(2, 2, "SELL", "YES", 55, 10),
			kind: Burn, yes: 55, pairs: -10,
			makerLeg: Leg{Price: 45, Cash: 450, Shares: -10, SharesLocked: -10},
			takerLeg: Leg{Price: 55, Cash: 550, Shares: -10, SharesLocked: -10},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := New(4)
			r := submitAll(t, b, tt.maker, tt.taker)
			if len(r.Fills) != 1 {
				t.Fatalf("fills = %+v, want one", r.Fills)
			}
			f := r.Fills[0]
			if f.Kind != tt.kind || f.YesPrice != tt.yes || f.Quantity != 10 || f.Pairs() != tt.pairs {
				t.Errorf("fill kind %v yes %d qty %d pairs %d, want %v %d 10 %d", f.Kind, f.YesPrice, f.Quantity, f.Pairs(), tt.kind, tt.yes, tt.pairs)
			}
			want := func(l Leg, o Order) Leg {
				l.Order, l.Account, l.Side, l.Outcome, l.Filled, l.Status = o.ID, o.Account, o.Side, o.Outcome, 10, StatusFilled
				return l
			}
			if got, w := f.Maker, want(tt.makerLeg, tt.maker); got != w {
				t.Errorf("maker leg\n got %+v\nwant %+v", got, w)
			}
			if got, w := f.Taker, want(tt.takerLeg, tt.taker); got != w {
				t.Errorf("taker leg\n got %+v\nwant %+v", got, w)
			}
			if r.Order.Status != StatusFilled || b.Len() != 0 || b.LastTradePrice() != tt.yes {
				t.Errorf("after: order %v, %d resting, last %d", r.Order.Status, b.Len(), b.LastTradePrice())
			}
		})
	}
}

func TestPartialFills(t *testing.T) {
	t.Run("taker smaller than maker", func(t *testing.T) {
		b := New(4)
		r := submitAll(t, b, ord(1, 1, "SELL", "YES", 50, 10), ord(2, 2, "BUY", "YES", 50, 4))
		if r.Order.Status != StatusFilled || r.Fills[0].Maker.Status != StatusPartiallyFilled || r.Fills[0].Maker.Filled != 4 {
			t.Fatalf("got order %+v, maker leg %+v", r.Order, r.Fills[0].Maker)
		}
		if st, ok := b.Order(1); !ok || st.Filled != 4 || st.Status != StatusPartiallyFilled {
			t.Fatalf("maker now %+v %v", st, ok)
		}
	})
	t.Run("taker larger than book rests the remainder", func(t *testing.T) {
		b := New(4)
		r := submitAll(t, b, ord(1, 1, "SELL", "YES", 50, 3), ord(2, 1, "SELL", "YES", 51, 3), ord(3, 2, "BUY", "YES", 52, 10))
		if len(r.Fills) != 2 || r.Order.Filled != 6 || r.Order.Status != StatusPartiallyFilled {
			t.Fatalf("got %+v with fills %+v", r.Order, r.Fills)
		}
		if b.BestBid() != 52 || b.BestAsk() != Payout {
			t.Fatalf("book bid %d ask %d, want 52 and none", b.BestBid(), b.BestAsk())
		}
		var d Depth
		b.Depth(10, &d)
		if want := []Level{{52, 4, 4}}; !reflect.DeepEqual(d.Yes.Bids, want) {
			t.Fatalf("bids %v, want %v", d.Yes.Bids, want)
		}
	})
}

func TestPriceImprovementReturnsSurplus(t *testing.T) {
	tests := []struct {
		name         string
		maker, taker Order
		takerPrice   int
		surplus      int64
	}{
		{"BUY YES above the ask", ord(1, 1, "SELL", "YES", 55, 10), ord(2, 2, "BUY", "YES", 60, 10), 55, 50},
		{"BUY NO above the mirrored bid", ord(1, 1, "BUY", "YES", 45, 10), ord(2, 2, "BUY", "NO", 60, 10), 55, 50},
		{"SELL YES below the bid gets more cash", ord(1, 1, "BUY", "YES", 45, 10), ord(2, 2, "SELL", "YES", 40, 10), 45, 0},
		{"SELL NO below the mirrored ask gets more cash", ord(1, 1, "SELL", "YES", 55, 10), ord(2, 2, "SELL", "NO", 40, 10), 45, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := New(4)
			l := newLedger()
			l.grant(1, 10_000)
			l.grant(2, 10_000)
			// Mint pairs between the two accounts first so that both hold YES and NO to sell.
			for _, o := range []Order{ord(100, 1, "BUY", "YES", 50, 10), ord(101, 2, "BUY", "NO", 50, 10), ord(102, 2, "BUY", "YES", 50, 10), ord(103, 1, "BUY", "NO", 50, 10)} {
				l.trade(t, b, o)
			}
			l.trade(t, b, tt.maker)
			f := l.trade(t, b, tt.taker).Fills[0]
			if f.Taker.Price != tt.takerPrice || f.Taker.Surplus() != tt.surplus {
				t.Fatalf("taker executed at %d with surplus %d, want %d and %d", f.Taker.Price, f.Taker.Surplus(), tt.takerPrice, tt.surplus)
			}
			l.mustCheck(t, b)
		})
	}
}

func TestFIFOWithinLevel(t *testing.T) {
	b := New(4)
	r := submitAll(t, b,
		ord(1, 1, "SELL", "YES", 50, 5),
		ord(2, 2, "BUY", "NO", 50, 5), // also an ask at YES 50, later in time
		ord(3, 3, "SELL", "YES", 49, 5),
		ord(4, 4, "BUY", "YES", 50, 12))
	var makers []OrderID
	for _, f := range r.Fills {
		makers = append(makers, f.Maker.Order)
	}
	if want := []OrderID{3, 1, 2}; !reflect.DeepEqual(makers, want) {
		t.Fatalf("makers hit in order %v, want %v (best price, then oldest first)", makers, want)
	}
	if st, _ := b.Order(2); st.Filled != 2 {
		t.Fatalf("last maker filled %d, want 2", st.Filled)
	}
}

func TestQueuePosition(t *testing.T) {
	b := New(8)
	submitAll(t, b,
		ord(1, 1, "BUY", "YES", 40, 5),
		ord(2, 2, "SELL", "NO", 60, 3), // a YES bid at 40 too, later in time
		ord(3, 1, "BUY", "YES", 40, 7),
		ord(4, 3, "BUY", "YES", 40, 2),
		ord(5, 3, "BUY", "YES", 39, 4),
		ord(6, 4, "BUY", "NO", 55, 6), // a YES ask at 45
		ord(7, 5, "SELL", "YES", 45, 1))
	check := func(when string, want map[OrderID]QueuePosition) {
		t.Helper()
		for id, w := range want {
			got, ok := b.QueuePosition(id)
			if w == (QueuePosition{}) {
				if ok {
					t.Errorf("%s: order %d rests at %+v, want not resting", when, id, got)
				}
				continue
			}
			if !ok || got != w {
				t.Errorf("%s: order %d at %+v (resting %v), want %+v", when, id, got, ok, w)
			}
		}
	}
	check("placed", map[OrderID]QueuePosition{
		1: {0, 17}, 2: {5, 17}, 3: {8, 17}, 4: {15, 17},
		5: {0, 4},
		6: {0, 7}, 7: {6, 7}, // the NO bid at 55 and the YES ask at 45 share a level
		99: {},
	})
	submitAll(t, b, ord(8, 6, "SELL", "YES", 40, 6)) // fills 1 and one of 2
	check("after a fill", map[OrderID]QueuePosition{1: {}, 2: {0, 11}, 3: {2, 11}, 4: {9, 11}})
	if _, err := b.Cancel(3); err != nil {
		t.Fatal(err)
	}
	check("after a cancel", map[OrderID]QueuePosition{2: {0, 4}, 3: {}, 4: {2, 4}})
	var r Result
	if err := b.Amend(2, 60, 1, &r); err != nil { // less remaining keeps its place
		t.Fatal(err)
	}
	check("after an amend in place", map[OrderID]QueuePosition{2: {0, 3}, 4: {1, 3}})
	if err := b.Amend(2, 60, 2, &r); err != nil { // more goes to the back
		t.Fatal(err)
	}
	check("after an amend to the back", map[OrderID]QueuePosition{4: {0, 4}, 2: {2, 4}})
}

func TestSelfTradePrevention(t *testing.T) {
	b := New(4)
	r := submitAll(t, b,
		ord(1, 7, "SELL", "YES", 50, 5),
		ord(2, 8, "SELL", "YES", 50, 5),
		ord(3, 7, "BUY", "NO", 49, 5), // YES ask at 51, same account as the taker below
		ord(4, 7, "BUY", "YES", 51, 20))
	if len(r.Cancelled) != 2 || r.Cancelled[0].ID != 1 || r.Cancelled[1].ID != 3 {
		t.Fatalf("STP cancelled %+v, want orders 1 and 3", r.Cancelled)
	}
	for _, c := range r.Cancelled {
		if c.Status != StatusCancelled {
			t.Errorf("cancelled order %d has status %v", c.ID, c.Status)
		}
	}
	if len(r.Fills) != 1 || r.Fills[0].Maker.Order != 2 || r.Fills[0].Quantity != 5 {
		t.Fatalf("fills %+v, want only order 2's 5 shares", r.Fills)
	}
	if r.Order.Filled != 5 || r.Order.Status != StatusPartiallyFilled || b.BestBid() != 51 || b.BestAsk() != Payout {
		t.Fatalf("taker %+v, book %d/%d", r.Order, b.BestBid(), b.BestAsk())
	}
}

func TestCancel(t *testing.T) {
	b := New(4)
	submitAll(t, b, ord(1, 1, "BUY", "YES", 40, 10), ord(2, 2, "SELL", "NO", 55, 10), ord(3, 3, "SELL", "YES", 40, 4))
	// Order 1 (bid 40) is older than order 2 (bid 45), but 45 is the better price.
	if st, _ := b.Order(2); st.Filled != 4 {
		t.Fatalf("order 2 filled %d, want 4", st.Filled)
	}
	tests := []struct {
		id     OrderID
		status Status
		err    error
	}{
		{2, StatusPartiallyFilledCancelled, nil},
		{1, StatusCancelled, nil},
		{1, 0, ErrUnknownOrder},
		{3, 0, ErrUnknownOrder}, // filled: no longer in the book
		{99, 0, ErrUnknownOrder},
	}
	for _, tt := range tests {
		st, err := b.Cancel(tt.id)
		if !errors.Is(err, tt.err) || st.Status != tt.status {
			t.Errorf("Cancel(%d) = %v, %v; want %v, %v", tt.id, st.Status, err, tt.status, tt.err)
		}
	}
	if b.Len() != 0 || b.BestBid() != 0 {
		t.Fatalf("book not empty: %d resting, best bid %d", b.Len(), b.BestBid())
	}
	if cash, _ := (&OrderState{Order: ord(2, 2, "SELL", "NO", 55, 10), Filled: 4}).Lock(); cash != 0 {
		t.Fatalf("a SELL holds no cash")
	}
}

func TestCancelAccount(t *testing.T) {
	b := New(4)
	submitAll(t, b,
		ord(1, 1, "BUY", "YES", 40, 10),
		ord(2, 2, "BUY", "YES", 41, 10),
		ord(3, 1, "SELL", "YES", 60, 10),
		ord(4, 1, "BUY", "YES", 45, 10),
		ord(5, 3, "SELL", "YES", 45, 3)) // fills 3 of order 4
	got := b.CancelAccount(1, nil)
	var ids []OrderID
	for _, st := range got {
		ids = append(ids, st.ID)
	}
	if want := []OrderID{4, 1, 3}; !reflect.DeepEqual(ids, want) {
		t.Fatalf("cancelled %v, want %v", ids, want)
	}
	if got[0].Status != StatusPartiallyFilledCancelled || got[1].Status != StatusCancelled {
		t.Fatalf("statuses %v %v", got[0].Status, got[1].Status)
	}
	if rest := b.Resting(nil); len(rest) != 1 || rest[0].ID != 2 {
		t.Fatalf("left %+v, want only order 2", rest)
	}
	if len(b.CancelAccount(1, nil)) != 0 {
		t.Fatal("second cancel-all found orders")
	}
}

func TestDepth(t *testing.T) {
	b := New(32)
	// 12 bid levels (YES 30..41) and 12 ask levels (YES 50..61), two orders each at some prices.
	id := OrderID(1)
	for i := range 12 {
		submitAll(t, b, ord(id, 1, "BUY", "YES", 30+i, int64(i+1)), ord(id+1, 2, "SELL", "YES", 50+i, int64(10*(i+1))))
		id += 2
	}
	submitAll(t, b, ord(id, 3, "SELL", "NO", 59, 5)) // a second order on the best bid, YES 41
	var d Depth
	b.Depth(10, &d)
	if len(d.Yes.Bids) != 10 || len(d.Yes.Asks) != 10 || len(d.No.Bids) != 10 || len(d.No.Asks) != 10 {
		t.Fatalf("levels %d/%d/%d/%d, want 10 each", len(d.Yes.Bids), len(d.Yes.Asks), len(d.No.Bids), len(d.No.Asks))
	}
	if want := (Level{41, 17, 17}); d.Yes.Bids[0] != want {
		t.Errorf("best YES bid %v, want %v", d.Yes.Bids[0], want)
	}
	if want := (Level{32, 3, 17 + 11 + 10 + 9 + 8 + 7 + 6 + 5 + 4 + 3}); d.Yes.Bids[9] != want {
		t.Errorf("10th YES bid %v, want %v", d.Yes.Bids[9], want)
	}
	if want := (Level{59, 100, 550}); d.Yes.Asks[9] != want {
		t.Errorf("10th YES ask %v, want %v", d.Yes.Asks[9], want)
	}
	if want := (Level{50, 10, 10}); d.No.Bids[0] != want {
		t.Errorf("best NO bid %v, want %v", d.No.Bids[0], want)
	}
	if want := (Level{59, 17, 17}); d.No.Asks[0] != want {
		t.Errorf("best NO ask %v, want %v", d.No.Asks[0], want)
	}
	if d.Yes.LastTradePrice != 0 || d.No.LastTradePrice != 0 {
		t.Errorf("last trade %d/%d before any trade", d.Yes.LastTradePrice, d.No.LastTradePrice)
	}
	if err := checkMirror(&d); err != nil {
		t.Error(err)
	}
	submitAll(t, b, ord(id+1, 4, "BUY", "NO", 60, 1)) // sells YES at 40 into the 41 bid
	b.Depth(3, &d)
	if d.Yes.LastTradePrice != 41 || d.No.LastTradePrice != 59 || len(d.Yes.Bids) != 3 {
		t.Errorf("after a trade: last %d/%d, %d levels", d.Yes.LastTradePrice, d.No.LastTradePrice, len(d.Yes.Bids))
	}
	if err := checkMirror(&d); err != nil {
		t.Error(err)
	}
}

func TestSubmitRejectsBadOrders(t *testing.T) {
	tests := []struct {
		name string
		o    Order
		err  error
	}{
		{"no side", Order{ID: 9, Outcome: Yes, Price: 50, Quantity: 1}, ErrInvalidSide},
		{"no outcome", Order{ID: 9, Side: Buy, Price: 50, Quantity: 1}, ErrInvalidOutcome},
		{"price 0", ord(9, 1, "BUY", "YES", 0, 1), ErrInvalidPrice},
		{"price 100", ord(9, 1, "SELL", "NO", 100, 1), ErrInvalidPrice},
		{"quantity 0", ord(9, 1, "BUY", "YES", 50, 0), ErrInvalidQuantity},
		{"quantity negative", ord(9, 1, "BUY", "YES", 50, -3), ErrInvalidQuantity},
		{"quantity too large", ord(9, 1, "BUY", "YES", 50, MaxQuantity+1), ErrInvalidQuantity},
		{"duplicate id", ord(1, 2, "SELL", "YES", 40, 1), ErrDuplicateOrder},
		{"unknown time in force", with(ord(9, 1, "BUY", "YES", 50, 1), FOK+1, CancelResting, false), ErrInvalidTimeInForce},
		{"unknown self-trade mode", with(ord(9, 1, "BUY", "YES", 50, 1), GTC, CancelIncoming+1, false), ErrInvalidSelfTrade},
		{"post-only IOC", with(ord(9, 1, "BUY", "YES", 40, 1), IOC, CancelResting, true), ErrPostOnlyMustRest},
		{"post-only that crosses", with(ord(9, 2, "SELL", "YES", 50, 1), GTC, CancelResting, true), ErrPostOnlyWouldCross},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := New(4)
			submitAll(t, b, ord(1, 1, "BUY", "YES", 50, 5))
			before := b.Resting(nil)
			var r Result
			if err := b.Submit(tt.o, &r); !errors.Is(err, tt.err) {
				t.Fatalf("err = %v, want %v", err, tt.err)
			}
			if after := b.Resting(nil); !reflect.DeepEqual(after, before) || b.LastTradePrice() != 0 {
				t.Fatalf("a refused order changed the book: %+v", after)
			}
		})
	}
}

func TestRebuild(t *testing.T) {
	orders := []OrderState{
		{Order: ord(1, 1, "BUY", "YES", 40, 10), Filled: 3, Status: StatusPartiallyFilled},
		{Order: with(ord(2, 2, "SELL", "NO", 60, 5), GTD, CancelIncoming, true), Status: StatusOpen}, // bid at YES 40, behind order 1
		{Order: with(ord(3, 3, "SELL", "YES", 45, 5), GTC, CancelIncoming, false), Status: StatusOpen},
	}
	b, err := Rebuild(orders, 42)
	if err != nil {
		t.Fatal(err)
	}
	if got := b.Resting(nil); !reflect.DeepEqual(got, orders) {
		t.Fatalf("resting\n got %+v\nwant %+v", got, orders)
	}
	r := submitAll(t, b, ord(4, 4, "SELL", "YES", 40, 8))
	if len(r.Fills) != 2 || r.Fills[0].Maker.Order != 1 || r.Fills[0].Quantity != 7 || r.Fills[1].Maker.Order != 2 {
		t.Fatalf("rebuilt book matched %+v", r.Fills)
	}

	bad := []struct {
		name   string
		orders []OrderState
		last   int
		err    error
	}{
		{"crossed", []OrderState{{Order: ord(1, 1, "BUY", "YES", 50, 1)}, {Order: ord(2, 2, "BUY", "NO", 50, 1)}}, 0, ErrCrossedBook},
		{"duplicate", []OrderState{{Order: ord(1, 1, "BUY", "YES", 50, 1)}, {Order: ord(1, 2, "BUY", "YES", 40, 1)}}, 0, ErrDuplicateOrder},
		{"nothing left", []OrderState{{Order: ord(1, 1, "BUY", "YES", 50, 1), Filled: 1}}, 0, ErrInvalidQuantity},
		{"bad price", []OrderState{{Order: ord(1, 1, "BUY", "YES", 0, 1)}}, 0, ErrInvalidPrice},
		{"IOC cannot rest", []OrderState{{Order: with(ord(1, 1, "BUY", "YES", 50, 1), IOC, CancelResting, false)}}, 0, ErrInvalidTimeInForce},
		{"FOK cannot rest", []OrderState{{Order: with(ord(1, 1, "BUY", "YES", 50, 1), FOK, CancelResting, false)}}, 0, ErrInvalidTimeInForce},
		{"bad self-trade mode", []OrderState{{Order: with(ord(1, 1, "BUY", "YES", 50, 1), GTC, 7, false)}}, 0, ErrInvalidSelfTrade},
		{"bad last price", nil, 100, ErrInvalidPrice},
	}
	for _, tt := range bad {
		if _, err := Rebuild(tt.orders, tt.last); !errors.Is(err, tt.err) {
			t.Errorf("%s: err = %v, want %v", tt.name, err, tt.err)
		}
	}
}

func TestBitset(t *testing.T) {
	var s bitset
	marked := map[int]bool{}
	for _, k := range []int{1, 2, 31, 62, 63, 64, 65, 90, 99} {
		s.set(k)
		marked[k] = true
	}
	s.clear(90)
	delete(marked, 90)
	for k := 0; k <= Payout; k++ {
		want := 0
		for j := k - 1; j >= 1; j-- {
			if marked[j] {
				want = j
				break
			}
		}
		if got := s.prev(k); got != want {
			t.Errorf("prev(%d) = %d, want %d", k, got, want)
		}
	}
	if s.best() != 99 {
		t.Errorf("best() = %d, want 99", s.best())
	}
	if (&bitset{}).best() != 0 {
		t.Error("best() of an empty set is not 0")
	}
}

func TestKeys(t *testing.T) {
	// The YES price where each kind of order sits, and which side, follow docs/architecture.md §3.
	tests := []struct {
		side     Side
		outcome  Outcome
		price    int
		bookSide int
		yesPrice int
	}{
		{Buy, Yes, 30, bidSide, 30},
		{Sell, No, 30, bidSide, 70},
		{Sell, Yes, 30, askSide, 30},
		{Buy, No, 30, askSide, 70},
	}
	for _, tt := range tests {
		o := Order{Side: tt.side, Outcome: tt.outcome, Price: tt.price}
		if s := sideOf(tt.side, tt.outcome); s != tt.bookSide || o.IsBid() != (s == bidSide) {
			t.Errorf("%v %v sits on side %d, want %d", tt.side, tt.outcome, s, tt.bookSide)
		}
		if got := yes(tt.bookSide, keyOf(tt.side, tt.price)); got != tt.yesPrice || o.BookPrice() != tt.yesPrice {
			t.Errorf("%v %v @%d sits at YES %d (BookPrice %d), want %d", tt.side, tt.outcome, tt.price, got, o.BookPrice(), tt.yesPrice)
		}
	}
}

func TestNamesMatchTheAPI(t *testing.T) {
	got := []string{Buy.String(), Sell.String(), Yes.String(), No.String(),
		StatusOpen.String(), StatusPartiallyFilled.String(), StatusFilled.String(),
		StatusCancelled.String(), StatusPartiallyFilledCancelled.String()}
	want := []string{"BUY", "SELL", "YES", "NO", "OPEN", "PARTIALLY_FILLED", "FILLED", "CANCELLED", "PARTIALLY_FILLED_CANCELLED"}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %v, want %v", got, want)
	}

	// The names of the store's columns (migration 009), which the API spells the same way.
	tifs := []string{"GTC", "GTD", "IOC", "FOK"}
	for i, name := range tifs {
		tif := TimeInForce(i)
		if p, ok := ParseTimeInForce(name); tif.String() != name || !ok || p != tif {
			t.Errorf("time in force %d: %q, parsed %v %v; want %q", i, tif.String(), p, ok, name)
		}
	}
	for i, name := range []string{"CANCEL_RESTING", "CANCEL_INCOMING"} {
		m := SelfTrade(i)
		if p, ok := ParseSelfTrade(name); m.String() != name || !ok || p != m {
			t.Errorf("self-trade mode %d: %q, parsed %v %v; want %q", i, m.String(), p, ok, name)
		}
	}
	reasons := []string{"", "USER", "IOC", "FOK", "EXPIRED", "SELF_TRADE", "MARKET_CLOSED", "HEARTBEAT", "ORDER_GROUP"}
	for i, name := range reasons {
		c := CancelReason(i)
		if p, ok := ParseCancelReason(name); c.String() != name || ok != (c != ReasonNone) || (ok && p != c) {
			t.Errorf("cancel reason %d: %q, parsed %v %v; want %q", i, c.String(), p, ok, name)
		}
	}
	for _, bad := range []string{"", "gtc", "DAY"} {
		if _, ok := ParseTimeInForce(bad); ok {
			t.Errorf("ParseTimeInForce(%q) accepted it", bad)
		}
		if _, ok := ParseSelfTrade(bad); ok {
			t.Errorf("ParseSelfTrade(%q) accepted it", bad)
		}
	}
	if TimeInForce(4).String() != "TimeInForce(4)" || SelfTrade(2).String() != "SelfTrade(2)" || CancelReason(9).String() != "CancelReason(9)" {
		t.Error("unknown values print as their number")
	}
	if !GTC.Rests() || !GTD.Rests() || IOC.Rests() || FOK.Rests() {
		t.Error("Rests: only GTC and GTD rest")
	}
}

// with returns o with a time in force, self-trade mode and post-only flag.
func with(o Order, tif TimeInForce, stp SelfTrade, postOnly bool) Order {
	o.TimeInForce, o.SelfTrade, o.PostOnly = tif, stp, postOnly
	return o
}

// left is a resting order's id and unfilled quantity, in book order.
type left struct {
	id        OrderID
	remaining int64
}

func resting(b *Book) []left {
	var out []left
	for _, o := range b.Resting(nil) {
		out = append(out, left{o.ID, o.Remaining()})
	}
	return out
}

// outcome is what a test expects of one submission or amend.
type outcome struct {
	fills     []int64 // quantities, in order
	surplus   int64   // summed over the taker's legs
	filled    int64
	status    Status
	reason    CancelReason
	cancelled []OrderID
	book      []left
}

func (w *outcome) check(t *testing.T, b *Book, r *Result) {
	t.Helper()
	var fills []int64
	var surplus int64
	for i := range r.Fills {
		fills = append(fills, r.Fills[i].Quantity)
		surplus += r.Fills[i].Taker.Surplus()
	}
	var cancelled []OrderID
	for _, c := range r.Cancelled {
		cancelled = append(cancelled, c.ID)
		if c.Status != StatusCancelled && c.Status != StatusPartiallyFilledCancelled {
			t.Errorf("cancelled order %d has status %v", c.ID, c.Status)
		}
	}
	if !reflect.DeepEqual(fills, w.fills) || surplus != w.surplus {
		t.Errorf("fills %v with surplus %d, want %v and %d", fills, surplus, w.fills, w.surplus)
	}
	if r.Order.Filled != w.filled || r.Order.Status != w.status || r.Reason != w.reason {
		t.Errorf("order filled %d, %v, reason %v; want %d, %v, %v", r.Order.Filled, r.Order.Status, r.Reason, w.filled, w.status, w.reason)
	}
	if !reflect.DeepEqual(cancelled, w.cancelled) {
		t.Errorf("cancelled %v, want %v", cancelled, w.cancelled)
	}
	if got := resting(b); !reflect.DeepEqual(got, w.book) {
		t.Errorf("book %v, want %v", got, w.book)
	}
}

func TestTimeInForce(t *testing.T) {
	// Asks of account 1 at YES 50, 52 and 53 (a BUY NO at 47), 5 each; account 2 takes.
	setup := []Order{ord(1, 1, "SELL", "YES", 50, 5), ord(2, 1, "SELL", "YES", 52, 5), ord(3, 1, "BUY", "NO", 47, 5)}
	all := []left{{1, 5}, {2, 5}, {3, 5}}
	tests := []struct {
		name string
		o    Order
		want outcome
	}{
		{"GTC rests its remainder", with(ord(9, 2, "BUY", "YES", 52, 12), GTC, CancelResting, false),
			outcome{fills: []int64{5, 5}, surplus: 10, filled: 10, status: StatusPartiallyFilled, book: []left{{9, 2}, {3, 5}}}},
		{"GTD rests like GTC", with(ord(9, 2, "BUY", "YES", 49, 4), GTD, CancelResting, false),
			outcome{status: StatusOpen, book: append([]left{{9, 4}}, all...)}},
		{"IOC filled entirely", with(ord(9, 2, "BUY", "YES", 52, 8), IOC, CancelResting, false),
			outcome{fills: []int64{5, 3}, surplus: 10, filled: 8, status: StatusFilled, book: []left{{2, 2}, {3, 5}}}},
		{"IOC cancels its remainder", with(ord(9, 2, "BUY", "YES", 52, 12), IOC, CancelResting, false),
			outcome{fills: []int64{5, 5}, surplus: 10, filled: 10, status: StatusPartiallyFilledCancelled, reason: ReasonIOC, book: []left{{3, 5}}}},
		{"IOC that crosses nothing", with(ord(9, 2, "BUY", "YES", 49, 5), IOC, CancelResting, false),
			outcome{status: StatusCancelled, reason: ReasonIOC, book: all}},
		{"FOK across three levels with price improvement", with(ord(9, 2, "BUY", "YES", 53, 15), FOK, CancelResting, false),
			outcome{fills: []int64{5, 5, 5}, surplus: 3*5 + 1*5, filled: 15, status: StatusFilled}},
		{"FOK one share short", with(ord(9, 2, "BUY", "YES", 53, 16), FOK, CancelResting, false),
			outcome{status: StatusCancelled, reason: ReasonFOK, book: all}},
		{"FOK short within its limit", with(ord(9, 2, "BUY", "YES", 51, 6), FOK, CancelResting, false),
			outcome{status: StatusCancelled, reason: ReasonFOK, book: all}},
		{"FOK from the NO side", with(ord(9, 2, "SELL", "NO", 48, 7), FOK, CancelResting, false), // a YES bid at 52
			outcome{fills: []int64{5, 2}, filled: 7, status: StatusFilled, book: []left{{2, 3}, {3, 5}}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := New(8)
			submitAll(t, b, setup...)
			r := submitAll(t, b, tt.o)
			tt.want.check(t, b, r)
			if r.Order.Order != tt.o {
				t.Errorf("order %+v, want %+v", r.Order.Order, tt.o)
			}
		})
	}
}

func TestSelfTradeModes(t *testing.T) {
	// Asks at YES 50 of accounts 1, 2 and 3, in that order; one of account 1 at 51; account 2 takes.
	setup := []Order{ord(1, 1, "SELL", "YES", 50, 5), ord(2, 2, "SELL", "YES", 50, 5), ord(3, 3, "BUY", "NO", 50, 5), ord(4, 1, "SELL", "YES", 51, 5)}
	all := []left{{1, 5}, {2, 5}, {3, 5}, {4, 5}}
	take := func(tif TimeInForce, stp SelfTrade, price int, qty int64) Order {
		return with(ord(9, 2, "BUY", "YES", price, qty), tif, stp, false)
	}
	tests := []struct {
		name string
		o    Order
		want outcome
	}{
		{"CancelResting cancels the own order and goes on", take(GTC, CancelResting, 50, 12),
			outcome{fills: []int64{5, 5}, filled: 10, status: StatusPartiallyFilled, cancelled: []OrderID{2}, book: []left{{9, 2}, {4, 5}}}},
		{"CancelIncoming stops at the own order, earlier fills stand", take(GTC, CancelIncoming, 50, 12),
			outcome{fills: []int64{5}, filled: 5, status: StatusPartiallyFilledCancelled, reason: ReasonSelfTrade, book: []left{{2, 5}, {3, 5}, {4, 5}}}},
		{"CancelIncoming filled before the own order", take(GTC, CancelIncoming, 50, 4),
			outcome{fills: []int64{4}, filled: 4, status: StatusFilled, book: []left{{1, 1}, {2, 5}, {3, 5}, {4, 5}}}},
		{"CancelIncoming overrides IOC's reason", take(IOC, CancelIncoming, 50, 12),
			outcome{fills: []int64{5}, filled: 5, status: StatusPartiallyFilledCancelled, reason: ReasonSelfTrade, book: []left{{2, 5}, {3, 5}, {4, 5}}}},
		{"FOK under CancelResting counts past own orders", take(FOK, CancelResting, 51, 15),
			outcome{fills: []int64{5, 5, 5}, surplus: 10, filled: 15, status: StatusFilled, cancelled: []OrderID{2}}},
		{"FOK under CancelResting, short: own order not cancelled", take(FOK, CancelResting, 51, 16),
			outcome{status: StatusCancelled, reason: ReasonFOK, book: all}},
		{"FOK under CancelIncoming fills before the own order", take(FOK, CancelIncoming, 51, 5),
			outcome{fills: []int64{5}, surplus: 5, filled: 5, status: StatusFilled, book: []left{{2, 5}, {3, 5}, {4, 5}}}},
		{"FOK under CancelIncoming cannot count past it", take(FOK, CancelIncoming, 51, 6),
			outcome{status: StatusCancelled, reason: ReasonFOK, book: all}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := New(8)
			submitAll(t, b, setup...)
			tt.want.check(t, b, submitAll(t, b, tt.o))
		})
	}
}

func TestPostOnly(t *testing.T) {
	// A YES ask at 50 of account 1 and a YES bid at 48 of account 2.
	setup := []Order{ord(1, 1, "SELL", "YES", 50, 5), ord(2, 2, "BUY", "YES", 48, 5)}
	post := func(o Order) Order { return with(o, GTC, CancelResting, true) }
	tests := []struct {
		name string
		o    Order
		err  error
		book []left
	}{
		{"joins the bids below the ask", post(ord(9, 3, "BUY", "YES", 49, 5)), nil, []left{{9, 5}, {2, 5}, {1, 5}}},
		{"joins the asks from the NO side", post(ord(9, 3, "BUY", "NO", 45, 5)), nil, []left{{2, 5}, {1, 5}, {9, 5}}},
		{"GTD may be post-only", with(ord(9, 3, "SELL", "YES", 49, 5), GTD, CancelResting, true), nil, []left{{2, 5}, {9, 5}, {1, 5}}},
		{"refused at the ask", post(ord(9, 3, "BUY", "YES", 50, 5)), ErrPostOnlyWouldCross, nil},
		{"refused through the ask", post(ord(9, 3, "BUY", "YES", 70, 5)), ErrPostOnlyWouldCross, nil},
		{"refused from the NO side", post(ord(9, 3, "SELL", "NO", 50, 5)), ErrPostOnlyWouldCross, nil},
		{"refused against its own account's ask", post(ord(9, 1, "BUY", "YES", 50, 5)), ErrPostOnlyWouldCross, nil},
		{"refused under CancelIncoming too", with(ord(9, 1, "BUY", "YES", 50, 5), GTC, CancelIncoming, true), ErrPostOnlyWouldCross, nil},
		{"IOC cannot be post-only", with(ord(9, 3, "BUY", "YES", 40, 5), IOC, CancelResting, true), ErrPostOnlyMustRest, nil},
		{"FOK cannot be post-only", with(ord(9, 3, "BUY", "YES", 40, 5), FOK, CancelResting, true), ErrPostOnlyMustRest, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := New(8)
			submitAll(t, b, setup...)
			before := b.Resting(nil)
			var r Result
			err := b.Submit(tt.o, &r)
			if !errors.Is(err, tt.err) {
				t.Fatalf("err = %v, want %v", err, tt.err)
			}
			if err != nil {
				if after := b.Resting(nil); !reflect.DeepEqual(after, before) {
					t.Fatalf("a refused order changed the book: %+v", after)
				}
				return
			}
			if len(r.Fills) != 0 || len(r.Cancelled) != 0 || r.Order.Status != StatusOpen {
				t.Fatalf("post-only order traded: %+v", r)
			}
			if got := resting(b); !reflect.DeepEqual(got, tt.book) {
				t.Fatalf("book %v, want %v", got, tt.book)
			}
			if st, _ := b.Order(9); !st.PostOnly {
				t.Fatalf("resting order forgot it is post-only: %+v", st)
			}
		})
	}
}

func TestAmend(t *testing.T) {
	// Bids at YES 40 of accounts 1, 2 and 3 (CANCEL_INCOMING), and a post-only one at 39; asks at 45,
	// 46 (account 3's) and 47 (account 2's). Order 1 has filled 3 of its 10 before the amend.
	setup := []Order{
		ord(1, 1, "BUY", "YES", 40, 10),
		ord(2, 2, "BUY", "YES", 40, 10),
		with(ord(3, 3, "BUY", "YES", 40, 10), GTC, CancelIncoming, false),
		with(ord(7, 6, "BUY", "YES", 39, 5), GTC, CancelResting, true),
		ord(8, 9, "SELL", "YES", 40, 3), // fills 3 of order 1
		ord(4, 4, "SELL", "YES", 45, 5),
		ord(5, 3, "SELL", "YES", 46, 5),
		ord(6, 2, "SELL", "YES", 47, 5),
	}
	bids := []left{{1, 7}, {2, 10}, {3, 10}, {7, 5}}
	asks := []left{{4, 5}, {5, 5}, {6, 5}}
	book := func(parts ...[]left) []left {
		var out []left
		for _, p := range parts {
			out = append(out, p...)
		}
		return out
	}
	tests := []struct {
		name      string
		id        OrderID
		price     int
		remaining int64
		quantity  int64 // the order's Quantity afterwards
		want      outcome
	}{
		{"less remaining keeps its place", 2, 40, 4, 4,
			outcome{status: StatusOpen, book: book([]left{{1, 7}, {2, 4}, {3, 10}, {7, 5}}, asks)}},
		{"less remaining of a partly filled order", 1, 40, 2, 5,
			outcome{filled: 3, status: StatusPartiallyFilled, book: book([]left{{1, 2}, {2, 10}, {3, 10}, {7, 5}}, asks)}},
		{"more remaining goes to the back", 1, 40, 8, 11,
			outcome{filled: 3, status: StatusPartiallyFilled, book: book([]left{{2, 10}, {3, 10}, {1, 8}, {7, 5}}, asks)}},
		{"a new price goes to the back of its level", 2, 39, 10, 10,
			outcome{status: StatusOpen, book: book([]left{{1, 7}, {3, 10}, {7, 5}, {2, 10}}, asks)}},
		{"the same price and remaining change nothing", 2, 40, 10, 10,
			outcome{status: StatusOpen, book: book(bids, asks)}},
		{"a crossing price trades, then rests", 1, 46, 12, 15,
			outcome{fills: []int64{5, 5}, surplus: 5, filled: 13, status: StatusPartiallyFilled,
				book: book([]left{{1, 2}, {2, 10}, {3, 10}, {7, 5}}, []left{{6, 5}})}},
		{"a crossing price cancels its own ask under CANCEL_RESTING", 2, 47, 20, 20,
			outcome{fills: []int64{5, 5}, surplus: 2*5 + 1*5, filled: 10, status: StatusPartiallyFilled, cancelled: []OrderID{6},
				book: []left{{2, 10}, {1, 7}, {3, 10}, {7, 5}}}},
		{"a crossing price stops at its own ask under CANCEL_INCOMING", 3, 47, 10, 10,
			outcome{fills: []int64{5}, surplus: 2 * 5, filled: 5, status: StatusPartiallyFilledCancelled, reason: ReasonSelfTrade,
				book: book([]left{{1, 7}, {2, 10}, {7, 5}}, []left{{5, 5}, {6, 5}})}},
		{"a crossing price fills it entirely", 2, 45, 5, 5,
			outcome{fills: []int64{5}, filled: 5, status: StatusFilled, book: book([]left{{1, 7}, {3, 10}, {7, 5}}, []left{{5, 5}, {6, 5}})}},
		{"post-only repriced without crossing", 7, 44, 5, 5,
			outcome{status: StatusOpen, book: book([]left{{7, 5}, {1, 7}, {2, 10}, {3, 10}}, asks)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, l := New(16), newLedger()
			fund(t, l, b, 2, 3, 4, 9)
			for _, o := range setup {
				l.trade(t, b, o)
			}
			var r Result
			if ok, err := l.amend(b, tt.id, tt.price, tt.remaining, &r); !ok || err != nil {
				t.Fatalf("amend: ok %v, %v", ok, err)
			}
			l.mustCheck(t, b)
			tt.want.check(t, b, &r)
			if r.Order.ID != tt.id || r.Order.Price != tt.price || r.Order.Quantity != tt.quantity {
				t.Errorf("order %+v, want id %d at %d for %d", r.Order, tt.id, tt.price, tt.quantity)
			}
			if st, ok := b.Order(tt.id); ok != r.Order.Status.Resting() || (ok && st != r.Order) {
				t.Errorf("book holds %+v (%v), result says %+v", st, ok, r.Order)
			}
		})
	}

	refused := []struct {
		name      string
		id        OrderID
		price     int
		remaining int64
		err       error
	}{
		{"post-only to a crossing price", 7, 45, 5, ErrPostOnlyWouldCross},
		{"post-only through the asks", 7, 60, 5, ErrPostOnlyWouldCross},
		{"unknown id", 99, 40, 5, ErrUnknownOrder},
		{"a filled order", 8, 40, 5, ErrUnknownOrder},
		{"price 0", 2, 0, 5, ErrInvalidPrice},
		{"price 100", 2, 100, 5, ErrInvalidPrice},
		{"remaining 0", 2, 40, 0, ErrInvalidQuantity},
		{"remaining negative", 2, 40, -1, ErrInvalidQuantity},
		{"quantity past the maximum", 1, 40, MaxQuantity - 2, ErrInvalidQuantity}, // 3 filled
	}
	for _, tt := range refused {
		t.Run(tt.name, func(t *testing.T) {
			b := New(16)
			submitAll(t, b, setup...)
			before := b.Resting(nil)
			var r Result
			if err := b.Amend(tt.id, tt.price, tt.remaining, &r); !errors.Is(err, tt.err) {
				t.Fatalf("err = %v, want %v", err, tt.err)
			}
			if after := b.Resting(nil); !reflect.DeepEqual(after, before) {
				t.Fatalf("a refused amend changed the book: %+v", after)
			}
		})
	}
	t.Run("the largest quantity is allowed", func(t *testing.T) {
		b := New(16)
		submitAll(t, b, setup...)
		var r Result
		if err := b.Amend(1, 40, MaxQuantity-3, &r); err != nil || r.Order.Quantity != MaxQuantity {
			t.Fatalf("err %v, order %+v", err, r.Order)
		}
	})
}

func TestAmendLock(t *testing.T) {
	buy := OrderState{Order: ord(1, 1, "BUY", "NO", 40, 10), Filled: 4} // locks 40 × 6
	sell := OrderState{Order: ord(2, 1, "SELL", "YES", 60, 10), Filled: 4}
	tests := []struct {
		st           *OrderState
		price        int
		remaining    int64
		cash, shares int64
	}{
		{&buy, 40, 6, 0, 0},
		{&buy, 45, 6, 30, 0},
		{&buy, 30, 8, 0, 0},
		{&buy, 30, 2, -180, 0},
		{&sell, 70, 6, 0, 0},
		{&sell, 50, 9, 0, 3},
		{&sell, 60, 1, 0, -5},
	}
	for _, tt := range tests {
		cash, shares := tt.st.AmendLock(tt.price, tt.remaining)
		if cash != tt.cash || shares != tt.shares {
			t.Errorf("%v %d left, amended to %d at %d: lock change %d cents, %d shares; want %d, %d",
				tt.st.Side, tt.st.Remaining(), tt.remaining, tt.price, cash, shares, tt.cash, tt.shares)
		}
		amended := *tt.st
		amended.Price, amended.Quantity = tt.price, tt.st.Filled+tt.remaining
		c0, s0 := tt.st.Lock()
		c1, s1 := amended.Lock()
		if c1-c0 != cash || s1-s0 != shares {
			t.Errorf("AmendLock is not the amended order's Lock less the order's")
		}
	}
}

// fund mints 50 pairs for each account against account 1000, so that each holds YES shares to sell
// (and account 1000 the NO side), and grants every account in the tests ample cash.
func fund(t *testing.T, l *ledger, b *Book, accounts ...AccountID) {
	t.Helper()
	for a := AccountID(1); a <= 10; a++ {
		l.grant(a, 100_000)
	}
	l.grant(1000, 1_000_000)
	id := OrderID(1000)
	for _, a := range accounts {
		l.trade(t, b, ord(id, a, "BUY", "YES", 50, 50))
		l.trade(t, b, ord(id+1, 1000, "BUY", "NO", 50, 50))
		id += 2
	}
}
