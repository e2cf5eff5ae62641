// Command eventarb is an example arbitrage bot for pmx events, written with the Go SDK (package
// client). An event's outcomes are mutually exclusive and exactly one wins, so one YES share of
// every outcome (a full set) pays 100 cents. When the outcomes' best YES asks sum under that, it
// buys a set of YES; when their best YES bids sum over 100, it buys one NO of every outcome and
// converts the n NO shares into (n − 1) × 100 cents at once (POST /event/convert). Either way
// the profit is locked when the last leg fills. README.md has the arithmetic.
//
//	go run ./examples/eventarb -key $KEY -event $EVENT -size 5 -max-sets 50
//
// It trades at most -size sets at a time and -max-sets in all, logs what it would do with
// -dry-run, and on Ctrl-C cancels any order of its still open. Read arb.go for the loop and
// plan.go for the arithmetic.
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

	"github.com/google/uuid"

	"github.com/pmx-dev/pmx/client"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "eventarb:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	fs := flag.NewFlagSet("eventarb", flag.ContinueOnError)
	api := fs.String("api", "http://127.0.0.1:8080/api/v1", "the pmx API's URL, with its /api/v1 prefix")
	key := fs.String("key", os.Getenv("PMX_API_KEY"), "API key (default $PMX_API_KEY)")
	event := fs.String("event", "", "the id of the event to watch (default: the newest open event)")
	a := &Arb{}
	fs.IntVar(&a.Edge, "edge", 1, "the least profit per set, in cents, worth trading for (pmx charges no fees)")
	fs.IntVar(&a.Size, "size", 5, "the most sets one trade takes")
	fs.IntVar(&a.MaxSets, "max-sets", 50, "the most sets to trade in all, then stop")
	fs.BoolVar(&a.DryRun, "dry-run", false, "log the trades the books allow; place nothing")
	fs.DurationVar(&a.Recheck, "recheck", 5*time.Second, "how often to read the books without a feed message")
	if err := fs.Parse(args); err != nil {
		return err
	}
	switch {
	case a.Edge < 1 || a.Edge > 99:
		return fmt.Errorf("-edge %d: give 1 to 99 cents", a.Edge)
	case a.Size < 1:
		return fmt.Errorf("-size %d: give at least 1", a.Size)
	case a.MaxSets < 1:
		return fmt.Errorf("-max-sets %d: give at least 1", a.MaxSets)
	case a.Recheck < 100*time.Millisecond:
		return fmt.Errorf("-recheck %v: give at least 100ms", a.Recheck)
	}
	c, err := client.New(*api, *key)
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if a.Event, err = chooseEvent(ctx, c, *event); err != nil {
		return err
	}
	a.C, a.Log = c, slog.New(slog.NewTextHandler(os.Stderr, nil))
	if err := a.Run(ctx); err != nil && !errors.Is(err, context.Canceled) {
		return err
	}
	return nil
}

// chooseEvent is the event given, or else the newest open one.
func chooseEvent(ctx context.Context, c *client.Client, given string) (uuid.UUID, error) {
	if given != "" {
		id, err := uuid.Parse(given)
		if err != nil {
			return uuid.Nil, fmt.Errorf("-event %q: %w", given, err)
		}
		return id, nil
	}
	open := client.MarketStatusOPEN
	page, err := c.Events(ctx, &open, nil, 1)
	if err != nil {
		return uuid.Nil, fmt.Errorf("listing open events: %w", err)
	}
	if len(page.Events) == 0 {
		return uuid.Nil, errors.New("no open event: give one with -event")
	}
	return page.Events[0].ID, nil
}
