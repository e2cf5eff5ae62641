package exchangetest

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/google/uuid"

	"github.com/pmx-dev/pmx/internal/kit/auth"
	"github.com/pmx-dev/pmx/internal/poll"
)

// A feed connection ends with its key (apiserver/keycache.go): once the API key it was opened
// with, or that fetched its ws-token, is revoked or expires, the connection is closed with the
// documented code 4004 within a few seconds, and a cancelOnDisconnect connection closed so
// cancels nothing.

// FeedKeyEndBound is how long a test waits for a connection to close after its key ended. The
// promise is a few seconds (at once for a revocation, a second for an expiry); the rest is room
// for a busy machine, since the test judges that it closes, not how fast.
const FeedKeyEndBound = 20 * time.Second

// feedKeyEndedCode is the close code of a connection whose key was revoked or expired.
const feedKeyEndedCode = 4004

func testFeedKeyEnds(t *testing.T, tg *Target) {
	t.Run("Revoked", func(t *testing.T) { testFeedKeyRevoked(t, tg) })
	t.Run("RevokedWSToken", func(t *testing.T) { testFeedKeyRevokedToken(t, tg) })
	t.Run("Expired", func(t *testing.T) { testFeedKeyExpired(t, tg) })
	t.Run("RevokedCancelOnDisconnect", func(t *testing.T) { testFeedKeyRevokedCancelOnDisconnect(t, tg) })
}

// RevokeKey revokes c's key as the settings page does (store.RevokeAPIKey, whose commit Postgres
// announces to every front), through no front: a front hears of it only by the announcement.
func RevokeKey(t testing.TB, tg *Target, c *Client) {
	t.Helper()
	prefix, ok := auth.ParseKey(c.Key)
	if !ok {
		t.Fatalf("not a key: %q", c.Key)
	}
	ctx := context.Background()
	var id uuid.UUID
	var account int64
	if err := tg.Store.Pool.QueryRow(ctx, `select id, account_id from api_keys where prefix = $1`, prefix).Scan(&id, &account); err != nil {
		t.Fatal(err)
	}
	if _, err := tg.Store.RevokeAPIKey(ctx, account, id, time.Now()); err != nil {
		t.Fatal(err)
	}
}

// ExpectKeyEnded reads f until the server closes it, which it must do within bound with the
// documented code 4004 and a reason that mentions why (revoked or expired). Whatever came before
// the close is skipped; the wait is bounded as a whole, heartbeats or not.
func (f *FeedConn) ExpectKeyEnded(t testing.TB, bound time.Duration, why string) {
	t.Helper()
	deadline := time.Now().Add(bound)
	for {
		left := time.Until(deadline)
		if left <= 0 {
			t.Fatalf("the connection is still open %v after its key was %s", bound, why)
		}
		_, err := f.nextRaw(left)
		if err == nil {
			continue
		}
		if errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("the connection is still open %v after its key was %s", bound, why)
		}
		var ce websocket.CloseError
		if !errors.As(err, &ce) {
			t.Fatalf("waiting for the close after the key was %s: %v", why, err)
		}
		if int(ce.Code) != feedKeyEndedCode || !f.T.Feed.CloseCodeDocumented(int(ce.Code)) {
			t.Fatalf("closed with %v, want the documented %d", err, feedKeyEndedCode)
		}
		if !strings.Contains(ce.Reason, why) {
			t.Fatalf("closed with the reason %q, which does not say the key was %s", ce.Reason, why)
		}
		return
	}
}

// refusedKey checks that c's key can no longer connect to the feed.
func refusedKey(t *testing.T, c *Client) {
	t.Helper()
	if f, err := c.TryDialFeed(context.Background()); err == nil || !strings.Contains(err.Error(), "401") {
		if f != nil {
			f.Abort()
		}
		t.Fatalf("connecting again with the ended key: %v, want a 401", err)
	}
}

// testFeedKeyRevoked: a connection subscribed to its account's orders is closed when its key is
// revoked, while the account's other key goes on working.
func testFeedKeyRevoked(t *testing.T, tg *Target) {
	trader := tg.NewAccount(t, "feedrevoked")
	c := tg.AddKey(t, trader, auth.KeySpec{Scope: auth.ScopeRead})
	f := c.DialFeed(t)
	f.Send(t, map[string]any{"op": "subscribe", "id": 1, "channel": "orders"})
	f.ExpectReply(t, "subscribed", "")
	RevokeKey(t, tg, c)
	f.ExpectKeyEnded(t, FeedKeyEndBound, "revoked")
	refusedKey(t, c)
	trader.Expect(t, "GET", "/account", nil, http.StatusOK, nil)
}

// testFeedKeyRevokedToken: a connection by ws-token ends with the key that fetched the token.
func testFeedKeyRevokedToken(t *testing.T, tg *Target) {
	trader := tg.NewAccount(t, "feedrevokedtoken")
	c := tg.AddKey(t, trader, auth.KeySpec{Scope: auth.ScopeRead})
	var tok struct{ Token string }
	c.Expect(t, "POST", "/ws-token", nil, http.StatusCreated, &tok)
	f, err := c.DialFeedQuery(context.Background(), "token="+tok.Token)
	if err != nil {
		t.Fatalf("connecting with a token: %v", err)
	}
	t.Cleanup(f.Abort)
	f.Send(t, map[string]any{"op": "subscribe", "id": 1, "channel": "fills"})
	f.ExpectReply(t, "subscribed", "")
	RevokeKey(t, tg, c)
	f.ExpectKeyEnded(t, FeedKeyEndBound, "revoked")
}

