package exchangetest

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/google/uuid"

	"github.com/pmx-dev/pmx/apiserver"
	"github.com/pmx-dev/pmx/internal/kit/ratelimit"
)

// TestFeedFollow follows a market through more than 10,000 events of random trading, reconnecting
// at random points and resuming; the front keeps only 64 events a market in memory, so most
// resumes read from Postgres before going live. The rebuilt book equals the REST snapshot at the
// same seq.
func TestFeedFollow(t *testing.T) {
	tg := StartDev(t, func(c *apiserver.Config) { c.Feed.Ring = 64 })
	b := FollowUnderTrading(t, tg, FollowConfig{Events: 10_000, Seed: 5, Traders: 6})
	if b.Events < 10_000 {
		t.Fatalf("followed %d events", b.Events)
	}
}

// TestFeedSlowConsumer has a client stop reading its book subscription while trading goes on:
// the server keeps at most its queue of messages for it and then closes the connection with the
// documented code, 4001; the client reconnects and resumes with nothing lost.
func TestFeedSlowConsumer(t *testing.T) {
	const queue = 16
	tg := StartDev(t, func(c *apiserver.Config) { c.Feed.Queue = queue })
	m := tg.NewMarket(t, nil)
	slow := tg.NewAccount(t, "slow")
	f := slow.DialSlowFeed(t)
	f.Send(t, map[string]any{"op": "subscribe", "id": 1, "channel": "book", "marketId": m.ID})
	f.Expect(t, "subscribed", "")
	b := &BookFollower{Market: m.ID}
	b.Apply(t, f.Expect(t, "snapshot", ""))

	// Trade until the server gives up on the client, which reads nothing meanwhile.
	// Two traders meet at 50, so that nothing rests for long: each placement is an event or two.
	traders := []*Client{tg.NewAccount(t, "yes"), tg.NewAccount(t, "no")}
	var err error
	for i := 0; ; i++ {
		if i == 20_000 {
			t.Fatal("the server never closed the connection of a client that does not read")
		}
		traders[i%2].Place(t, m.ID, "BUY", []string{"YES", "NO"}[i%2], 50, 1)
		if i%50 != 49 {
			continue
		}
		if tg.Metric(t, `pmx_feed_closed_total{reason="slow_consumer"}`) > 0 {
			break
		}
	}
	// Now read: what was sent arrives, then the close with its code and reason.
	for {
		var msg FeedMessage
		msg, err = f.TryNext(30 * time.Second)
		if err != nil {
			break
		}
		b.Apply(t, msg)
	}
	if code := CloseCode(err); code != 4001 || !tg.Feed.CloseCodeDocumented(code) {
		t.Fatalf("closed with %v (code %d), want the documented 4001", err, code)
	}
	t.Logf("closed after %d events: %v", b.Events, err)

	// Resuming catches up with nothing lost.
	g := slow.DialFeed(t)
	g.Send(t, map[string]any{"op": "subscribe", "id": 1, "channel": "book", "marketId": m.ID, "resumeFrom": b.Next - 1})
	g.Expect(t, "subscribed", "")
	snap := slow.Book(t, m.ID)
	for b.Next-1 < snap.Seq {
		b.Apply(t, g.Next(t, 30*time.Second))
	}
	b.Equal(t, snap)
}

// TestFeedHeartbeats checks both directions: the server sends heartbeats to a quiet connection,
// and closes one whose client sends nothing for ClientTimeout with the documented code 4002.
func TestFeedHeartbeats(t *testing.T) {
	tg := StartDev(t, func(c *apiserver.Config) {
		c.Feed.Heartbeat = 50 * time.Millisecond
		c.Feed.ClientTimeout = 2 * time.Second
	})
	f := tg.NewAccount(t, "quiet").DialFeed(t)
	beats := 0
	var err error
	for beats < 100 {
		var raw []byte
		if raw, err = f.nextRaw(10 * time.Second); err != nil {
			break
		}
		if !strings.Contains(string(raw), `"type":"heartbeat"`) {
			t.Fatalf("a quiet connection got %s", raw)
		}
		beats++
	}
	if beats < 3 {
		t.Errorf("%d heartbeats before the close, want several", beats)
	}
	if code := CloseCode(err); code != 4002 || !tg.Feed.CloseCodeDocumented(code) {
		t.Fatalf("after %d heartbeats: %v (code %d), want the documented 4002", beats, err, code)
	}
}

