// Command marketmaker is an example market maker for pmx, written with the Go SDK (package
// client): it quotes both sides of one market around a fair value, leaning against its inventory,
// keeps its quotes with batch placements and amends, follows the live feed (resuming after a
// disconnect), arms the dead-man switch, places its quotes into an order group that the exchange
// triggers if they fill too fast, and cancels its quotes when stopped with Ctrl-C, with a key that
// can only cancel when given one.
//
//	go run ./examples/marketmaker -key $KEY -cancel-key $CANCEL_KEY -market $MARKET
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
	cancelKey := fs.String("cancel-key", os.Getenv("PMX_CANCEL_KEY"),
		"an API key of the same account with scope cancel, to cancel the quotes with on Ctrl-C (default $PMX_CANCEL_KEY; none: -key)")
	market := fs.String("market", "", "the id of the market to quote (default: the first open market)")
	m := &Maker{}
	fs.Float64Var(&m.Fair, "fair", 0, "starting fair value of YES in cents (0: the last trade's price, else 50)")
	fs.Float64Var(&m.Alpha, "alpha", 0.1, "how far each trade moves the fair value toward its price (0 to 1)")
	fs.IntVar(&m.Spread, "spread", 4, "cents between the bid and the ask")
	fs.IntVar(&m.Size, "size", 10, "quantity of each quote")
	fs.Float64Var(&m.Skew, "skew", 0.2, "cents both quotes move down per share of inventory (YES held minus NO held)")
	fs.IntVar(&m.MaxPosition, "max-position", 100, "the largest inventory, either way, to hold")
	fs.DurationVar(&m.Heartbeat, "heartbeat", 10*time.Second, "the dead-man switch's timeout (5s to 300s)")
	fs.IntVar(&m.GroupFills, "group-fills", 100, "the shares the quotes may fill within -group-window before the exchange cancels them (0: no order group)")
	fs.DurationVar(&m.GroupWindow, "group-window", 10*time.Second, "the order group's rolling window (1s to 24h, whole seconds), and how long the maker pauses once it triggers")
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
	case m.GroupFills < 0:
		return fmt.Errorf("-group-fills %d: give 0 (no group) or more", m.GroupFills)
	case m.GroupFills > 0 && (m.GroupWindow < time.Second || m.GroupWindow > 24*time.Hour || m.GroupWindow%time.Second != 0):
		return fmt.Errorf("-group-window %v: give whole seconds from 1s to 24h", m.GroupWindow)
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
	if *cancelKey != "" {
		if m.Cancel, err = client.New(*api, *cancelKey); err != nil {
			return err
		}
	} else {
		m.Log.Info("no -cancel-key: the quotes are cancelled on the way out with -key; a key of scope cancel would do, and can do nothing else")
	}
	if err := m.Run(ctx); err != nil && !errors.Is(err, context.Canceled) {
		return err
	}
	return nil
}
