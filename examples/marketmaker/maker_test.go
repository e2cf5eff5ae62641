package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/pmx-dev/pmx/client"
	"github.com/pmx-dev/pmx/internal/exchangetest"
	"github.com/pmx-dev/pmx/internal/kit/auth"
	"github.com/pmx-dev/pmx/internal/pgtest"
	"github.com/pmx-dev/pmx/internal/poll"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

func sdkClient(t *testing.T, tg *exchangetest.Target) *client.Client {
	t.Helper()
	c, err := client.New(tg.URL+"/api/v1", tg.NewAccount(t, "mm").Key)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// sdkClients opens an account on tg and returns an SDK client of it with a trade key and one with
// a cancel key.
func sdkClients(t *testing.T, tg *exchangetest.Target) (trade, cancel *client.Client) {
	t.Helper()
	acct := tg.NewAccount(t, "mm")
	trade, err := client.New(tg.URL+"/api/v1", acct.Key)
	if err != nil {
		t.Fatal(err)
	}
	cancel, err = client.New(tg.URL+"/api/v1", tg.AddKey(t, acct, auth.KeySpec{Scope: auth.ScopeCancel}).Key)
	if err != nil {
		t.Fatal(err)
	}
	return trade, cancel
}

// TestMakerQuotesSkewsAndStops runs the Maker against a real exchange: it quotes both sides
// around its fair value; after a taker hits its bid it holds YES and both quotes move down by the
// skew; when stopped it leaves no open order and its dead-man switch disarmed, having cancelled
// with its key of scope cancel.
func TestMakerQuotesSkewsAndStops(t *testing.T) {
	tg := exchangetest.StartDev(t)
	market := tg.NewMarket(t, nil).ID
	mmClient, mmCancel := sdkClients(t, tg)
	taker := sdkClient(t, tg)
	var mu sync.Mutex
	var bid, ask, inventory int
	m := &Maker{C: mmClient, Cancel: mmCancel, Market: market, Fair: 50, Alpha: 0, Spread: 4, Size: 10, Skew: 0.5, MaxPosition: 100,
		Heartbeat: 10 * time.Second, Log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	m.changed = func(m *Maker) {
		mu.Lock()
		defer mu.Unlock()
		bid, ask, inventory = 0, 0, m.inventory
		if m.bid != nil {
			bid = m.bid.price
		}
		if m.ask != nil {
			ask = m.ask.price
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	var runErr error
	finished := make(chan struct{})
	go func() { runErr = m.Run(ctx); close(finished) }()
	t.Cleanup(func() { cancel(); <-finished })

	waitBook := func(wantBid, wantAsk int) {
		t.Helper()
		poll.Wait(t, 15*time.Second, fmt.Sprintf("the maker's quotes at %d / %d", wantBid, wantAsk), func() bool {
			b, err := taker.OrderBook(context.Background(), market)
			if err != nil {
				t.Fatal(err)
			}
			y := b.OrderBookYes
			return len(y.Bids) == 1 && len(y.Asks) == 1 && y.Bids[0].Price == wantBid && y.Asks[0].Price == wantAsk &&
				y.Bids[0].Quantity == 10 && y.Asks[0].Quantity == 10
		})
	}
	waitBook(48, 52)

	// A taker sells 10 YES into the bid (buying NO at 52 is a YES ask at 48): the maker holds 10
	// YES and leans 5 cents down: 43 / 47.
	if _, err := taker.PlaceOrder(context.Background(), client.PlaceOrderRequest{MarketID: market, Side: client.BUY,
		Outcome: client.OutcomeNO, Price: 52, Quantity: 10}); err != nil {
		t.Fatal(err)
	}
	waitBook(43, 47)
	// The book shows the new quotes once they commit; the maker learns it, and calls changed, when
	// their answers reach it, a moment later.
	poll.Wait(t, 15*time.Second, "the maker to hold 10 and quote 43 / 47", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return inventory == 10 && bid == 43 && ask == 47
	})

	cancel()
	<-finished
	if runErr != nil {
		t.Fatalf("Run: %v", runErr)
	}
	open, err := mmClient.Orders(context.Background(), &client.ListOrdersParams{Status: ptr(client.OrderStatusOPEN)})
	if err != nil || len(open.Orders) != 0 {
		t.Fatalf("after stopping the maker has open orders: %v, %+v", err, open)
	}
	hb, err := mmClient.Heartbeat(context.Background(), 0)
	if err != nil || hb.Armed {
		t.Fatalf("the dead-man switch after stopping: %v, %+v", err, hb)
	}
}

// TestMakerGroupPausesAndResumes places the Maker's quotes into an order group of 10 shares in a
// 2 s window: a taker filling 10 of the bid triggers it, the exchange cancels both quotes (the ask
// too, unfilled), the Maker quotes nothing while the window runs, then resets the group and
// quotes again, leaning on what it now holds.
func TestMakerGroupPausesAndResumes(t *testing.T) {
	tg := exchangetest.StartDev(t)
	market := tg.NewMarket(t, nil).ID
	mmClient, mmCancel := sdkClients(t, tg)
	taker := sdkClient(t, tg)
	m := &Maker{C: mmClient, Cancel: mmCancel, Market: market, Fair: 50, Alpha: 0, Spread: 4, Size: 10, Skew: 0.5, MaxPosition: 100,
		Heartbeat: 10 * time.Second, GroupFills: 10, GroupWindow: 2 * time.Second, Log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	ctx, cancel := context.WithCancel(context.Background())
	var runErr error
	finished := make(chan struct{})
	go func() { runErr = m.Run(ctx); close(finished) }()
	t.Cleanup(func() { cancel(); <-finished })
	book := func() client.OrderBook {
		b, err := taker.OrderBook(context.Background(), market)
		if err != nil {
			t.Fatal(err)
		}
		return b.OrderBookYes
	}
	poll.Wait(t, 15*time.Second, "the maker's first quotes", func() bool {
		y := book()
		return len(y.Bids) == 1 && len(y.Asks) == 1
	})
	groups, err := mmClient.OrderGroups(context.Background())
	if err != nil || len(groups) != 1 || groups[0].FillLimit != 10 || groups[0].WindowSeconds != 2 {
		t.Fatalf("the maker's order group: %v, %+v", err, groups)
	}
	open, err := mmClient.Orders(context.Background(), &client.ListOrdersParams{Status: ptr(client.OrderStatusOPEN)})
	if err != nil || len(open.Orders) != 2 || open.Orders[0].OrderGroupID == nil || *open.Orders[0].OrderGroupID != groups[0].ID ||
		open.Orders[1].OrderGroupID == nil || *open.Orders[1].OrderGroupID != groups[0].ID {
		t.Fatalf("the maker's quotes are not in its group: %v, %+v", err, open)
	}

	took, err := taker.PlaceOrder(context.Background(), client.PlaceOrderRequest{MarketID: market, Side: client.BUY,
		Outcome: client.OutcomeNO, Price: 52, Quantity: 10})
	if err != nil || took.FilledQuantity != 10 {
		t.Fatalf("taking the bid: %v, %+v", err, took)
	}
	// The trigger cancelled the ask in the same batch: the book is empty at once.
	if y := book(); len(y.Bids) != 0 || len(y.Asks) != 0 {
		t.Fatalf("after the group's trigger the book holds %+v", y)
	}
	triggered := time.Now()
	poll.Wait(t, 15*time.Second, "the maker to quote again, 43 / 47, after its pause", func() bool {
		y := book()
		return len(y.Bids) == 1 && len(y.Asks) == 1 && y.Bids[0].Price == 43 && y.Asks[0].Price == 47
	})
	if paused := time.Since(triggered); paused < 1500*time.Millisecond {
		t.Errorf("the maker quoted again %v after its group triggered, within its 2 s window", paused)
	}
	if g, err := mmClient.OrderGroup(context.Background(), groups[0].ID); err != nil || g.Triggered {
		t.Fatalf("the group after the maker resumed: %v, %+v", err, g)
	}
	cancel()
	<-finished
	if runErr != nil {
		t.Fatalf("Run: %v", runErr)
	}
}

// TestTargets is the quoting rule: around the fair value less the skew, clamped to the price
// range, a side dropped at the position limit.
func TestTargets(t *testing.T) {
	tests := []struct {
		fair, skew          float64
		spread, inv, maxPos int
		bid, ask            int
	}{
		{50, 0.5, 4, 0, 100, 48, 52},
		{50, 0.5, 4, 10, 100, 43, 47},
		{50, 0.5, 4, -10, 100, 53, 57},
		{50, 0.5, 3, 0, 100, 48, 52},
		{2, 0, 4, 0, 100, 1, 4},
		{99, 0, 4, 0, 100, 97, 99},
		{50, 0, 4, 100, 100, 0, 52},
		{50, 0, 4, -100, 100, 48, 0},
	}
	for _, tt := range tests {
		m := &Maker{Fair: tt.fair, Skew: tt.skew, Spread: tt.spread, inventory: tt.inv, MaxPosition: tt.maxPos}
		if bid, ask := m.targets(); bid != tt.bid || ask != tt.ask {
			t.Errorf("fair %v skew %v spread %d inventory %d: %d / %d, want %d / %d", tt.fair, tt.skew, tt.spread, tt.inv, bid, ask, tt.bid, tt.ask)
		}
	}
}