// MakeHistory trades on a market until it has at least events events: batches of resting bids
// and the orders that meet them, each a trade and a level.
func MakeHistory(t testing.TB, tg *Target, market uuid.UUID, events int64) {
	t.Helper()
	maker, taker := tg.NewAccount(t, "history"), tg.NewAccount(t, "history")
	for range 10_000 {
		if maker.Book(t, market).Seq >= events {
			return
		}
		for i, c := range []*Client{maker, taker} {
			orders := make([]any, 20)
			for j := range orders {
				orders[j] = OrderBody(market, "BUY", []string{"YES", "NO"}[i], 50, 1)
			}
			c.Expect(t, "POST", "/orders/batch", map[string]any{"orders": orders}, http.StatusCreated, nil)
		}
	}
	t.Fatalf("market %s never reached %d events", market, events)
}

// TestPublicFeedLimitPerAddress holds the public feed's subscribe allowance per client address,
// across connections: reconnecting does not reset it (it did when it was per connection).
func TestPublicFeedLimitPerAddress(t *testing.T) {
	tg := StartDev(t)
	const conns, each = 4, 60 // 240 subscribes, well past the first 100
	allowed, limited := 0, 0
	start := time.Now()
	for range conns {
		f := tg.DialPublicFeed(t)
		for i := range each {
			f.Send(t, map[string]any{"op": "subscribe", "id": i + 1, "channel": "ticker", "marketId": uuid.New()})
		}
		for range each {
			switch m := f.Next(t, 30*time.Second); {
			case m.Type == "error" && m.Code == "unknown_market":
				allowed++
			case m.Type == "error" && m.Code == "rate_limited":
				limited++
				if m.RetryAfterSeconds <= 0 || !strings.Contains(m.Message, "address") {
					t.Fatalf("rate_limited without a wait, or not saying which limit: %s", m.Raw)
				}
			default:
				t.Fatalf("got %s", m.Raw)
			}
		}
		f.Close()
	}
	elapsed := time.Since(start)
	if most := 100 + int(elapsed.Seconds()*10) + 1; allowed > most || allowed < 100 {
		t.Fatalf("%d of %d subscribes from one address over %d connections in %s were let through, want 100 to %d",
			allowed, conns*each, conns, elapsed, most)
	}
	if got := tg.Metric(t, `pmx_feed_rate_limited_total{limit="public_subscribes"}`); got != float64(limited) {
		t.Errorf("pmx_feed_rate_limited_total says %g refused, the client saw %d", got, limited)
	}
}

