package exchangetest

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"math/rand/v2"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/pmx-dev/pmx/apiserver"
	"github.com/pmx-dev/pmx/internal/apitest"
	"github.com/pmx-dev/pmx/internal/history"
	"github.com/pmx-dev/pmx/internal/pgtest"
	"github.com/pmx-dev/pmx/internal/poll"
	"github.com/pmx-dev/pmx/internal/store"
)

// The lines of a pmx process's banner that say where its API and its metrics listen.
var (
	apiLine     = regexp.MustCompile(`API:\s+(http://\S+)/api/v1`)
	metricsLine = regexp.MustCompile(`Metrics:\s+(http://\S+)/metrics`)
)

// seedFlag replays a randomized test that failed: the test logs its seed, and
// `go test ./internal/exchangetest -run <test> -args -seed=<seed>` runs it again with the same
// random choices (the kill and the network still land where they land).
var seedFlag = flag.Uint64("seed", 0, "seed of the randomized tests (default: taken from the clock, and logged)")

// testSeed is the seed of a randomized test: -seed when given, else the clock's, logged either way
// so that a failure can be replayed.
func testSeed(t *testing.T) uint64 {
	seed := *seedFlag
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	t.Logf("seed %d (replay with -args -seed=%d)", seed, seed)
	return seed
}

// startDevProcess runs `pmx dev` on a database and returns it with its base URL. Its metrics are
// on a port of their own (p.Line(metricsLine) says where).
func startDevProcess(t *testing.T, bin, dbURL, token string) (*Process, string) {
	p, base := StartProcess(t, apiLine, bin, "dev", "--database-url", dbURL, "--addr", "127.0.0.1:0",
		"--metrics-addr", "127.0.0.1:0", "--markets", "", "--admin-token", token, "--data-dir", t.TempDir(), "--log-level", "warn",
		"--read-rate", "0", "--write-rate", "0") // load, not the rate limits, is under test
	WaitReady(t, base+"/readyz")
	return p, base
}

// checkerName is the application_name of the tests' own sessions on a process's database, which
// tells them from the process's.
const checkerName = "pmx-test-checks"

// processTarget is the target of a `pmx dev` at base, with a store of its own on the process's
// database for the checks in SQL (its sessions named checkerName).
func processTarget(t *testing.T, base, dbURL, token string) *Target {
	sep := "?"
	if strings.Contains(dbURL, "?") {
		sep = "&"
	}
	st, err := store.Open(context.Background(), dbURL+sep+"application_name="+checkerName)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(st.Close)
	tg := &Target{URL: base, AdminToken: token, Store: st, Validator: apitest.NewValidator(t), HTTP: &http.Client{Timeout: 10 * time.Second}}
	tg.Markets = AdminMarkets{tg}
	return tg
}

