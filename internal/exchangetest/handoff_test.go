package exchangetest

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/pmx-dev/pmx/apiserver"
	"github.com/pmx-dev/pmx/internal/apitest"
	"github.com/pmx-dev/pmx/internal/history"
	"github.com/pmx-dev/pmx/internal/pgtest"
	"github.com/pmx-dev/pmx/internal/poll"
	"github.com/pmx-dev/pmx/internal/shardclient"
	"github.com/pmx-dev/pmx/internal/store"
	"github.com/pmx-dev/pmx/internal/storetest"
)

// handoffMoves is how many planned handoffs TestDistributedHandoff makes, one market after the
// other, each back and forth between the two shards.
const handoffMoves = 50

// TestDistributedHandoff moves markets back and forth between two `pmx shard` processes 50 times
// by the planned handoff (the operator's move: shardclient.Router.HandOff), while bots place and
// cancel orders on them continuously through two `pmx api` processes. No request may be answered
// 5xx, no shard may be fenced (a move that fell back to a failover's, store.Move, fences the old
// owner's next commit for the market: the test fails then), no acknowledged order may be lost, and
// afterwards each book the shards serve is the one Postgres rebuilds and the ledger's invariants
// hold; two bots follow their account feeds live over the WebSocket (checkAccountFeed: each
// event once, in commit order per market, across the streams of both shards). It logs the pause a client saw at each move: the
// longest request on the moved market in flight during the handoff (docs/performance.md, "The
// planned handoff's pause"). Every placement and cancel of the bots, and every answer, is
// recorded, and the history is checked against the log at the end (history.Check).
func TestDistributedHandoff(t *testing.T) {
	r := startHandoffRig(t)
	ctx, st, shards, fronts := t.Context(), r.store, r.names, r.fronts
	counted := r.counted
	// Two markets that move, one on each shard, and one that stays on shard-a, as busy.
	markets := []uuid.UUID{storetest.Market(t, st), storetest.Market(t, st), storetest.Market(t, st)}
	for i, id := range markets {
		if _, err := st.Assign(ctx, id, shards[i%2]); err != nil {
			t.Fatal(err)
		}
	}

	var bots []*Client
	for i := range 8 {
		bots = append(bots, fronts[i%2].NewAccount(t, fmt.Sprintf("handoff-bot%d", i)))
	}
	// Two bots follow their account feeds live, one through each front, as the markets move.
	followers := []*accountFollower{followAccount(t, bots[0]), followAccount(t, bots[1])}
	load := startTrading(bots, markets)
	if err := poll.Until(ctx, 30*time.Second, func(context.Context) (bool, error) { return load.acked() > 200, nil }); err != nil {
		load.stop()
		t.Fatalf("the bots could not trade before the moves: %d acknowledged", load.acked())
	}

	fencedBefore := counted("pmx_shard_fenced_total")
	operator := &shardclient.Router{Store: st, Token: clusterInternalToken, Lifecycle: true}
	type move struct {
		market uuid.UUID
		from   time.Time
		to     time.Time
	}
	var moves []move
	pace := time.NewTicker(150 * time.Millisecond) // the moves' pace, not a wait for readiness
	defer pace.Stop()
	for i := range handoffMoves {
		<-pace.C
		id := markets[i%2]
		o, err := st.Owner(ctx, id)
		if err != nil {
			load.stop()
			t.Fatal(err)
		}
		to := shards[0]
		if o.Shard == to {
			to = shards[1]
		}
		from := time.Now()
		moved, err := operator.HandOff(ctx, []uuid.UUID{id}, o.Shard, to)
		if err != nil || !moved {
			load.stop()
			t.Fatalf("move %d of market %s from %s to %s: moved %v, %v", i, id, o.Shard, to, moved, err)
		}
		moves = append(moves, move{market: id, from: from, to: time.Now()})
	}
	<-pace.C // requests the last move sent on finish
	load.stop()

	load.mu.Lock()
	reqs := load.reqs
	load.mu.Unlock()
	failed := failures(reqs, moves[0].from)
	if len(failed) > 0 {
		t.Errorf("%d of %d requests failed across %d planned moves, want none; the first: %v", len(failed), len(reqs), len(moves),
			failed[:min(len(failed), 10)])
	}

	// The pause a client saw at each move: the longest request on the market moved that was in
	// flight at some moment of the handoff (from the operator's call to its answer).
	var pauses []time.Duration
	spanned := 0
	for _, mv := range moves {
		var longest time.Duration
		for _, r := range reqs {
			if r.market == mv.market && !r.start.After(mv.to) && !r.end.Before(mv.from) {
				longest = max(longest, r.end.Sub(r.start))
				spanned++
			}
		}
		pauses = append(pauses, longest)
	}
	var all []time.Duration
	for _, r := range reqs {
		all = append(all, r.end.Sub(r.start))
	}
	slices.Sort(pauses)
	slices.Sort(all)
	handoffs := make([]time.Duration, len(moves))
	for i, mv := range moves {
		handoffs[i] = mv.to.Sub(mv.from)
	}
	slices.Sort(handoffs)
	t.Logf("%d planned moves under load (%d requests, %d spanning a move, %d orders acknowledged): "+
		"pause p50 %v, p99 %v, max %v; the handoff call p50 %v, max %v; every request p50 %v, p99 %v",
		len(moves), len(reqs), spanned, load.acked(), quantile(pauses, 0.5), quantile(pauses, 0.99), pauses[len(pauses)-1],
		quantile(handoffs, 0.5), handoffs[len(handoffs)-1], quantile(all, 0.5), quantile(all, 0.99))
	if spanned < len(moves) {
		t.Errorf("%d requests spanned the %d moves: the load did not cover them", spanned, len(moves))
	}

	// No shard found a market gone from under it: every move was a handoff, none a failover's
	// fencing (which store.Move would be).
	if fenced := counted("pmx_shard_fenced_total") - fencedBefore; fenced != 0 {
		t.Errorf("the shards were fenced %v times during the planned moves, want none", fenced)
	}
	if handed := counted("pmx_shard_markets_handed_over_total"); handed != handoffMoves {
		t.Errorf("the shards handed %v markets over, want %d", handed, handoffMoves)
	}
	load.checkKept(t, st)
	tg := fronts[0]
	CheckBooksOverAPI(t, tg, bots[0], markets)
	CheckInvariants(t, tg)
	CheckHistory(t, tg, load.rec.History())

	// Each follower's feed: every event once, in commit order per market, across the moves of
	// its markets from one shard's stream to the other's and back.
	spanning := 0
	for _, f := range followers {
		spanning += checkAccountFeed(t, f)
	}
	if spanning == 0 {
		t.Error("no followed order had events in two streams: the moves did not meet the account feed")
	}
}