// TestPublicFeedResumeLimit holds resumes without a key that read Postgres (older than the
// front's ring) to the address's allowance: 10 at once, then 2 a second; refused ones are
// answered rate_limited and change nothing, and resumes from the ring are not counted.
func TestPublicFeedResumeLimit(t *testing.T) {
	tg := StartDev(t, func(c *apiserver.Config) { c.Feed.Ring = 4 })
	m := tg.NewMarket(t, nil)
	MakeHistory(t, tg, m.ID, 40)
	f := tg.DialPublicFeed(t)
	const tries = 20
	allowed, limited := 0, 0
	start := time.Now()
	for i := range tries {
		f.Send(t, map[string]any{"op": "subscribe", "id": i + 1, "channel": "book", "marketId": m.ID, "resumeFrom": 0})
		switch r := f.Next(t, 30*time.Second); {
		case r.Type == "subscribed":
			allowed++
			f.Send(t, map[string]any{"op": "unsubscribe", "id": i + 1, "channel": "book", "marketId": m.ID})
			f.ExpectReply(t, "unsubscribed", "")
		case r.Type == "error" && r.Code == "rate_limited":
			limited++
			if r.RetryAfterSeconds <= 0 {
				t.Fatalf("rate_limited without a wait: %s", r.Raw)
			}
			// Nothing changed: the connection is not subscribed.
			f.Send(t, map[string]any{"op": "unsubscribe", "id": i + 1, "channel": "book", "marketId": m.ID})
			f.ExpectReply(t, "error", "not_subscribed")
		default:
			t.Fatalf("got %s", r.Raw)
		}
	}
	elapsed := time.Since(start)
	if most := 10 + int(elapsed.Seconds()*2) + 1; allowed > most || allowed < 10 || limited == 0 {
		t.Fatalf("%d of %d resumes from Postgres in %s were let through, want 10 to %d", allowed, tries, elapsed, most)
	}
	// A resume the ring holds costs nothing: a live subscription keeps the ring filling.
	ringer := tg.NewAccount(t, "ring")
	seq := ringer.Book(t, m.ID).Seq
	g := tg.DialPublicFeed(t)
	g.Send(t, map[string]any{"op": "subscribe", "id": 1, "channel": "book", "marketId": m.ID})
	g.Expect(t, "subscribed", "")
	g.Expect(t, "snapshot", "")
	ringer.Place(t, m.ID, "BUY", "YES", 10, 1)
	g.Expect(t, "events", "")
	for i := range 3 {
		f.Send(t, map[string]any{"op": "subscribe", "id": 100 + i, "channel": "book", "marketId": m.ID, "resumeFrom": seq})
		f.ExpectReply(t, "subscribed", "")
		f.Send(t, map[string]any{"op": "unsubscribe", "id": 100 + i, "channel": "book", "marketId": m.ID})
		f.ExpectReply(t, "unsubscribed", "")
	}
}

// TestFeedSubscribeSpendsReads charges a keyed connection's subscriptions to the account's read
// bucket, as GETs are: GET /account/limits shows them spent, and once the bucket is empty a
// subscribe is refused rate_limited and changes nothing.
func TestFeedSubscribeSpendsReads(t *testing.T) {
	const burst = 10
	tg := StartDev(t, func(c *apiserver.Config) { c.ReadLimit = ratelimit.Limit{Rate: 0.001, Burst: burst} })
	a := tg.NewAccount(t, "reader")
	var markets []string
	for range 4 {
		markets = append(markets, tg.NewMarket(t, nil).ID.String())
	}
	f := a.DialFeed(t) // a read
	f.Send(t, map[string]any{"op": "subscribe", "id": 1, "channel": "ticker", "marketId": markets[0]})
	f.ExpectReply(t, "subscribed", "")
	f.Send(t, map[string]any{"op": "subscribe", "id": 2, "channel": "orders"})
	f.ExpectReply(t, "subscribed", "")
	var limits struct{ Reads struct{ Remaining float64 } }
	a.Expect(t, "GET", "/account/limits", nil, http.StatusOK, &limits) // a read
	if want := float64(burst - 4); limits.Reads.Remaining != want {
		t.Fatalf("%g reads remaining after connecting, two subscriptions and this request, want %d", limits.Reads.Remaining, burst-4)
	}
	id := 3
	for _, m := range markets[1:] {
		for _, ch := range []string{"book", "trades", "ticker"} {
			f.Send(t, map[string]any{"op": "subscribe", "id": id, "channel": ch, "marketId": m})
			id++
			if id <= burst-1 {
				f.ExpectReply(t, "subscribed", "")
				continue
			}
			e := f.ExpectReply(t, "error", "rate_limited")
			if e.RetryAfterSeconds <= 0 || !strings.Contains(e.Message, "read rate limit") {
				t.Fatalf("refused %s", e.Raw)
			}
			f.Send(t, map[string]any{"op": "unsubscribe", "id": id, "channel": ch, "marketId": m})
			f.ExpectReply(t, "error", "not_subscribed")
		}
	}
	if id <= burst {
		t.Fatal("the test never spent the bucket")
	}
}

