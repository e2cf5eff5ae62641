package exchangetest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/pmx-dev/pmx/internal/feed"
	"github.com/pmx-dev/pmx/internal/poll"
)

// BookFollower rebuilds a market's book from the book channel, checking the sequence as it goes.
type BookFollower struct {
	Market uuid.UUID
	Levels [2]map[int]int64     // bid, ask: YES price → quantity
	Next   int64                // the seq expected next
	Events int                  // events applied
	Log    map[int64]feed.Event // when not nil, every event applied, by seq
}

// Apply takes one message of the book channel; it fails t on a gap or a repeat.
func (b *BookFollower) Apply(t testing.TB, m FeedMessage) {
	t.Helper()
	if err := b.TryApply(m); err != nil {
		t.Fatal(err)
	}
}

// TryApply is Apply that returns its error.
func (b *BookFollower) TryApply(m FeedMessage) error {
	switch m.Type {
	case "snapshot":
		b.Levels = [2]map[int]int64{{}, {}}
		for _, l := range m.Bids {
			b.Levels[0][l.Price] = l.Quantity
		}
		for _, l := range m.Asks {
			b.Levels[1][l.Price] = l.Quantity
		}
		b.Next = m.Seq + 1
	case "events":
		for _, e := range m.Events {
			if e.Seq != b.Next {
				return fmt.Errorf("market %s: event %d follows %d: a gap or a repeat", b.Market, e.Seq, b.Next-1)
			}
			b.Next++
			b.Events++
			if b.Log != nil {
				b.Log[e.Seq] = e
			}
			if e.Type == feed.TypeLevel {
				side := 0
				if e.Side == "ask" {
					side = 1
				}
				if e.Quantity == 0 {
					delete(b.Levels[side], e.Price)
				} else {
					b.Levels[side][e.Price] = e.Quantity
				}
			}
		}
	default:
		return fmt.Errorf("the book channel sent %s", m.Raw)
	}
	return nil
}

// Equal compares the rebuilt book with a REST snapshot at the same seq: its best levels (the
// REST book shows ten a side) must be the rebuilt book's best.
func (b *BookFollower) Equal(t testing.TB, snap Book) {
	t.Helper()
	if b.Next-1 != snap.Seq {
		t.Fatalf("the follower is at seq %d, the snapshot at %d", b.Next-1, snap.Seq)
	}
	for side, want := range [2][]Level{snap.Yes.Bids, snap.Yes.Asks} {
		got := 0
		for _, l := range want {
			if b.Levels[side][l.Price] != l.Quantity {
				t.Errorf("seq %d side %d price %d: the feed rebuilt %d, the REST book shows %d", snap.Seq, side, l.Price, b.Levels[side][l.Price], l.Quantity)
			}
			got++
		}
		if len(want) < 10 && len(b.Levels[side]) != len(want) {
			t.Errorf("seq %d side %d: the feed rebuilt %d levels, the REST book shows %d", snap.Seq, side, len(b.Levels[side]), len(want))
		}
	}
}

// FollowConfig shapes FollowUnderTrading.
type FollowConfig struct {
	Events  int    // follow at least this many events
	Seed    uint64 // the trading's and the reconnects' randomness
	Traders int    // accounts trading at once (default 4)
	// Feeds are the targets the follower connects to, in turn at each reconnect (default the
	// target itself): in distributed mode the front replicas.
	Feeds []*Target
	// During, when set, runs once while trading goes on, after a third of the events (a shard
	// killed, say).
	During func()
}