// handoffRig is two `pmx shard` processes and two `pmx api` processes on one database, without
// an operator: the tests move the markets themselves.
type handoffRig struct {
	store   *store.Store
	names   []string
	shards  []*Process
	metrics []string // where each shard serves /metrics
	fronts  []*Target
	t       *testing.T
}

func startHandoffRig(t *testing.T) *handoffRig {
	db := pgtest.NewDatabase(t, pgtest.Shared(t))
	bin := BuildPMX(t)
	ctx := t.Context()
	st, err := store.Open(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(st.Close)
	r := &handoffRig{store: st, names: []string{"shard-a", "shard-b"}, t: t}
	for _, name := range r.names {
		p, _ := StartProcess(t, shardLine, bin, "shard", "--name", name, "--addr", "127.0.0.1:0", "--metrics-addr", "127.0.0.1:0",
			"--database-url", db, "--internal-token", clusterInternalToken, "--log-level", "warn")
		r.shards = append(r.shards, p)
		r.metrics = append(r.metrics, p.Line(metricsLine))
	}
	for range 2 {
		_, base := StartProcess(t, apiLine, bin, append([]string{"api", "--addr", "127.0.0.1:0", "--metrics-addr", "127.0.0.1:0",
			"--database-url", db, "--admin-token", clusterAdminToken, "--internal-token", clusterInternalToken,
			"--log-level", "warn"}, SuiteLimitFlags()...)...)
		WaitReady(t, base+"/readyz")
		r.fronts = append(r.fronts, &Target{URL: base, AdminToken: clusterAdminToken, Store: st, HTTP: &http.Client{Timeout: time.Minute},
			Validator: apitest.NewValidator(t), Feed: apitest.NewAsyncValidator(t)})
	}
	if err := poll.Until(ctx, 30*time.Second, func(ctx context.Context) (bool, error) {
		live, err := st.LiveShards(ctx, 5*time.Second)
		return len(live) == len(r.names), err
	}); err != nil {
		t.Fatalf("the shards did not register: %v", err)
	}
	return r
}

// counted sums a counter over the shard processes still running (and the slots of each).
func (r *handoffRig) counted(name string) float64 {
	r.t.Helper()
	sum := 0.0
	for i, url := range r.metrics {
		if r.shards[i].cmd.ProcessState == nil {
			sum += (&Target{MetricsURL: url, HTTP: http.DefaultClient}).Metrics(r.t, name)
		}
	}
	return sum
}

// failures lists the requests answered 5xx or not at all.
func failures(reqs []tradeRequest, since time.Time) []string {
	var failed []string
	for _, r := range reqs {
		if r.status >= 500 || r.status == 0 {
			failed = append(failed, fmt.Sprintf("%s %s at +%v: %d %s", r.kind, r.market, r.start.Sub(since).Round(time.Millisecond), r.status, r.body))
		}
	}
	return failed
}

// TestDistributedGracefulStop stops a `pmx shard` process with SIGTERM while bots trade on its
// markets, with no operator to move them: the stopping shard hands them to the other shard itself
// (the planned handoff) before it stops serving, so no request is answered 5xx, the other shard
// owns every market afterwards, nothing acknowledged is lost and the books equal Postgres. Before
// the handoff, a stopping shard released its markets to no owner, and with no operator to schedule
// them every request on them was answered 503.
func TestDistributedGracefulStop(t *testing.T) {
	r := startHandoffRig(t)
	ctx, st := t.Context(), r.store
	markets := []uuid.UUID{storetest.Market(t, st), storetest.Market(t, st), storetest.Market(t, st)}
	for _, id := range markets {
		if _, err := st.Assign(ctx, id, "shard-a"); err != nil {
			t.Fatal(err)
		}
	}
	var bots []*Client
	for i := range 6 {
		bots = append(bots, r.fronts[i%2].NewAccount(t, fmt.Sprintf("stop-bot%d", i)))
	}
	load := startTrading(bots, markets)
	if err := poll.Until(ctx, 30*time.Second, func(context.Context) (bool, error) { return load.acked() > 200, nil }); err != nil {
		load.stop()
		t.Fatalf("the bots could not trade before the stop: %d acknowledged", load.acked())
	}
	stopping := time.Now()
	r.shards[0].Stop()
	stopped := time.Now()
	// Trade on for as long again on shard-b alone.
	if err := poll.Until(ctx, 30*time.Second, func(context.Context) (bool, error) {
		return load.acked() > 400 && time.Since(stopped) > stopped.Sub(stopping), nil
	}); err != nil {
		load.stop()
		t.Fatalf("the bots could not trade after the stop: %d acknowledged", load.acked())
	}
	load.stop()
	load.mu.Lock()
	reqs := load.reqs
	load.mu.Unlock()
	if failed := failures(reqs, stopping); len(failed) > 0 {
		t.Errorf("%d of %d requests failed while shard-a stopped, want none; the first: %v", len(failed), len(reqs), failed[:min(len(failed), 10)])
	}
	for _, id := range markets {
		if o, err := st.Owner(ctx, id); err != nil || o.Shard != "shard-b" {
			t.Errorf("market %s after shard-a stopped: %+v (%v), want shard-b's", id, o, err)
		}
	}
	t.Logf("shard-a stopped in %v under load (%d requests, %d orders acknowledged)", stopped.Sub(stopping).Round(time.Millisecond), len(reqs), load.acked())
	load.checkKept(t, st)
	CheckBooksOverAPI(t, r.fronts[0], bots[0], markets)
	CheckInvariants(t, r.fronts[0])
}

// quantile is the q-quantile of sorted durations (nearest rank).
func quantile(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(q*float64(len(sorted))+0.5) - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}

// trading is bots placing orders on markets and cancelling about half of those that rest, until
// stop, each through its client's target; it records every request with its time, and every order
// acknowledged, and every placement and cancel of one order, with its answer, in rec (a cancel of
// everything is not an operation history models: it leaves the orders it cancels to become final
// with no operation).
type trading struct {
	mu     sync.Mutex
	reqs   []tradeRequest
	placed []uuid.UUID
	rec    *history.Recorder
	done   chan struct{}
	wg     sync.WaitGroup
}

type tradeRequest struct {
	kind       string
	market     uuid.UUID // uuid.Nil for a cancel of everything
	start, end time.Time
	status     int // 0: no answer
	body       string
}

func startTrading(bots []*Client, markets []uuid.UUID) *trading {
	l := &trading{rec: &history.Recorder{}, done: make(chan struct{})}
	for i, bot := range bots {
		l.wg.Go(func() {
			for n := 0; ; n++ {
				select {
				case <-l.done:
					return
				default:
				}
				m := markets[(i+n)%len(markets)]
				status, raw := l.send(bot, "place", m, "/order", OrderBody(m, "BUY", []string{"YES", "NO"}[(i+n)%2], 40+(i*7+n*3)%21, 1+n%4))
				if status == http.StatusBadRequest {
					l.send(bot, "cancel-everything", uuid.Nil, "/cancel-everything", nil) // too many open orders: make room
					continue
				}
				var placed apiserver.PlacedOrder
				if status != http.StatusCreated || json.Unmarshal(raw, &placed) != nil {
					continue
				}
				l.mu.Lock()
				l.placed = append(l.placed, placed.ID)
				l.mu.Unlock()
				if placed.Status == "OPEN" && n%2 == 0 {
					l.send(bot, "cancel", m, "/cancel-order", map[string]any{"orderId": placed.ID})
				}
			}
		})
	}
	return l
}

// send makes one request and records it, and in the history too unless it is a cancel of
// everything.
func (l *trading) send(bot *Client, kind string, market uuid.UUID, path string, body any) (int, []byte) {
	var p *history.Pending
	switch kind {
	case "place":
		p = l.rec.Begin(bot.Name, bot.Account, history.Place, history.RequestOf(body))
	case "cancel":
		p = l.rec.Begin(bot.Name, bot.Account, history.Cancel, history.RequestOf(body))
	}
	r := tradeRequest{kind: kind, market: market, start: time.Now()}
	resp, raw, err := call(bot.T, bot, path, body)
	r.end = time.Now()
	if p != nil {
		p.End(resp, raw, err)
	}
	if resp != nil {
		r.status = resp.StatusCode
	}
	if err != nil || r.status >= 500 {
		r.body = fmt.Sprintf("%.200s %v", raw, err)
	}
	l.mu.Lock()
	l.reqs = append(l.reqs, r)
	l.mu.Unlock()
	return r.status, raw
}

func (l *trading) acked() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.placed)
}

func (l *trading) stop() {
	select {
	case <-l.done:
	default:
		close(l.done)
	}
	l.wg.Wait()
}

// checkKept fails t unless every acknowledged order is in Postgres.
func (l *trading) checkKept(t *testing.T, st *store.Store) {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, id := range l.placed {
		if _, err := st.Order(context.Background(), id); err != nil {
			t.Fatalf("acknowledged order %s is gone: %v", id, err)
		}
	}
}