// TestFeedKeepsTopic has a client subscribe, unsubscribe and subscribe again to a market while it
// trades: the front reads the market's book once (it keeps the market followed for a while after
// its last subscription), and the kept market resumes with no gap.
func TestFeedKeepsTopic(t *testing.T) {
	tg := StartDev(t)
	m := tg.NewMarket(t, nil)
	a, b := tg.NewAccount(t, "churn"), tg.NewAccount(t, "churn")
	f := tg.DialPublicFeed(t)
	follower := &BookFollower{Market: m.ID}
	for i := range 5 {
		sub := map[string]any{"op": "subscribe", "id": i + 1, "channel": "book", "marketId": m.ID}
		if i > 0 {
			sub["resumeFrom"] = follower.Next - 1
		}
		f.Send(t, sub)
		f.Expect(t, "subscribed", "")
		if i == 0 {
			follower.Apply(t, f.Expect(t, "snapshot", ""))
		}
		a.Place(t, m.ID, "BUY", "YES", 40+i, 2)
		for follower.Next-1 < a.Book(t, m.ID).Seq {
			follower.Apply(t, f.Next(t, 30*time.Second))
		}
		f.Send(t, map[string]any{"op": "unsubscribe", "id": i + 1, "channel": "book", "marketId": m.ID})
		f.ExpectReply(t, "unsubscribed", "")
		// Trading goes on while no one follows: the kept market follows it.
		b.Place(t, m.ID, "BUY", "NO", 100-(40+i), 1)
	}
	f.Send(t, map[string]any{"op": "subscribe", "id": 99, "channel": "book", "marketId": m.ID, "resumeFrom": follower.Next - 1})
	f.Expect(t, "subscribed", "")
	snap := a.Book(t, m.ID)
	for follower.Next-1 < snap.Seq {
		follower.Apply(t, f.Next(t, 30*time.Second))
	}
	follower.Equal(t, snap)
	if loads := tg.Metric(t, "pmx_feed_book_loads_total"); loads != 1 {
		t.Fatalf("the front read the market's book %g times over 6 subscriptions, want once", loads)
	}
}

// TestFeedTokenCancelOnDisconnect refuses cancelOnDisconnect on a connection by ws-token (a URL
// others may read could cancel the account's orders) with a 400, before the token is spent.
func TestFeedTokenCancelOnDisconnect(t *testing.T) {
	tg := StartDev(t)
	a := tg.NewAccount(t, "token")
	var tok struct{ Token string }
	a.Expect(t, "POST", "/ws-token", nil, http.StatusCreated, &tok)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ws, resp, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(tg.URL, "http")+"/api/v1/ws?cancelOnDisconnect=true&token="+tok.Token, nil)
	if err == nil {
		ws.CloseNow()
		t.Fatal("connected by ws-token with cancelOnDisconnect")
	}
	var e struct {
		Error   string
		Details struct{ Code, Field string }
	}
	if resp == nil || resp.StatusCode != http.StatusBadRequest || json.NewDecoder(resp.Body).Decode(&e) != nil ||
		e.Details.Field != "cancelOnDisconnect" || !strings.Contains(e.Error, "Authorization") {
		t.Fatalf("a token with cancelOnDisconnect: %v %+v, want a 400 naming cancelOnDisconnect and saying to use the key", err, e)
	}
	// The token was not spent, and connects without cancelOnDisconnect.
	g, err := a.DialFeedQuery(context.Background(), "cancelOnDisconnect=false&token="+tok.Token)
	if err != nil {
		t.Fatalf("the token after the refusal: %v", err)
	}
	g.Send(t, map[string]any{"op": "ping", "id": 1})
	g.ExpectReply(t, "pong", "")
	g.Close()
}