// testFeedKeyExpired: a connection is closed when its key expires. The key expires a few seconds
// after it is made, long enough to connect on a busy machine; should the connection come too late
// (refused as expired), the next try gives the key twice as long.
func testFeedKeyExpired(t *testing.T, tg *Target) {
	trader := tg.NewAccount(t, "feedexpired")
	window := 3 * time.Second
	for try := 0; ; try++ {
		expires := time.Now().UTC().Add(window).Truncate(time.Microsecond)
		c := tg.AddKey(t, trader, auth.KeySpec{Scope: auth.ScopeRead, ExpiresAt: &expires})
		f, err := c.TryDialFeed(context.Background())
		if err != nil && strings.Contains(err.Error(), "401") && try < 4 {
			window *= 2
			continue
		}
		if err != nil {
			t.Fatalf("connecting with a key that expires in %v: %v", window, err)
		}
		t.Cleanup(f.Abort)
		f.ExpectKeyEnded(t, time.Until(expires)+FeedKeyEndBound, "expired")
		refusedKey(t, c)
		return
	}
}

// testFeedKeyRevokedCancelOnDisconnect: a cancelOnDisconnect connection closed because its key
// was revoked cancels none of the account's orders (the key has no authority left to), while a
// live key's connection still cancels them by closing.
func testFeedKeyRevokedCancelOnDisconnect(t *testing.T, tg *Target) {
	ctx := context.Background()
	m := tg.NewMarket(t, nil)
	trader := tg.NewAccount(t, "feedrevokedcod")
	var account int64
	if err := tg.Store.Pool.QueryRow(ctx, `select id from accounts where uid = $1`, trader.Account).Scan(&account); err != nil {
		t.Fatal(err)
	}
	resting := trader.Place(t, m.ID, "BUY", "YES", 10, 1)
	desk := tg.AddKey(t, trader, auth.KeySpec{Scope: auth.ScopeCancel})
	f, err := desk.DialFeedQuery(ctx, "cancelOnDisconnect=true")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(f.Abort)
	f.Send(t, map[string]any{"op": "ping", "id": 1})
	f.ExpectReply(t, "pong", "")
	RevokeKey(t, tg, desk)
	f.ExpectKeyEnded(t, FeedKeyEndBound, "revoked")

	// The front records the connection's end after the close: once the account has no presence
	// left, nothing more will be decided for it.
	poll.Wait(t, 30*time.Second, "the front to record the end of the revoked key's connection", func() bool {
		var n int
		if err := tg.Store.Pool.QueryRow(ctx, `select count(*) from ws_presence where account_id = $1`, account).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n == 0
	})
	var tripped *time.Time
	if err := tg.Store.Pool.QueryRow(ctx, `select max(tripped) from heartbeats where account_id = $1`, account).Scan(&tripped); err != nil {
		t.Fatal(err)
	}
	if tripped != nil {
		t.Fatalf("the revoked key's cancelOnDisconnect connection tripped the account's switch at %v", tripped)
	}
	var o struct {
		Status       string
		CancelReason *string
	}
	trader.Expect(t, "GET", "/order?orderId="+resting.ID.String(), nil, http.StatusOK, &o)
	if o.Status != "OPEN" {
		t.Fatalf("after the revoked key's cancelOnDisconnect connection closed, the order is %s, want OPEN", o.Status)
	}

	// A live key's cancelOnDisconnect connection still cancels the orders when it closes.
	g, err := trader.DialFeedQuery(ctx, "cancelOnDisconnect=true")
	if err != nil {
		t.Fatal(err)
	}
	g.Send(t, map[string]any{"op": "ping", "id": 1})
	g.ExpectReply(t, "pong", "")
	g.Close()
	poll.Wait(t, 30*time.Second, "the order to be cancelled after the live key's connection closed", func() bool {
		trader.Expect(t, "GET", "/order?orderId="+resting.ID.String(), nil, http.StatusOK, &o)
		return o.Status == "CANCELLED"
	})
	if o.CancelReason == nil || *o.CancelReason != "HEARTBEAT" {
		t.Errorf("cancelled with reason %v, want HEARTBEAT", o.CancelReason)
	}
}

// CheckFeedKeyEndsAcrossFronts connects to every front with one key, and to every front with a
// ws-token the key fetched there, revokes the key through none of them, and checks that every
// connection is closed with 4004: the revocation reaches every front.
func CheckFeedKeyEndsAcrossFronts(t *testing.T, fronts []*Target) {
	trader := fronts[0].NewAccount(t, "feedrevokedfronts")
	c := fronts[0].AddKey(t, trader, auth.KeySpec{Scope: auth.ScopeRead})
	var conns []*FeedConn
	for _, tg := range fronts {
		on := &Client{T: tg, Key: c.Key, Account: c.Account, Name: c.Name}
		conns = append(conns, on.DialFeed(t))
		var tok struct{ Token string }
		on.Expect(t, "POST", "/ws-token", nil, http.StatusCreated, &tok)
		f, err := on.DialFeedQuery(context.Background(), "token="+tok.Token)
		if err != nil {
			t.Fatalf("connecting with a token: %v", err)
		}
		t.Cleanup(f.Abort)
		conns = append(conns, f)
	}
	for _, f := range conns {
		f.Send(t, map[string]any{"op": "ping", "id": 1})
		f.ExpectReply(t, "pong", "")
	}
	RevokeKey(t, fronts[0], c)
	for _, f := range conns {
		f.ExpectKeyEnded(t, FeedKeyEndBound, "revoked")
	}
}
