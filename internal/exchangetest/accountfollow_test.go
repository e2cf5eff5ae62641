package exchangetest

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/pmx-dev/pmx/internal/feed"
	"github.com/pmx-dev/pmx/internal/poll"
)

// accountFollower follows a bot's account feed on the orders channel as a bot does: it keeps the
// cursor of the last events it saw and, should the connection end, resumes from it. It records
// every event it is sent, and every one that does not follow on from the last of its stream.
type accountFollower struct {
	c    *Client
	mu   sync.Mutex
	conn *FeedConn
	seen []feed.AccountEvent
	at   feed.Cursor
	// broken: what broke the feed's promise (an event out of its stream's sequence, an error
	// message, a resume that failed).
	broken  []string
	resumes int
	stopped bool
	done    chan struct{}
}

// followAccount subscribes to c's orders channel from the start of its feed (c has no events
// yet) and follows it until stop.
func followAccount(t *testing.T, c *Client) *accountFollower {
	t.Helper()
	f := &accountFollower{c: c, at: feed.Cursor{}, done: make(chan struct{})}
	f.conn = c.DialFeed(t)
	f.conn.Send(t, map[string]any{"op": "subscribe", "id": 1, "channel": "orders"})
	f.conn.ExpectReply(t, "subscribed", "")
	go f.run()
	t.Cleanup(f.stop)
	return f
}

func (f *accountFollower) run() {
	defer close(f.done)
	conn := f.conn
	for {
		msg, err := conn.TryNext(10 * time.Minute)
		f.mu.Lock()
		if f.stopped {
			f.mu.Unlock()
			return
		}
		if err != nil {
			f.mu.Unlock()
			if conn = f.resume(err); conn == nil {
				return
			}
			continue
		}
		switch msg.Type {
		case "accountEvents":
			for _, e := range msg.AccountEvents {
				if e.Seq != f.at[e.Stream]+1 {
					f.broken = append(f.broken, fmt.Sprintf("event %d of stream %q after %d", e.Seq, e.Stream, f.at[e.Stream]))
				}
				f.at[e.Stream] = max(f.at[e.Stream], e.Seq)
				f.seen = append(f.seen, e)
			}
		case "subscribed":
		default:
			f.broken = append(f.broken, fmt.Sprintf("a %s message: %s", msg.Type, msg.Raw))
		}
		f.mu.Unlock()
	}
}

// resume connects again after the connection ended (err), subscribing from the cursor of the
// events seen, at most 50 times a few hundred milliseconds apart; it returns nil if it could not.
func (f *accountFollower) resume(cause error) *FeedConn {
	for range 50 {
		f.mu.Lock()
		stopped, cursor := f.stopped, f.at.String()
		f.mu.Unlock()
		if stopped {
			return nil
		}
		conn, err := f.c.TryDialFeed(context.Background())
		if err == nil {
			sub := map[string]any{"op": "subscribe", "id": 1, "channel": "orders"}
			if cursor != "" {
				sub["resumeFrom"] = cursor
			}
			if err = conn.TrySend(sub); err == nil {
				f.mu.Lock()
				f.conn, f.resumes = conn, f.resumes+1
				f.mu.Unlock()
				return conn
			}
			conn.ws.CloseNow()
		}
		time.Sleep(300 * time.Millisecond) // the pace of retries, not a wait for readiness
	}
	f.mu.Lock()
	f.broken = append(f.broken, fmt.Sprintf("the feed ended (%v) and could not be resumed", cause))
	f.mu.Unlock()
	return nil
}

// stop ends the following.
func (f *accountFollower) stop() {
	f.mu.Lock()
	if f.stopped {
		f.mu.Unlock()
		return
	}
	f.stopped = true
	conn := f.conn
	f.mu.Unlock()
	conn.ws.CloseNow()
	<-f.done
}

// events returns what the follower has been sent so far.
func (f *accountFollower) events() []feed.AccountEvent {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.seen)
}

