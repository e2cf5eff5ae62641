package exchangetest

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"regexp"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/pmx-dev/pmx/apiserver"
	"github.com/pmx-dev/pmx/internal/apitest"
	"github.com/pmx-dev/pmx/internal/pgtest"
	"github.com/pmx-dev/pmx/internal/poll"
	"github.com/pmx-dev/pmx/store"
)

// The lines of a pmx process's banner that say where its API and its metrics listen.
var (
	apiLine     = regexp.MustCompile(`API:\s+(http://\S+)/api/v1`)
	metricsLine = regexp.MustCompile(`Metrics:\s+(http://\S+)/metrics`)
)

// startDevProcess runs `pmx dev` on a database and returns it with its base URL. Its metrics are
// on a port of their own (p.Line(metricsLine) says where).
func startDevProcess(t *testing.T, bin, dbURL, token string) (*Process, string) {
	p, base := StartProcess(t, apiLine, bin, "dev", "--database-url", dbURL, "--addr", "127.0.0.1:0",
		"--metrics-addr", "127.0.0.1:0", "--markets", "", "--admin-token", token, "--data-dir", t.TempDir(), "--log-level", "warn")
	WaitReady(t, base+"/readyz")
	return p, base
}

// TestCrashRecovery kills `pmx dev` with SIGKILL while bots trade, restarts it on the same
// database, and checks that every acknowledged order survived, that every invariant holds and
// that the rebuilt books equal Postgres.
func TestCrashRecovery(t *testing.T) {
	bin := BuildPMX(t)
	dbURL := pgtest.NewDatabase(t, pgtest.Shared(t))
	const token = "crash-test-token"
	proc, base := startDevProcess(t, bin, dbURL, token)
	st, err := store.Open(context.Background(), dbURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(st.Close)
	tg := &Target{URL: base, AdminToken: token, Store: st, Validator: apitest.NewValidator(t), HTTP: &http.Client{Timeout: 10 * time.Second}}
	tg.Markets = AdminMarkets{tg}

	markets := []uuid.UUID{tg.NewMarket(t, nil).ID, tg.NewMarket(t, nil).ID}
	bots := make([]*Client, 8)
	for i := range bots {
		bots[i] = tg.NewAccount(t, "crash")
	}

	// Bots place orders as fast as they can until the process dies; an order counts as
	// acknowledged only when its 201 arrived.
	var mu sync.Mutex
	acked := map[uuid.UUID]uuid.UUID{} // order → market
	var count atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for i, bot := range bots {
		wg.Go(func() {
			for n := 0; ; n++ {
				select {
				case <-stop:
					return
				default:
				}
				m := markets[n%len(markets)]
				side, outcome := "BUY", []string{"YES", "NO"}[(i+n)%2]
				status, raw, err := post(tg, bot, OrderBody(m, side, outcome, 40+(i*7+n*3)%21, 1+n%5))
				if err != nil {
					return // the process is gone
				}
				if status == http.StatusCreated {
					var o apiserver.PlacedOrder
					if json.Unmarshal(raw, &o) == nil {
						mu.Lock()
						acked[o.ID] = m
						mu.Unlock()
						count.Add(1)
					}
				}
			}
		})
	}
	if err := poll.Until(t.Context(), time.Minute, func(context.Context) (bool, error) { return count.Load() >= 400, nil }); err != nil {
		t.Fatalf("only %d orders acknowledged in a minute", count.Load())
	}
	proc.Kill()
	close(stop)
	wg.Wait()
	t.Logf("killed pmx dev after %d acknowledged orders", len(acked))

	proc, base = startDevProcess(t, bin, dbURL, token)
	tg.URL = base
	var missing int
	for id := range acked {
		if _, err := st.Order(context.Background(), id); err != nil {
			missing++
		}
	}
	if missing > 0 {
		t.Fatalf("%d of %d acknowledged orders are missing after the crash", missing, len(acked))
	}
	CheckInvariants(t, tg)
	CheckBooksOverAPI(t, tg, bots[0], markets)

	// Trading goes on where it stopped: a new account, which owns no resting order, crosses the
	// best YES bid.
	book := bots[0].Book(t, markets[0])
	if len(book.Yes.Bids) == 0 {
		t.Fatalf("no YES bids rest on %s after the restart: %+v", markets[0], book)
	}
	o := tg.NewAccount(t, "crash-after").Place(t, markets[0], "BUY", "NO", 100-book.Yes.Bids[0].Price, 1)
	if o.FilledQuantity != 1 || len(o.Trades) == 0 {
		t.Fatalf("a crossing order after the restart did not trade: %+v", o)
	}
	CheckInvariants(t, tg)
	proc.Stop()
}

// post places an order without failing the test on a transport error, which is expected while the
// process is killed.
func post(tg *Target, c *Client, body map[string]any) (int, []byte, error) {
	raw, _ := json.Marshal(body)
	req, _ := http.NewRequest("POST", tg.URL+"/api/v1/order", bytes.NewReader(raw))
	req.Header.Set("Authorization", "Bearer "+c.Key)
	resp, err := tg.HTTP.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	buf, err := io.ReadAll(resp.Body)
	return resp.StatusCode, buf, err
}
