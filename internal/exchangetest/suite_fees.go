package exchangetest

import (
	"net/http"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/pmx-dev/pmx/apiserver"
)

// testFees: a market's fee schedule (docs/fees.md) charges each fill by the engine's formula —
// the taker ⌈rate × q × p × (100 − p) / 10⁶⌉ cents, a maker's rebate rounded down — and every
// answer shows it: the placement's trades, the fills, the account's balance and GET /account/fees;
// a resting BUY locks its maker fee's worst case and a cancel gives it back; a schedule change
// applies to orders placed after it, a resting order keeping its own; an event's schedule reaches
// its markets. The invariants (CheckInvariants, with the exchange's account among the accounts)
// hold after it all.
func testFees(t *testing.T, tg *Target) {
	m := tg.NewMarket(t, nil)
	maker, taker := tg.NewAccount(t, "fee-maker"), tg.NewAccount(t, "fee-taker")
	if got := maker.market(t, m.ID); got.Fees != (apiserver.Fees{}) {
		t.Fatalf("a new market's fees: %+v, want none", got.Fees)
	}
	got := tg.Markets.SetFees(t, m.ID, &apiserver.Fees{TakerBps: 700, MakerBps: -175})
	if want := (apiserver.Fees{TakerBps: 700, MakerBps: -175}); got.Fees != want || maker.market(t, m.ID).Fees != want {
		t.Fatalf("the market's fees after setting them: %+v, want %+v", got.Fees, want)
	}

	makerCash, _ := maker.Balance(t)
	takerCash, _ := taker.Balance(t)
	// The maker's BUY NO at 60 is a YES ask at 40; the taker's BUY YES at 45 trades 10 at 40.
	rest := maker.Place(t, m.ID, "BUY", "NO", 60, 10)
	if _, locked := maker.Balance(t); locked != 600 {
		t.Fatalf("a resting BUY NO 10 at 60 under a rebate locks %d, want 600 (no fee to reserve)", locked)
	}
	placed := taker.Place(t, m.ID, "BUY", "YES", 45, 10)
	// Taker: ⌈700 × 10 × 40 × 60 / 10⁶⌉ = ⌈16.8⌉ = 17. Maker: a rebate of ⌊175 × 10 × 40 × 60 / 10⁶⌋ = 4.
	if len(placed.Trades) != 1 || placed.Trades[0].Price != 40 || placed.Trades[0].Fee != 17 {
		t.Fatalf("the taker's placement: trades %+v, want one of 10 at 40 with fee 17", placed.Trades)
	}
	balance := func(c *Client, wantAvailable, wantLocked int64) {
		t.Helper()
		if a, l := c.Balance(t); a != wantAvailable || l != wantLocked {
			t.Fatalf("%s: available %d, locked %d; want %d and %d", c.Name, a, l, wantAvailable, wantLocked)
		}
	}
	balance(taker, takerCash-400-17, 0)
	balance(maker, makerCash-600+4, 0)
	fill := func(c *Client, order uuid.UUID, role string, fee int64) {
		t.Helper()
		var page struct{ Fills []apiserver.Fill }
		c.Expect(t, "GET", "/fills?marketId="+m.ID.String(), nil, http.StatusOK, &page)
		for _, f := range page.Fills {
			if f.OrderID == order {
				if f.Role != role || f.Fee != fee {
					t.Fatalf("%s's fill %+v: want role %s, fee %d", c.Name, f, role, fee)
				}
				return
			}
		}
		t.Fatalf("%s has no fill of order %s: %+v", c.Name, order, page.Fills)
	}
	fill(taker, placed.ID, "TAKER", 17)
	fill(maker, rest.ID, "MAKER", -4)
	fees := func(c *Client, paid, rebates, fills int64) {
		t.Helper()
		var f apiserver.AccountFees
		c.Expect(t, "GET", "/account/fees", nil, http.StatusOK, &f)
		if f.Paid != paid || f.Rebates != rebates || f.Net != paid-rebates || f.Fills != fills || !f.Since.Before(f.Until) {
			t.Fatalf("%s's GET /account/fees: %+v, want paid %d, rebates %d over %d fills", c.Name, f, paid, rebates, fills)
		}
	}
	fees(taker, 17, 0, 1)
	fees(maker, 0, 4, 1)
	var none apiserver.AccountFees
	since := time.Now().Add(time.Hour).UTC().Format(time.RFC3339)
	taker.Expect(t, "GET", "/account/fees?since="+since+"&until="+time.Now().Add(2*time.Hour).UTC().Format(time.RFC3339), nil, http.StatusOK, &none)
	if none.Paid != 0 || none.Fills != 0 {
		t.Fatalf("GET /account/fees of a period with no fill: %+v", none)
	}
	taker.ExpectError(t, "GET", "/account/fees?since="+since+"&until="+since, nil, http.StatusBadRequest, "out_of_range")
	taker.ExpectError(t, "GET", "/account/fees?since=2020-01-01T00:00:00Z&until=2022-01-01T00:00:00Z", nil, http.StatusBadRequest, "out_of_range")
	taker.ExpectError(t, "GET", "/account/fees?since=yesterday", nil, http.StatusBadRequest, "invalid_value")

	// A maker fee: a resting BUY locks its worst case, ⌈350 × 30 × 70 / 10⁶⌉ = 1 cent a share.
	tg.Markets.SetFees(t, m.ID, &apiserver.Fees{TakerBps: 700, MakerBps: 350})
	before, _ := maker.Balance(t)
	bid := maker.Place(t, m.ID, "BUY", "YES", 30, 10)
	balance(maker, before-310, 310)
	var cancelled apiserver.Order
	maker.Expect(t, "POST", "/cancel-order", map[string]any{"orderId": bid.ID}, http.StatusOK, &cancelled)
	balance(maker, before, 0)

	// A resting order keeps the schedule it was placed under: the fees go, its maker fee stays.
	bid = maker.Place(t, m.ID, "BUY", "YES", 30, 10)
	tg.Markets.SetFees(t, m.ID, nil)
	if got := maker.market(t, m.ID).Fees; got != (apiserver.Fees{}) {
		t.Fatalf("the market's fees after removing them: %+v, want none", got)
	}
	takerCash, _ = taker.Balance(t)
	sold := taker.Place(t, m.ID, "SELL", "YES", 30, 10) // the taker sells the YES it bought
	if len(sold.Trades) != 1 || sold.Trades[0].Fee != 0 {
		t.Fatalf("a taker under no schedule: trades %+v, want one with no fee", sold.Trades)
	}
	balance(taker, takerCash+300, 0)
	fill(maker, bid.ID, "MAKER", 8) // ⌈350 × 10 × 30 × 70 / 10⁶⌉ = ⌈7.35⌉
	balance(maker, before-300-8, 0)
	fees(maker, 8, 4, 2)

	// An event's schedule reaches its markets; a market's own wins.
	ev := tg.events().Create(t, "a", "b")
	e := tg.events().SetFees(t, ev.ID, &apiserver.Fees{TakerBps: 100, MakerBps: 0})
	if e.Fees == nil || *e.Fees != (apiserver.Fees{TakerBps: 100}) {
		t.Fatalf("the event's fees: %+v", e.Fees)
	}
	a, b := ev.Outcomes[0].MarketID, ev.Outcomes[1].MarketID
	if got := maker.market(t, a).Fees; got != (apiserver.Fees{TakerBps: 100}) {
		t.Fatalf("a market of an event with fees: %+v", got)
	}
	tg.Markets.SetFees(t, b, &apiserver.Fees{TakerBps: 200, MakerBps: 200})
	if got := maker.market(t, b).Fees; got != (apiserver.Fees{TakerBps: 200, MakerBps: 200}) {
		t.Fatalf("a market with fees of its own in an event with fees: %+v", got)
	}
	tg.events().SetFees(t, ev.ID, nil)
	if got := maker.market(t, a).Fees; got != (apiserver.Fees{}) {
		t.Fatalf("a market of an event whose fees were removed: %+v", got)
	}

	// Bad schedules, through the admin API: refused, nothing changed.
	if _, admin := tg.Markets.(AdminMarkets); admin {
		for _, body := range []map[string]any{
			{"takerBps": 700, "makerBps": -701},
			{"takerBps": 100, "makerBps": 200},
			{"takerBps": 10001, "makerBps": 0},
			{"takerBps": -1, "makerBps": 0},
			{"takerBps": 700},
			{"takerBps": 1.5, "makerBps": 0},
		} {
			var e ErrorBody
			tg.Admin(t, "PUT", "/admin/v1/markets/"+b.String()+"/fees", body, http.StatusBadRequest, &e)
			if e.Details.Field == "" {
				t.Fatalf("PUT fees %v: %+v names no field", body, e)
			}
		}
		var e ErrorBody
		tg.Admin(t, "PUT", "/admin/v1/events/"+ev.ID.String()+"/fees", map[string]any{"takerBps": 1}, http.StatusBadRequest, &e)
		if e.Details.Code != "missing_field" || e.Details.Field != "makerBps" {
			t.Fatalf("PUT an event's fees without makerBps: %+v", e)
		}
		ok := map[string]any{"takerBps": 1, "makerBps": 0}
		for _, kind := range []struct{ path, notFound string }{{"/admin/v1/markets/", "market_not_found"}, {"/admin/v1/events/", "event_not_found"}} {
			for _, method := range []string{"PUT", "DELETE"} {
				var body any
				if method == "PUT" {
					body = ok
				}
				tg.AdminAs(t, "", method, kind.path+b.String()+"/fees", body, http.StatusUnauthorized, nil)
				tg.Admin(t, method, kind.path+"42/fees", body, http.StatusBadRequest, &e)
				if e.Details.Code != "invalid_uuid" {
					t.Errorf("%s %s42/fees: %+v", method, kind.path, e)
				}
				tg.Admin(t, method, kind.path+uuid.NewString()+"/fees", body, http.StatusNotFound, &e)
				if e.Details.Code != kind.notFound {
					t.Errorf("%s %s{unknown}/fees: %+v", method, kind.path, e)
				}
			}
		}
		if got := maker.market(t, b).Fees; got != (apiserver.Fees{TakerBps: 200, MakerBps: 200}) {
			t.Fatalf("refused schedules changed the market's fees to %+v", got)
		}
	}
}