// checkAccountFeed compares what a follower was sent live with the account's feed as GET
// /account/events pages it from the start, once the trading has stopped: every event exactly once,
// each stream in its order, and each market's events in the same order in both, which is the
// order they committed in — every order's events begin with its acceptance, its filled quantity
// never falls, and nothing follows its end. It returns how many orders had events in more than
// one stream (a market moved between shards while they were open).
func checkAccountFeed(t *testing.T, f *accountFollower) (spanning int) {
	t.Helper()
	paged := f.c.accountEvents(t, feed.Cursor{}, 500) // each stream gapless, or it fails
	if err := poll.Until(t.Context(), 60*time.Second, func(context.Context) (bool, error) {
		return len(f.events()) >= len(paged.Events), nil
	}); err != nil {
		t.Errorf("%s: the live feed delivered %d events, the pages hold %d", f.c.Name, len(f.events()), len(paged.Events))
	}
	f.stop()
	live := f.events()
	f.mu.Lock()
	broken, resumes := slices.Clone(f.broken), f.resumes
	f.mu.Unlock()
	for _, b := range broken {
		t.Errorf("%s's live feed: %s", f.c.Name, b)
	}

	// The same events, stream by stream and market by market, in the same order.
	byStream := func(evs []feed.AccountEvent) map[string][]feed.AccountEvent {
		out := map[string][]feed.AccountEvent{}
		for _, e := range evs {
			out[e.Stream] = append(out[e.Stream], e)
		}
		return out
	}
	pagedStreams, liveStreams := byStream(paged.Events), byStream(live)
	if len(pagedStreams) != len(liveStreams) {
		t.Errorf("%s: %d streams paged, %d live", f.c.Name, len(pagedStreams), len(liveStreams))
	}
	for s, evs := range pagedStreams {
		if !sameAccountEvents(evs, liveStreams[s]) {
			t.Errorf("%s: stream %q holds %d events paged and %d live, not the same", f.c.Name, s, len(evs), len(liveStreams[s]))
		}
	}
	marketOf := func(e feed.AccountEvent) (uuid.UUID, uuid.UUID) {
		switch {
		case e.Order != nil:
			return e.Order.MarketID, e.Order.ID
		case e.Fill != nil:
			return e.Fill.MarketID, e.Fill.OrderID
		}
		return uuid.Nil, uuid.Nil
	}
	byMarket := func(evs []feed.AccountEvent) map[uuid.UUID][]string {
		out := map[uuid.UUID][]string{}
		for _, e := range evs {
			m, _ := marketOf(e)
			out[m] = append(out[m], fmt.Sprintf("%s/%d", e.Stream, e.Seq))
		}
		return out
	}
	liveMarkets := byMarket(live)
	for m, keys := range byMarket(paged.Events) {
		if !slices.Equal(keys, liveMarkets[m]) {
			t.Errorf("%s: market %s's events in another order live than paged:\n%v\n%v", f.c.Name, m, keys, liveMarkets[m])
		}
	}

	// Commit order, order by order.
	type state struct {
		filled  int64
		ended   bool
		streams map[string]bool
	}
	orders := map[uuid.UUID]*state{}
	for _, e := range paged.Events {
		_, id := marketOf(e)
		if id == uuid.Nil {
			continue
		}
		st := orders[id]
		if st == nil {
			if e.Type != feed.AccountAccepted {
				t.Errorf("%s: order %s's first event is %q (%s/%d), not its acceptance", f.c.Name, id, e.Type, e.Stream, e.Seq)
			}
			st = &state{streams: map[string]bool{}}
			orders[id] = st
		}
		filled, status := e.FilledQuantity, e.Status
		if e.Order != nil {
			filled, status = e.Order.FilledQuantity, e.Order.Status
		}
		if st.ended || filled < st.filled {
			t.Errorf("%s: order %s's event %q (%s/%d, filled %d) after its end or a larger fill (%d)", f.c.Name, id, e.Type, e.Stream, e.Seq, filled, st.filled)
		}
		st.filled, st.ended = filled, status != "OPEN" && status != "PARTIALLY_FILLED"
		st.streams[e.Stream] = true
	}
	for _, st := range orders {
		if len(st.streams) > 1 {
			spanning++
		}
	}
	t.Logf("%s's account feed: %d events in %d streams, %d orders (%d with events in two streams), the live feed resumed %d times",
		f.c.Name, len(paged.Events), len(pagedStreams), len(orders), spanning, resumes)
	return spanning
}
