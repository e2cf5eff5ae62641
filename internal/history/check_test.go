package history

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pmx-dev/pmx/internal/apijson"
	"github.com/pmx-dev/pmx/internal/pgtest"
	"github.com/pmx-dev/pmx/internal/store"
	"github.com/pmx-dev/pmx/internal/storetest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// fixture is a small log in Postgres and the ids its history names.
type fixture struct {
	st                   *store.Store
	pool                 *pgxpool.Pool
	makerID, takerID     int64 // the accounts' ids in Postgres
	market               uuid.UUID
	makerAcct, takerAcct uuid.UUID
	bid, take, other     uuid.UUID // the maker's bid, the taker's IOC, the maker's other bid
	trade                uuid.UUID
	t0                   time.Time
}

// newFixture writes the log of a small run: a maker rests BUY YES 47 × 5 (client order id m.1)
// and BUY YES 45 × 3; a taker's IOC BUY NO 55 × 2 takes 2 of the first at YES 47 (NO 53); the
// maker cancels the rest of its bid.
func newFixture(t *testing.T) *fixture {
	st := storetest.New(t)
	ctx := context.Background()
	f := &fixture{st: st, pool: st.Pool, market: storetest.Market(t, st), bid: uuid.New(), take: uuid.New(), other: uuid.New(), trade: uuid.New(),
		t0: time.Now().Add(-time.Minute).Truncate(time.Millisecond)}
	maker, taker := storetest.Account(t, st, "maker", 1e6), storetest.Account(t, st, "taker", 1e6)
	f.makerID, f.takerID = maker, taker
	for _, a := range []struct {
		id  int64
		uid *uuid.UUID
	}{{maker, &f.makerAcct}, {taker, &f.takerAcct}} {
		if err := st.Pool.QueryRow(ctx, `select uid from accounts where id = $1`, a.id).Scan(a.uid); err != nil {
			t.Fatal(err)
		}
	}
	at := f.at(0)
	orders := []struct {
		id                      uuid.UUID
		seq, account            int64
		outcome                 string
		price                   int
		quantity, filled        int64
		status, tif, cid, cause any
	}{
		{f.bid, 1, maker, "YES", 47, 5, 2, "PARTIALLY_FILLED_CANCELLED", "GTC", "m.1", "USER"},
		{f.take, 2, taker, "NO", 55, 2, 2, "FILLED", "IOC", nil, nil},
		{f.other, 3, maker, "YES", 45, 3, 0, "OPEN", "GTC", nil, nil},
	}
	for _, o := range orders {
		var placement any
		if o.cid != nil {
			placement = "p"
		}
		if _, err := st.Pool.Exec(ctx, `insert into orders (id, market_id, seq, account_id, side, outcome, price, quantity, filled_quantity,
			status, created_at, updated_at, time_in_force, client_order_id, placement, cancel_reason)
			values ($1, $2, $3, $4, 'BUY', $5, $6, $7, $8, $9, $10, $10, $11, $12, $13, $14)`,
			o.id, f.market, o.seq, o.account, o.outcome, o.price, o.quantity, o.filled, o.status, at, o.tif, o.cid, placement, o.cause); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := st.Pool.Exec(ctx, `insert into trades (id, market_id, seq, kind, yes_price, quantity, taker_order_seq, maker_order_seq,
		taker_account_id, maker_account_id, taker_side, taker_outcome, taker_price, created_at)
		values ($1, $2, 1, 'MINT', 47, 2, 2, 1, $3, $4, 'BUY', 'NO', 55, $5)`, f.trade, f.market, taker, maker, f.at(2500)); err != nil {
		t.Fatal(err)
	}
	return f
}

// at is t0 plus some microseconds.
func (f *fixture) at(us int) time.Time { return f.t0.Add(time.Duration(us) * time.Microsecond) }

// op is an operation of the fixture's run, from µs call to µs ret.
func (f *fixture) op(client string, kind Kind, req Request, call, ret int, ans Answer) Op {
	acct := f.makerAcct
	if strings.HasPrefix(client, "taker") {
		acct = f.takerAcct
	}
	return Op{Client: client, Account: acct, Kind: kind, Req: req, Call: f.at(call), Return: f.at(ret), Ans: ans}
}

// order is an answer with an order.
func (f *fixture) order(http int, id uuid.UUID, req Request, status string, filled int64) Answer {
	var cid *string
	if req.ClientOrderID != "" {
		cid = &req.ClientOrderID
	}
	return Answer{HTTP: http, Order: &apijson.Order{ID: id, MarketID: f.market, Side: req.Side, Outcome: req.Outcome, Price: req.Price,
		Quantity: req.Quantity, FilledQuantity: filled, Status: status, ClientOrderID: cid}}
}

// history is the fixture's run as its clients saw it, which the log bears out.
func (f *fixture) history() []Op {
	bid := Request{MarketID: f.market, Side: "BUY", Outcome: "YES", Price: 47, Quantity: 5, ClientOrderID: "m.1", TimeInForce: "GTC"}
	other := Request{MarketID: f.market, Side: "BUY", Outcome: "YES", Price: 45, Quantity: 3, TimeInForce: "GTC"}
	take := Request{MarketID: f.market, Side: "BUY", Outcome: "NO", Price: 55, Quantity: 2, TimeInForce: "IOC"}
	placed := f.order(201, f.bid, bid, "OPEN", 0)
	placed.FillsReported = true
	otherPlaced := f.order(201, f.other, other, "OPEN", 0)
	otherPlaced.FillsReported = true
	taken := f.order(201, f.take, take, "FILLED", 2)
	taken.Fills, taken.FillsReported = []apijson.Trade{{ID: f.trade, MarketID: f.market, Outcome: "NO", Side: "BUY", Price: 53, Quantity: 2, YesPrice: 47}}, true
	return []Op{
		f.op("maker", Place, bid, 0, 1000, placed),
		f.op("maker", Place, other, 1100, 1200, otherPlaced),
		f.op("taker", Place, take, 2000, 3000, taken),
		f.op("maker", Read, Request{OrderID: f.bid}, 4000, 5000, f.order(200, f.bid, bid, "PARTIALLY_FILLED", 2)),
		f.op("maker", Cancel, Request{OrderID: f.bid}, 6000, 7000, f.order(200, f.bid, bid, "PARTIALLY_FILLED_CANCELLED", 2)),
		f.op("maker", Place, bid, 8000, 9000, Answer{HTTP: 503, Code: "outcome_unknown"}),
		f.op("maker", Place, bid, 10000, 11000, f.order(200, f.bid, bid, "PARTIALLY_FILLED_CANCELLED", 2)),
		f.op("taker", Cancel, Request{OrderID: f.take}, 12000, 13000, Answer{HTTP: 400, Code: "order_not_open"}),
	}
}

// TestCheck checks a history the log bears out, then histories with one thing wrong each, which
// Check must report by name: the checks can fail.
func TestCheck(t *testing.T) {
	f := newFixture(t)
	check := func(t *testing.T, h []Op) *Report {
		t.Helper()
		r, err := Check(context.Background(), h, f.pool)
		if err != nil {
			t.Fatal(err)
		}
		if r.Ops != len(h) || r.Orders != 3 || r.Trades != 1 {
			t.Errorf("checked %d operations, %d orders, %d trades; want %d, 3, 1", r.Ops, r.Orders, r.Trades, len(h))
		}
		for _, v := range r.Violations {
			t.Log(v)
		}
		return r
	}
	if r := check(t, f.history()); len(r.Violations) > 0 || r.Fills != 1 || r.Linearized != 3 {
		t.Fatalf("a correct history: %d violations, %d fills found, %d orders linearized; want 0, 1, 3", len(r.Violations), r.Fills, r.Linearized)
	}

	cases := []struct {
		name  string
		wrong func(h []Op) []Op
		want  []string // the checks that must fail, each on the order named (uuid.Nil: any)
		order uuid.UUID
	}{
		{"a fill reported at the wrong price", func(h []Op) []Op {
			h[2].Ans.Fills[0].Price, h[2].Ans.Fills[0].YesPrice = 52, 48
			return h
		}, []string{"fills"}, f.take},
		{"a fill reported that is not in the log", func(h []Op) []Op {
			h[2].Ans.Fills = append(h[2].Ans.Fills, apijson.Trade{ID: uuid.New(), Price: 53, YesPrice: 47, Quantity: 1})
			return h
		}, []string{"fills"}, f.take},
		{"a cancel answered CANCELLED for an order that then filled", func(h []Op) []Op {
			bid := h[0].Req
			cancel := f.op("maker", Cancel, Request{OrderID: f.bid}, 1300, 1400, f.order(200, f.bid, bid, "CANCELLED", 0))
			return append([]Op{h[0], h[1], h[2], cancel}, h[6:]...) // no read, and no later cancel
		}, []string{"final", "linearizable"}, f.bid},
		{"two orders for one client order id", func(h []Op) []Op {
			h[6].Ans.Order.ID = f.other
			return h
		}, []string{"client-order-id"}, uuid.Nil},
		{"a placement acknowledged and not in Postgres", func(h []Op) []Op {
			h[1].Ans.Order.ID = uuid.New()
			return h
		}, []string{"placement"}, uuid.Nil},
		{"a read going backwards", func(h []Op) []Op {
			back := f.op("maker", Read, Request{OrderID: f.bid}, 5500, 5800, f.order(200, f.bid, h[0].Req, "OPEN", 0))
			return append(h[:4:4], append([]Op{back}, h[4:]...)...)
		}, []string{"monotonic-reads", "linearizable"}, f.bid},
		{"another client reading an older state", func(h []Op) []Op {
			back := f.op("maker-2", Read, Request{OrderID: f.bid}, 5500, 5800, f.order(200, f.bid, h[0].Req, "OPEN", 0))
			return append(h[:4:4], append([]Op{back}, h[4:]...)...)
		}, []string{"linearizable"}, f.bid},
		{"an amend acknowledged and lost", func(h []Op) []Op {
			req := h[1].Req
			req.OrderID, req.Price = f.other, 46
			return append(h, f.op("maker", Amend, req, 14000, 15000, f.order(200, f.other, req, "OPEN", 0)))
		}, []string{"amend"}, f.other},
		{"order_not_open for an open order", func(h []Op) []Op {
			h[7].Req.OrderID, h[7].Client, h[7].Account = f.other, "maker", f.makerAcct
			return h
		}, []string{"final"}, f.other},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := check(t, tc.wrong(f.history())).Violations
			for _, want := range tc.want {
				found := false
				for _, v := range got {
					found = found || v.Check == want && (tc.order == uuid.Nil || v.Order == tc.order) && strings.Contains(v.String(), want)
				}
				if !found {
					t.Errorf("no %s violation reported (order %s)", want, tc.order)
				}
			}
		})
	}
}

