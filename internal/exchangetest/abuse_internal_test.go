package exchangetest

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/pmx-dev/pmx/internal/poll"
)

// How long, and from how many goroutines, the internal API is abused.
const (
	abuseInternalFor      = 5 * time.Second
	abuseInternalAttacker = 4
)

// testInternalAPIAbuse is the abuse suite's attack on the shards' internal API (issue 34), run on
// the distributed exchange, the only one that has one. Whatever holds the internal token sends the
// shard that owns a market what no front sends — a price of 0 or 150, Side 7, a NUL in a client
// order id — alone and inside place-many calls beside good placements, as fast as it can, while a
// well-behaved client trades on the same market through a front. Every bad request must be
// refused on its own (400, or its own result's error in a place-many), never answered 500 nor fail
// the batch it joined; the good placements beside it are carried out, and every one of the
// well-behaved client's orders is placed within the bound.
func testInternalAPIAbuse(t *testing.T, c *cluster) {
	ctx := context.Background()
	tg := c.target(t, 0)
	market := tg.NewMarket(t, nil).ID
	good, abuser := tg.NewAccount(t, "internal-good"), tg.NewAccount(t, "internal-abuser")
	var account int64
	if err := c.store.Pool.QueryRow(ctx, `select id from accounts where name = $1`, abuser.Name).Scan(&account); err != nil {
		t.Fatal(err)
	}
	var owner string
	poll.Wait(t, 30*time.Second, "the market to have an owner", func() bool {
		var shard *string
		err := c.store.Pool.QueryRow(ctx, `select shard from markets where id = $1`, market).Scan(&shard)
		if err == nil && shard != nil && c.shardURLs[*shard] != "" {
			owner = *shard
			return true
		}
		return false
	})

	// A placement as a front sends it (an IOC, which never rests), with fields replaced by extra.
	place := func(extra string) string {
		return fmt.Sprintf(`{"Account":%d,"Market":%q,"Side":1,"Outcome":1,"Price":40,"Quantity":1,"TimeInForce":2,"Placement":"p"%s}`,
			account, market, extra)
	}
	bad := []string{place(`,"Price":0`), place(`,"Price":150`), place(`,"Side":7`), place(`,"ClientOrderID":"a\u0000b"`)}
	many := "[" + place("") + "," + place(`,"ClientOrderID":"bad\u0000id"`) + "," + place(`,"Price":150`) + "," + place("") + "]"
	send := func(path, body string) (int, []byte, error) {
		req, err := http.NewRequest(http.MethodPost, c.shardURLs[owner]+path, strings.NewReader(body))
		if err != nil {
			return 0, nil, err
		}
		req.Header.Set("Authorization", "Bearer "+clusterInternalToken)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return 0, nil, err
		}
		defer resp.Body.Close()
		raw, err := io.ReadAll(resp.Body)
		return resp.StatusCode, raw, err
	}

	var found problems
	report := found.add
	g := tradeDuring(tg.URL, good.Key, market)
	sent := hammer(abuseInternalAttacker, abuseInternalFor, func(i int) bool {
		for _, body := range bad {
			status, raw, err := send("/internal/v1/place", body)
			if err != nil || status != http.StatusBadRequest {
				report("internal place %s: %d %s (%v), want 400", body, status, raw, err)
			}
		}
		status, raw, err := send("/internal/v1/place-many", many)
		var results []struct {
			Placed json.RawMessage `json:"placed"`
			Error  json.RawMessage `json:"error"`
		}
		switch {
		case err != nil || status != http.StatusOK || json.Unmarshal(raw, &results) != nil || len(results) != 4:
			report("internal place-many: %d %s (%v), want 200 with 4 results", status, raw, err)
		case results[0].Placed == nil || results[3].Placed == nil || results[1].Error == nil || results[2].Error == nil:
			report("internal place-many: %s, want the first and last placed and the two between refused", raw)
		}
		return true
	})
	g.finish(t, "bad requests to the internal API", abuseMaxPlacement)
	found.report(t)
	t.Logf("%d rounds of %d bad placements and a place-many sent to %s", sent, len(bad), owner)
	if t.Failed() {
		return
	}
	CheckInvariants(t, tg)
}
