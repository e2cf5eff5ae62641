package shardclient

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/pmx-dev/pmx/engine"
	"github.com/pmx-dev/pmx/internal/exchange"
	"github.com/pmx-dev/pmx/internal/pgtest"
	"github.com/pmx-dev/pmx/internal/shard"
	"github.com/pmx-dev/pmx/internal/shardproto"
	"github.com/pmx-dev/pmx/internal/shardserver"
	"github.com/pmx-dev/pmx/internal/store"
	"github.com/pmx-dev/pmx/internal/storetest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

const validateToken = "validate-test-internal-token"

// internalRig is a shard's internal API over real HTTP, on a migrated database with an OPEN
// market and a funded account.
type internalRig struct {
	t       testing.TB
	url     string
	st      *store.Store
	sh      *shard.Shard
	market  uuid.UUID
	account int64
}

func newInternalRig(t testing.TB) *internalRig { return newNamedInternalRig(t, "") }

// newNamedInternalRig is newInternalRig with a shard of that name (unnamed when ""), as pmx shard
// runs one.
func newNamedInternalRig(t testing.TB, name string) *internalRig {
	t.Helper()
	st := storetest.New(t)
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	sh := shard.New(shard.Config{Store: st, Name: name, Logger: log})
	t.Cleanup(sh.Stop)
	srv := httptest.NewServer(shardserver.Server{Shard: sh, Store: st, Token: validateToken, Logger: log}.Handler())
	t.Cleanup(srv.Close)
	return &internalRig{t: t, url: srv.URL, st: st, sh: sh, market: storetest.Market(t, st),
		account: storetest.Account(t, st, "alice", 1_000_000)}
}

// do sends body (JSON text) to path and returns the status and the answer.
func (r *internalRig) do(method, path, body string) (int, []byte) {
	r.t.Helper()
	req, err := http.NewRequest(method, r.url+path, strings.NewReader(body))
	if err != nil {
		r.t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+validateToken)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		r.t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		r.t.Fatal(err)
	}
	return resp.StatusCode, raw
}

// orders is how many orders Postgres holds.
func (r *internalRig) orders() int {
	r.t.Helper()
	var n int
	if err := r.st.Pool.QueryRow(context.Background(), `select count(*) from orders`).Scan(&n); err != nil {
		r.t.Fatal(err)
	}
	return n
}

// apiError is the API's error shape, as the internal API answers a refused request.
type apiError struct {
	Error   string `json:"error"`
	Details struct {
		Code  string `json:"code"`
		Field string `json:"field"`
	} `json:"details"`
}

// place is a placement's JSON, as a front sends it, with fields replaced or added by extra
// (JSON text of more members, which win as encoding/json takes the last of a repeated key).
func (r *internalRig) place(extra string) string {
	base := fmt.Sprintf(`"Account":%d,"Market":%q,"Side":1,"Outcome":1,"Price":40,"Quantity":2,"Placement":"p"`, r.account, r.market)
	if extra != "" {
		base += "," + extra
	}
	return "{" + base + "}"
}

