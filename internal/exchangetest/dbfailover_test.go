package exchangetest

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/pmx-dev/pmx/apiserver"
	"github.com/pmx-dev/pmx/internal/history"
	"github.com/pmx-dev/pmx/internal/pgtest"
	"github.com/pmx-dev/pmx/internal/poll"
)

// dbFailoverRounds is how many failovers TestDatabaseFailover runs: each kills the primary,
// promotes the standby and clones a new standby from it.
const dbFailoverRounds = 3

// dbResumeBound is the longest TestDatabaseFailover lets trading stay stopped, from the primary's
// SIGKILL to the first acknowledgement of an order sent after the standby's promotion. It bounds
// what it measures (logged each round) with room for a loaded machine; the promotion itself, which
// an HA manager (CloudNativePG, Patroni) decides on its own clock, is part of it here.
const dbResumeBound = 15 * time.Second

// TestDatabaseFailover runs `pmx dev` on a primary and a synchronous standby through a multi-host
// URL with target_session_attrs=read-write, bots trading over HTTP, and kills the primary
// (SIGKILL to every postgres process) dbFailoverRounds times, promoting the standby each time.
// pmx is never restarted. It checks that every order and trade the bots had acknowledged is on
// the new primary, that a placement answered 503 (the commit's outcome unknown, or the database
// gone) is answered with what actually happened when it is sent again with its clientOrderId,
// that trading resumes within dbResumeBound, and at the end that the invariants hold and the
// books equal Postgres. Every placement of the bots (the retries at the end included), and every
// answer, is recorded, and the history is checked against the new primary's log at the end
// (history.Check).
func TestDatabaseFailover(t *testing.T) {
	if testing.Short() {
		t.Skip("starts two Postgres servers and pmx, and fails the database over several times")
	}
	bin := BuildPMX(t)
	db := pgtest.StartReplicated(t, dbFailoverRounds+2)
	const token = "db-failover-admin-token-0123456789abcdef"
	_, base := startDevProcess(t, bin, db.URL(), token)
	runDBFailover(t, db, processTarget(t, base, db.URL(), token))
}

// TestDistributedDatabaseFailover is TestDatabaseFailover with the distributed processes: the
// operator, two shards and two fronts, all on the multi-host URL, the bots trading through one
// front.
func TestDistributedDatabaseFailover(t *testing.T) {
	if testing.Short() {
		t.Skip("starts two Postgres servers, a control plane and the distributed processes, and fails the database over several times")
	}
	db := pgtest.StartReplicated(t, dbFailoverRounds+2)
	c := startClusterOn(t, builds{}, db.URL())
	runDBFailover(t, db, c.target(t, 0))
}

