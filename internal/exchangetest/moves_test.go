package exchangetest

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/pmx-dev/pmx/internal/history"
	"github.com/pmx-dev/pmx/internal/poll"
	"github.com/pmx-dev/pmx/internal/shardclient"
	"github.com/pmx-dev/pmx/internal/store/bookkeeping"
)

// moveRounds is how many times testMovesAfterTheSuite moves every OPEN market to another shard.
const moveRounds = 4

// testMovesAfterTheSuite is the real cluster's Scale in processes: every market the contract suite
// left OPEN (events' outcomes and markets with fee schedules among them) is moved to another shard
// by the planned handoff (what the operator's rebalancer and drains do), each event's markets
// together; then bots new to the markets trade on all of them while they move three rounds more:
// one between the two shards, then, with a third shard started (a holder new to every account),
// two over the three; then the third stops (SIGTERM), handing what it holds to the others as it
// goes. No placement may be answered 5xx or fail in transit, none acknowledged may be lost, and
// afterwards the ledger's invariants and the audit must hold over the whole database, the history
// must check against the log and the books the shards serve must be Postgres's.
func testMovesAfterTheSuite(t *testing.T, c *cluster) {
	ctx := t.Context()
	tg := c.target(t, 0)
	units, markets := openUnits(t, c)
	if len(markets) < 10 {
		t.Fatalf("the suite left %d OPEN markets, want the many it makes", len(markets))
	}
	bots := make([]*Client, 8)
	for i := range bots {
		bots[i] = tg.NewAccount(t, fmt.Sprintf("mover-%d", i))
	}
	router := &shardclient.Router{Store: c.store, Token: clusterInternalToken, Lifecycle: true}
	moves := 0
	shards := []string{"shard-a", "shard-b"}
	var third *Process
	moveAll := func(round int) {
		t.Helper()
		if round == moveRounds/2 {
			third, _ = StartProcess(t, shardLine, c.shardBin, "shard", "--name", "shard-c", "--addr", "127.0.0.1:0",
				"--metrics-addr", "127.0.0.1:0", "--database-url", c.dbURL, "--internal-token", clusterInternalToken,
				"--log-level", "warn", "--max-open-orders", strconv.Itoa(SuiteMaxOpenOrders))
			poll.Wait(t, 30*time.Second, "shard-c live", func() bool {
				live, err := c.store.LiveShards(ctx, 5*time.Second)
				return err == nil && slices.ContainsFunc(live, func(s bookkeeping.Shard) bool { return s.Name == "shard-c" })
			})
			shards = append(shards, "shard-c")
		}
		for i, unit := range units {
			o, err := c.store.Owner(ctx, unit[0])
			if err != nil {
				t.Fatal(err)
			}
			if o.Shard == "" {
				continue // released (a market the suite closed meanwhile)
			}
			to := shards[(slices.Index(shards, o.Shard)+1+i%(len(shards)-1))%len(shards)]
			moved, err := router.HandOff(ctx, unit, o.Shard, to)
			if err != nil || !moved {
				t.Fatalf("round %d: moving %v from %s to %s: moved %v, %v", round, unit, o.Shard, to, moved, err)
			}
			moves++
		}
	}
	// The first round before any order: each market's next order is then numbered by a shard that
	// loaded it from Postgres, not by the one that numbered its last (the real cluster's Scale
	// trades on markets moved to the new shard: it met a number an ended order's move had taken).
	began := time.Now()
	moveAll(0)
	rec := &history.Recorder{}
	load := StartRecordedLoad(bots, markets, rec)
	defer load.Stop()
	poll.Wait(t, time.Minute, "200 acknowledged orders", func() bool { return load.Acked() >= 200 })
	for round := 1; round < moveRounds; round++ {
		moveAll(round)
	}
	third.Stop() // it hands its markets over as it stops
	if owned, err := c.store.OwnedMarkets(ctx, "shard-c"); err != nil || len(owned) > 0 {
		t.Errorf("shard-c stopped owning %d markets (%v), want it to have handed them all over", len(owned), err)
	}
	ended := time.Now()
	poll.Wait(t, time.Minute, "an order sent after the moves to be acknowledged", func() bool {
		return load.Sent(ended, time.Now().Add(time.Hour)) > 0
	})
	load.Stop()
	t.Logf("%d moves of %d units (%d markets) in %v; %d orders acknowledged", moves, len(units), len(markets),
		ended.Sub(began).Round(time.Millisecond), load.Acked())
	if f := load.Failures(began, time.Now()); len(f) > 0 {
		t.Errorf("%d placements answered 5xx or not at all across the moves; the first: %v", len(f), f[:min(len(f), 5)])
	}
	load.CheckKept(t, tg)
	CheckInvariants(t, tg)
	CheckHistory(t, tg, rec.History())
	CheckBooksOverAPI(t, tg, bots[0], markets)
}

// openUnits lists the OPEN markets, each event's together (a unit moves as one), and all of them.
func openUnits(t *testing.T, c *cluster) (units [][]uuid.UUID, markets []uuid.UUID) {
	rows, err := c.store.Pool.Query(context.Background(),
		`select id, coalesce(event_id::text, id::text) from markets where status = 'OPEN' and shard is not null order by 2, 1`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	last := ""
	for rows.Next() {
		var id uuid.UUID
		var unit string
		if err := rows.Scan(&id, &unit); err != nil {
			t.Fatal(err)
		}
		if unit != last {
			units = append(units, nil)
			last = unit
		}
		units[len(units)-1] = append(units[len(units)-1], id)
		markets = append(markets, id)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	slices.SortFunc(units, func(a, b []uuid.UUID) int { return len(b) - len(a) }) // the events first
	return units, markets
}
