package shardclient

import (
	"context"
	"errors"
	"net/http"
	"reflect"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/pmx-dev/pmx/engine"
	"github.com/pmx-dev/pmx/internal/domain"
	"github.com/pmx-dev/pmx/internal/exchange"
	"github.com/pmx-dev/pmx/internal/shardproto"
	"github.com/pmx-dev/pmx/internal/storetest"
)

// TestOrderBooksThroughRouter reads the books of markets on two shards, one of them not OPEN, at
// once (issue 51): each is what OrderBook reads for it, and the shard holding two of them is called
// once. A shard of the release before (404 to the books call) has its books read one by one; an
// unknown market fails the read as OrderBook's does.
func TestOrderBooksThroughRouter(t *testing.T) {
	ctx := context.Background()
	r := newNamedInternalRig(t, "shard-1")
	second := startSecondShard(t, r, shardproto.PathBooks)
	ids := []uuid.UUID{r.market, storetest.Market(t, r.st), storetest.Market(t, r.st), storetest.Market(t, r.st), storetest.Market(t, r.st)}
	for i, id := range ids {
		if _, err := r.st.Assign(ctx, id, []string{"shard-1", "shard-2"}[i%2]); err != nil {
			t.Fatal(err)
		}
	}
	front := &Router{Store: r.st, Token: validateToken}
	for i, id := range ids[:4] {
		if _, err := front.Place(ctx, exchange.PlaceRequest{Account: r.account, Market: id, Side: engine.Buy, Outcome: engine.Yes,
			Price: 40 + i, Quantity: int64(1 + i)}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := r.st.Pool.Exec(ctx, `update markets set status = 'CLOSED', last_trade_price = 37 where id = $1`, ids[4]); err != nil {
		t.Fatal(err)
	}
	// read reads the books at once and checks each against OrderBook's, returning shard-2's calls
	// during the read at once.
	read := func(what string) map[string]int {
		t.Helper()
		second.takeCalls()
		got, err := front.OrderBooks(ctx, ids)
		if err != nil || len(got) != len(ids) {
			t.Fatalf("%s: %d books (%v)", what, len(got), err)
		}
		during := second.takeCalls()
		for i, id := range ids {
			want, err := front.OrderBook(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got[i], want) {
				t.Errorf("%s: market %d's book %+v, OrderBook reads %+v", what, i, got[i], want)
			}
		}
		if b := got[0].Depth.Yes.Bids; len(b) != 1 || b[0].Price != 40 || got[4].Status != domain.MarketClosed || got[4].Depth.Yes.LastTradePrice != 37 {
			t.Errorf("%s: the first book %+v, the closed one %+v", what, got[0], got[4])
		}
		return during
	}
	if c := read("both shards of this release"); c[shardproto.PathBooks] != 1 || c[shardproto.PathBook] != 0 {
		t.Errorf("shard-2, owning two of the markets, was called %v; want one books call", c)
	}
	second.older.Store(true)
	if c := read("shard-2 of the release before"); c[shardproto.PathBooks] != 1 || c[shardproto.PathBook] != 2 {
		t.Errorf("shard-2 of the release before was called %v; want the books call refused, then a book call per market", c)
	}
	if _, err := front.OrderBooks(ctx, []uuid.UUID{r.market, uuid.New()}); !errors.Is(err, domain.ErrUnknownMarket) {
		t.Errorf("the books of an unknown market: %v, want %v", err, domain.ErrUnknownMarket)
	}
}

// TestBooksRefused checks the books call's own refusals: no markets, a market twice, and epochs
// that do not go with the markets.
func TestBooksRefused(t *testing.T) {
	r := newInternalRig(t)
	m := r.market.String()
	for _, body := range []string{
		`{"markets":[],"epochs":[]}`,
		`{"markets":["` + m + `","` + m + `"],"epochs":[1,1]}`,
		`{"markets":["` + m + `"],"epochs":[]}`,
		`{"markets":["` + m + `"],"epochs":[-1]}`,
	} {
		if status, raw := r.do(http.MethodPost, shardproto.PathBooks, body); status != http.StatusBadRequest || !strings.Contains(string(raw), `"details"`) {
			t.Errorf("%s: %d %s, want 400 in the API's error shape", body, status, raw)
		}
	}
}
