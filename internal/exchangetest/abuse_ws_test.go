package exchangetest

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"
)

// The feed's attacks: how long they run, and the limits they must be held to (apiserver/ws.go's
// defaults, and the read limit the test sets: low, for the keyed abuser to exceed it however slowly
// the test runs, under the race detector say).
const (
	abuseFeedTime      = 10 * time.Second
	abuseFeedConns     = 8  // the attacker's goroutines reconnecting to the public feed
	abuseFeedEach      = 5  // resumes each public connection asks for before it reconnects
	abuseFeedKeyed     = 4  // the keyed abuser's connections
	abuseReplayRate    = 2  // pages of public resumes from Postgres an address may read a second ...
	abuseReplayBurst   = 10 // ... after a first burst
	abuseFeedReadRate  = 4  // the abuser's reads a second (a busy 2-core machine's attacker resumes ~12) ...
	abuseFeedReadBurst = 8  // ... after a first burst
)

// abuseFeedConn is a bare feed connection for the attackers, which run in goroutines and so
// return errors rather than failing the test.
type abuseFeedConn struct{ ws *websocket.Conn }

// dialFeedFrom connects to the feed at path from a loopback address, with a key or without.
func (r *abuseRig) dialFeedFrom(ctx context.Context, ip, path, key string) (*abuseFeedConn, error) {
	// (coder/websocket takes no http.Client with a Timeout: the context bounds the dial.)
	hc := &http.Client{Transport: &http.Transport{DialContext: func(context.Context, string, string) (net.Conn, error) {
		return r.dialFrom(ip)
	}}}
	var header http.Header
	if key != "" {
		header = http.Header{"Authorization": {"Bearer " + key}}
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	ws, resp, err := websocket.Dial(ctx, "ws://"+r.addr()+path, &websocket.DialOptions{HTTPClient: hc, HTTPHeader: header})
	if resp != nil && resp.Body != nil {
		resp.Body.Close()
	}
	if err != nil {
		return nil, err
	}
	ws.SetReadLimit(-1)
	return &abuseFeedConn{ws: ws}, nil
}

// ask sends a message and returns the answer to it (the first subscribed, unsubscribed or error
// message), skipping the subscriptions' own messages.
func (c *abuseFeedConn) ask(msg map[string]any) (FeedMessage, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	raw, _ := json.Marshal(msg)
	if err := c.ws.Write(ctx, websocket.MessageText, raw); err != nil {
		return FeedMessage{}, err
	}
	for {
		_, raw, err := c.ws.Read(ctx)
		if err != nil {
			return FeedMessage{}, err
		}
		var m FeedMessage
		if err := json.Unmarshal(raw, &m); err != nil {
			return FeedMessage{}, err
		}
		m.Raw = raw
		switch m.Type {
		case "subscribed", "unsubscribed", "error":
			return m, nil
		}
	}
}

// resumeAttempt subscribes with resumeFrom 0 and, when let in, unsubscribes again. It says whether
// the subscription was let in, or refused rate_limited; any other answer is an error.
func (c *abuseFeedConn) resumeAttempt(sub map[string]any) (bool, error) {
	m, err := c.ask(sub)
	switch {
	case err != nil:
		return false, err
	case m.Type == "error" && m.Code == "rate_limited" && m.RetryAfterSeconds > 0:
		return false, nil
	case m.Type != "subscribed":
		return false, fmt.Errorf("subscribing: %s", m.Raw)
	}
	unsub := map[string]any{"op": "unsubscribe", "id": sub["id"], "channel": sub["channel"]}
	if id, ok := sub["marketId"]; ok {
		unsub["marketId"] = id
	}
	if m, err := c.ask(unsub); err != nil || m.Type != "unsubscribed" {
		return false, fmt.Errorf("unsubscribing: %s %v", m.Raw, err)
	}
	return true, nil
}

// TestAbuseFeed resumes from the beginning of a market with history, without a key, over and
// over from one address on connection after connection (each resume reads Postgres), while an
// abuser's account resumes its orders channel from 0 in a loop with its key: the public resumes
// are held to the address's allowance however often it reconnects, the keyed ones to the
// account's read rate, and the well-behaved client's placements stay within the bound.
func TestAbuseFeed(t *testing.T) {
	r := newAbuseRig(t, "--read-rate", fmt.Sprint(abuseFeedReadRate), "--read-burst", fmt.Sprint(abuseFeedReadBurst))
	// History: trades between a maker and the abuser, for the market's and the abuser's feeds.
	maker := r.tg.NewAccount(t, "maker")
	for range 5 {
		for i, c := range []*Client{maker, r.abuser} {
			orders := make([]any, 20)
			for j := range orders {
				orders[j] = OrderBody(r.market, "BUY", []string{"YES", "NO"}[i], 50, 1)
			}
			c.Expect(t, "POST", "/orders/batch", map[string]any{"orders": orders}, http.StatusCreated, nil)
		}
	}

	var found problems
	report := found.add
	var mu sync.Mutex
	var publicLet, publicRefused, keyedLet, keyedRefused, reconnects int
	count := func(n *int) {
		mu.Lock()
		*n++
		mu.Unlock()
	}
	tally := func(let bool, in, refused *int) {
		if let {
			count(in)
		} else {
			count(refused)
		}
	}

	g := r.tradeDuring(t)
	start := time.Now()
	var wg sync.WaitGroup
	wg.Go(func() {
		// The public attacker: connect, resume trades from 0 a few times, reconnect.
		limited := func() bool {
			mu.Lock()
			defer mu.Unlock()
			return publicRefused > 0
		}
		hammerUntil(abuseFeedConns, abuseFeedTime, limited, func(int) bool {
			c, err := r.dialFeedFrom(t.Context(), abuseAttacker, "/api/v1/ws/public", "")
			if err != nil {
				report("public connection: %v", err)
				return false
			}
			defer c.ws.CloseNow()
			count(&reconnects)
			for i := range abuseFeedEach {
				let, err := c.resumeAttempt(map[string]any{"op": "subscribe", "id": i + 1, "channel": "trades", "marketId": r.market, "resumeFrom": 0})
				if err != nil {
					report("public resume: %v", err)
					return false
				}
				tally(let, &publicLet, &publicRefused)
			}
			return true
		})
	})
	wg.Go(func() {
		// The keyed abuser: the orders channel from 0, in a loop, on a few connections.
		conns := make([]*abuseFeedConn, abuseFeedKeyed)
		for i := range conns {
			c, err := r.dialFeedFrom(t.Context(), abuseAttacker, "/api/v1/ws", r.abuser.Key)
			if err != nil {
				report("keyed connection: %v", err)
				return
			}
			defer c.ws.CloseNow()
			conns[i] = c
		}
		ids := make([]int, len(conns))
		limited := func() bool {
			mu.Lock()
			defer mu.Unlock()
			return keyedRefused > 0
		}
		hammerUntil(len(conns), abuseFeedTime, limited, func(i int) bool {
			ids[i]++
			let, err := conns[i].resumeAttempt(map[string]any{"op": "subscribe", "id": ids[i], "channel": "orders", "resumeFrom": 0})
			if err != nil {
				report("keyed resume: %v", err)
				return false
			}
			tally(let, &keyedLet, &keyedRefused)
			return true
		})
	})
	wg.Wait()
	elapsed := time.Since(start)
	g.finish(t, "feed resumes", abuseMaxPlacement)
	found.report(t)

	t.Logf("public: %d resumes from 0 let in, %d refused, over %d connections; keyed: %d let in, %d refused, in %v",
		publicLet, publicRefused, reconnects, keyedLet, keyedRefused, elapsed)
	if most := abuseReplayBurst + int(elapsed.Seconds()*abuseReplayRate) + 1; publicLet > most || publicRefused == 0 {
		t.Errorf("public resumes from Postgres from one address: %d let in and %d refused in %v, want at most %d let in",
			publicLet, publicRefused, elapsed, most)
	}
	if reconnects < 2*abuseFeedConns {
		t.Errorf("the public attacker reconnected only %d times: the attack did not run", reconnects)
	}
	// (Every token spent was taken from the shared bucket: a front's leases never add to it.)
	if most := abuseFeedReadBurst + int(elapsed.Seconds()*abuseFeedReadRate) + 1; keyedLet > most || keyedRefused == 0 {
		t.Errorf("keyed resumes of the orders channel: %d let in and %d refused in %v, want at most %d let in",
			keyedLet, keyedRefused, elapsed, most)
	}
}