// TestCrashRecovery kills `pmx dev` with SIGKILL while bots trade with every kind of order, restarts
// it on the same database, and checks what a crash must not break. The bots place GTC, IOC, FOK and
// GTD orders — most GTD ones expiring a second or two after placement, so that some expire just
// before the kill, some while the process is down and some after the restart — amend their
// resting orders, give half their placements a client order id and replay some of those. Then:
// every acknowledged order survived, once (by id, and each client order id has exactly the one
// acknowledged order) and with its last acknowledged amend; no IOC or FOK order rests; no trade
// involves a GTD order at or after its expiry; every GTD order open at the kill and due is cancelled
// as EXPIRED within a bound of the restart; every acknowledged placement with a client order id is
// still answered 200 with its order when replayed; and the invariants hold and the books equal
// Postgres, before and after trading resumes. Every request of the bots, and every answer, is
// recorded, and the history is checked against the log at the end (history.Check).
func TestCrashRecovery(t *testing.T) {
	seed := testSeed(t)
	bin := BuildPMX(t)
	dbURL := pgtest.NewDatabase(t, pgtest.Shared(t))
	const token = "crash-test-admin-token-0123456789abcdef"
	proc, base := startDevProcess(t, bin, dbURL, token)
	tg := processTarget(t, base, dbURL, token)

	// Eight bots trade at random on two markets; a ninth and a tenth race an expiry on a third.
	markets := []uuid.UUID{tg.NewMarket(t, nil).ID, tg.NewMarket(t, nil).ID, tg.NewMarket(t, nil).ID}
	// The second charges fees and pays makers a rebate (docs/fees.md): what the crash leaves of
	// them is checked with the rest (the invariants, with the exchange's account; the audit).
	tg.Markets.SetFees(t, markets[1], &apiserver.Fees{TakerBps: 700, MakerBps: -175})
	var count atomic.Int64 // orders acknowledged, for the kill's timing
	rec := &history.Recorder{}
	bots := make([]*crashBot, 10)
	for i := range bots {
		bots[i] = &crashBot{c: tg.NewAccount(t, "crash"), rng: rand.New(rand.NewPCG(seed, uint64(i))),
			acked: map[uuid.UUID]bool{}, amends: map[uuid.UUID]apiserver.Order{}, count: &count, rec: rec}
	}
	traders, maker, taker := bots[:8], bots[8], bots[9]

	// Bots trade as fast as they can until the process dies; an order counts as acknowledged only
	// when its 201 arrived, an amend when its 200 did. The kill waits for enough orders, and for
	// some GTD orders to have expired while the process ran.
	stop := make(chan struct{})
	stopped := func() bool {
		select {
		case <-stop:
			return true
		default:
			return false
		}
	}
	var wg sync.WaitGroup
	for _, b := range traders {
		wg.Go(func() {
			for !stopped() && b.step(t, tg, markets[:2]) {
			}
		})
	}
	wg.Go(func() { raceExpiry(t, tg, maker, taker, markets[2], stopped) })
	ready := func(ctx context.Context) (bool, error) {
		var expired int
		err := tg.Store.Pool.QueryRow(ctx, `select count(*) from orders where cancel_reason = 'EXPIRED'`).Scan(&expired)
		return count.Load() >= 300 && expired >= 30, err
	}
	started := time.Now()
	if err := poll.Until(t.Context(), time.Minute, ready); err != nil {
		t.Fatalf("not enough trading in a minute: %v", err)
	}
	proc.Kill()
	killed := time.Now()
	close(stop)
	wg.Wait()
	var acked, amended int
	for _, b := range bots {
		acked, amended = acked+len(b.acked), amended+len(b.amends)
	}
	t.Logf("killed pmx dev after %v of trading: %d acknowledged orders, %d amended", killed.Sub(started).Round(time.Millisecond), acked, amended)

	// Nothing writes to Postgres until the restart, once the killed process's sessions are gone:
	// what it holds is then what the crash left.
	waitSessionsGone(t, tg)
	checkAcknowledged(t, tg, bots)
	checkNeverRest(t, tg)
	due := restingGTD(t, tg, killed.Add(time.Minute)) // not those an hour away
	if len(due) == 0 {
		t.Fatal("no GTD order due soon was open at the kill: the test did not test expiry across a restart")
	}

	proc, base = startDevProcess(t, bin, dbURL, token)
	restarted := time.Now()
	tg.URL = base
	checkExpiredAfterRestart(t, tg, due, killed, restarted)
	checkReplays(t, tg, bots)
	checkNeverRest(t, tg)
	checkNoTradeAfterExpiry(t, tg)
	CheckInvariants(t, tg)
	CheckBooksOverAPI(t, tg, bots[0].c, markets)

	// Trading goes on where it stopped: a new account, which owns no resting order, crosses every
	// YES bid the bots rest (45 to 49).
	book := bots[0].c.Book(t, markets[0])
	if len(book.Yes.Bids) == 0 {
		t.Fatalf("no YES bids rest on %s after the restart: %+v", markets[0], book)
	}
	o := tg.NewAccount(t, "crash-after").Place(t, markets[0], "BUY", "NO", 55, 1)
	if o.FilledQuantity != 1 || len(o.Trades) == 0 {
		t.Fatalf("a crossing order after the restart did not trade: %+v", o)
	}
	checkNoTradeAfterExpiry(t, tg)
	CheckInvariants(t, tg)
	CheckBooksOverAPI(t, tg, bots[0].c, markets)
	proc.Stop()
	CheckHistory(t, tg, rec.History())
}