// TestRecorder records operations from many goroutines and reads their answers' bodies.
func TestRecorder(t *testing.T) {
	var r Recorder
	done := make(chan struct{})
	for i := range 8 {
		go func() {
			defer func() { done <- struct{}{} }()
			for range 100 {
				p := r.Begin("c", uuid.Nil, Place, RequestOf(map[string]any{"marketId": uuid.Nil, "side": "BUY", "price": 40 + i, "quantity": 1}))
				p.End(&http.Response{StatusCode: 201}, []byte(`{"id":"`+uuid.NewString()+`","status":"FILLED","filledQuantity":1,"trades":[{"price":40,"quantity":1}]}`), nil)
			}
		}()
	}
	for range 8 {
		<-done
	}
	h := r.History()
	if len(h) != 800 {
		t.Fatalf("%d operations recorded, want 800", len(h))
	}
	if op := h[0]; !op.Acked() || !op.Ans.FillsReported || len(op.Ans.Fills) != 1 || op.Ans.Order.FilledQuantity != 1 || op.Req.Side != "BUY" || op.Return.Before(op.Call) {
		t.Errorf("recorded %+v", op)
	}
	p := r.Begin("c", uuid.Nil, Cancel, Request{})
	p.End(&http.Response{StatusCode: 503}, []byte(`{"error":"x","details":{"code":"outcome_unknown"}}`), nil)
	p = r.Begin("c", uuid.Nil, Cancel, Request{})
	p.End(nil, nil, errors.New("connection refused"))
	h = r.History()
	if a, b := h[800], h[801]; a.Ans.Code != "outcome_unknown" || !a.Unknown() || b.Ans.HTTP != 0 || !b.Unknown() || b.Ans.Err == "" {
		t.Errorf("recorded %+v and %+v", a, b)
	}
}

