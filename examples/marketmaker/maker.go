package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"time"

	"github.com/google/uuid"

	"github.com/pmx-dev/pmx/client"
)

// Maker quotes one market on both sides around a fair value: a YES bid (BUY YES) and a YES ask,
// placed as a NO bid (BUY NO at 100 − ask), so that it needs cash, not shares, for either side. Its
// quotes lean against its inventory (YES shares held minus NO shares): long, it quotes lower, to
// sell more and buy less; at MaxPosition it stops adding to it. It places its first quotes in one
// batch and then keeps them with amends; it follows trades (for the fair value) and its own fills
// (for its inventory) on the live feed, which resumes by itself after a disconnect; it arms the
// dead-man switch, so that its quotes are cancelled if it dies; and on its way out it cancels its
// quotes and disarms the switch.
//
// Two controls of the exchange's stop it if something goes wrong. Its quote set (the bid and the
// ask it keeps in its market) is placed into an order group of its own: once they fill GroupFills
// shares within GroupWindow — a fair value gone wrong, a market that moved past it — the exchange
// cancels them both in the batch that reached the limit, and the Maker stops quoting for
// GroupWindow, then resets the group and quotes again. And it cancels on its way out with Cancel,
// best a key of scope cancel: the path that must work when something went wrong holds a key that
// can only cancel.
type Maker struct {
	C *client.Client
	// Cancel is the client the Maker cancels its quotes and disarms the switch with on its way out
	// (nil: C).
	Cancel *client.Client
	Market uuid.UUID
	// Fair is the starting fair value of YES, in cents (0: the last trade's price, else 50). It
	// follows the market's trades: each moves it Alpha of the way to the trade's price.
	Fair  float64
	Alpha float64
	// Spread is the distance between bid and ask, in cents; Size each quote's quantity.
	Spread, Size int
	// Skew moves both quotes down by this many cents per share of inventory.
	Skew float64
	// MaxPosition is the largest inventory, either way, the Maker will hold.
	MaxPosition int
	// Heartbeat is the dead-man switch's timeout; the Maker renews it three times per timeout.
	Heartbeat time.Duration
	// GroupFills and GroupWindow are the quote set's order group: its fill limit and its rolling
	// window (GroupFills 0: no group).
	GroupFills  int
	GroupWindow time.Duration
	Log         *slog.Logger

	group       *uuid.UUID // the quote set's order group, if any
	pausedUntil time.Time  // set when the group triggers: no quotes until then

	inventory int
	bid, ask  *quote
	// fills counts the fills seen, for the tests and the log.
	fills int
	// changed is called after each requote, for tests (nil: nothing).
	changed func(m *Maker)
}

// quote is one of the Maker's resting orders, in YES terms.
type quote struct {
	id        uuid.UUID
	price     int // the YES price: the bid's own price; the ask's 100 − its NO price
	remaining int
}

// Run quotes until ctx ends, then cancels the quotes and disarms the switch. It returns nil after
// a clean stop, or why it could not go on.
func (m *Maker) Run(ctx context.Context) error {
	if err := m.start(ctx); err != nil {
		return err
	}
	defer m.stop()

	msgs := make(chan client.FeedMessage, 256)
	feedErr := make(chan error, 1)
	feed := m.C.Feed(
		client.Subscription{Channel: client.ChannelTrades, MarketID: m.Market},
		client.Subscription{Channel: client.ChannelOrders},
	)
	feed.OnReconnect = func(err error) { m.Log.Warn("feed reconnecting; it resumes where it stopped", "reason", err) }
	feedCtx, stopFeed := context.WithCancel(ctx)
	defer stopFeed()
	go func() {
		feedErr <- feed.Run(feedCtx, func(msg client.FeedMessage) error {
			select {
			case msgs <- msg:
				return nil
			case <-feedCtx.Done():
				return feedCtx.Err()
			}
		})
	}()

	heartbeat := time.NewTicker(m.Heartbeat / 3)
	defer heartbeat.Stop()
	requote := time.NewTicker(time.Second) // also retries what failed
	defer requote.Stop()
	// Quote only once the feed is live: a fill of a quote before it would go unheard, and the
	// inventory, and so the quotes, would be off from then on. The switch is kept armed meanwhile.
	ready, live := feed.Ready(), false
	for {
		select {
		case <-ctx.Done():
			return nil
		case err := <-feedErr:
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("the feed stopped (live: %v): %w", live, err)
		case <-heartbeat.C:
			m.renew(ctx)
		case <-ready:
			ready, live = nil, true
			m.requote(ctx)
		case msg := <-msgs:
			if m.apply(ctx, msg) && live {
				m.requote(ctx)
			}
		case <-requote.C:
			if live {
				m.requote(ctx)
			}
		}
	}
}