// FollowUnderTrading has accounts trade at random on a new market while a client follows its book
// channel, reconnecting at random points — closing cleanly or dropping the connection — and
// resuming from the last seq it applied. When trading stops, the rebuilt book must equal the REST
// snapshot at the same seq. It returns the follower.
func FollowUnderTrading(t *testing.T, tg *Target, cfg FollowConfig) *BookFollower {
	if cfg.Traders == 0 {
		cfg.Traders = 4
	}
	if len(cfg.Feeds) == 0 {
		cfg.Feeds = []*Target{tg}
	}
	m := tg.NewMarket(t, nil)
	traders := make([]*Client, cfg.Traders)
	for i := range traders {
		traders[i] = tg.NewAccount(t, "follow")
	}
	reader := tg.NewAccount(t, "follower")

	var followed atomic.Int64 // events the follower applied, for the traders to know when to stop
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	var wg sync.WaitGroup
	for i, c := range traders {
		wg.Go(func() { tradeRandomly(ctx, t, c, m.ID, cfg.Seed+uint64(i)) })
	}

	rng := rand.New(rand.NewPCG(cfg.Seed, 99))
	b := &BookFollower{Market: m.ID}
	conns := 0
	dial := func() *FeedConn {
		target := cfg.Feeds[conns%len(cfg.Feeds)]
		conns++
		r := *reader
		r.T = target
		var f *FeedConn
		var err error
		for attempt := 0; attempt < 50; attempt++ { // a front may be restarting
			if f, err = r.TryDialFeed(context.Background()); err == nil {
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
		if err != nil {
			t.Fatalf("reconnecting to the feed: %v", err)
		}
		sub := map[string]any{"op": "subscribe", "id": conns, "channel": "book", "marketId": m.ID}
		if b.Next > 0 {
			sub["resumeFrom"] = b.Next - 1
		}
		f.Send(t, sub)
		f.Expect(t, "subscribed", "")
		return f
	}
	f := dial()
	during := cfg.During
	var undocumented *UndocumentedError
	deadline := time.Now().Add(5 * time.Minute)
	for b.Events < cfg.Events {
		if time.Now().After(deadline) {
			t.Fatalf("followed %d events of %d in 5 minutes", b.Events, cfg.Events)
		}
		msg, err := f.TryNext(30 * time.Second)
		if errors.As(err, &undocumented) {
			t.Fatal(err)
		}
		if err != nil {
			// A front that goes away closes the connection: resume elsewhere.
			t.Logf("the feed closed after %d events (%v): resuming from %d", b.Events, err, b.Next-1)
			f = dial()
			continue
		}
		b.Apply(t, msg)
		followed.Store(int64(b.Events))
		if during != nil && b.Events > cfg.Events/3 {
			during()
			during = nil
		}
		switch rng.IntN(60) {
		case 0:
			f.Close()
			f = dial()
		case 1:
			f.Abort()
			f = dial()
		}
	}
	stop()
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	snap := reader.Book(t, m.ID)
	for b.Next-1 < snap.Seq {
		msg, err := f.TryNext(30 * time.Second)
		if errors.As(err, &undocumented) {
			t.Fatal(err)
		}
		if err != nil {
			f = dial()
			continue
		}
		b.Apply(t, msg)
	}
	b.Equal(t, snap)
	f.Close()
	t.Logf("followed %d events over %d connections; the book at seq %d equals the REST snapshot", b.Events, conns, snap.Seq)
	return b
}

// tradeRandomly places batches of random orders on a market, and now and then cancels them all,
// until ctx ends.
func tradeRandomly(ctx context.Context, t *testing.T, c *Client, market uuid.UUID, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, 7))
	for ctx.Err() == nil {
		if rng.IntN(12) == 0 {
			if status, raw := c.Do(t, "POST", "/cancel-everything", nil); status != http.StatusOK && status != http.StatusServiceUnavailable {
				t.Errorf("cancel-everything: %d %s", status, raw)
				return
			}
			continue
		}
		orders := make([]any, 1+rng.IntN(10))
		for i := range orders {
			orders[i] = OrderBody(market, "BUY", []string{"YES", "NO"}[rng.IntN(2)], 35+rng.IntN(30), 1+rng.IntN(5))
		}
		status, raw := c.Do(t, "POST", "/orders/batch", map[string]any{"orders": orders})
		// 503: a shard is moving (distributed mode); 429: over the rate limit. The bot carries on.
		if status != http.StatusCreated && status != http.StatusServiceUnavailable && status != http.StatusTooManyRequests {
			t.Errorf("a batch: %d %s", status, raw)
			return
		}
		if status == http.StatusTooManyRequests {
			time.Sleep(100 * time.Millisecond) // as a bot backs off (pacing, not synchronisation)
		}
	}
}