// TestCheckQueue checks the queue check on the log of one taker, an IOC BUY NO 55 × 3, meeting
// three makers' bids, BUY YES 47, 47 and 48 × 1 (seqs 1, 2, 3): in the book's order (48, then the
// 47s by time) it passes; a worse price first, or the later 47 first, fails.
func TestCheckQueue(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	prices := map[int64]int{1: 47, 2: 47, 3: 48}
	for _, tc := range []struct {
		name  string
		order []int64 // the makers' seqs in trade order
		want  bool    // a queue violation
	}{
		{"in the book's order", []int64{3, 1, 2}, false},
		{"a worse price first", []int64{1, 3, 2}, true},
		{"a later order at one price first", []int64{3, 2, 1}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			market := storetest.Market(t, f.st)
			var h []Op
			for seq := int64(1); seq <= 3; seq++ {
				id := uuid.New()
				if _, err := f.pool.Exec(ctx, `insert into orders (id, market_id, seq, account_id, side, outcome, price, quantity, filled_quantity,
					status, created_at, updated_at) values ($1, $2, $3, $4, 'BUY', 'YES', $5, 1, 1, 'FILLED', $6, $6)`,
					id, market, seq, f.makerID, prices[seq], f.at(0)); err != nil {
					t.Fatal(err)
				}
				req := Request{MarketID: market, Side: "BUY", Outcome: "YES", Price: prices[seq], Quantity: 1, TimeInForce: "GTC"}
				ans := f.order(201, id, req, "OPEN", 0)
				ans.Order.MarketID, ans.FillsReported = market, true
				h = append(h, f.op("maker", Place, req, int(seq)*100, int(seq)*100+50, ans))
			}
			taker := uuid.New()
			if _, err := f.pool.Exec(ctx, `insert into orders (id, market_id, seq, account_id, side, outcome, price, quantity, filled_quantity,
				status, created_at, updated_at, time_in_force) values ($1, $2, 4, $3, 'BUY', 'NO', 55, 3, 3, 'FILLED', $4, $4, 'IOC')`,
				taker, market, f.takerID, f.at(1000)); err != nil {
				t.Fatal(err)
			}
			take := Request{MarketID: market, Side: "BUY", Outcome: "NO", Price: 55, Quantity: 3, TimeInForce: "IOC"}
			taken := f.order(201, taker, take, "FILLED", 3)
			taken.Order.MarketID, taken.FillsReported = market, true
			for i, seq := range tc.order {
				id, yes := uuid.New(), prices[seq]
				if _, err := f.pool.Exec(ctx, `insert into trades (id, market_id, seq, kind, yes_price, quantity, taker_order_seq, maker_order_seq,
					taker_account_id, maker_account_id, taker_side, taker_outcome, taker_price, created_at)
					values ($1, $2, $3, 'MINT', $4, 1, 4, $5, $6, $7, 'BUY', 'NO', 55, $8)`,
					id, market, i+1, yes, seq, f.takerID, f.makerID, f.at(1500)); err != nil {
					t.Fatal(err)
				}
				taken.Fills = append(taken.Fills, apijson.Trade{ID: id, MarketID: market, Outcome: "NO", Side: "BUY", Price: 100 - yes, Quantity: 1, YesPrice: yes})
			}
			h = append(h, f.op("taker", Place, take, 1000, 2000, taken))
			r, err := Check(ctx, h, f.pool)
			if err != nil {
				t.Fatal(err)
			}
			var queue int
			for _, v := range r.Violations {
				t.Log(v)
				if v.Check == "queue" && v.Order == taker {
					queue++
				} else {
					t.Errorf("unexpected: %s", v)
				}
			}
			if got := queue > 0; got != tc.want {
				t.Errorf("%d queue violations, want any: %v", queue, tc.want)
			}
		})
	}
}