// runDBFailover is the failover scenario of TestDatabaseFailover on the exchange tg, whose
// database db is.
func runDBFailover(t *testing.T, db *pgtest.Replicated, tg *Target) {
	markets := []uuid.UUID{tg.NewMarket(t, nil).ID, tg.NewMarket(t, nil).ID}
	rec := &history.Recorder{}
	bots := make([]*failoverBot, 6)
	for i := range bots {
		bots[i] = &failoverBot{c: tg.NewAccount(t, "dbfo"), i: i, acked: map[uuid.UUID]time.Time{}, trades: map[uuid.UUID]bool{}, rec: rec}
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for _, b := range bots {
		wg.Go(func() { b.run(tg, markets, stop) })
	}
	defer func() {
		select {
		case <-stop:
		default:
			close(stop)
		}
		wg.Wait()
	}()
	acked := func() int {
		n := 0
		for _, b := range bots {
			n += b.count()
		}
		return n
	}

	for round := range dbFailoverRounds {
		before := acked()
		if err := poll.Until(t.Context(), 30*time.Second, func(context.Context) (bool, error) { return acked() >= before+100, nil }); err != nil {
			t.Fatalf("round %d: not 100 orders acknowledged in 30 s before the kill: %v", round, err)
		}
		before = acked()
		killed := time.Now()
		db.KillPrimary()
		db.Promote()
		promoted := time.Now()
		resumed := func(context.Context) (bool, error) {
			for _, m := range markets {
				if !ackedSentAfter(bots, m, promoted) {
					return false, nil
				}
			}
			return true, nil
		}
		if err := poll.Until(t.Context(), dbResumeBound, resumed); err != nil {
			t.Fatalf("round %d: trading did not resume on every market within %v of the promotion: %v", round, dbResumeBound, err)
		}
		resume := time.Since(killed)
		t.Logf("round %d: killed the primary after %d acknowledged orders; promoted in %v; trading resumed on every market %v after the kill",
			round, before, promoted.Sub(killed).Round(time.Millisecond), resume.Round(time.Millisecond))
		if resume > dbResumeBound {
			t.Errorf("round %d: trading resumed %v after the kill, more than %v", round, resume, dbResumeBound)
		}
		db.NewStandby() // a synchronous pair again, for the next round
	}
	close(stop)
	wg.Wait()

	// Everything acknowledged is on the last primary, which tg.Store reaches through the same URL;
	// its idle connections to a killed primary would fail their first query, so they go first.
	ctx := context.Background()
	tg.Store.Pool.Reset()
	var orders, trades, unsure int
	codes := map[string]int{}
	for _, b := range bots {
		unsure += len(b.unsure)
		for _, u := range b.unsure {
			codes[u.code]++
		}
		for id := range b.acked {
			if _, err := tg.Store.Order(ctx, id); err != nil {
				t.Errorf("%s: acknowledged order %s is not on the new primary: %v", b.c.Name, id, err)
			}
			orders++
		}
		for id := range b.trades {
			var n int
			if err := tg.Store.Pool.QueryRow(ctx, `select count(*) from trades where id = $1`, id).Scan(&n); err != nil || n != 1 {
				t.Errorf("%s: acknowledged trade %s is not on the new primary (%d rows, %v)", b.c.Name, id, n, err)
			}
			trades++
		}
		b.checkUnsure(t, tg)
	}
	t.Logf("%d acknowledged orders and %d acknowledged fills checked on the primary after %d failovers; %d placements left undecided (503 or no answer) sent again, by code %v",
		orders, trades, dbFailoverRounds, unsure, codes)
	if unsure == 0 {
		t.Error("no placement was left undecided by a failover: the kills missed the trading")
	}
	if trades == 0 {
		t.Error("no acknowledged fill to check: the bots never traded with each other")
	}
	CheckInvariants(t, tg)
	CheckBooksOverAPI(t, tg, bots[0].c, markets)
	CheckHistory(t, tg, rec.History())
}

// failoverBot places orders with client order ids; it records each acknowledged one and the
// trades its answer carried, and keeps every placement answered with no decision (503 or no
// answer) to send again at the end.
type failoverBot struct {
	c  *Client
	i  int
	mu sync.Mutex
	// acked maps each acknowledged order to when it was sent.
	acked  map[uuid.UUID]time.Time
	market map[uuid.UUID]uuid.UUID
	trades map[uuid.UUID]bool
	unsure []unsurePlacement
	rec    *history.Recorder // every placement it sends, and its answer; not its cancels of everything
}

// unsurePlacement is a placement answered with no decision: its body and its answer's error code
// ("" for no answer at all).
type unsurePlacement struct {
	body map[string]any
	code string
}

func (b *failoverBot) count() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.acked)
}

// ackedSentAfter tells whether some bot had an order on market, sent after since, acknowledged.
func ackedSentAfter(bots []*failoverBot, market uuid.UUID, since time.Time) bool {
	for _, b := range bots {
		b.mu.Lock()
		for id, sent := range b.acked {
			if b.market[id] == market && sent.After(since) {
				b.mu.Unlock()
				return true
			}
		}
		b.mu.Unlock()
	}
	return false
}

