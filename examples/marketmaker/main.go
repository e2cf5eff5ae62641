// Command marketmaker is an example market maker for pmx, written with the Go SDK (package
// client): it quotes both sides of one market around a fair value, leaning against its inventory,
// keeps its quotes with batch placements and amends, follows the live feed (resuming after a
// disconnect), arms the dead-man switch, and cancels its quotes when stopped with Ctrl-C.
//
//	go run ./examples/marketmaker -key $KEY -market $MARKET
//
// `make demo` runs it with a few noise traders against pmx dev. Read maker.go for the strategy.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/pmx-dev/pmx/client"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "marketmaker:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	fs := flag.NewFlagSet("marketmaker", flag.ContinueOnError)
	api := fs.String("api", "http://127.0.0.1:8080/api/v1", "the pmx API's URL, with its /api/v1 prefix")
	key := fs.String("key", os.Getenv("PMX_API_KEY"), "API key (default $PMX_API_KEY)")
	market := fs.String("market", "", "the id of the market to quote (default: the first open market)")
	m := &Maker{}
	fs.Float64Var(&m.Fair, "fair", 0, "starting fair value of YES in cents (0: the last trade's price, else 50)")
	fs.Float64Var(&m.Alpha, "alpha", 0.1, "how far each trade moves the fair value toward its price (0 to 1)")
	fs.IntVar(&m.Spread, "spread", 4, "cents between the bid and the ask")
	fs.IntVar(&m.Size, "size", 10, "quantity of each quote")
	fs.Float64Var(&m.Skew, "skew", 0.2, "cents both quotes move down per share of inventory (YES held minus NO held)")
	fs.IntVar(&m.MaxPosition, "max-position", 100, "the largest inventory, either way, to hold")
	fs.DurationVar(&m.Heartbeat, "heartbeat", 10*time.Second, "the dead-man switch's timeout (5s to 300s)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	switch {
	case m.Spread < 1 || m.Spread > 97:
		return fmt.Errorf("-spread %d: give 1 to 97 cents", m.Spread)
	case m.Size < 1:
		return fmt.Errorf("-size %d: give at least 1", m.Size)
	case m.Alpha < 0 || m.Alpha > 1:
		return fmt.Errorf("-alpha %v: give 0 to 1", m.Alpha)
	case m.Heartbeat < 5*time.Second || m.Heartbeat > 300*time.Second:
		return fmt.Errorf("-heartbeat %v: give 5s to 300s", m.Heartbeat)
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
	m.C, m.Market = c, id
	m.Log = slog.New(slog.NewTextHandler(os.Stderr, nil))
	if err := m.Run(ctx); err != nil && !errors.Is(err, context.Canceled) {
		return err
	}
	return nil
}