// crashBot is one account trading until the kill, and what the exchange acknowledged to it. Only
// its own goroutine touches it until the bots have stopped.
//
// A trading bot's resting orders are GTC and GTD bids of 45 to 49 on either outcome (a BUY NO at
// q is a YES ask at 100 − q, so they never cross each other); its IOC and FOK orders are BUYs of
// 51 to 55 that take from them. The expiry race (raceExpiry) bids 50 in a market of its own. Every
// book thus has at most five levels a side, all of which the order book's depth shows, so that
// CheckBooksOverAPI compares whole books.
type crashBot struct {
	c   *Client
	rng *rand.Rand

	count   *atomic.Int64                 // every bot's acknowledged orders
	n       int                           // placements sent, which number the client order ids
	acked   map[uuid.UUID]bool            // every order whose 201 arrived
	placed  []placement                   // the acknowledged placements that gave a client order id
	resting []restingOrder                // its orders last seen resting, which it amends
	amends  map[uuid.UUID]apiserver.Order // each amended order as its last acknowledged amend answered
	unsure  *request                      // the request under way when the process died, if any
	rec     *history.Recorder             // every request it sends, and its answer
}

// call sends a request as call does, and records it and its answer in the bot's history as an
// operation of a kind on order (uuid.Nil: the one the request names).
func (b *crashBot) call(tg *Target, kind history.Kind, order uuid.UUID, path string, body map[string]any) (*http.Response, []byte, error) {
	req := history.RequestOf(body)
	if order != uuid.Nil {
		req.OrderID = order
	}
	p := b.rec.Begin(b.c.Name, b.c.Account, kind, req)
	resp, raw, err := call(tg, b.c, path, body)
	p.End(resp, raw, err)
	return resp, raw, err
}

// placement is an acknowledged placement with a client order id, as sent, and its order.
type placement struct {
	body     map[string]any
	clientID string
	order    uuid.UUID
}

// restingOrder is an order a bot may amend.
type restingOrder struct {
	id       uuid.UUID
	clientID string // "" when placed without one
}

// request is a request a bot sent: a placement (body) or an amend (of order).
type request struct {
	path  string
	body  map[string]any
	order uuid.UUID
}

// step does one random thing and checks its answer; it reports false once the process is gone.
func (b *crashBot) step(t *testing.T, tg *Target, markets []uuid.UUID) bool {
	m := markets[b.rng.IntN(len(markets))]
	outcome := []string{"YES", "NO"}[b.rng.IntN(2)]
	switch op := b.rng.IntN(100); {
	case op < 15 && len(b.resting) > 0:
		return b.amend(t, tg)
	case op < 22 && len(b.placed) > 0:
		return b.replay(t, tg, b.placed[b.rng.IntN(len(b.placed))])
	case op < 32:
		_, ok := b.place(t, tg, OrderBody(m, "BUY", outcome, 51+b.rng.IntN(5), 1+b.rng.IntN(12)), "IOC")
		return ok
	case op < 42:
		_, ok := b.place(t, tg, OrderBody(m, "BUY", outcome, 51+b.rng.IntN(5), 1+b.rng.IntN(12)), "FOK")
		return ok
	case op < 62:
		body := OrderBody(m, "BUY", outcome, 45+b.rng.IntN(5), 1+b.rng.IntN(5))
		// Most expire a second or two from now, around the kill when they are among the last.
		expires := time.Now().Add(time.Second + time.Duration(b.rng.IntN(1000))*time.Millisecond)
		if b.rng.IntN(4) == 0 {
			expires = time.Now().Add(time.Hour)
		}
		body["expiresAt"] = expires.UTC().Format(time.RFC3339Nano)
		_, ok := b.place(t, tg, body, "GTD")
		return ok
	default:
		_, ok := b.place(t, tg, OrderBody(m, "BUY", outcome, 45+b.rng.IntN(5), 1+b.rng.IntN(5)), "GTC")
		return ok
	}
}