// renew renews the dead-man switch; a failure is logged, and the next renewal tries again
// (three come within the switch's timeout).
func (m *Maker) renew(ctx context.Context) {
	if _, err := m.C.Heartbeat(ctx, m.Heartbeat); err != nil && ctx.Err() == nil {
		m.Log.Warn("renewing the dead-man switch", "err", err)
	}
}

// start arms the switch, reads the inventory, cancels any quotes left from an earlier run and
// finds the fair value.
func (m *Maker) start(ctx context.Context) error {
	if _, err := m.C.Heartbeat(ctx, m.Heartbeat); err != nil {
		return fmt.Errorf("arming the dead-man switch: %w", err)
	}
	if err := m.readInventory(ctx); err != nil {
		return err
	}
	if m.GroupFills > 0 {
		g, err := m.C.CreateOrderGroup(ctx, int64(m.GroupFills), int(m.GroupWindow/time.Second))
		if err != nil {
			return fmt.Errorf("making the quotes' order group: %w", err)
		}
		m.group = &g.ID
		m.Log.Info("the quotes' order group", "group", g.ID, "fillLimit", g.FillLimit, "windowSeconds", g.WindowSeconds)
	}
	if _, err := m.C.CancelOrders(ctx, client.CancelOrdersJSONRequestBody{MarketID: &m.Market}); err != nil {
		return fmt.Errorf("cancelling earlier quotes: %w", err)
	}
	if m.Fair == 0 {
		m.Fair = 50
		book, err := m.C.OrderBook(ctx, m.Market)
		if err != nil {
			return fmt.Errorf("reading the book of market %s: %w", m.Market, err)
		}
		if p := book.OrderBookYes.LastTradePrice; p != nil {
			m.Fair = float64(*p)
		}
	}
	m.Log.Info("quoting", "market", m.Market, "fair", m.Fair, "inventory", m.inventory)
	return nil
}

func (m *Maker) readInventory(ctx context.Context) error {
	positions, err := m.C.Positions(ctx)
	if err != nil {
		return fmt.Errorf("reading positions: %w", err)
	}
	m.inventory = 0
	for _, p := range positions {
		if p.MarketID != m.Market {
			continue
		}
		if p.Outcome == client.OutcomeYES {
			m.inventory += p.Quantity
		} else {
			m.inventory -= p.Quantity
		}
	}
	return nil
}

// stop cancels the quotes and disarms the switch, with its Cancel client and a context of its own:
// Run's has ended.
func (m *Maker) stop() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c := m.Cancel
	if c == nil {
		c = m.C
	}
	cancelled, err := c.CancelOrders(ctx, client.CancelOrdersJSONRequestBody{MarketID: &m.Market})
	if err != nil {
		m.Log.Error("cancelling the quotes on the way out; the dead-man switch will", "err", err)
		return
	}
	if _, err := c.Heartbeat(ctx, 0); err != nil {
		m.Log.Warn("disarming the dead-man switch", "err", err)
	}
	m.Log.Info("stopped", "cancelled", len(cancelled.Cancelled), "inventory", m.inventory, "fills", m.fills)
}