// testFeedFollow follows a market's book over the WebSocket feed through random trading and
// reconnects.
func testFeedFollow(t *testing.T, tg *Target) {
	FollowUnderTrading(t, tg, FollowConfig{Events: 1500, Seed: 11})
}

// testFeedChannels checks the trades, ticker and lifecycle channels, resuming the trades channel,
// and every refusal of a subscription.
func testFeedChannels(t *testing.T, tg *Target) {
	m := tg.NewMarket(t, nil)
	id := m.ID.String()
	a, b := tg.NewAccount(t, "channels"), tg.NewAccount(t, "channels")
	f := a.DialFeed(t)
	f.Send(t, map[string]any{"op": "ping", "id": 1})
	if p := f.Expect(t, "pong", ""); p.ID != 1 {
		t.Fatalf("pong %s", p.Raw)
	}
	f.Send(t, map[string]any{"op": "subscribe", "id": 2, "channel": "ticker", "marketId": id})
	if ack := f.Expect(t, "subscribed", ""); ack.ID != 2 || ack.Channel != "ticker" || ack.MarketID != id {
		t.Fatalf("ack %s", ack.Raw)
	}
	if tk := f.Expect(t, "ticker", ""); tk.BestBid != nil || tk.BestAsk != nil || tk.LastPrice != nil || tk.Seq != 0 {
		t.Fatalf("a new market's ticker: %s", tk.Raw)
	}
	f.Send(t, map[string]any{"op": "subscribe", "id": 3, "channel": "trades", "marketId": id})
	f.Expect(t, "subscribed", "")

	// A bid, then a sell that meets it: the ticker shows the bid, then the trade.
	a.Place(t, m.ID, "BUY", "YES", 40, 5)
	if tk := f.Expect(t, "ticker", ""); tk.BestBid == nil || *tk.BestBid != 40 || tk.BestAsk != nil {
		t.Fatalf("ticker after a bid at 40: %s", tk.Raw)
	}
	b.Place(t, m.ID, "BUY", "NO", 60, 2) // a YES ask at 40
	var trade feed.Event
	var tick FeedMessage
	for trade.Seq == 0 || tick.Seq == 0 {
		msg := f.Next(t, 30*time.Second)
		switch {
		case msg.Type == "events" && msg.Channel == "trades":
			if len(msg.Events) != 1 {
				t.Fatalf("trades: %s", msg.Raw)
			}
			trade = msg.Events[0]
		case msg.Type == "ticker":
			tick = msg
		default:
			t.Fatalf("unexpected %s", msg.Raw)
		}
	}
	if trade.Type != feed.TypeTrade || trade.Price != 40 || trade.Quantity != 2 || trade.TakerSide != "BUY" || trade.TakerOutcome != "NO" {
		t.Errorf("trade event %+v", trade)
	}
	if tick.LastPrice == nil || *tick.LastPrice != 40 || tick.BestBid == nil || *tick.BestBid != 40 || tick.Seq != trade.Seq+1 {
		t.Errorf("ticker after the trade (seq %d): %s", trade.Seq, tick.Raw)
	}

	// The trades channel resumes: another connection replays the trade after seq 0.
	g := b.DialFeed(t)
	g.Send(t, map[string]any{"op": "subscribe", "id": 1, "channel": "trades", "marketId": id, "resumeFrom": 0})
	g.Expect(t, "subscribed", "")
	if r := g.Expect(t, "events", ""); len(r.Events) != 1 || r.Events[0] != trade {
		t.Errorf("replayed trades %s, want the one trade %+v", r.Raw, trade)
	}
	g.Close()

	// Lifecycle: a new market is listed, a closed one changes status. (Other markets' changes,
	// such as those of the suite's earlier tests, may come too.)
	f.Send(t, map[string]any{"op": "subscribe", "id": 4, "channel": "lifecycle"})
	f.ExpectReply(t, "subscribed", "")
	n := tg.NewMarket(t, nil)
	tg.Markets.Close(t, m.ID)
	listed, closed := false, false
	for !listed || !closed {
		msg := f.Next(t, 30*time.Second)
		switch {
		case msg.Type != "market":
		case msg.MarketID == n.ID.String():
			if msg.Change != "listed" || msg.Status != "OPEN" {
				t.Errorf("the new market: %s", msg.Raw)
			}
			listed = true
		case msg.MarketID == id && msg.Status == "CLOSED":
			// (The market may first be seen as new, listed OPEN, by a sweep of the feed.)
			if msg.Change != "status" {
				t.Errorf("the closed market: %s", msg.Raw)
			}
			closed = true
		}
	}

	// Unsubscribing is answered.
	f.Send(t, map[string]any{"op": "unsubscribe", "id": 9, "channel": "lifecycle"})
	f.ExpectReply(t, "unsubscribed", "")

	// Refusals change nothing and leave the connection open.
	for _, bad := range []struct {
		msg  string
		code string
	}{
		{`{"op":"subscribe","id":10,"channel":"book","marketId":"nope"}`, "invalid_market_id"},
		{`{"op":"subscribe","id":11,"channel":"book","marketId":"` + uuid.NewString() + `"}`, "unknown_market"},
		{`{"op":"subscribe","id":12,"channel":"trades","marketId":"` + id + `"}`, "already_subscribed"},
		{`{"op":"unsubscribe","id":13,"channel":"book","marketId":"` + id + `"}`, "not_subscribed"},
		{`{"op":"subscribe","id":14,"channel":"book","marketId":"` + id + `","resumeFrom":1000000}`, "invalid_resume_from"},
		{`{"op":"subscribe","id":15,"channel":"ticker","marketId":"` + id + `","resumeFrom":1}`, "invalid_resume_from"},
		{`{"op":"subscribe","id":16,"channel":"book","marketId":"` + id + `","resumeFrom":-1}`, "invalid_resume_from"},
		{`{"op":"subscribe","id":17,"channel":"lifecycle","marketId":"` + id + `"}`, "invalid_message"},
		{`{"op":"subscribe","id":18,"channel":"candles","marketId":"` + id + `"}`, "unknown_channel"},
		{`{"op":"dance","id":19}`, "invalid_message"},
		{`{"op":"ping","id":20,"extra":true}`, "invalid_message"},
		{`not json`, "invalid_message"},
		{`{"op":"subscribe","id":21,"channel":"book","marketId":"{` + id + `}"}`, "invalid_market_id"},
		{`{"op":"ping","id":22,"channel":"book"}`, "invalid_message"},
		{`{"OP":"ping","id":23}`, "invalid_message"},
	} {
		f.SendRaw(t, []byte(bad.msg))
		e := f.ExpectReply(t, "error", bad.code)
		var want struct{ ID int64 }
		_ = json.Unmarshal([]byte(bad.msg), &want)
		if e.ID != want.ID {
			t.Errorf("error %s answers id %d, want %d", e.Raw, e.ID, want.ID)
		}
	}
	// A message that is not one object with each key once cannot be read: answered with id 0.
	for _, bad := range []string{`{"op":"ping","id":24,"op":"subscribe"}`, `{"op":"ping","id":25}{"op":"ping","id":26}`} {
		f.SendRaw(t, []byte(bad))
		if e := f.ExpectReply(t, "error", "invalid_message"); e.ID != 0 {
			t.Errorf("error %s answers id %d, want 0", e.Raw, e.ID)
		}
	}

	// Events no longer kept cannot be resumed from, where the front holds none of the market's
	// events in memory either: a market no one has followed (the front keeps a followed market's
	// last events for a while after its last subscription ends).
	for i, ch := range []string{"ticker", "trades"} {
		f.Send(t, map[string]any{"op": "unsubscribe", "id": 30 + i, "channel": ch, "marketId": id})
		f.ExpectReply(t, "unsubscribed", "")
	}
	unfollowed := tg.NewMarket(t, nil)
	a.Place(t, unfollowed.ID, "BUY", "YES", 40, 1)
	a.Place(t, unfollowed.ID, "BUY", "YES", 41, 1)
	if _, err := tg.Store.Pool.Exec(context.Background(), `delete from market_events where market_id = $1 and first_seq = 1`, unfollowed.ID); err != nil {
		t.Fatal(err)
	}
	h := a.DialFeed(t)
	h.Send(t, map[string]any{"op": "subscribe", "id": 1, "channel": "book", "marketId": unfollowed.ID, "resumeFrom": 0})
	h.Expect(t, "error", "resync_required")
	f.Close()
	h.Close()
}