// place places an order with the given time in force, with a client order id half the time, and
// returns the answer; it reports false once the process is gone.
func (b *crashBot) place(t *testing.T, tg *Target, body map[string]any, tif string) (apiserver.PlacedOrder, bool) {
	var o apiserver.PlacedOrder
	body["timeInForce"] = tif
	clientID := ""
	if b.rng.IntN(2) == 0 {
		b.n++
		clientID = fmt.Sprintf("%s.%d", b.c.Name, b.n)
		body["clientOrderId"] = clientID
	}
	b.unsure = &request{path: "/order", body: body}
	resp, raw, err := b.call(tg, history.Place, uuid.Nil, "/order", body)
	if err != nil {
		return o, false
	}
	b.unsure = nil
	if resp.StatusCode != http.StatusCreated || json.Unmarshal(raw, &o) != nil {
		t.Errorf("%s: POST /order %v: %d %s", b.c.Name, body, resp.StatusCode, raw)
		return o, false
	}
	b.acked[o.ID] = true
	b.count.Add(1)
	if clientID != "" {
		b.placed = append(b.placed, placement{body: body, clientID: clientID, order: o.ID})
	}
	resting := o.Status == "OPEN" || o.Status == "PARTIALLY_FILLED"
	switch {
	case resting && (tif == "IOC" || tif == "FOK"):
		t.Errorf("%s: an %s order rests: %s", b.c.Name, tif, raw)
	case resting:
		b.resting = append(b.resting, restingOrder{id: o.ID, clientID: clientID})
	}
	return o, true
}

// raceExpiry has a maker place a GTD bid in a market of its own, expiring a second later, and a
// taker take from it one share at a time with IOC orders until one fills nothing; then again,
// until stopped or the process is gone. The taker's orders arrive right up to the expiry and just
// after it, when the bid must no longer trade, whether the shard's sweep has cancelled it yet or
// not: the random bots' orders seldom meet an order in the moments around its expiry.
func raceExpiry(t *testing.T, tg *Target, maker, taker *crashBot, m uuid.UUID, stopped func() bool) {
	for !stopped() {
		// More than the taker can take in a second, yet little enough that neither account runs out
		// of cash at any pace.
		body := OrderBody(m, "BUY", "YES", 50, 2000)
		body["expiresAt"] = time.Now().Add(time.Second).UTC().Format(time.RFC3339Nano)
		if _, ok := maker.place(t, tg, body, "GTD"); !ok {
			return
		}
		for filled := int64(1); filled > 0; {
			if stopped() {
				return
			}
			o, ok := taker.place(t, tg, OrderBody(m, "BUY", "NO", 50, 1), "IOC")
			if !ok {
				return
			}
			filled = o.FilledQuantity
		}
	}
}

// replay places an acknowledged placement with a client order id again, which must answer 200
// with its order and place nothing.
func (b *crashBot) replay(t *testing.T, tg *Target, p placement) bool {
	resp, raw, err := b.call(tg, history.Place, uuid.Nil, "/order", p.body)
	if err != nil {
		return false // nothing is unsure: a replay places nothing
	}
	var o apiserver.Order
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Idempotent-Replayed") != "true" || json.Unmarshal(raw, &o) != nil || o.ID != p.order {
		t.Errorf("%s: a replay of %s: %d %s, want 200 with order %s", b.c.Name, p.clientID, resp.StatusCode, raw, p.order)
	}
	return true
}

// amend changes the price, the remaining quantity or both of one of the bot's resting orders,
// named by its id or its client order id, within the resting range.
func (b *crashBot) amend(t *testing.T, tg *Target) bool {
	i := b.rng.IntN(len(b.resting))
	r := b.resting[i]
	fields := map[string]any{"orderId": r.id}
	if r.clientID != "" && b.rng.IntN(2) == 0 {
		fields = map[string]any{"clientOrderId": r.clientID}
	}
	if b.rng.IntN(3) > 0 {
		fields["price"] = 45 + b.rng.IntN(5)
	}
	if _, ok := fields["price"]; !ok || b.rng.IntN(2) == 0 {
		fields["quantity"] = 1 + b.rng.IntN(5)
	}
	b.unsure = &request{path: "/order/amend", order: r.id}
	resp, raw, err := b.call(tg, history.Amend, r.id, "/order/amend", fields)
	if err != nil {
		return false
	}
	b.unsure = nil
	switch resp.StatusCode {
	case http.StatusOK:
		var o apiserver.PlacedOrder
		if json.Unmarshal(raw, &o) != nil || o.ID != r.id {
			t.Errorf("%s: amend %v: %s", b.c.Name, fields, raw)
			return false
		}
		b.amends[r.id] = o.Order
		if o.Status == "OPEN" || o.Status == "PARTIALLY_FILLED" {
			return true
		}
	case http.StatusBadRequest: // filled, cancelled (self-trade) or expired meanwhile
		var e ErrorBody
		if json.Unmarshal(raw, &e) != nil || e.Details.Code != "order_not_open" {
			t.Errorf("%s: amend %v: 400 %s", b.c.Name, fields, raw)
			return false
		}
	default:
		t.Errorf("%s: amend %v: %d %s", b.c.Name, fields, resp.StatusCode, raw)
		return false
	}
	b.resting = slices.Delete(b.resting, i, i+1)
	return true
}

