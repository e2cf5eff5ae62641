package client_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/pmx-dev/pmx/client"
	"github.com/pmx-dev/pmx/internal/exchangetest"
	"github.com/pmx-dev/pmx/internal/poll"
)

// followed is what a test's feed handler saw: a book folded from its snapshot and events, the
// account's events, and any break in their sequences, checked here independently of the Feed.
type followed struct {
	mu           sync.Mutex
	bookSeq      int
	bids, asks   map[int]int    // YES price → quantity
	accountSeqs  map[string]int // the last seq of each stream of the account's feed
	accountTypes map[string]int
	snapshots    int
	broken       error
}

func (f *followed) handle(m client.FeedMessage) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	switch m.Type {
	case "snapshot":
		f.snapshots++
		f.bids, f.asks = levels(m.Snapshot.Bids), levels(m.Snapshot.Asks)
		f.bookSeq = m.Seq
	case "events":
		for _, e := range m.Events {
			if e.Seq != f.bookSeq+1 && f.broken == nil {
				f.broken = fmt.Errorf("book went from seq %d to %d", f.bookSeq, e.Seq)
			}
			f.bookSeq = e.Seq
			if e.Type == client.MarketEventTypeLevel {
				side := f.bids
				if *e.Side == client.Ask {
					side = f.asks
				}
				if e.Quantity == 0 {
					delete(side, *e.Price)
				} else {
					side[*e.Price] = e.Quantity
				}
			}
		}
	case "accountEvents":
		for _, e := range m.AccountEvents {
			stream := streamOf(e)
			if e.Seq != f.accountSeqs[stream]+1 && f.broken == nil {
				f.broken = fmt.Errorf("account stream %q went from seq %d to %d", stream, f.accountSeqs[stream], e.Seq)
			}
			f.accountSeqs[stream] = e.Seq
			f.accountTypes[string(e.Type)]++
		}
	}
	return nil
}

// streamOf is the stream of the account's feed an event is in: its shard's holder name, "" for
// the feed's first.
func streamOf(e client.AccountEvent) string {
	if e.Stream == nil {
		return ""
	}
	return *e.Stream
}

// lastSeqs is the last seq of each stream among events.
func lastSeqs(events []client.AccountEvent) map[string]int {
	last := map[string]int{}
	for _, e := range events {
		last[streamOf(e)] = max(last[streamOf(e)], e.Seq)
	}
	return last
}

// reached reports whether the seqs seen reach want's in every stream.
func reached(seen, want map[string]int) bool {
	for stream, seq := range want {
		if seen[stream] < seq {
			return false
		}
	}
	return true
}

func levels(ls []client.Level) map[int]int {
	m := make(map[int]int, len(ls))
	for _, l := range ls {
		m[l.Price] = l.Quantity
	}
	return m
}

// best returns the best n levels of a side: bids highest first, asks lowest first.
func best(side map[int]int, bids bool, n int) []client.Level {
	var out []client.Level
	for p, q := range side {
		out = append(out, client.Level{Price: p, Quantity: q})
	}
	slices.SortFunc(out, func(a, b client.Level) int {
		if bids {
			return b.Price - a.Price
		}
		return a.Price - b.Price
	})
	return out[:min(n, len(out))]
}

// priced is levels' prices and quantities, without the REST book's cumulative totals.
func priced(ls []client.Level) []client.Level {
	out := make([]client.Level, len(ls))
	for i, l := range ls {
		out[i] = client.Level{Price: l.Price, Quantity: l.Quantity}
	}
	return out
}

