package loadgen

import (
	"encoding/json"
	"testing"
)

const (
	mktA = "0b7c6a52-3c55-4f1e-9d8c-2f6f7b1b0a01"
	mktB = "0b7c6a52-3c55-4f1e-9d8c-2f6f7b1b0a02"
)

func newTestState() *botState {
	return newBotState(map[string]int{mktA: 0, mktB: 1})
}

func decode[T any](t *testing.T, body string) T {
	t.Helper()
	var v T
	if err := json.Unmarshal([]byte(body), &v); err != nil {
		t.Fatalf("decoding %s: %v", body, err)
	}
	return v
}

func TestHoldingsFromPlacements(t *testing.T) {
	s := newTestState()

	// A BUY YES that filled 7 of 10 and rests the rest.
	buy := order{market: 0, outcome: outYes, price: 55, qty: 10}
	r := decode[orderResp](t, `{"id":"o1","marketId":"`+mktA+`","side":"BUY","outcome":"YES","price":55,
		"quantity":10,"filledQuantity":7,"status":"PARTIALLY_FILLED",
		"trades":[{"id":"t1","quantity":4,"price":54},{"id":"t2","quantity":3,"price":55}]}`)
	s.placed(buy, &r)
	if got := s.available(0, outYes); got != 7 {
		t.Fatalf("YES held after buy = %d, want 7", got)
	}
	if len(s.open) != 1 || s.open[0].id != "o1" || s.open[0].sell {
		t.Fatalf("open orders %+v, want the resting buy o1", s.open)
	}

	// A BUY NO that filled completely is not a cancel candidate.
	r = decode[orderResp](t, `{"id":"o2","status":"FILLED","quantity":3,"filledQuantity":3,"trades":[{"quantity":3}]}`)
	s.placed(order{market: 1, outcome: outNo, price: 40, qty: 3}, &r)
	if got := s.available(1, outNo); got != 3 || len(s.open) != 1 {
		t.Fatalf("NO held in B = %d (want 3), open %+v", got, s.open)
	}

	// SELL 5 YES: 2 fill, 3 rest locked. Either way the 5 are no longer sellable.
	sell := order{market: 0, sell: true, outcome: outYes, price: 60, qty: 5}
	r = decode[orderResp](t, `{"id":"o3","status":"PARTIALLY_FILLED","quantity":5,"filledQuantity":2,"trades":[{"quantity":2}]}`)
	s.placed(sell, &r)
	if got := s.available(0, outYes); got != 2 {
		t.Fatalf("YES held after selling 5 of 7 = %d, want 2", got)
	}

	// Cancelling it (one more share filled meanwhile) unlocks the 2 still unfilled.
	i := len(s.open) - 1
	oo := s.takeOpen(i)
	if oo.id != "o3" || !oo.sell {
		t.Fatalf("took %+v, want the sell o3", oo)
	}
	r = decode[orderResp](t, `{"id":"o3","status":"PARTIALLY_FILLED_CANCELLED","quantity":5,"filledQuantity":3}`)
	s.cancelled(oo, &r)
	if got := s.available(0, outYes); got != 4 {
		t.Fatalf("YES held after cancel = %d, want 4", got)
	}

	// A failed SELL: the shares may be locked, so they count as gone.
	s.placeUnknown(order{market: 0, sell: true, outcome: outYes, price: 60, qty: 3})
	if got := s.available(0, outYes); got != 1 {
		t.Fatalf("YES held after an unknown sell = %d, want 1", got)
	}
	// A rejected BUY changes nothing; a SELL rejected for lack of shares forgets them.
	s.placeRejected(order{market: 1, outcome: outYes, qty: 3}, "insufficient_funds")
	s.placeRejected(order{market: 1, sell: true, outcome: outNo, qty: 2}, "market_not_open")
	if got := s.available(1, outNo); got != 3 {
		t.Fatalf("NO held after other rejections = %d, want 3", got)
	}
	s.placeRejected(order{market: 1, sell: true, outcome: outNo, qty: 2}, "insufficient_shares")
	if got := s.available(1, outNo); got != 0 {
		t.Fatalf("NO held after insufficient_shares = %d, want 0", got)
	}
}