// TestInternalRequestsValidated sends the internal API every kind of bad request and checks each
// is refused with 400 in the API's error shape naming its field, and that nothing was committed;
// the shard then still places a good order. On 14b4c8f a price of 0 or 150 answered 500, Side 7
// placed a SELL, a NUL in a client order id failed the batch.
func TestInternalRequestsValidated(t *testing.T) {
	r := newInternalRig(t)
	seq := `"Account":%d,"Market":%q,"Seq":1`
	cancel := func(extra string) string {
		return "{" + fmt.Sprintf(seq, r.account, r.market) + extra + "}"
	}
	amend := func(extra string) string {
		return "{" + fmt.Sprintf(seq, r.account, r.market) + `,"Side":1,"Outcome":1` + extra + "}"
	}
	for _, c := range []struct {
		name, path, body string
		field            string // "" for a body that is not the call's JSON
	}{
		{"price 0", shardproto.PathPlace, r.place(`"Price":0`), "Price"},
		{"price 150", shardproto.PathPlace, r.place(`"Price":150`), "Price"},
		{"price -1", shardproto.PathPlace, r.place(`"Price":-1`), "Price"},
		{"side 7", shardproto.PathPlace, r.place(`"Side":7`), "Side"},
		{"side 0", shardproto.PathPlace, r.place(`"Side":0`), "Side"},
		{"outcome 3", shardproto.PathPlace, r.place(`"Outcome":3`), "Outcome"},
		{"outcome 0", shardproto.PathPlace, r.place(`"Outcome":0`), "Outcome"},
		{"quantity 0", shardproto.PathPlace, r.place(`"Quantity":0`), "Quantity"},
		{"quantity -5", shardproto.PathPlace, r.place(`"Quantity":-5`), "Quantity"},
		{"quantity past the engine's bound", shardproto.PathPlace, r.place(`"Quantity":1099511627777`), "Quantity"},
		{"time in force 9", shardproto.PathPlace, r.place(`"TimeInForce":9`), "TimeInForce"},
		{"self-trade mode 5", shardproto.PathPlace, r.place(`"SelfTrade":5`), "SelfTrade"},
		{"post-only IOC", shardproto.PathPlace, r.place(`"TimeInForce":2,"PostOnly":true`), "PostOnly"},
		{"GTD without expiry", shardproto.PathPlace, r.place(`"TimeInForce":1`), "ExpiresAt"},
		{"expiry without GTD", shardproto.PathPlace, r.place(`"ExpiresAt":"2099-01-01T00:00:00Z"`), "ExpiresAt"},
		{"expiry past year 9999 in UTC", shardproto.PathPlace, r.place(`"TimeInForce":1,"ExpiresAt":"9999-12-31T23:59:59-23:59"`), "ExpiresAt"},
		{"expiry before 1970", shardproto.PathPlace, r.place(`"TimeInForce":1,"ExpiresAt":"1969-12-31T23:59:59Z"`), "ExpiresAt"},
		{"NUL in a client order id", shardproto.PathPlace, r.place(`"ClientOrderID":"a\u0000b"`), "ClientOrderID"},
		{"space in a client order id", shardproto.PathPlace, r.place(`"ClientOrderID":"a b"`), "ClientOrderID"},
		{"client order id of 65", shardproto.PathPlace, r.place(`"ClientOrderID":"` + strings.Repeat("x", 65) + `"`), "ClientOrderID"},
		{"NUL in the fingerprint", shardproto.PathPlace, r.place(`"Placement":"a\u0000b"`), "Placement"},
		{"long fingerprint", shardproto.PathPlace, r.place(`"Placement":"` + strings.Repeat("x", 257) + `"`), "Placement"},
		{"account 0", shardproto.PathPlace, r.place(`"Account":0`), "Account"},
		{"nil market", shardproto.PathPlace, r.place(`"Market":"00000000-0000-0000-0000-000000000000"`), "Market"},
		{"not a UUID", shardproto.PathPlace, r.place(`"Market":"market"`), ""},
		{"side as a string", shardproto.PathPlace, r.place(`"Side":"BUY"`), ""},
		{"not JSON", shardproto.PathPlace, `{"Price":`, ""},
		{"too large", shardproto.PathPlace, r.place(`"Pad":"` + strings.Repeat("x", shardproto.MaxBody) + `"`), ""},

		{"cancel seq 0", shardproto.PathCancel, cancel(`,"Seq":0`), "Seq"},
		{"cancel account -1", shardproto.PathCancel, cancel(`,"Account":-1`), "Account"},
		{"cancel nil market", shardproto.PathCancel, cancel(`,"Market":"00000000-0000-0000-0000-000000000000"`), "Market"},
		{"cancel for a heartbeat", shardproto.PathCancel, cancel(`,"Reason":7`), "Reason"},
		{"cancel reason 200", shardproto.PathCancel, cancel(`,"Reason":200`), "Reason"},

		{"amend nothing", shardproto.PathAmend, amend(``), "Price"},
		{"amend price 150", shardproto.PathAmend, amend(`,"Price":150`), "Price"},
		{"amend remaining -1", shardproto.PathAmend, amend(`,"Remaining":-1`), "Remaining"},
		{"amend side 7", shardproto.PathAmend, amend(`,"Side":7,"Price":30`), "Side"},
		{"amend seq 0", shardproto.PathAmend, amend(`,"Seq":0,"Price":30`), "Seq"},

		{"cancel-all no markets", shardproto.PathCancelAll, fmt.Sprintf(`{"account":%d,"markets":[]}`, r.account), "markets"},
		{"cancel-all nil market", shardproto.PathCancelAll, fmt.Sprintf(`{"account":%d,"markets":["00000000-0000-0000-0000-000000000000"]}`, r.account), "markets"},
		{"cancel-all account 0", shardproto.PathCancelAll, fmt.Sprintf(`{"account":0,"markets":[%q]}`, r.market), "Account"},

		{"transition nil market", shardproto.PathTransition, `{"market":"00000000-0000-0000-0000-000000000000","action":"close"}`, "market"},
		{"transition unknown action", shardproto.PathTransition, fmt.Sprintf(`{"market":%q,"action":"settle"}`, r.market), "action"},
		{"transition action as Go names it", shardproto.PathTransition, fmt.Sprintf(`{"market":%q,"action":"Close"}`, r.market), "action"},

		{"place-many none", shardproto.PathPlaceMany, `[]`, ""},
		{"place-many too many", shardproto.PathPlaceMany, "[" + strings.TrimSuffix(strings.Repeat(r.place("")+",", shardproto.MaxMany+1), ",") + "]", ""},
		{"cancel-many too many", shardproto.PathCancelMany, "[" + strings.TrimSuffix(strings.Repeat(cancel("")+",", shardproto.MaxMany+1), ",") + "]", ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			status, raw := r.do(http.MethodPost, c.path, c.body)
			var e apiError
			if err := json.Unmarshal(raw, &e); status != http.StatusBadRequest || err != nil || e.Error == "" || e.Details.Code == "" {
				t.Fatalf("%d %.300s, want 400 in the API's error shape", status, raw)
			}
			if c.field != "" && e.Details.Field != c.field {
				t.Errorf("field %q (%s), want %q", e.Details.Field, e.Error, c.field)
			}
		})
	}
	for _, q := range []string{"market=x", "market=00000000-0000-0000-0000-000000000000", "market={" + r.market.String() + "}",
		"market=" + r.market.String() + "&epoch=x", "market=" + r.market.String() + "&epoch=-1"} {
		if status, raw := r.do(http.MethodGet, shardproto.PathBook+"?"+q, ""); status != http.StatusBadRequest || !bytes.Contains(raw, []byte(`"details"`)) {
			t.Errorf("GET book?%s: %d %s, want 400 in the API's error shape", q, status, raw)
		}
	}
	if n := r.orders(); n != 0 {
		t.Fatalf("%d orders committed by refused requests", n)
	}
	if status, raw := r.do(http.MethodPost, shardproto.PathPlace, r.place(`"ClientOrderID":"good-1"`)); status != http.StatusCreated {
		t.Fatalf("a good placement after them: %d %s", status, raw)
	}
	if err := r.sh.CheckBooks(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// TestInternalBatchKeepsTheGood checks that a bad request in a many-at-once call is refused on its
// own, with its result's error, and the others are carried out: on 14b4c8f a NUL in one client
// order id failed the batch and every placement in it.
func TestInternalBatchKeepsTheGood(t *testing.T) {
	r := newInternalRig(t)
	body := "[" + r.place(`"ClientOrderID":"first"`) + "," + r.place(`"ClientOrderID":"bad\u0000id"`) + "," +
		r.place(`"Price":150`) + "," + r.place(`"ClientOrderID":"last"`) + "]"
	status, raw := r.do(http.MethodPost, shardproto.PathPlaceMany, body)
	var results []shardproto.PlaceResultV1
	if err := json.Unmarshal(raw, &results); status != http.StatusOK || err != nil || len(results) != 4 {
		t.Fatalf("place-many: %d %s (%v), want 200 with 4 results", status, raw, err)
	}
	for i, field := range []string{"", "ClientOrderID", "Price", ""} {
		res := results[i]
		switch {
		case field == "" && (res.Error != nil || res.Placed == nil):
			t.Errorf("result %d: %+v, want placed", i, res)
		case field != "" && (res.Placed != nil || res.Error == nil || res.Error.Refusal == nil || res.Error.Refusal.Field != field || res.Error.Details == nil):
			t.Errorf("result %d: %s, want refused naming %s", i, raw, field)
		}
	}
	if n := r.orders(); n != 2 {
		t.Fatalf("%d orders committed, want the 2 good ones", n)
	}
	var ids []string
	if err := r.st.Pool.QueryRow(context.Background(), `select array_agg(client_order_id order by client_order_id) from orders`).Scan(&ids); err != nil {
		t.Fatal(err)
	}
	if strings.Join(ids, ",") != "first,last" {
		t.Fatalf("client order ids committed: %v", ids)
	}

	cancels := fmt.Sprintf(`[{"Account":%d,"Market":%q,"Seq":0},{"Account":%d,"Market":%q,"Seq":%d}]`,
		r.account, r.market, r.account, r.market, results[0].Placed.Seq)
	status, raw = r.do(http.MethodPost, shardproto.PathCancelMany, cancels)
	var cancelled []shardproto.CancelResultV1
	if err := json.Unmarshal(raw, &cancelled); status != http.StatusOK || err != nil || len(cancelled) != 2 {
		t.Fatalf("cancel-many: %d %s (%v)", status, raw, err)
	}
	if cancelled[0].Error == nil || cancelled[0].Error.Refusal == nil || cancelled[0].Error.Refusal.Field != "Seq" || cancelled[1].Order == nil {
		t.Fatalf("cancel-many: %s, want the first refused (Seq) and the second cancelled", raw)
	}
	if err := r.sh.CheckBooks(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// TestRouterRequestsPass checks that what a front sends through the Router, shaped as the public
// API's handlers shape it, passes the internal API's checks: every call of the Exchange, with the
// optional fields set.
func TestRouterRequestsPass(t *testing.T) {
	ctx := context.Background()
	r := newNamedInternalRig(t, "shard-1")
	st, now := r.st, time.Now()
	if _, err := st.Register(ctx, "shard-1", strings.TrimPrefix(r.url, "http://"), ""); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Assign(ctx, r.market, "shard-1"); err != nil {
		t.Fatal(err)
	}
	rt := &Router{Store: st, Token: validateToken}
	expires := now.Add(time.Hour).UTC().Truncate(time.Microsecond)
	place := func(price int, coid string) exchange.PlaceRequest {
		return exchange.PlaceRequest{Account: r.account, Market: r.market, Side: engine.Buy, Outcome: engine.Yes, Price: price, Quantity: 3,
			TimeInForce: engine.GTD, ExpiresAt: expires, PostOnly: true, SelfTrade: engine.CancelIncoming, ClientOrderID: coid,
			Placement: fmt.Sprintf("%s BUY YES %d 3 GTD %s true CANCEL_INCOMING", r.market, price, expires.Format(time.RFC3339Nano))}
	}
	first, err := rt.Place(ctx, place(10, "router-1"))
	if err != nil {
		t.Fatal(err)
	}
	many := rt.PlaceMany(ctx, []exchange.PlaceRequest{place(11, "router-2"), place(12, ""),
		{Account: r.account, Market: r.market, Side: engine.Buy, Outcome: engine.No, Price: 5, Quantity: 1, TimeInForce: engine.IOC, Placement: "p"}})
	for i, res := range many {
		if res.Err != nil {
			t.Fatalf("PlaceMany %d: %v", i, res.Err)
		}
	}
	if _, err := rt.Amend(ctx, exchange.AmendRequest{Account: r.account, Market: r.market, Seq: first.Seq, Side: engine.Buy, Outcome: engine.Yes, Price: 9}); err != nil {
		t.Fatalf("Amend the price: %v", err)
	}
	if _, err := rt.Amend(ctx, exchange.AmendRequest{Account: r.account, Market: r.market, Seq: first.Seq, Side: engine.Buy, Outcome: engine.Yes, Remaining: 2}); err != nil {
		t.Fatalf("Amend the quantity: %v", err)
	}
	if _, err := rt.Cancel(ctx, exchange.CancelRequest{Account: r.account, Market: r.market, Seq: first.Seq}); err != nil {
		t.Fatalf("Cancel: %v", err)
	}
	for i, res := range rt.CancelMany(ctx, []exchange.CancelRequest{{Account: r.account, Market: r.market, Seq: many[0].Placed.Seq}}) {
		if res.Err != nil {
			t.Fatalf("CancelMany %d: %v", i, res.Err)
		}
	}
	if _, err := rt.OrderBook(ctx, r.market); err != nil {
		t.Fatalf("OrderBook: %v", err)
	}
	if cancelled, err := rt.CancelAll(ctx, r.account, []uuid.UUID{r.market}); err != nil || len(cancelled) != 1 {
		t.Fatalf("CancelAll: %d orders, %v; want the one left", len(cancelled), err)
	}
}

// secondShard is "shard-2", a shard beside the rig's registered with it, behind a server that
// counts its calls by path and, once older is set, answers 404 to one call, as a shard of the
// release before that call does.
type secondShard struct {
	older atomic.Bool
	mu    sync.Mutex
	calls map[string]int
}

// startSecondShard starts shard-2, whose server refuses newCall while older is set, and registers
// both shards at their addresses.
func startSecondShard(t *testing.T, r *internalRig, newCall string) *secondShard {
	t.Helper()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	sh := shard.New(shard.Config{Store: r.st, Name: "shard-2", Logger: log})
	t.Cleanup(sh.Stop)
	h := shardserver.Server{Shard: sh, Store: r.st, Token: validateToken, Logger: log}.Handler()
	s := &secondShard{calls: map[string]int{}}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		s.mu.Lock()
		s.calls[req.URL.Path]++
		s.mu.Unlock()
		if s.older.Load() && req.URL.Path == newCall {
			http.NotFound(w, req)
			return
		}
		h.ServeHTTP(w, req)
	}))
	t.Cleanup(srv.Close)
	for name, url := range map[string]string{"shard-1": r.url, "shard-2": srv.URL} {
		if _, err := r.st.Register(context.Background(), name, strings.TrimPrefix(url, "http://"), ""); err != nil {
			t.Fatal(err)
		}
	}
	return s
}

// takeCalls returns shard-2's calls since the last take, by path.
func (s *secondShard) takeCalls() map[string]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	calls := s.calls
	s.calls = map[string]int{}
	return calls
}
