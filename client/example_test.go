package client_test

import (
	"context"
	"errors"
	"fmt"
	"log"

	"github.com/pmx-dev/pmx/client"
)

// Each example runs against a real exchange (examples_main_test.go): baseURL is its API's server
// URL, apiKey alice's key and otherKey bob's; newMarket opens a market for the example alone.

// A client signs every request with its API key; the server URL ends in /api/v1.
func ExampleNew() {
	c, err := client.New(baseURL, apiKey) // e.g. "http://localhost:8080/api/v1", "pmx_..."
	if err != nil {
		log.Fatal(err)
	}
	account, err := c.Account(context.Background())
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(account.Name)

	// A wrong key is refused with the API's error, which IsCode reads.
	stranger, _ := client.New(baseURL, "pmx_0000000000000000_notakeynotakeynotakeynotakeyno")
	_, err = stranger.Account(context.Background())
	fmt.Println(client.IsCode(err, "invalid_api_key"))
	// Output:
	// alice
	// true
}

// A BUY YES at 45 meets bob's resting BUY NO at 60, a YES ask at 40: it trades at the resting
// order's price, 40, and locks no more than that.
func ExampleClient_PlaceOrder() {
	ctx := context.Background()
	market := newMarket("Will it rain tomorrow?")
	alice, _ := client.New(baseURL, apiKey)
	bob, _ := client.New(baseURL, otherKey)

	if _, err := bob.PlaceOrder(ctx, client.PlaceOrderRequest{MarketID: market, Side: client.BUY,
		Outcome: client.OutcomeNO, Price: 60, Quantity: 5}); err != nil {
		log.Fatal(err)
	}
	placed, err := alice.PlaceOrder(ctx, client.PlaceOrderRequest{MarketID: market, Side: client.BUY,
		Outcome: client.OutcomeYES, Price: 45, Quantity: 3})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(placed.Status, placed.FilledQuantity)
	for _, t := range placed.Trades {
		fmt.Printf("%d %s at %d\n", t.Quantity, t.Outcome, t.Price)
	}
	// Output:
	// FILLED 3
	// 3 YES at 40
}

// Cancelling an order returns it as it left the book.
func ExampleClient_CancelOrder() {
	ctx := context.Background()
	market := newMarket("Will the bus be late?")
	c, _ := client.New(baseURL, apiKey)

	bid, err := c.PlaceOrder(ctx, client.PlaceOrderRequest{MarketID: market, Side: client.BUY,
		Outcome: client.OutcomeYES, Price: 30, Quantity: 10})
	if err != nil {
		log.Fatal(err)
	}
	cancelled, err := c.CancelOrder(ctx, bid.ID)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(bid.Status, "then", cancelled.Status, *cancelled.CancelReason)

	// An order cancelled already cannot be cancelled again.
	_, err = c.CancelOrder(ctx, bid.ID)
	var apiErr *client.APIError
	if errors.As(err, &apiErr) {
		fmt.Println(apiErr.Status, apiErr.Code)
	}
	// Output:
	// OPEN then CANCELLED USER
	// 400 order_not_open
}

// A batch places up to 20 orders in one request; each is answered on its own, so one refused
// order does not stop the others.
func ExampleClient_PlaceOrders() {
	ctx := context.Background()
	market := newMarket("Will the train be on time?")
	c, _ := client.New(baseURL, apiKey)

	results, err := c.PlaceOrders(ctx, []client.PlaceOrderRequest{
		{MarketID: market, Side: client.BUY, Outcome: client.OutcomeYES, Price: 20, Quantity: 5},
		{MarketID: market, Side: client.BUY, Outcome: client.OutcomeYES, Price: 100, Quantity: 5},
		{MarketID: market, Side: client.BUY, Outcome: client.OutcomeNO, Price: 70, Quantity: 5},
	})
	if err != nil {
		log.Fatal(err)
	}
	for i, r := range results {
		if r.Err != nil {
			fmt.Println(i, "refused:", r.Err.Code, r.Err.Field)
			continue
		}
		fmt.Println(i, "placed:", r.Placed.Status)
	}
	// Output:
	// 0 placed: OPEN
	// 1 refused: out_of_range price
	// 2 placed: OPEN
}

// Positions lists the shares an account holds, in every market.
func ExampleClient_Positions() {
	ctx := context.Background()
	market := newMarket("Will it snow in May?")
	alice, _ := client.New(baseURL, apiKey)
	bob, _ := client.New(baseURL, otherKey)

	// A BUY YES and a BUY NO whose prices add up to 100 match: each gets its shares.
	if _, err := bob.PlaceOrder(ctx, client.PlaceOrderRequest{MarketID: market, Side: client.BUY,
		Outcome: client.OutcomeNO, Price: 75, Quantity: 4}); err != nil {
		log.Fatal(err)
	}
	if _, err := alice.PlaceOrder(ctx, client.PlaceOrderRequest{MarketID: market, Side: client.BUY,
		Outcome: client.OutcomeYES, Price: 25, Quantity: 4}); err != nil {
		log.Fatal(err)
	}
	positions, err := alice.Positions(ctx)
	if err != nil {
		log.Fatal(err)
	}
	for _, p := range positions {
		if p.MarketID == market {
			fmt.Println(p.MarketQuestion, p.Outcome, p.Quantity)
		}
	}
	// Output:
	// Will it snow in May? YES 4
}

// A Feed follows subscriptions of the live feed, resuming after a broken connection. A trade's
// price is the YES price whatever the taker traded: here bob buys NO at 65 against alice's YES bid
// at 40, a trade at 40.
func ExampleClient_Feed() {
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	market := newMarket("Will the river flood?")
	alice, _ := client.New(baseURL, apiKey)
	bob, _ := client.New(baseURL, otherKey)

	feed := alice.Feed(client.Subscription{Channel: client.ChannelTrades, MarketID: market})
	placed := make(chan struct{})
	go func() {
		defer close(placed)
		select {
		case <-feed.Ready(): // subscribed: nothing after this is missed
		case <-ctx.Done(): // Run ended first
			return
		}
		for _, o := range []struct {
			c       *client.Client
			outcome client.Outcome
			price   int
		}{{alice, client.OutcomeYES, 40}, {bob, client.OutcomeNO, 65}} {
			if _, err := o.c.PlaceOrder(context.Background(), client.PlaceOrderRequest{MarketID: market, Side: client.BUY,
				Outcome: o.outcome, Price: o.price, Quantity: 2}); err != nil {
				log.Fatal(err)
			}
		}
	}()
	err := feed.Run(ctx, func(m client.FeedMessage) error {
		for _, e := range m.Events {
			fmt.Printf("%s: %d at %d, taker %s %s\n", e.Type, e.Quantity, *e.Price, *e.TakerSide, *e.TakerOutcome)
			stop() // one trade is all this example waits for
		}
		return nil
	})
	stop()
	<-placed
	fmt.Println(errors.Is(err, context.Canceled))
	// Output:
	// trade: 2 at 40, taker BUY NO
	// true
}
