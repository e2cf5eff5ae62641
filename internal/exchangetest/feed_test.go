package exchangetest

import (
	"strings"
	"testing"
	"time"

	"github.com/pmx-dev/pmx/apiserver"
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