func TestHoldingsFromCancelEverythingAndPositions(t *testing.T) {
	s := newTestState()
	s.avail[2*0+int(outNo)] = 10
	s.placed(order{market: 0, sell: true, outcome: outNo, price: 30, qty: 6},
		&orderResp{ID: "s1", Status: "OPEN", Quantity: 6})
	s.placed(order{market: 1, outcome: outYes, price: 30, qty: 6}, &orderResp{ID: "b1", Status: "OPEN", Quantity: 6})
	if got := s.available(0, outNo); got != 4 || len(s.open) != 2 {
		t.Fatalf("after a resting sell: NO held %d (want 4), open %+v", got, s.open)
	}

	rs := decode[[]orderResp](t, `[
		{"id":"s1","marketId":"`+mktA+`","side":"SELL","outcome":"NO","price":30,"quantity":6,"filledQuantity":1,"status":"PARTIALLY_FILLED_CANCELLED"},
		{"id":"b1","marketId":"`+mktB+`","side":"BUY","outcome":"YES","price":30,"quantity":6,"filledQuantity":0,"status":"CANCELLED"},
		{"id":"zz","marketId":"ffffffff-0000-0000-0000-000000000000","side":"SELL","outcome":"YES","quantity":9,"filledQuantity":0,"status":"CANCELLED"}]`)
	s.cancelledAll(rs)
	if got := s.available(0, outNo); got != 9 {
		t.Fatalf("NO held after cancel-everything = %d, want 9", got)
	}
	if got := s.available(1, outYes); got != 0 || len(s.open) != 0 {
		t.Fatalf("after cancel-everything: YES held in B %d (want 0), open %+v", got, s.open)
	}

	ps := decode[positionsResp](t, `{"positions":[
		{"id":"p1","marketId":"`+mktA+`","marketQuestion":"?","marketStatus":"OPEN","outcome":"YES","quantity":12,"lockedQuantity":5},
		{"id":"p2","marketId":"`+mktB+`","outcome":"NO","quantity":3,"lockedQuantity":0},
		{"id":"p3","marketId":"ffffffff-0000-0000-0000-000000000000","outcome":"NO","quantity":8,"lockedQuantity":0}]}`)
	s.resync(ps.Positions)
	want := []int{7, 0, 0, 3} // A YES, A NO (no longer listed), B YES, B NO
	for i, w := range want {
		if s.avail[i] != w {
			t.Fatalf("after resync avail = %v, want %v", s.avail, want)
		}
	}
}

func TestOpenOrdersAreBounded(t *testing.T) {
	s := newTestState()
	for i := range maxOpenTracked + 5 {
		s.placed(order{market: 0, outcome: outYes, price: 10, qty: 1}, &orderResp{ID: string(rune('A' + i)), Status: "OPEN"})
	}
	if len(s.open) != maxOpenTracked || s.open[0].id != string(rune('A'+5)) {
		t.Fatalf("%d open orders tracked, oldest %q; want %d, oldest %q", len(s.open), s.open[0].id, maxOpenTracked, string(rune('A'+5)))
	}
}

