package exchangetest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pmx-dev/pmx/internal/store"
)

// The limits these attacks meet (package marketpages, and the read limit the event pages' rig is
// started with), and how long each attack runs at least.
const (
	abusePagesRate   = 10 // pages a second one address may load ...
	abusePagesBurst  = 20 // ... in bursts of this many
	abuseReadRate    = 25 // reads a second the event pages' abuser may make (--read-rate) ...
	abuseReadBurst   = 50 // ... in bursts of this many; a busy 2-core machine serves it ~75 pages a second
	abusePgcostFor   = 10 * time.Second
	abuseFeedBatches = 20_000 // batches the feed of the event pages' market keeps
	// abusePageCPU is the most Postgres CPU one page of 1,000 events may cost, all told (the
	// trading beside it too): 20-25 ms when a page read every batch the market kept.
	abusePageCPU = 10 * time.Millisecond
)

// TestAbuseMarketPages floods the public market pages (the list, of 30 markets, and a market's
// page) from one address while the well-behaved client trades and another address browses: the
// flood is refused with 429 beyond its address's allowance (issue 34: 170 lists a second from four
// connections took both cores and the good client's p99 from 12 to 259 ms), the browser and the
// trader are served.
func TestAbuseMarketPages(t *testing.T) {
	r := newAbuseRig(t)
	for i := range 30 {
		r.tg.NewMarket(t, map[string]any{"question": fmt.Sprintf("Listed %d?", i)})
	}
	browser := &http.Transport{DialContext: func(context.Context, string, string) (net.Conn, error) {
		return r.dialFrom("127.0.0.3")
	}}
	defer browser.CloseIdleConnections()
	visitor := &http.Client{Transport: browser, Timeout: time.Minute}

	g := r.tradeDuring(t)
	stop, browsed := make(chan struct{}), make(chan []string)
	go func() {
		// A person reading: a page every half second, each of which must be served.
		var problems []string
		for i := 0; ; i++ {
			select {
			case <-stop:
				browsed <- problems
				return
			case <-time.After(500 * time.Millisecond):
			}
			path := "/markets"
			if i%2 == 1 {
				path = "/markets/" + r.market.String()
			}
			resp, err := visitor.Get(r.base + path)
			if err != nil {
				problems = append(problems, err.Error())
				continue
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				problems = append(problems, fmt.Sprintf("GET %s: %d", path, resp.StatusCode))
			}
		}
	}()
	var mu sync.Mutex
	served, refused := 0, 0
	var wrong []string
	start := time.Now()
	limited := func() bool {
		mu.Lock()
		defer mu.Unlock()
		return refused > 0
	}
	hammerUntil(8, abusePgcostFor, limited, func(i int) bool {
		path := "/markets"
		if i%2 == 1 {
			path = "/markets/" + r.market.String()
		}
		resp, err := r.attacker.Get(r.base + path)
		if err != nil {
			mu.Lock()
			wrong = append(wrong, err.Error())
			mu.Unlock()
			return false
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		mu.Lock()
		defer mu.Unlock()
		switch {
		case resp.StatusCode == http.StatusOK:
			served++
		case resp.StatusCode == http.StatusTooManyRequests && resp.Header.Get("Retry-After") != "":
			refused++
		default:
			wrong = append(wrong, fmt.Sprintf("GET %s: %d", path, resp.StatusCode))
		}
		return true
	})
	elapsed := time.Since(start)
	close(stop)
	problems := <-browsed
	g.finish(t, "market pages flood", abuseMaxPlacement)
	if len(wrong) > 0 {
		t.Errorf("the flood was answered otherwise than 200 or 429 with Retry-After: %q", wrong[:min(5, len(wrong))])
	}
	if most := abusePagesBurst + int(elapsed.Seconds()*abusePagesRate) + 3; served > most || refused == 0 {
		t.Errorf("one address was served %d pages and refused %d in %v; want at most %d served", served, refused, elapsed, most)
	}
	if len(problems) > 0 {
		t.Errorf("a person browsing from another address during the flood: %q", problems)
	}
	t.Logf("market pages flood: %d served, %d refused (429) in %v", served, refused, elapsed.Round(time.Millisecond))
}

// TestAbuseEventPages has a key's holder read a market's feed from the start, pages of 1,000
// events, as fast as its read limit allows, on a market whose feed keeps 20,000 batches, while
// the well-behaved client trades (issue 34: each such page read every batch the market kept, and
// one account at its read rate kept ~8 Postgres cores busy). A page now reads about the batches it
// returns, so the reads cost what they would on a fresh market.
func TestAbuseEventPages(t *testing.T) {
	r := newAbuseRig(t, "--read-rate", fmt.Sprint(abuseReadRate), "--read-burst", fmt.Sprint(abuseReadBurst))
	// The feed of a market nobody trades, as its shard would have written it: batches of a trade
	// and its two levels, numbered on from 1, the market's last number where they end.
	m := r.tg.NewMarket(t, map[string]any{"question": "Long history?"}).ID
	ctx := context.Background()
	at := time.Now().UTC().Format(time.RFC3339Nano)
	if _, err := r.tg.Store.Pool.Exec(ctx, `insert into market_events (market_id, first_seq, last_seq, created_at, events)
		select $1, i * 3 + 1, i * 3 + 3, now(), convert_to(format('[{"seq":%s,"type":"trade","price":50,"quantity":1,'||
		  '"tradeId":"%s","takerSide":"BUY","takerOutcome":"YES","at":"%s"},{"seq":%s,"type":"level","side":"bid","price":50,'||
		  '"quantity":0,"at":"%s"},{"seq":%s,"type":"level","side":"ask","price":51,"quantity":7,"at":"%s"}]',
		  i * 3 + 1, gen_random_uuid(), $3::text, i * 3 + 2, $3, i * 3 + 3, $3), 'UTF8')
		from generate_series(0, $2 - 1) i`, m, abuseFeedBatches, at); err != nil {
		t.Fatal(err)
	}
	if _, err := r.tg.Store.Pool.Exec(ctx, `update markets set event_seq = $2 where id = $1`, m, 3*abuseFeedBatches); err != nil {
		t.Fatal(err)
	}
	if _, err := r.tg.Store.Pool.Exec(ctx, `vacuum analyze market_events`); err != nil {
		t.Fatal(err)
	}
	path := fmt.Sprintf("%s/api/v1/market/events?marketId=%s&after=0&limit=1000", r.base, m)
	read := func() (int, []byte, error) {
		req, _ := http.NewRequest("GET", path, nil)
		req.Header.Set("Authorization", "Bearer "+r.abuser.Key)
		resp, err := r.attacker.Do(req)
		if err != nil {
			return 0, nil, err
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		return resp.StatusCode, body, err
	}
	status, body, err := read()
	var page struct {
		Events []struct {
			Seq int64 `json:"seq"`
		} `json:"events"`
	}
	if err != nil || status != http.StatusOK || json.Unmarshal(body, &page) != nil || len(page.Events) != 1000 ||
		page.Events[0].Seq != 1 || page.Events[999].Seq != 1000 {
		t.Fatalf("the first page of the feed: %d %v %.300s", status, err, body)
	}

	g := r.tradeDuring(t)
	var mu sync.Mutex
	served, refused := 0, 0
	var wrong []string
	start, cpu := time.Now(), postgresCPU(t, r.tg.Store)
	limited := func() bool {
		mu.Lock()
		defer mu.Unlock()
		return refused > 0
	}
	hammerUntil(8, abusePgcostFor, limited, func(int) bool {
		status, body, err := read()
		mu.Lock()
		defer mu.Unlock()
		switch {
		case err != nil:
			wrong = append(wrong, err.Error())
			return false
		case status == http.StatusOK:
			served++
		case status == http.StatusTooManyRequests:
			refused++
		default:
			wrong = append(wrong, fmt.Sprintf("%d %.200s", status, body))
		}
		return true
	})
	elapsed, cpu := time.Since(start), postgresCPU(t, r.tg.Store)-cpu
	g.finish(t, "event pages from seq 0", abuseMaxPlacement)
	if len(wrong) > 0 {
		t.Errorf("the reads were answered otherwise than 200 or 429: %q", wrong[:min(5, len(wrong))])
	}
	if most := abuseReadBurst + int(elapsed.Seconds()*abuseReadRate) + 5; served > most {
		t.Errorf("one key was served %d pages in %v; its read limit allows %d", served, elapsed, most)
	}
	// What Postgres spent meanwhile, on everything (the trading too), per page served: 20-25 ms
	// when a page read every batch; when it reads about those it returns, about 1 ms at 100 pages
	// a second, 3 ms at this rig's 25 (the trading's share, spread over fewer pages).
	perPage := cpu / time.Duration(max(served, 1))
	if refused == 0 || perPage > abusePageCPU {
		t.Errorf("one key reading pages from seq 0: %d served, %d refused in %v, Postgres spent %v (%v a page): want it held by its read limit, at most %v of Postgres a page",
			served, refused, elapsed, cpu, perPage, abusePageCPU)
	}
	t.Logf("event pages from seq 0: %d served (%.0f a second), %d refused (429) in %v; Postgres CPU %v, %v a page", served,
		float64(served)/elapsed.Seconds(), refused, elapsed.Round(time.Millisecond), cpu, perPage)
}

// postgresCPU is the CPU time the Postgres backends serving st's database have spent so far
// (/proc; Linux counts in hundredths of a second): the exchange's connections, which stay open
// in its pool.
func postgresCPU(t *testing.T, st *store.Store) time.Duration {
	t.Helper()
	rows, err := st.Pool.Query(context.Background(), `select pid from pg_stat_activity where datname = current_database()`)
	if err != nil {
		t.Fatal(err)
	}
	pids, err := pgx.CollectRows(rows, pgx.RowTo[int32])
	if err != nil {
		t.Fatal(err)
	}
	var ticks int64
	for _, pid := range pids {
		raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			continue // a connection closed since
		}
		f := strings.Fields(string(raw[bytes.LastIndexByte(raw, ')')+2:]))
		utime, _ := strconv.ParseInt(f[11], 10, 64)
		stime, _ := strconv.ParseInt(f[12], 10, 64)
		ticks += utime + stime
	}
	return time.Duration(ticks) * 10 * time.Millisecond
}
