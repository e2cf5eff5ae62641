package exchangetest

import (
	"encoding/json"
	"math/rand/v2"
	"net/http"
	"sync"
	"testing"

	"github.com/google/uuid"

	"github.com/pmx-dev/pmx/apiserver"
)

// SoakConfig sizes a soak.
type SoakConfig struct {
	Accounts int
	Markets  int
	Steps    int // per account
	Seed     uint64
}

// SoakStats counts what a soak did.
type SoakStats struct {
	Placed, Rejected, Cancelled, CancelAll, Fills int
}

// Soak has many accounts trade at once — random orders of all four kinds around a mid on several
// markets, cancels, cancel-everything and reads — and returns the ids of every order the exchange
// acknowledged. Every answer is checked against the OpenAPI document; any 5xx fails the test.
func Soak(t *testing.T, tg *Target, cfg SoakConfig, markets []uuid.UUID) (map[uuid.UUID]bool, SoakStats) {
	t.Helper()
	if markets == nil {
		for range cfg.Markets {
			markets = append(markets, tg.NewMarket(t, nil).ID)
		}
	}
	clients := make([]*Client, cfg.Accounts)
	for i := range clients {
		clients[i] = tg.NewAccount(t, "soak")
	}
	var mu sync.Mutex
	acked := map[uuid.UUID]bool{}
	var total SoakStats
	var wg sync.WaitGroup
	for i, c := range clients {
		wg.Go(func() {
			stats, ids := soakAccount(t, c, markets, cfg.Steps, rand.New(rand.NewPCG(cfg.Seed, uint64(i))))
			mu.Lock()
			defer mu.Unlock()
			for _, id := range ids {
				acked[id] = true
			}
			total.Placed += stats.Placed
			total.Rejected += stats.Rejected
			total.Cancelled += stats.Cancelled
			total.CancelAll += stats.CancelAll
			total.Fills += stats.Fills
		})
	}
	wg.Wait()
	return acked, total
}

func soakAccount(t *testing.T, c *Client, markets []uuid.UUID, steps int, rng *rand.Rand) (SoakStats, []uuid.UUID) {
	var stats SoakStats
	var mine []uuid.UUID
	for range steps {
		m := markets[rng.IntN(len(markets))]
		switch op := rng.IntN(100); {
		case op < 70:
			sides, outcomes := []string{"BUY", "SELL"}, []string{"YES", "NO"}
			body := OrderBody(m, sides[rng.IntN(2)], outcomes[rng.IntN(2)], 35+rng.IntN(31), 1+rng.IntN(10))
			status, raw := c.Do(t, "POST", "/order", body)
			switch status {
			case http.StatusCreated:
				var o apiserver.PlacedOrder
				if err := json.Unmarshal(raw, &o); err != nil {
					t.Error(err)
					return stats, mine
				}
				stats.Placed++
				stats.Fills += len(o.Trades)
				mine = append(mine, o.ID)
			case http.StatusBadRequest:
				stats.Rejected++ // mostly insufficient_shares: a random SELL of shares not held
			default:
				t.Errorf("POST /order: %d %s", status, raw)
				return stats, mine
			}
		case op < 90:
			if len(mine) == 0 {
				continue
			}
			id := mine[rng.IntN(len(mine))]
			status, raw := c.Do(t, "POST", "/cancel-order", map[string]any{"orderId": id})
			switch status {
			case http.StatusOK:
				stats.Cancelled++
			case http.StatusBadRequest: // filled or already cancelled meanwhile
			default:
				t.Errorf("POST /cancel-order: %d %s", status, raw)
				return stats, mine
			}
		case op < 92:
			c.Expect(t, "POST", "/cancel-everything", nil, http.StatusOK, nil)
			stats.CancelAll++
		case op < 96:
			c.Expect(t, "GET", "/market/order-book?marketId="+m.String(), nil, http.StatusOK, nil)
		default:
			c.Expect(t, "GET", "/positions", nil, http.StatusOK, nil)
		}
	}
	return stats, mine
}