// LiveFollower follows a market's book channel in the background, as a bot does: it reconnects
// whenever the connection fails (a front or a shard going away) and resumes from the last seq it
// applied. Every event it applies is kept, to compare followers.
type LiveFollower struct {
	mu   sync.Mutex
	book BookFollower
	err  error
	stop context.CancelFunc
	done chan struct{}
}

// FollowLive starts following a market through a client's target.
func FollowLive(c *Client, market uuid.UUID) *LiveFollower {
	ctx, stop := context.WithCancel(context.Background())
	f := &LiveFollower{book: BookFollower{Market: market, Log: map[int64]feed.Event{}}, stop: stop, done: make(chan struct{})}
	go func() {
		defer close(f.done)
		f.run(ctx, c)
	}()
	return f
}

func (f *LiveFollower) run(ctx context.Context, c *Client) {
	for ctx.Err() == nil {
		conn, err := c.TryDialFeed(ctx)
		if err != nil {
			select { // a front restarting: try again shortly
			case <-ctx.Done():
			case <-time.After(100 * time.Millisecond):
			}
			continue
		}
		func() {
			defer conn.Abort()
			go func() { <-ctx.Done(); conn.Abort() }()
			f.mu.Lock()
			sub := map[string]any{"op": "subscribe", "id": 1, "channel": "book", "marketId": f.book.Market}
			if f.book.Next > 0 {
				sub["resumeFrom"] = f.book.Next - 1
			}
			f.mu.Unlock()
			raw, _ := json.Marshal(sub)
			if err := conn.ws.Write(ctx, 1, raw); err != nil {
				return
			}
			for {
				m, err := conn.TryNext(time.Minute)
				var undocumented *UndocumentedError
				if errors.As(err, &undocumented) {
					f.fail(err)
					return
				}
				if err != nil {
					return
				}
				switch m.Type {
				case "subscribed":
				case "error":
					f.fail(fmt.Errorf("subscribing: %s", m.Raw))
					return
				default:
					f.mu.Lock()
					err := f.book.TryApply(m)
					f.mu.Unlock()
					if err != nil {
						f.fail(err)
						return
					}
				}
			}
		}()
	}
}

