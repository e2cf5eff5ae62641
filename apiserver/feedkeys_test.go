package apiserver_test

import (
	"context"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pmx-dev/pmx/apiserver"
	"github.com/pmx-dev/pmx/internal/exchangetest"
	"github.com/pmx-dev/pmx/internal/kit/auth"
	"github.com/pmx-dev/pmx/internal/poll"
	"github.com/pmx-dev/pmx/internal/store/accounts"
)

// TestFeedKeyEndsOnEveryReplica connects to two replicas on one database with a key, and with
// ws-tokens it fetched, revokes the key through neither (as another replica's settings page
// would), and checks that every connection is closed with 4004: the revocation's announcement
// reaches every replica.
func TestFeedKeyEndsOnEveryReplica(t *testing.T) {
	tg := exchangetest.StartDev(t)
	other := httptest.NewServer(replicaOf(t, tg.Store))
	t.Cleanup(other.Close)
	otherTg := &exchangetest.Target{URL: other.URL, AdminToken: tg.AdminToken, Store: tg.Store, Markets: tg.Markets,
		Validator: tg.Validator, Feed: tg.Feed, HTTP: tg.HTTP}
	exchangetest.CheckFeedKeyEndsAcrossFronts(t, []*exchangetest.Target{tg, otherTg})
}

// TestFeedKeyExpiresOnTheServersClock holds the server's clock: a connection is closed with 4004
// once the clock passes its key's expiry, however far the wall clock is from it.
func TestFeedKeyExpiresOnTheServersClock(t *testing.T) {
	var skew atomic.Int64 // how far the server's clock is ahead of the wall's
	tg := exchangetest.StartDev(t, func(c *apiserver.Config) {
		c.Now = func() time.Time { return time.Now().Add(time.Duration(skew.Load())) }
	})
	trader := tg.NewAccount(t, "clock")
	expires := time.Now().UTC().Add(time.Hour).Truncate(time.Microsecond)
	c := tg.AddKey(t, trader, auth.KeySpec{Scope: auth.ScopeRead, ExpiresAt: &expires})
	f := c.DialFeed(t)
	f.Send(t, map[string]any{"op": "subscribe", "id": 1, "channel": "fills"})
	f.ExpectReply(t, "subscribed", "")
	skew.Store(int64(2 * time.Hour))
	f.ExpectKeyEnded(t, exchangetest.FeedKeyEndBound, "expired")
}

// TestFeedKeyRevokedUnannounced revokes a key without announcing it (an UPDATE of the row, as a
// revocation committed while a replica's announcement channel is down goes unheard by it), then
// cuts the replica's announcement channel: once it is back, the replica checks the keys of its
// connections in Postgres and closes the revoked key's.
func TestFeedKeyRevokedUnannounced(t *testing.T) {
	tg := exchangetest.StartDev(t)
	c := tg.AddKey(t, tg.NewAccount(t, "unannounced"), auth.KeySpec{Scope: auth.ScopeRead})
	f := c.DialFeed(t)
	f.Send(t, map[string]any{"op": "ping", "id": 1})
	f.ExpectReply(t, "pong", "")
	ctx := context.Background()
	prefix, _ := auth.ParseKey(c.Key)
	if _, err := tg.Store.Pool.Exec(ctx, `update api_keys set revoked_at = now() where prefix = $1`, prefix); err != nil {
		t.Fatal(err)
	}
	// (The replica starts listening in the background: the first tries may find no listener yet.)
	poll.Wait(t, 30*time.Second, "the replica's announcement channel to be cut", func() bool {
		var cut int
		err := tg.Store.Pool.QueryRow(ctx, `select count(*) from (select pg_terminate_backend(pid) from pg_stat_activity
			where datname = current_database() and query = 'listen `+accounts.KeyChannel+`') t`).Scan(&cut)
		if err != nil {
			t.Fatal(err)
		}
		return cut == 1
	})
	f.ExpectKeyEnded(t, exchangetest.FeedKeyEndBound, "revoked")
}