func (b *failoverBot) run(tg *Target, markets []uuid.UUID, stop <-chan struct{}) {
	b.mu.Lock()
	b.market = map[uuid.UUID]uuid.UUID{}
	b.mu.Unlock()
	for n := 0; ; n++ {
		select {
		case <-stop:
			return
		default:
		}
		m := markets[n%len(markets)]
		// Half the bots buy YES and half buy NO around 50, so that they meet and trade.
		outcome := []string{"YES", "NO"}[(b.i+n)%2]
		body := OrderBody(m, "BUY", outcome, 45+(b.i*7+n*3)%11, 1+n%3)
		body["clientOrderId"] = fmt.Sprintf("dbfo-%d-%d", b.i, n)
		sent := time.Now()
		p := b.rec.Begin(b.c.Name, b.c.Account, history.Place, history.RequestOf(body))
		resp, raw, err := call(tg, b.c, "/order", body)
		p.End(resp, raw, err)
		status := 0
		if resp != nil {
			status = resp.StatusCode
		}
		switch {
		case err == nil && status == http.StatusCreated:
			var placed apiserver.PlacedOrder
			if json.Unmarshal(raw, &placed) != nil {
				continue
			}
			b.mu.Lock()
			b.acked[placed.ID] = sent
			b.market[placed.ID] = m
			for _, tr := range placed.Trades {
				b.trades[tr.ID] = true
			}
			b.mu.Unlock()
		case err == nil && status == http.StatusBadRequest:
			call(tg, b.c, "/cancel-everything", nil) // too many open orders, or too little cash: make room
		default:
			// 503 (the database gone, or the commit's outcome unknown) or no answer: what
			// happened is for the retry at the end to tell.
			u := unsurePlacement{body: body}
			var e ErrorBody
			if err == nil && json.Unmarshal(raw, &e) == nil {
				u.code = e.Details.Code
			}
			if err == nil && (status != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "") {
				u.code = fmt.Sprintf("%d %s without Retry-After", status, raw)
			}
			b.mu.Lock()
			b.unsure = append(b.unsure, u)
			b.mu.Unlock()
			time.Sleep(10 * time.Millisecond) // the database is failing over; don't spin
		}
	}
}

// checkUnsure sends every placement that was not answered with a decision again, with its
// clientOrderId: the answer must be the order Postgres holds under that id (a replay) or, when
// Postgres holds none, a fresh decision; never a second order.
func (b *failoverBot) checkUnsure(t *testing.T, tg *Target) {
	t.Helper()
	for _, u := range b.unsure {
		body := u.body
		clientID := body["clientOrderId"].(string)
		switch u.code {
		case "", "unavailable", "outcome_unknown":
		default:
			t.Errorf("%s: %s was answered %s during the failover, want 503 unavailable or outcome_unknown with Retry-After", b.c.Name, clientID, u.code)
		}
		var held []uuid.UUID
		if err := tg.Store.Pool.QueryRow(context.Background(), `select coalesce(array_agg(o.id), '{}')
			from orders o join accounts a on a.id = o.account_id where a.uid = $1 and o.client_order_id = $2`, b.c.Account, clientID).Scan(&held); err != nil {
			t.Fatal(err)
		}
		if u.code == "unavailable" && len(held) > 0 {
			t.Errorf("%s: %s was answered 503 unavailable (nothing changed) during the failover, yet Postgres holds order %v under it", b.c.Name, clientID, held)
		}
		if len(held) > 1 {
			t.Errorf("%s: %s is the client order id of %d orders %v", b.c.Name, clientID, len(held), held)
			continue
		}
		p := b.rec.Begin(b.c.Name, b.c.Account, history.Place, history.RequestOf(body))
		resp, raw := b.c.DoResponse(t, "POST", "/order", body)
		p.End(resp, raw, nil)
		var o apiserver.Order
		switch {
		case len(held) == 1 && resp.StatusCode == http.StatusOK && json.Unmarshal(raw, &o) == nil && o.ID == held[0]:
		case len(held) == 0 && resp.StatusCode != http.StatusOK && resp.StatusCode < 500:
		default:
			t.Errorf("%s: %s, unanswered during the failover and sent again: %d %s; Postgres held %v under it",
				b.c.Name, clientID, resp.StatusCode, raw, held)
		}
	}
}
