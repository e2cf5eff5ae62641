package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/google/uuid"

	"github.com/pmx-dev/pmx/client"
)

// Arb watches one event's books and trades full sets of its outcomes when their YES prices stop
// summing to 100 by at least Edge cents.
type Arb struct {
	C     *client.Client
	Event uuid.UUID
	// Edge is the least profit per set, in cents, worth trading for (at least 1).
	Edge int
	// Size is the most sets one trade takes; MaxSets the most over the run.
	Size, MaxSets int
	// DryRun logs the trades the books allow and places nothing.
	DryRun bool
	// Recheck is how often the books are read again without a feed message (a missed message, a
	// failed trade).
	Recheck time.Duration
	Log     *slog.Logger

	outcomes []client.OutcomeDetail // the event's outcomes, in its order
	traded   int                    // sets traded so far
	profit   int                    // cents locked so far
	// checked is called after each look at the books with the plan found, for tests (nil: nothing).
	checked func(p Plan, found bool)
}

// errUnhedged stops the Arb when a trade filled some legs and not the rest: it then holds shares
// of some outcomes and not of the others, which a person should look at.
var errUnhedged = errors.New("a leg of the trade did not fill")

// Run watches the event until ctx ends or the Arb has traded MaxSets, then cancels any order of the
// Arb's still open. It returns nil after a clean stop, or why it could not go on.
func (a *Arb) Run(ctx context.Context) error {
	ev, err := a.C.Event(ctx, a.Event)
	if err != nil {
		return fmt.Errorf("reading event %s: %w", a.Event, err)
	}
	a.outcomes = ev.Outcomes
	a.Log.Info("watching", "event", ev.ID, "question", ev.Question, "outcomes", len(ev.Outcomes), "dryRun", a.DryRun)
	defer a.stop()

	// A ticker message says an outcome's best prices moved; the books are then read whole.
	subs := make([]client.Subscription, len(a.outcomes))
	for i, o := range a.outcomes {
		subs[i] = client.Subscription{Channel: client.ChannelTicker, MarketID: o.MarketID}
	}
	moved := make(chan struct{}, 1)
	feedErr := make(chan error, 1)
	feed := a.C.Feed(subs...)
	feed.OnReconnect = func(err error) { a.Log.Warn("feed reconnecting", "reason", err) }
	feedCtx, stopFeed := context.WithCancel(ctx)
	defer stopFeed()
	go func() {
		feedErr <- feed.Run(feedCtx, func(client.FeedMessage) error {
			select {
			case moved <- struct{}{}:
			default: // a look is already due
			}
			return nil
		})
	}()
	recheck := time.NewTicker(a.Recheck)
	defer recheck.Stop()
	// The first look waits for the feed: a move between that look and the feed's start would go
	// unheard until the next recheck.
	ready := feed.Ready()
	for {
		select {
		case <-ctx.Done():
			return nil
		case err := <-feedErr:
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("the feed stopped: %w", err)
		case <-ready:
			ready = nil
		case <-moved:
		case <-recheck.C:
		}
		done, err := a.look(ctx)
		if err != nil || done {
			return err
		}
	}
}

// look reads every outcome's book and trades what it allows. done is true once the event no
// longer trades or the Arb has traded MaxSets.
func (a *Arb) look(ctx context.Context) (done bool, err error) {
	if a.traded >= a.MaxSets {
		return true, nil
	}
	books := make([]Book, len(a.outcomes))
	for i, o := range a.outcomes {
		ob, err := a.C.OrderBook(ctx, o.MarketID)
		if err != nil {
			if ctx.Err() == nil {
				a.Log.Warn("reading a book; trying again later", "outcome", o.Key, "err", err)
			}
			return false, nil
		}
		books[i] = Book{Key: o.Key, Bid: best(ob.OrderBookYes.Bids), Ask: best(ob.OrderBookYes.Asks)}
	}
	p, found := PlanFor(books, a.Edge, min(a.Size, a.MaxSets-a.traded))
	if a.checked != nil {
		defer a.checked(p, found)
	}
	if !found {
		return false, nil
	}
	a.Log.Info("mispriced", "trade", p.Direction, "sets", p.Sets, "profitPerSet", p.Profit, "prices", p.Prices)
	if a.DryRun {
		return false, nil
	}
	return false, a.trade(ctx, p)
}

func best(levels []client.Level) Level {
	if len(levels) == 0 {
		return Level{}
	}
	return Level{Price: levels[0].Price, Quantity: levels[0].Quantity}
}

// trade places the plan's legs, each fill-or-kill at the best level's price, and for SellSets
// converts the NO shares into cash. A leg that does not fill (the book moved) ends the trade; if
// an earlier leg filled, the Arb stops (errUnhedged).
func (a *Arb) trade(ctx context.Context, p Plan) error {
	side := client.OutcomeYES
	if p.Direction == SellSets {
		side = client.OutcomeNO
	}
	for i, o := range a.outcomes {
		placed, err := a.C.PlaceOrder(ctx, client.PlaceOrderRequest{MarketID: o.MarketID, Side: client.BUY, Outcome: side,
			Price: p.Prices[i], Quantity: p.Sets, TimeInForce: ptr(client.TimeInForceFOK)})
		if err == nil && placed.FilledQuantity == p.Sets {
			continue
		}
		if err == nil {
			err = fmt.Errorf("not filled: the book moved")
		}
		if i == 0 {
			a.Log.Info("the first leg did not fill; nothing traded", "outcome", o.Key, "err", err)
			return nil
		}
		return fmt.Errorf("%w: %d of %d legs filled (%s of %d sets, up to outcome %s), then %s: %v",
			errUnhedged, i, len(a.outcomes), side, p.Sets, a.outcomes[i-1].Key, o.Key, err)
	}
	if p.Direction == SellSets {
		keys := make([]string, len(a.outcomes))
		for i, o := range a.outcomes {
			keys[i] = o.Key
		}
		conv, err := a.C.Convert(ctx, client.ConvertRequest{EventID: a.Event, Outcomes: keys, Quantity: int64(p.Sets)})
		if err != nil {
			return fmt.Errorf("%w: converting %d NO sets: %v", errUnhedged, p.Sets, err)
		}
		a.Log.Info("converted", "sets", p.Sets, "cash", conv.Cash)
	}
	a.traded += p.Sets
	a.profit += p.Sets * p.Profit
	a.Log.Info("traded", "trade", p.Direction, "sets", p.Sets, "profit", p.Sets*p.Profit, "totalSets", a.traded, "totalProfit", a.profit)
	return nil
}

// stop cancels any order of the Arb's still open in the event's markets (fill-or-kill orders
// leave none, unless a reply was lost), with a fresh context: ctx has ended by now.
func (a *Arb) stop() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cancelled := 0
	for _, o := range a.outcomes {
		ans, err := a.C.CancelOrders(ctx, client.CancelOrdersJSONRequestBody{MarketID: &o.MarketID})
		if err != nil {
			a.Log.Warn("cancelling on the way out", "outcome", o.Key, "err", err)
			continue
		}
		cancelled += len(ans.Cancelled)
	}
	a.Log.Info("stopped", "cancelled", cancelled, "sets", a.traded, "profit", a.profit)
}

func ptr[T any](v T) *T { return &v }