func TestHoldingsFromAmends(t *testing.T) {
	s := newTestState()
	s.avail[2*0+int(outYes)] = 10
	// SELL 6 YES at 60: 2 fill at once, 4 rest; 4 shares still sellable.
	sell := order{market: 0, sell: true, outcome: outYes, price: 60, qty: 6}
	s.placed(sell, &orderResp{ID: "s1", Status: "PARTIALLY_FILLED", Quantity: 6, FilledQuantity: 2})
	if got := s.available(0, outYes); got != 4 || len(s.open) != 1 || s.open[0].remaining != 4 || s.open[0].quantity != 6 {
		t.Fatalf("after the sell: %d held, open %+v", got, s.open)
	}
	// Another fill of 1 that the bot does not see; then it lowers the remaining to 2 at the same
	// price. The answer's quantity is filled (3) + 2 = 5: the order locks one share less than
	// before (it had 3 left), which is exactly 6 - 5.
	oo := s.takeOpen(0)
	s.amended(oo, 0, &orderResp{ID: "s1", Status: "PARTIALLY_FILLED", Quantity: 5, FilledQuantity: 3})
	if got := s.available(0, outYes); got != 5 {
		t.Fatalf("YES held after lowering the sell = %d, want 5", got)
	}
	if len(s.open) != 1 || s.open[0].price != 60 || s.open[0].quantity != 5 || s.open[0].remaining != 2 {
		t.Fatalf("open after the amend %+v", s.open)
	}
	// Moved to 58 it crosses and fills: its shares were locked and are sold; it is no longer open.
	oo = s.takeOpen(0)
	s.amended(oo, 58, &orderResp{ID: "s1", Status: "FILLED", Quantity: 5, FilledQuantity: 5, Trades: []tradeResp{{Quantity: 2}}})
	if got := s.available(0, outYes); got != 5 || len(s.open) != 0 {
		t.Fatalf("after a filling amend: %d held (want 5), open %+v", got, s.open)
	}

	// A BUY moved to a crossing price buys what its trades say; it rests with the rest.
	buy := order{market: 1, outcome: outNo, price: 30, qty: 5}
	s.placed(buy, &orderResp{ID: "b1", Status: "OPEN", Quantity: 5})
	oo = s.takeOpen(0)
	s.amended(oo, 45, &orderResp{ID: "b1", Status: "PARTIALLY_FILLED", Quantity: 8, FilledQuantity: 3,
		Trades: []tradeResp{{Quantity: 1}, {Quantity: 2}}})
	if got := s.available(1, outNo); got != 3 || len(s.open) != 1 || s.open[0].price != 45 || s.open[0].remaining != 5 {
		t.Fatalf("after a crossing buy amend: %d NO held (want 3), open %+v", got, s.open)
	}

	// Refused: no longer open, it is forgotten; short of cash, it stays.
	oo = s.takeOpen(0)
	s.amendRefused(oo, "insufficient_funds")
	if len(s.open) != 1 {
		t.Fatalf("an order refused for funds was forgotten: %+v", s.open)
	}
	oo = s.takeOpen(0)
	s.amendRefused(oo, "order_not_open")
	if len(s.open) != 0 {
		t.Fatalf("an order no longer open is still a candidate: %+v", s.open)
	}

	// Unknown fate: a SELL asked to rest 3 may have locked 3 more shares; it stays a candidate.
	s.placed(order{market: 0, sell: true, outcome: outYes, price: 70, qty: 1}, &orderResp{ID: "s2", Status: "OPEN", Quantity: 1})
	oo = s.takeOpen(0)
	s.amendUnknown(oo, 3)
	if got := s.available(0, outYes); got != 1 || len(s.open) != 1 {
		t.Fatalf("after an unknown sell amend: %d held (want 5-1-3 = 1), open %+v", got, s.open)
	}
}

func TestCancelsOfSeveralOrders(t *testing.T) {
	s := newTestState()
	for i, m := range []int{0, 1, 0, 1, 0} {
		s.placed(order{market: m, outcome: outYes, price: 10, qty: 1}, &orderResp{ID: string(rune('A' + i)), Status: "OPEN"})
	}
	taken := s.takeOldest(2, nil)
	if len(taken) != 2 || taken[0].id != "A" || taken[1].id != "B" || len(s.open) != 3 || s.open[0].id != "C" {
		t.Fatalf("took %+v, left %+v", taken, s.open)
	}
	if taken = s.takeOldest(5, taken[:0]); len(taken) != 3 || len(s.open) != 0 {
		t.Fatalf("took %+v of 3, left %+v", taken, s.open)
	}
	for i, m := range []int{0, 1, 0} {
		s.placed(order{market: m, outcome: outYes, price: 10, qty: 1}, &orderResp{ID: string(rune('a' + i)), Status: "OPEN"})
	}
	s.forgetMarket(0)
	if len(s.open) != 1 || s.open[0].id != "b" {
		t.Fatalf("after forgetting market 0: %+v", s.open)
	}
	// The cancelled SELLs give their unfilled shares back; the open orders are left alone.
	s.cancelledMany([]orderResp{{MarketID: mktA, Side: "SELL", Outcome: "NO", Quantity: 6, FilledQuantity: 2},
		{MarketID: mktB, Side: "BUY", Outcome: "YES", Quantity: 3}})
	if got := s.available(0, outNo); got != 4 || len(s.open) != 1 {
		t.Fatalf("after a cancel of several: %d NO held (want 4), open %+v", got, s.open)
	}
}
