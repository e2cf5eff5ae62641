package shardclient

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/pmx-dev/pmx/engine"
	"github.com/pmx-dev/pmx/internal/domain"
	"github.com/pmx-dev/pmx/internal/exchange"
	"github.com/pmx-dev/pmx/internal/shardproto"
	"github.com/pmx-dev/pmx/internal/storetest"
)

// TestQueuePositionsThroughRouter reads queue positions of orders on two shards at once, one
// market of them not OPEN (its order refused from Postgres); another account's order is refused
// by its shard; a shard of the release before the call (404) leaves its orders unavailable and
// the other shard's answered.
func TestQueuePositionsThroughRouter(t *testing.T) {
	ctx := context.Background()
	r := newNamedInternalRig(t, "shard-1")
	second := startSecondShard(t, r, shardproto.PathQueuePositions)
	ids := []uuid.UUID{r.market, storetest.Market(t, r.st), storetest.Market(t, r.st)}
	for i, id := range ids {
		if _, err := r.st.Assign(ctx, id, []string{"shard-1", "shard-2", "shard-1"}[i]); err != nil {
			t.Fatal(err)
		}
	}
	bob := storetest.Account(t, r.st, "bob", 1_000_000)
	front := &Router{Store: r.st, Token: validateToken}
	place := func(account int64, market uuid.UUID, side engine.Side, outcome engine.Outcome, price int, qty int64) exchange.OrderRef {
		t.Helper()
		p, err := front.Place(ctx, exchange.PlaceRequest{Account: account, Market: market, Side: side, Outcome: outcome, Price: price, Quantity: qty})
		if err != nil {
			t.Fatal(err)
		}
		return exchange.OrderRef{Market: market, Seq: p.Order.Seq}
	}
	a1 := place(r.account, ids[0], engine.Buy, engine.Yes, 40, 5)
	b1 := place(bob, ids[0], engine.Buy, engine.Yes, 40, 3)
	a2 := place(r.account, ids[0], engine.Buy, engine.Yes, 40, 7)
	no := place(r.account, ids[1], engine.Buy, engine.No, 55, 4)
	closed := place(r.account, ids[2], engine.Buy, engine.Yes, 30, 1)
	// The market closed as a lifecycle change leaves it: its orders cancelled, in Postgres.
	if _, err := r.st.Pool.Exec(ctx, `update orders set status = 'CANCELLED' where market_id = $1`, ids[2]); err != nil {
		t.Fatal(err)
	}
	if _, err := r.st.Pool.Exec(ctx, `update markets set status = 'CLOSED' where id = $1`, ids[2]); err != nil {
		t.Fatal(err)
	}
	refs := []exchange.OrderRef{a1, b1, a2, no, closed}
	got := front.QueuePositions(ctx, r.account, refs)
	want := []exchange.QueuePosition{{Side: engine.Buy, Outcome: engine.Yes, Price: 40, Ahead: 0, Level: 15},
		{}, {Side: engine.Buy, Outcome: engine.Yes, Price: 40, Ahead: 8, Level: 15}, {Side: engine.Buy, Outcome: engine.No, Price: 55, Ahead: 0, Level: 4}}
	for i, w := range want {
		if i == 1 {
			continue
		}
		if p := got[i].Position; got[i].Err != nil || p.Side != w.Side || p.Outcome != w.Outcome || p.Price != w.Price || p.Ahead != w.Ahead || p.Level != w.Level {
			t.Errorf("order %d: %+v, want %+v", i, got[i], w)
		}
	}
	if !errors.Is(got[1].Err, domain.ErrNotYourOrder) {
		t.Errorf("another account's order: %v", got[1].Err)
	}
	if !errors.Is(got[4].Err, domain.ErrOrderNotOpen) || !strings.Contains(got[4].Err.Error(), "CANCELLED") {
		t.Errorf("an order of a closed market: %v", got[4].Err)
	}
	second.older.Store(true)
	got = front.QueuePositions(ctx, r.account, refs[2:4])
	if got[0].Err != nil || got[0].Position.Ahead != 8 || !errors.Is(got[1].Err, exchange.ErrUnavailable) {
		t.Errorf("with shard-2 of the release before: %+v", got)
	}
}
