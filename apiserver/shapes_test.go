package apiserver

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	ginjson "github.com/gin-gonic/gin/codec/json"
	"github.com/google/uuid"

	"github.com/pmx-dev/pmx/engine"
	"github.com/pmx-dev/pmx/internal/apijson"
	"github.com/pmx-dev/pmx/internal/records"
)

// shapeRows are rows with every field set, awkward text included, and the JSON the API answers
// for each: the contract's shapes, pinned byte for byte.
func shapeRows() map[string]struct {
	v    any
	want string
} {
	id := uuid.MustParse("0190f6a4-7a55-7c3e-9b1d-2f0e8c4b5a6f")
	mk := uuid.MustParse("123e4567-e89b-12d3-a456-426614174000")
	t1 := time.Date(2027, 1, 31, 18, 0, 0, 123456000, time.UTC)
	t2 := time.Date(2027, 6, 1, 0, 0, 0, 0, time.UTC)
	url, txt, yes, price, shard := "https://example.com/q?a=1&b=<2>", "Rain? <b>\"yes\"</b> & \u2028 é", "YES", 42, "shard-1"
	order := records.Order{ID: id, MarketID: mk, Side: "BUY", Outcome: "NO", Price: 57, Quantity: 10, FilledQuantity: 7,
		Status: engine.StatusPartiallyFilled, CreatedAt: t1, UpdatedAt: t2, Seq: 99, AccountID: 7}
	trade := records.Trade{ID: id, MarketID: mk, Outcome: "NO", Side: "BUY", Price: 57, Quantity: 3, YesPrice: 43, CreatedAt: t1, Fee: 2}
	const orderJSON = `{"id":"0190f6a4-7a55-7c3e-9b1d-2f0e8c4b5a6f","marketId":"123e4567-e89b-12d3-a456-426614174000","side":"BUY","outcome":"NO","price":57,"quantity":10,"filledQuantity":7,"status":"PARTIALLY_FILLED","createdAt":"2027-01-31T18:00:00.123456Z","updatedAt":"2027-06-01T00:00:00Z","timeInForce":"GTC","expiresAt":null,"postOnly":false,"clientOrderId":null,"cancelReason":null`
	coid, reason := "quote:7.b-1", "EXPIRED"
	gtd := records.Order{ID: id, MarketID: mk, Side: "SELL", Outcome: "YES", Price: 60, Quantity: 5, Status: engine.StatusCancelled,
		CreatedAt: t1, UpdatedAt: t2, Seq: 100, AccountID: 7, TimeInForce: "GTD", ExpiresAt: &t2, PostOnly: true,
		SelfTrade: "CANCEL_INCOMING", ClientOrderID: &coid, CancelReason: &reason}
	const tradeJSON = `{"id":"0190f6a4-7a55-7c3e-9b1d-2f0e8c4b5a6f","marketId":"123e4567-e89b-12d3-a456-426614174000","outcome":"NO","side":"BUY","price":57,"quantity":3,"yesPrice":43,"createdAt":"2027-01-31T18:00:00.123456Z"}`
	return map[string]struct {
		v    any
		want string
	}{
		"market": {MarketOf(&records.Market{ID: mk, URL: &url, Question: txt, Description: &txt, Category: "a&b", Status: "RESOLVED",
			ClosesAt: &t1, ResolvesAt: &t2, Resolved: true, Outcome: &yes, LabelA: "<A>", LabelB: "B", CreatedAt: t1, UpdatedAt: t2,
			Name: &txt, LastTradePrice: &price, Shard: &shard, Epoch: 3, Fees: engine.Fees{Taker: 700, Maker: -175}}),
			`{"id":"123e4567-e89b-12d3-a456-426614174000","url":"https://example.com/q?a=1\u0026b=\u003c2\u003e","question":"Rain? \u003cb\u003e\"yes\"\u003c/b\u003e \u0026 \u2028 é","description":"Rain? \u003cb\u003e\"yes\"\u003c/b\u003e \u0026 \u2028 é","category":"a\u0026b","status":"RESOLVED","closesAt":"2027-01-31T18:00:00.123456Z","resolvesAt":"2027-06-01T00:00:00Z","resolved":true,"outcome":"YES","labelA":"\u003cA\u003e","labelB":"B","createdAt":"2027-01-31T18:00:00.123456Z","updatedAt":"2027-06-01T00:00:00Z","fees":{"takerBps":700,"makerBps":-175}}`},
		"market with nulls": {MarketOf(&records.Market{ID: mk, Question: "Q", Category: "c", Status: "OPEN", LabelA: "Yes", LabelB: "No", CreatedAt: t1, UpdatedAt: t1}),
			`{"id":"123e4567-e89b-12d3-a456-426614174000","url":null,"question":"Q","description":null,"category":"c","status":"OPEN","closesAt":null,"resolvesAt":null,"resolved":false,"outcome":null,"labelA":"Yes","labelB":"No","createdAt":"2027-01-31T18:00:00.123456Z","updatedAt":"2027-01-31T18:00:00.123456Z","fees":{"takerBps":0,"makerBps":0}}`},
		"order": {orderOf(&order), orderJSON + `}`},
		"order, every field": {orderOf(&gtd),
			`{"id":"0190f6a4-7a55-7c3e-9b1d-2f0e8c4b5a6f","marketId":"123e4567-e89b-12d3-a456-426614174000","side":"SELL","outcome":"YES","price":60,"quantity":5,"filledQuantity":0,"status":"CANCELLED","createdAt":"2027-01-31T18:00:00.123456Z","updatedAt":"2027-06-01T00:00:00Z","timeInForce":"GTD","expiresAt":"2027-06-01T00:00:00Z","postOnly":true,"clientOrderId":"quote:7.b-1","cancelReason":"EXPIRED"}`},
		"placed":          {placedOf(&records.PlacedOrder{Order: order, Trades: []records.Trade{trade}}), orderJSON + `,"trades":[` + strings.TrimSuffix(tradeJSON, "}") + `,"fee":2}]}`},
		"placed, no fill": {placedOf(&records.PlacedOrder{Order: order, Trades: []records.Trade{}}), orderJSON + `,"trades":[]}`},
		"trade":           {tradeOf(&trade), tradeJSON},
		"orders, none":    {listOf([]records.Order(nil), orderOf), `[]`},
		"position": {positionOf(&records.Position{ID: id, MarketID: mk, MarketQuestion: txt, MarketStatus: "OPEN", Outcome: "YES",
			Quantity: 5, LockedQuantity: 2, CreatedAt: t1, UpdatedAt: t2}),
			`{"id":"0190f6a4-7a55-7c3e-9b1d-2f0e8c4b5a6f","marketId":"123e4567-e89b-12d3-a456-426614174000","marketQuestion":"Rain? \u003cb\u003e\"yes\"\u003c/b\u003e \u0026 \u2028 é","marketStatus":"OPEN","outcome":"YES","quantity":5,"lockedQuantity":2,"createdAt":"2027-01-31T18:00:00.123456Z","updatedAt":"2027-06-01T00:00:00Z"}`},
		"book": {OrderBook{Yes: apijson.ViewOf(&engine.View{Bids: []engine.Level{{Price: 55, Quantity: 10, Total: 10}}, LastTradePrice: 55}, 10),
			No: apijson.ViewOf(&engine.View{}, 10), Seq: 7},
			`{"orderBookYes":{"bids":[{"price":55,"quantity":10,"total":10}],"asks":[],"lastTradePrice":55},"orderBookNo":{"bids":[],"asks":[],"lastTradePrice":null},"seq":7}`},
		"heartbeat":           {Heartbeat{Armed: true, Deadline: &t1}, `{"armed":true,"deadline":"2027-01-31T18:00:00.123456Z"}`},
		"heartbeat, disarmed": {Heartbeat{}, `{"armed":false,"deadline":null}`},
		"account": {accountOfRow(&records.Account{UID: id, Name: "ada", Available: 999_000, Locked: 1_000, CreatedAt: t1, ID: 7}),
			`{"id":"0190f6a4-7a55-7c3e-9b1d-2f0e8c4b5a6f","name":"ada","available":999000,"locked":1000,"createdAt":"2027-01-31T18:00:00.123456Z"}`},
	}
}

// TestShapes pins the JSON of every shape, as gin's codec (c.JSON) and encoding/json write it.
func TestShapes(t *testing.T) {
	for name, c := range shapeRows() {
		got, err := ginjson.API.Marshal(c.v)
		if err != nil {
			t.Fatal(err)
		}
		ref, _ := json.Marshal(c.v)
		if string(got) != c.want || string(ref) != c.want {
			t.Errorf("%s:\n codec         %s\n encoding/json %s\n want          %s", name, got, ref, c.want)
		}
	}
}
