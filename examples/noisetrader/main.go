// Command noisetrader is an example bot for pmx, written with the Go SDK (package client): it
// trades one market at random, buying YES or NO with immediate-or-cancel orders a few cents
// around the last trade's price, so that a market maker has someone to trade with. `make demo`
// runs a few of them beside examples/marketmaker.
//
//	go run ./examples/noisetrader -key $KEY -market $MARKET -rate 2
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/pmx-dev/pmx/client"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "noisetrader:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	fs := flag.NewFlagSet("noisetrader", flag.ContinueOnError)
	api := fs.String("api", "http://127.0.0.1:8080/api/v1", "the pmx API's URL, with its /api/v1 prefix")
	key := fs.String("key", os.Getenv("PMX_API_KEY"), "API key (default $PMX_API_KEY)")
	market := fs.String("market", "", "the id of the market to trade (default: the first open market)")
	rate := fs.Float64("rate", 1, "orders a second, on average")
	reach := fs.Int("reach", 4, "how many cents past the last price an order may reach")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *rate <= 0 || *reach < 0 {
		return errors.New("-rate must be above 0 and -reach at least 0")
	}
	c, err := client.New(*api, *key)
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	id, err := client.ChooseMarket(ctx, c, *market)
	if err != nil {
		return err
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 0))
	for {
		// Exponential waits: orders arrive as a Poisson process of the given rate.
		t := time.NewTimer(time.Duration(rng.ExpFloat64() / *rate * float64(time.Second)))
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-t.C:
		}
		last := 50
		if book, err := c.OrderBook(ctx, id); err == nil && book.OrderBookYes.LastTradePrice != nil {
			last = *book.OrderBookYes.LastTradePrice
		}
		// Buy YES up to a few cents above the last price, or NO up to a few cents above its own.
		o := client.PlaceOrderRequest{MarketID: id, Side: client.BUY, Outcome: client.OutcomeYES,
			Quantity: 1 + rng.IntN(5), TimeInForce: ptr(client.TimeInForceIOC)}
		price := last + rng.IntN(*reach+1)
		if rng.IntN(2) == 0 {
			o.Outcome, price = client.OutcomeNO, 100-last+rng.IntN(*reach+1)
		}
		o.Price = min(max(price, 1), 99)
		placed, err := c.PlaceOrder(ctx, o)
		switch {
		case ctx.Err() != nil:
			return nil
		case err != nil:
			log.Warn("placing", "err", err)
		case placed.FilledQuantity > 0:
			log.Info("traded", "outcome", o.Outcome, "price", o.Price, "filled", placed.FilledQuantity)
		}
	}
}

func ptr[T any](v T) *T { return &v }