// TestFeedResumesAcrossCuts follows a market's book and the account's orders through a proxy
// that cuts the connection again and again while two accounts trade: the Feed reconnects and
// resumes each time, and what it delivered is gapless and folds to the book and the account
// events the REST API reports.
func TestFeedResumesAcrossCuts(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	tg := exchangetest.StartDev(t)
	m := tg.NewMarket(t, nil).ID
	px := startProxy(t, strings.TrimPrefix(tg.URL, "http://"))
	alice := newClient(t, tg, px.URL())
	bob := newClient(t, tg, "")

	var reconnects atomic.Int32
	seen := &followed{accountTypes: make(map[string]int), accountSeqs: make(map[string]int)}
	feed := alice.Feed(client.Subscription{Channel: client.ChannelBook, MarketID: m}, client.Subscription{Channel: client.ChannelOrders})
	feed.OnReconnect = func(error) { reconnects.Add(1) }
	done := make(chan error, 1)
	go func() { done <- feed.Run(ctx, seen.handle) }()
	poll.Wait(t, 10*time.Second, "the feed's snapshot", func() bool {
		seen.mu.Lock()
		defer seen.mu.Unlock()
		return seen.snapshots == 1
	})

	rng := rand.New(rand.NewPCG(1, 2))
	const rounds, perRound = 4, 15
	var book *client.OrderBookAnswer
	var events *client.AccountEventsPage
	for round := range rounds {
		for range perRound {
			trader, outcome := alice, client.OutcomeYES
			if rng.IntN(2) == 0 {
				trader = bob
			}
			if rng.IntN(2) == 0 {
				outcome = client.OutcomeNO
			}
			if _, err := trader.PlaceOrder(ctx, order(m, client.BUY, outcome, 40+rng.IntN(21), 1+rng.IntN(5))); err != nil {
				t.Fatalf("round %d: %v", round, err)
			}
		}
		px.cut()
		// One more order after the cut: the feed has it only once it has reconnected.
		if _, err := bob.PlaceOrder(ctx, order(m, client.BUY, client.OutcomeYES, 1+round, 1)); err != nil {
			t.Fatal(err)
		}
		var err error
		if book, err = bob.OrderBook(ctx, m); err != nil {
			t.Fatal(err)
		}
		if events, err = alice.AccountEvents(ctx, "", 1000); err != nil {
			t.Fatal(err)
		}
		want := lastSeqs(events.Events)
		poll.Wait(t, 20*time.Second, fmt.Sprintf("the feed at book seq %d and account seqs %v", book.Seq, want), func() bool {
			seen.mu.Lock()
			defer seen.mu.Unlock()
			return seen.bookSeq >= book.Seq && reached(seen.accountSeqs, want)
		})
	}
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("Run: %v, want it to end with its context", err)
	}

	seen.mu.Lock()
	defer seen.mu.Unlock()
	if seen.broken != nil {
		t.Fatalf("the feed delivered a gap: %v", seen.broken)
	}
	if seen.snapshots != 1 {
		t.Errorf("%d snapshots: every reconnect should have resumed, not started over", seen.snapshots)
	}
	if n := reconnects.Load(); n < rounds {
		t.Errorf("%d reconnects for %d cuts", n, rounds)
	}
	if seen.bookSeq != book.Seq {
		t.Errorf("book at seq %d, the REST book at %d", seen.bookSeq, book.Seq)
	}
	if got := best(seen.bids, true, 10); !slices.Equal(got, priced(book.OrderBookYes.Bids)) {
		t.Errorf("bids folded from the feed %v, the REST book's %v", got, book.OrderBookYes.Bids)
	}
	if got := best(seen.asks, false, 10); !slices.Equal(got, priced(book.OrderBookYes.Asks)) {
		t.Errorf("asks folded from the feed %v, the REST book's %v", got, book.OrderBookYes.Asks)
	}
	want := make(map[string]int)
	for _, e := range events.Events {
		want[string(e.Type)]++
	}
	if fmt.Sprint(seen.accountSeqs) != fmt.Sprint(lastSeqs(events.Events)) || fmt.Sprint(seen.accountTypes) != fmt.Sprint(want) {
		t.Errorf("account events from the feed: seqs %v %v; from GET /account/events: seqs %v %v",
			seen.accountSeqs, seen.accountTypes, lastSeqs(events.Events), want)
	}
}

// TestFeedRefusals checks that what reconnecting cannot mend ends Run with the reason: a wrong
// key, and a subscription the server refuses.
func TestFeedRefusals(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	tg := exchangetest.StartDev(t)
	stranger, err := client.New(tg.URL+"/api/v1", "pmx_not-a-key")
	if err != nil {
		t.Fatal(err)
	}
	err = stranger.Feed(client.Subscription{Channel: client.ChannelLifecycle}).Run(ctx, func(client.FeedMessage) error { return nil })
	if err == nil || !strings.Contains(err.Error(), "API key") {
		t.Fatalf("a feed with a wrong key: %v", err)
	}
	c := newClient(t, tg, "")
	err = c.Feed(client.Subscription{Channel: "candles"}).Run(ctx, func(client.FeedMessage) error { return nil })
	var fe *client.FeedError
	if !errors.As(err, &fe) || fe.Code != "unknown_channel" {
		t.Fatalf("a feed of an unknown channel: %v, want unknown_channel", err)
	}
}

