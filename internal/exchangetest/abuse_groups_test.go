package exchangetest

import (
	"net/http"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/google/uuid"

	"github.com/pmx-dev/pmx/apiserver"
)

// TestAbuseOrderGroups makes order groups as fast as an account can, as a bot that makes one per
// order and forgets them would (issue 51: at the default write rate, 180,000 an hour). The account
// keeps DefaultMaxOrderGroups of them, the rest are refused with 409 too_many_order_groups, and
// GET /order-groups reads them a page at a time, every group exactly once.
func TestAbuseOrderGroups(t *testing.T) {
	tg := StartDev(t)
	a := tg.NewAccount(t, "group-abuser")
	const workers, tries = 8, apiserver.DefaultMaxOrderGroups + 100
	var next, made, refused atomic.Int64
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for next.Add(1) <= tries {
				status, raw := a.Do(t, "POST", "/order-groups", map[string]any{"fillLimit": 1, "windowSeconds": 1})
				switch status {
				case http.StatusCreated:
					made.Add(1)
				case http.StatusConflict:
					refused.Add(1)
				default:
					t.Errorf("POST /order-groups: %d %s", status, raw)
					return
				}
			}
		})
	}
	wg.Wait()
	if made.Load() != apiserver.DefaultMaxOrderGroups || refused.Load() != tries-apiserver.DefaultMaxOrderGroups {
		t.Fatalf("%d groups asked for: %d made, %d refused; want %d made", tries, made.Load(), refused.Load(), apiserver.DefaultMaxOrderGroups)
	}
	seen := map[uuid.UUID]bool{}
	path := "/order-groups?limit=500"
	for pages := 0; ; pages++ {
		if pages > apiserver.DefaultMaxOrderGroups/500+1 {
			t.Fatalf("GET /order-groups in pages of 500: still a nextCursor after %d pages", pages)
		}
		var page orderGroupPage
		a.Expect(t, "GET", path, nil, http.StatusOK, &page)
		for _, g := range page.OrderGroups {
			if seen[g.ID] {
				t.Fatalf("group %s on two pages", g.ID)
			}
			seen[g.ID] = true
		}
		if page.NextCursor == nil {
			break
		}
		path = "/order-groups?limit=500&cursor=" + *page.NextCursor
	}
	if len(seen) != apiserver.DefaultMaxOrderGroups {
		t.Errorf("the pages hold %d groups, want %d", len(seen), apiserver.DefaultMaxOrderGroups)
	}
}
