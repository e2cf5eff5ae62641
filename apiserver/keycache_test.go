package apiserver_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/pmx-dev/pmx/apiserver"
	"github.com/pmx-dev/pmx/internal/exchangetest"
	"github.com/pmx-dev/pmx/internal/poll"
	"github.com/pmx-dev/pmx/internal/store"
)

// TestRevokedKeyRefusedOnEveryReplica warms two replicas' key caches, revokes the key directly in
// the store (through neither replica), and checks that both refuse it as soon as Postgres announces
// the revocation (a bounded wait, not a sleep).
func TestRevokedKeyRefusedOnEveryReplica(t *testing.T) {
	tg := exchangetest.StartDev(t)
	other := httptest.NewServer(replicaOf(t, tg.Store))
	t.Cleanup(other.Close)
	c := tg.NewAccount(t, "cached")
	get := func(base string) int {
		req, _ := http.NewRequest("GET", base+"/api/v1/account", nil)
		req.Header.Set("Authorization", "Bearer "+c.Key)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	for range 3 { // the first call fills each cache, the next ones use it
		if a, b := get(tg.URL), get(other.URL); a != http.StatusOK || b != http.StatusOK {
			t.Fatalf("before revocation: %d and %d", a, b)
		}
	}
	ctx := context.Background()
	keys, err := tg.Store.APIKeys(ctx, accountID(t, tg, c))
	if err != nil || len(keys) != 1 {
		t.Fatalf("keys: %v, %v", keys, err)
	}
	if _, err := tg.Store.RevokeAPIKey(ctx, keys[0].AccountID, keys[0].ID, time.Now()); err != nil {
		t.Fatal(err)
	}
	for _, base := range []string{tg.URL, other.URL} {
		poll.Wait(t, 5*time.Second, base+" refusing the revoked key", func() bool { return get(base) == http.StatusUnauthorized })
	}
}

func accountID(t *testing.T, tg *exchangetest.Target, c *exchangetest.Client) int64 {
	var id int64
	if err := tg.Store.Pool.QueryRow(context.Background(), `select id from accounts where uid = $1`, c.Account).Scan(&id); err != nil {
		t.Fatal(err)
	}
	return id
}

// replicaOf is another API replica on the same database, closed when t ends.
func replicaOf(t *testing.T, st *store.Store) http.Handler {
	api := apiserver.New(apiserver.Config{Store: st})
	t.Cleanup(api.Close)
	return api.Handler()
}