// apply takes one feed message into the Maker's state and reports whether its quotes may need to
// change.
func (m *Maker) apply(ctx context.Context, msg client.FeedMessage) bool {
	switch msg.Channel {
	case client.ChannelTrades:
		for _, e := range msg.Events {
			if e.Price != nil {
				m.Fair += m.Alpha * (float64(*e.Price) - m.Fair)
			}
		}
		return len(msg.Events) > 0
	case client.ChannelOrders:
		if msg.Resynced {
			// Events were missed: read the inventory again and start the quotes over.
			m.Log.Warn("the account's feed could not resume; reading the inventory again")
			if err := m.readInventory(ctx); err != nil {
				m.Log.Error("reading the inventory", "err", err)
			}
			m.bid, m.ask = nil, nil
			if _, err := m.C.CancelOrders(ctx, client.CancelOrdersJSONRequestBody{MarketID: &m.Market}); err != nil {
				m.Log.Error("cancelling the quotes", "err", err)
			}
		}
		for _, e := range msg.AccountEvents {
			m.applyAccountEvent(e)
		}
		return true
	}
	return false
}

func (m *Maker) applyAccountEvent(e client.AccountEvent) {
	switch e.Type {
	case client.AccountEventTypeFill:
		f := e.Fill
		if f == nil || f.MarketID != m.Market {
			return
		}
		m.fills++
		if (f.Side == client.BUY) == (f.Outcome == client.OutcomeYES) {
			m.inventory += f.Quantity
		} else {
			m.inventory -= f.Quantity
		}
		for _, q := range []**quote{&m.bid, &m.ask} {
			if *q != nil && (*q).id == f.OrderID {
				(*q).remaining -= f.Quantity
				if e.Status != nil && *e.Status == client.AccountEventStatusFILLED {
					*q = nil
				}
			}
		}
	case client.AccountEventTypeCancelled:
		if e.Order == nil {
			return
		}
		if r := e.Order.CancelReason; r != nil && *r == client.OrderCancelReasonORDERGROUP && e.Order.MarketID == m.Market {
			m.tripped()
		}
		for _, q := range []**quote{&m.bid, &m.ask} {
			if *q != nil && (*q).id == e.Order.ID {
				*q = nil
			}
		}
	}
}

// targets are the quotes the Maker wants now, in YES prices; 0 for a side it does not quote.
func (m *Maker) targets() (bid, ask int) {
	center := m.Fair - m.Skew*float64(m.inventory)
	half := float64(m.Spread) / 2
	bid = int(math.Floor(center - half))
	ask = int(math.Ceil(center + half))
	bid, ask = min(max(bid, 1), 98), min(max(ask, 2), 99)
	if ask <= bid {
		ask = bid + 1
	}
	if m.inventory >= m.MaxPosition {
		bid = 0
	}
	if m.inventory <= -m.MaxPosition {
		ask = 0
	}
	return bid, ask
}

// requote brings the resting quotes to the targets: new quotes placed together in one batch,
// quotes at another price or size amended, a side no longer wanted cancelled.
func (m *Maker) requote(ctx context.Context) {
	if !m.resume(ctx) {
		return
	}
	bid, ask := m.targets()
	var place []client.PlaceOrderRequest
	var sides []**quote
	for _, s := range []struct {
		q     **quote
		price int
		yes   bool
	}{{&m.bid, bid, true}, {&m.ask, ask, false}} {
		q := *s.q
		switch {
		case s.price == 0 && q != nil:
			if _, err := m.C.CancelOrder(ctx, q.id); err != nil && !client.IsCode(err, "order_not_open") {
				m.Log.Warn("cancelling a quote", "err", err)
				continue
			}
			*s.q = nil
		case s.price == 0:
		case q == nil:
			place = append(place, m.order(s.price, s.yes))
			sides = append(sides, s.q)
		case q.price != s.price || q.remaining != m.Size:
			m.amend(ctx, s.q, s.price, s.yes)
		}
	}
	if len(place) > 0 {
		results, err := m.C.PlaceOrders(ctx, place)
		if err != nil {
			m.Log.Warn("placing quotes", "err", err)
			return
		}
		for i, r := range results {
			if r.Err != nil {
				m.Log.Info("quote refused", "code", r.Err.Code, "reason", r.Err.Message)
				if r.Err.Code == "order_group_triggered" {
					m.tripped() // the group triggered before the feed told of its cancels
				}
				continue
			}
			if open := r.Placed.Status == client.OrderStatusOPEN || r.Placed.Status == client.OrderStatusPARTIALLYFILLED; open {
				*sides[i] = &quote{id: r.Placed.ID, price: yesPrice(r.Placed.Price, r.Placed.Outcome),
					remaining: r.Placed.Quantity - r.Placed.FilledQuantity}
			}
		}
	}
	if m.changed != nil {
		m.changed(m)
	}
}

