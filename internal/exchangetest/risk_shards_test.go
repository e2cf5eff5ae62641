package exchangetest

import (
	"context"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/google/uuid"

	"github.com/pmx-dev/pmx/apiserver"
)

// testLockedCashAcrossShards places one account's BUY orders concurrently in two markets owned by
// different shards, through both api replicas, under a maxLockedCash that admits half of them. The
// bound (docs/architecture.md §3): the account's locked cash never exceeds the limit, however
// many shards lock it, because the database refuses any commit that would take it past; each
// shard then runs its batch again from what it reads and refuses the order alone. So exactly as
// many orders are accepted as fit, the rest are 400 risk_limit_exceeded on maxLockedCash, and no
// sample of the account's row ever shows more locked than the limit.
func testLockedCashAcrossShards(t *testing.T, c *cluster) {
	ctx := context.Background()
	tg := c.target(t, 0)
	markets := marketsOnTwoShards(t, c, tg)
	a := tg.NewAccount(t, "risk-shards")
	const limit, each, perMarket = 5000, 500, 10 // 20 orders of 500 against 5000
	setRiskLimits(t, a, -1, limit)
	clients := []*Client{a, {T: c.target(t, 1), Key: a.Key, Account: a.Account, Name: a.Name}}

	var wg sync.WaitGroup
	var mu sync.Mutex
	accepted, refused := 0, 0
	done := make(chan struct{})
	sampled := make(chan int64, 1)
	go func() { // the account's row, as often as it can be read, until the orders are answered
		peak := int64(0)
		defer func() { sampled <- peak }()
		for {
			select {
			case <-done:
				return
			default:
			}
			var locked int64
			if err := c.store.Pool.QueryRow(ctx, `select b.locked from account_balances b join accounts a on a.id = b.id where a.uid = $1`, a.Account).Scan(&locked); err == nil {
				peak = max(peak, locked)
			}
		}
	}()
	for i, m := range markets {
		wg.Add(1)
		go func(cl *Client, market uuid.UUID) {
			defer wg.Done()
			for range perMarket {
				status, raw := cl.Do(t, "POST", "/order", OrderBody(market, "BUY", "YES", 50, each/50))
				mu.Lock()
				switch {
				case status == http.StatusCreated:
					accepted++
				case status == http.StatusBadRequest && strings.Contains(string(raw), `"code":"risk_limit_exceeded"`) &&
					strings.Contains(string(raw), `"field":"maxLockedCash"`):
					refused++
				default:
					t.Errorf("placement in %s: %d %s", market, status, raw)
				}
				mu.Unlock()
			}
		}(clients[i], m.ID)
	}
	wg.Wait()
	close(done)
	peak := <-sampled
	if accepted != limit/each || refused != 2*perMarket-limit/each {
		t.Errorf("%d placements accepted and %d refused, want %d and %d", accepted, refused, limit/each, 2*perMarket-limit/each)
	}
	if _, locked := a.Balance(t); locked != limit {
		t.Errorf("%d cents locked, want the limit, %d", locked, limit)
	}
	if peak > limit {
		t.Errorf("the account's row showed %d cents locked, over its limit of %d", peak, limit)
	}
	if r := riskLimits(t, a); r.Used.LockedCash != limit {
		t.Errorf("GET /account/risk-limits: %+v, want %d locked", r.Used, limit)
	}
	CheckInvariants(t, tg)
}

// marketsOnTwoShards makes markets until two are owned by different shards (the operator puts
// each new market on the least loaded shard) and returns those two.
func marketsOnTwoShards(t *testing.T, c *cluster, tg *Target) []apiserver.Market {
	t.Helper()
	var markets []apiserver.Market
	owners := map[string]bool{}
	for range 8 {
		m := tg.NewMarket(t, nil)
		row, err := c.store.Market(context.Background(), m.ID)
		if err != nil || row.Shard == nil {
			t.Fatalf("market %s: %v, %+v", m.ID, err, row)
		}
		if !owners[*row.Shard] {
			owners[*row.Shard] = true
			markets = append(markets, m)
		}
		if len(markets) == 2 {
			return markets
		}
	}
	t.Fatalf("no two markets on different shards among 8: %v", owners)
	return nil
}