func (f *LiveFollower) fail(err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.err == nil {
		f.err = err
	}
	f.stop()
}

// Seq is the last seq the follower applied.
func (f *LiveFollower) Seq() int64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.book.Next - 1
}

// Stop stops following and returns what was followed, failing t if the follower saw a gap, a
// repeat or an undocumented message.
func (f *LiveFollower) Stop(t testing.TB) *BookFollower {
	t.Helper()
	f.stop()
	<-f.done
	if f.err != nil && !errors.Is(f.err, context.Canceled) {
		t.Fatal(f.err)
	}
	return &f.book
}

// testFeedSessions checks connecting with a token (as a browser does) and cancelOnDisconnect.
func testFeedSessions(t *testing.T, tg *Target) {
	ctx := context.Background()
	a := tg.NewAccount(t, "sessions")

	// A token connects once; an unknown or spent one is refused.
	var tok struct {
		Token     string
		ExpiresAt time.Time
	}
	a.Expect(t, "POST", "/ws-token", nil, http.StatusCreated, &tok)
	if tok.Token == "" || time.Until(tok.ExpiresAt) > 2*time.Minute {
		t.Fatalf("token %+v", tok)
	}
	f, err := a.DialFeedQuery(ctx, "token="+tok.Token)
	if err != nil {
		t.Fatalf("connecting with a token: %v", err)
	}
	f.Send(t, map[string]any{"op": "ping", "id": 1})
	f.ExpectReply(t, "pong", "")
	f.Close()
	for _, bad := range []string{tok.Token, "not-a-token"} {
		if _, err := a.DialFeedQuery(ctx, "token="+bad); err == nil || !strings.Contains(err.Error(), "401") {
			t.Errorf("connecting with token %q: %v, want a 401", bad, err)
		}
	}
	if _, err := a.DialFeedQuery(ctx, "cancelOnDisconnect=maybe"); err == nil || !strings.Contains(err.Error(), "400") {
		t.Errorf("cancelOnDisconnect=maybe: %v, want a 400", err)
	}
	tg.Anonymous().ExpectError(t, "POST", "/ws-token", nil, http.StatusUnauthorized, "missing_api_key")

	// cancelOnDisconnect: with two such connections, closing one cancels nothing; closing the
	// last cancels the open orders with cancelReason HEARTBEAT, and only those placed before.
	m := tg.NewMarket(t, nil)
	resting := a.Place(t, m.ID, "BUY", "YES", 10, 1)
	var conns []*FeedConn
	for range 2 {
		c, err := a.DialFeedQuery(ctx, "cancelOnDisconnect=true")
		if err != nil {
			t.Fatal(err)
		}
		c.Send(t, map[string]any{"op": "ping", "id": 1})
		c.ExpectReply(t, "pong", "")
		conns = append(conns, c)
	}
	conns[0].Close()
	tripped := func() bool {
		var at *time.Time
		err := tg.Store.Pool.QueryRow(ctx, `select h.tripped from heartbeats h join accounts a on a.id = h.account_id
			where a.name = $1`, a.Name).Scan(&at)
		return err == nil && at != nil
	}
	// The other connection still answers, and the account's switch has not been tripped.
	conns[1].Send(t, map[string]any{"op": "ping", "id": 2})
	conns[1].ExpectReply(t, "pong", "")
	if tripped() {
		t.Fatal("closing one of two cancelOnDisconnect connections tripped the account's switch")
	}
	conns[1].Close()
	var o struct {
		Status       string
		CancelReason *string
	}
	poll.Wait(t, 30*time.Second, "the order to be cancelled after the last cancelOnDisconnect connection closed", func() bool {
		a.Expect(t, "GET", "/order?orderId="+resting.ID.String(), nil, http.StatusOK, &o)
		return o.Status == "CANCELLED"
	})
	if o.CancelReason == nil || *o.CancelReason != "HEARTBEAT" {
		t.Errorf("cancelled with reason %v, want HEARTBEAT", o.CancelReason)
	}
	later := a.Place(t, m.ID, "BUY", "YES", 11, 1)
	a.Expect(t, "GET", "/order?orderId="+later.ID.String(), nil, http.StatusOK, &o)
	if o.Status != "OPEN" {
		t.Errorf("an order placed after the disconnection is %s", o.Status)
	}
}