// order is a quote's placement: the bid as BUY YES, the ask as BUY NO at 100 − price. Post-only:
// a quote that would trade at once is refused and tried again at the next requote.
func (m *Maker) order(price int, bid bool) client.PlaceOrderRequest {
	o := client.PlaceOrderRequest{MarketID: m.Market, Side: client.BUY, Outcome: client.OutcomeYES, Price: price,
		Quantity: m.Size, PostOnly: ptr(true), OrderGroupID: m.group}
	if !bid {
		o.Outcome, o.Price = client.OutcomeNO, 100-price
	}
	return o
}

func (m *Maker) amend(ctx context.Context, q **quote, price int, bid bool) {
	own := price
	if !bid {
		own = 100 - price
	}
	a, err := m.C.AmendOrder(ctx, client.AmendOrderJSONRequestBody{OrderID: &(*q).id, Price: &own, Quantity: &m.Size})
	var apiErr *client.APIError
	switch {
	case errors.As(err, &apiErr) && apiErr.Status < 500:
		// Filled or cancelled meanwhile (the feed says so too): place a new quote next time.
		*q = nil
	case err != nil:
		m.Log.Warn("amending a quote", "err", err)
	case a.Status != client.OrderStatusOPEN && a.Status != client.OrderStatusPARTIALLYFILLED:
		*q = nil
	default:
		**q = quote{id: a.ID, price: yesPrice(a.Price, a.Outcome), remaining: a.Quantity - a.FilledQuantity}
	}
}

// tripped notes that the quotes' order group triggered: its fills in its window reached its limit
// and the exchange cancelled the quotes. The Maker quotes again after GroupWindow.
func (m *Maker) tripped() {
	if !m.pausedUntil.IsZero() {
		return
	}
	m.pausedUntil = time.Now().Add(m.GroupWindow)
	m.Log.Warn("the quotes' order group triggered: the quotes filled too fast, and the exchange cancelled them; pausing",
		"group", m.group, "fillLimit", m.GroupFills, "window", m.GroupWindow, "until", m.pausedUntil.Format(time.RFC3339))
}

// resume reports whether the Maker may quote: not while paused by its group; once the pause is
// over it resets the group first (a failed reset is tried again at the next requote).
func (m *Maker) resume(ctx context.Context) bool {
	if m.pausedUntil.IsZero() {
		return true
	}
	if time.Now().Before(m.pausedUntil) {
		return false
	}
	if _, err := m.C.ResetOrderGroup(ctx, *m.group); err != nil {
		m.Log.Warn("resetting the quotes' order group", "err", err)
		return false
	}
	m.pausedUntil = time.Time{}
	m.bid, m.ask = nil, nil // both were cancelled by the trigger
	m.Log.Info("the quotes' order group reset; quoting again", "group", m.group)
	return true
}

func yesPrice(price int, outcome client.Outcome) int {
	if outcome == client.OutcomeNO {
		return 100 - price
	}
	return price
}

func ptr[T any](v T) *T { return &v }