// TestFeedReady checks Ready: not before the feed runs, closed once the server has confirmed the
// subscriptions, and from then on every event is delivered, the first order's included.
func TestFeedReady(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	tg := exchangetest.StartDev(t)
	m := tg.NewMarket(t, nil).ID
	c := newClient(t, tg, "")
	feed := c.Feed(client.Subscription{Channel: client.ChannelOrders})
	select {
	case <-feed.Ready():
		t.Fatal("the feed was ready before it ran")
	default:
	}
	accepted := make(chan string, 16)
	runErr := make(chan error, 1)
	go func() {
		runErr <- feed.Run(ctx, func(msg client.FeedMessage) error {
			for _, e := range msg.AccountEvents {
				if e.Type == client.AccountEventTypeAccepted && e.Order != nil {
					accepted <- e.Order.ID.String()
				}
			}
			return nil
		})
	}()
	select {
	case <-feed.Ready():
	case err := <-runErr:
		t.Fatalf("the feed stopped before it was ready: %v", err)
	case <-ctx.Done():
		t.Fatal("the feed was not ready within 30 s")
	}
	o, err := c.PlaceOrder(ctx, order(m, client.BUY, client.OutcomeYES, 30, 1))
	if err != nil {
		t.Fatal(err)
	}
	select {
	case id := <-accepted:
		if id != o.ID.String() {
			t.Errorf("the first accepted event is of order %s, want %s", id, o.ID)
		}
	case <-ctx.Done():
		t.Fatal("the first order placed after Ready was never heard of on the feed")
	}
	cancel()
	<-runErr
}

// TestFeedEventLifecycle follows the lifecycle channel while an event is made and closed: each of
// its markets' changes names the event (MarketChange.EventID).
func TestFeedEventLifecycle(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	tg := exchangetest.StartDev(t)
	c := newClient(t, tg, "")
	feed := c.Feed(client.Subscription{Channel: client.ChannelLifecycle})
	changes := make(chan client.FeedMessage, 64)
	runErr := make(chan error, 1)
	go func() {
		runErr <- feed.Run(ctx, func(msg client.FeedMessage) error {
			if msg.Market != nil {
				select {
				case changes <- msg:
				case <-ctx.Done():
				}
			}
			return nil
		})
	}()
	select {
	case <-feed.Ready():
	case err := <-runErr:
		t.Fatalf("the feed stopped before it was ready: %v", err)
	case <-ctx.Done():
		t.Fatal("the feed was not ready within 30 s")
	}
	var made struct {
		ID       uuid.UUID `json:"id"`
		Outcomes []struct {
			MarketID uuid.UUID `json:"marketId"`
		} `json:"outcomes"`
	}
	tg.Admin(t, "POST", "/admin/v1/events", map[string]any{"question": "Which one wins", "category": "test",
		"outcomes": []map[string]any{{"key": "up", "label": "Up"}, {"key": "down", "label": "Down"}}}, http.StatusCreated, &made)
	ours := map[uuid.UUID]bool{}
	for _, o := range made.Outcomes {
		ours[o.MarketID] = true
	}
	// until reads changes until every market of the event has one of status naming the event.
	until := func(status client.MarketStatus) {
		t.Helper()
		seen := map[uuid.UUID]bool{}
		for len(seen) < len(ours) {
			select {
			case msg := <-changes:
				if !ours[msg.MarketID] || msg.Market.Status != status {
					continue
				}
				if msg.Market.EventID == nil || *msg.Market.EventID != made.ID {
					t.Fatalf("market %s's %s change names event %v, want %s", msg.MarketID, status, msg.Market.EventID, made.ID)
				}
				seen[msg.MarketID] = true
			case err := <-runErr:
				t.Fatalf("the feed stopped: %v", err)
			case <-ctx.Done():
				t.Fatalf("the lifecycle channel told %d of the event's %d markets as %s", len(seen), len(ours), status)
			}
		}
	}
	until(client.MarketStatusOPEN)
	tg.Admin(t, "POST", "/admin/v1/events/"+made.ID.String()+"/close", nil, http.StatusOK, nil)
	until(client.MarketStatusCLOSED)
	cancel()
	<-runErr
}