// TestFeedWriteTimeout has a client read nothing while its book subscription's market trades: the
// server's write to it times out, and the close counts as a slow consumer's, not the client's.
func TestFeedWriteTimeout(t *testing.T) {
	tg := StartDev(t, func(c *apiserver.Config) {
		c.Feed.WriteTimeout = 300 * time.Millisecond
		c.Feed.Queue, c.Feed.QueueBytes = 1<<20, 1<<30 // so that only the write timeout closes it
	})
	m := tg.NewMarket(t, nil)
	slow := tg.NewAccount(t, "slow")
	f := slow.DialSlowFeed(t)
	f.Send(t, map[string]any{"op": "subscribe", "id": 1, "channel": "book", "marketId": m.ID})
	f.Expect(t, "subscribed", "")
	f.Expect(t, "snapshot", "")
	traders := []*Client{tg.NewAccount(t, "yes"), tg.NewAccount(t, "no")}
	for i := 0; ; i++ {
		if i == 20_000 {
			t.Fatal("the server never closed the connection of a client that does not read")
		}
		traders[i%2].Place(t, m.ID, "BUY", []string{"YES", "NO"}[i%2], 50, 1)
		if i%50 == 49 && tg.Metric(t, `pmx_feed_closed_total{reason="slow_consumer"}`)+tg.Metric(t, `pmx_feed_closed_total{reason="client"}`) > 0 {
			break
		}
	}
	if slow, client := tg.Metric(t, `pmx_feed_closed_total{reason="slow_consumer"}`), tg.Metric(t, `pmx_feed_closed_total{reason="client"}`); slow != 1 || client != 0 {
		t.Fatalf("closed by the write timeout: counted %g slow_consumer and %g client, want 1 and 0", slow, client)
	}
	for { // what was sent arrives, then the connection ends
		if _, err := f.TryNext(30 * time.Second); err != nil {
			break
		}
	}
}

// TestFeedQueueBytes bounds a connection's queue in bytes: a client that reads nothing of a
// replay of large pages (1,000 events each) and of a live subscription is closed with 4001 once
// the bytes waiting exceed the bound, long before its queue holds 1,024 messages.
func TestFeedQueueBytes(t *testing.T) {
	tg := StartDev(t, func(c *apiserver.Config) {
		c.Feed.QueueBytes = 64 << 10
		c.Feed.WriteTimeout = time.Minute // so that only the queue's bound closes it
	})
	old, live := tg.NewMarket(t, nil), tg.NewMarket(t, nil)
	MakeHistory(t, tg, old.ID, 2500)
	slow := tg.NewAccount(t, "slow")
	f := slow.DialSlowFeed(t)
	f.Send(t, map[string]any{"op": "subscribe", "id": 1, "channel": "book", "marketId": live.ID})
	f.Expect(t, "subscribed", "")
	f.Send(t, map[string]any{"op": "subscribe", "id": 2, "channel": "book", "marketId": old.ID, "resumeFrom": 0})
	// The client reads nothing more; the live market trades, a message or two an order.
	traders := []*Client{tg.NewAccount(t, "yes"), tg.NewAccount(t, "no")}
	closed := false
	for i := range 500 {
		traders[i%2].Place(t, live.ID, "BUY", []string{"YES", "NO"}[i%2], 50, 1)
		if i%25 == 24 && tg.Metric(t, `pmx_feed_closed_total{reason="slow_consumer"}`) > 0 {
			closed = true
			break
		}
	}
	if !closed {
		t.Fatal("a client that read nothing of a 2,500-event replay and 500 orders' events was not closed")
	}
	var err error
	for {
		if _, err = f.TryNext(30 * time.Second); err != nil {
			break
		}
	}
	if code := CloseCode(err); code != 4001 {
		t.Fatalf("closed with %v (code %d), want 4001", err, code)
	}
}