// storedOrder is what the checks read of an order's row.
type storedOrder struct {
	id       uuid.UUID
	clientID *string
	price    int
	quantity int64
}

// accountOrders reads every order of an account from Postgres.
func accountOrders(t *testing.T, tg *Target, account uuid.UUID) map[uuid.UUID]storedOrder {
	t.Helper()
	rows, err := tg.Store.Pool.Query(context.Background(), `
		select o.id, o.client_order_id, o.price, o.quantity
		from orders o join accounts a on a.id = o.account_id where a.uid = $1`, account)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	out := map[uuid.UUID]storedOrder{}
	for rows.Next() {
		var o storedOrder
		if err := rows.Scan(&o.id, &o.clientID, &o.price, &o.quantity); err != nil {
			t.Fatal(err)
		}
		out[o.id] = o
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// checkAcknowledged checks, in Postgres, that no acknowledged order of the bots was lost or
// doubled: each is there; an account has no other order but the placement it had under way at
// the kill, if that was committed; each client order id of an acknowledged placement has exactly
// one order, the acknowledged one, and no client order id has two; and each amended order has the
// price and quantity its last acknowledged amend answered (only amends change them).
func checkAcknowledged(t *testing.T, tg *Target, bots []*crashBot) {
	t.Helper()
	for _, b := range bots {
		stored := accountOrders(t, tg, b.c.Account)
		var missing int
		for id := range b.acked {
			if _, ok := stored[id]; !ok {
				missing++
			}
		}
		if missing > 0 {
			t.Errorf("%s: %d of %d acknowledged orders are missing after the crash", b.c.Name, missing, len(b.acked))
		}
		extra, allowed := len(stored)-(len(b.acked)-missing), 0
		if b.unsure != nil && b.unsure.path == "/order" {
			allowed = 1
		}
		if extra > allowed {
			t.Errorf("%s: %d orders in Postgres were never acknowledged (%d placement under way at the kill)", b.c.Name, extra, allowed)
		}
		byClientID := map[string][]uuid.UUID{}
		for _, o := range stored {
			if o.clientID != nil {
				byClientID[*o.clientID] = append(byClientID[*o.clientID], o.id)
			}
		}
		for id, orders := range byClientID {
			if len(orders) > 1 {
				t.Errorf("%s: client order id %s has %d orders: %v", b.c.Name, id, len(orders), orders)
			}
		}
		for _, p := range b.placed {
			if orders := byClientID[p.clientID]; len(orders) != 1 || orders[0] != p.order {
				t.Errorf("%s: client order id %s has orders %v in Postgres; its placement was acknowledged with %s", b.c.Name, p.clientID, orders, p.order)
			}
		}
		for id, a := range b.amends {
			if b.unsure != nil && b.unsure.order == id {
				continue // a later amend of it was under way at the kill
			}
			if o := stored[id]; o.price != a.Price || o.quantity != a.Quantity {
				t.Errorf("%s: order %s has price %d and quantity %d in Postgres; its last acknowledged amend made them %d and %d",
					b.c.Name, id, o.price, o.quantity, a.Price, a.Quantity)
			}
		}
	}
}

// checkNeverRest checks that no IOC or FOK order rests in Postgres; the books are compared with
// Postgres apart (CheckBooksOverAPI).
func checkNeverRest(t *testing.T, tg *Target) {
	t.Helper()
	var ids []uuid.UUID
	err := tg.Store.Pool.QueryRow(context.Background(), `select coalesce(array_agg(id), '{}') from orders
		where time_in_force in ('IOC', 'FOK') and status in ('OPEN', 'PARTIALLY_FILLED')`).Scan(&ids)
	if err != nil {
		t.Fatal(err)
	}
	if len(ids) > 0 {
		t.Errorf("%d IOC or FOK orders rest: %v", len(ids), ids)
	}
}

// waitSessionsGone waits until the database has no session left but the checks' own. A killed
// process's sessions outlive it for a moment, and one may still commit: a batch's begin,
// statement and commit reach Postgres together, which runs them to the end whether or not the
// client is there to hear the answer. A check that read before that commit would see an order
// as open that the batch then filled.
func waitSessionsGone(t *testing.T, tg *Target) {
	t.Helper()
	gone := func(ctx context.Context) (bool, error) {
		var n int
		err := tg.Store.Pool.QueryRow(ctx, `select count(*) from pg_stat_activity
			where datname = current_database() and backend_type = 'client backend' and application_name <> $1`,
			checkerName).Scan(&n)
		return n == 0, err
	}
	if err := poll.Until(t.Context(), 30*time.Second, gone); err != nil {
		t.Fatalf("the killed process's Postgres sessions did not end: %v", err)
	}
}

// restingGTD returns the GTD orders resting in Postgres that expire before a time.
func restingGTD(t *testing.T, tg *Target, before time.Time) map[uuid.UUID]time.Time {
	t.Helper()
	rows, err := tg.Store.Pool.Query(context.Background(), `select id, expires_at from orders
		where time_in_force = 'GTD' and status in ('OPEN', 'PARTIALLY_FILLED') and expires_at < $1`, before)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	out := map[uuid.UUID]time.Time{}
	for rows.Next() {
		var id uuid.UUID
		var at time.Time
		if err := rows.Scan(&id, &at); err != nil {
			t.Fatal(err)
		}
		out[id] = at
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// expiryBound is how long after its expiry, or after the restart when it expired while the
// process was down, a GTD order must have been cancelled: the expiry sweep runs every 250ms; the
// rest is slack for a loaded machine running the other tests.
const expiryBound = 5 * time.Second

// checkExpiredAfterRestart waits for every GTD order open at the kill to leave its book, and checks
// that each was cancelled as EXPIRED, not before its time and within expiryBound of its time or of
// the restart. Nothing else trades or cancels until it returns.
func checkExpiredAfterRestart(t *testing.T, tg *Target, due map[uuid.UUID]time.Time, killed, restarted time.Time) {
	t.Helper()
	ids := make([]uuid.UUID, 0, len(due))
	last := restarted
	var down, after int
	for id, at := range due {
		ids = append(ids, id)
		if at.After(last) {
			last = at
		}
		switch {
		case at.After(restarted):
			after++
		case at.After(killed):
			down++
		}
	}
	t.Logf("%d GTD orders due soon were open at the kill: %d expired before it, %d while the process was down, %d after the restart",
		len(due), len(due)-down-after, down, after)
	gone := func(ctx context.Context) (bool, error) {
		var n int
		err := tg.Store.Pool.QueryRow(ctx, `select count(*) from orders where id = any($1) and status in ('OPEN', 'PARTIALLY_FILLED')`, ids).Scan(&n)
		return n == 0, err
	}
	if err := poll.Until(t.Context(), time.Until(last)+10*time.Second, gone); err != nil {
		t.Fatalf("GTD orders open at the kill still rest after their time: %v", err)
	}
	rows, err := tg.Store.Pool.Query(context.Background(), `select id, status, cancel_reason, expires_at, updated_at from orders where id = any($1)`, ids)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var id uuid.UUID
		var status string
		var reason *string
		var expires, updated time.Time
		if err := rows.Scan(&id, &status, &reason, &expires, &updated); err != nil {
			t.Fatal(err)
		}
		from := expires
		if restarted.After(from) {
			from = restarted
		}
		if (status != "CANCELLED" && status != "PARTIALLY_FILLED_CANCELLED") || reason == nil || *reason != "EXPIRED" {
			t.Errorf("GTD order %s, open at the kill and due at %v: %s with reason %v, want cancelled as EXPIRED", id, expires, status, reason)
		} else if updated.Before(expires) || updated.Sub(from) > expiryBound {
			t.Errorf("GTD order %s, due at %v, expired at %v: %v after its time or the restart (%v), beyond %v",
				id, expires, updated, updated.Sub(from), restarted, expiryBound)
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
}

// checkReplays replays, after the restart, every acknowledged placement with a client order id,
// which must answer 200 with the acknowledged order; and the placement under way at the kill, if it
// had a client order id, which is answered with the one order it made, or places it now, or — a
// GTD one past its time that was never placed — is refused; Postgres then holds one order with the
// id, or none.
func checkReplays(t *testing.T, tg *Target, bots []*crashBot) {
	t.Helper()
	for _, b := range bots {
		for _, p := range b.placed {
			resp, raw := b.doResponse(t, "/order", p.body)
			var o apiserver.Order
			if resp.StatusCode != http.StatusOK || resp.Header.Get("Idempotent-Replayed") != "true" || json.Unmarshal(raw, &o) != nil || o.ID != p.order {
				t.Errorf("%s: a replay of %s after the restart: %d %s, want 200 with order %s", b.c.Name, p.clientID, resp.StatusCode, raw, p.order)
			}
		}
		if b.unsure == nil || b.unsure.body["clientOrderId"] == nil {
			continue
		}
		clientID := b.unsure.body["clientOrderId"].(string)
		resp, raw := b.doResponse(t, "/order", b.unsure.body)
		var o apiserver.Order
		var e ErrorBody
		want := 1
		switch {
		case (resp.StatusCode == http.StatusOK || resp.StatusCode == http.StatusCreated) && json.Unmarshal(raw, &o) == nil:
		case resp.StatusCode == http.StatusBadRequest && json.Unmarshal(raw, &e) == nil && e.Details.Field == "expiresAt":
			want = 0
		default:
			t.Errorf("%s: the placement under way at the kill, sent again: %d %s", b.c.Name, resp.StatusCode, raw)
			continue
		}
		var ids []uuid.UUID
		for _, s := range accountOrders(t, tg, b.c.Account) {
			if s.clientID != nil && *s.clientID == clientID {
				ids = append(ids, s.id)
			}
		}
		if len(ids) != want || want == 1 && ids[0] != o.ID {
			t.Errorf("%s: the placement under way at the kill, sent again, answered %d %s; Postgres holds orders %v with its client order id",
				b.c.Name, resp.StatusCode, raw, ids)
		}
	}
}

// doResponse places an order as Client.DoResponse does, and records it in the bot's history.
func (b *crashBot) doResponse(t *testing.T, path string, body map[string]any) (*http.Response, []byte) {
	t.Helper()
	p := b.rec.Begin(b.c.Name, b.c.Account, history.Place, history.RequestOf(body))
	resp, raw := b.c.DoResponse(t, "POST", path, body)
	p.End(resp, raw, nil)
	return resp, raw
}

// checkNoTradeAfterExpiry checks that no trade involves a GTD order, as maker or as taker, at or
// after its expiry, and that no order was cancelled as EXPIRED before its time; it fails the test
// if no trade involves a GTD order at all, which would make the check vacuous.
func checkNoTradeAfterExpiry(t *testing.T, tg *Target) {
	t.Helper()
	ctx := context.Background()
	var late []string
	var gtdTrades int
	err := tg.Store.Pool.QueryRow(ctx, `
		select coalesce(array_agg(format('trade %s of order %s at %s, expiry %s', t.id, o.id, t.created_at, o.expires_at))
		         filter (where t.created_at >= o.expires_at), '{}'),
		       count(*)
		from trades t join orders o
		  on o.market_id = t.market_id and o.seq in (t.taker_order_seq, t.maker_order_seq)
		where o.time_in_force = 'GTD'`).Scan(&late, &gtdTrades)
	if err != nil {
		t.Fatal(err)
	}
	for i, l := range late {
		if i == 10 {
			t.Errorf("... and %d more trades of GTD orders at or after their expiry", len(late)-i)
			break
		}
		t.Errorf("a GTD order traded at or after its expiry: %s", l)
	}
	if gtdTrades == 0 {
		t.Error("no trade involves a GTD order: the test did not test trading up to an expiry")
	}
	var early []uuid.UUID
	if err := tg.Store.Pool.QueryRow(ctx, `select coalesce(array_agg(id), '{}') from orders
		where cancel_reason = 'EXPIRED' and updated_at < expires_at`).Scan(&early); err != nil {
		t.Fatal(err)
	}
	if len(early) > 0 {
		t.Errorf("orders cancelled as EXPIRED before their time: %v", early)
	}
}
