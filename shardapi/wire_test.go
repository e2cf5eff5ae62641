package shardapi

import (
	"encoding/json"
	"strings"
	"testing"

	ginjson "github.com/gin-gonic/gin/codec/json"
	"github.com/google/uuid"

	"github.com/pmx-dev/pmx/store"
)

// The internal API carries a placement's sequence number, which the public shape of an order
// leaves out, through the JSON codec gin uses on the shard and encoding/json on the router.
func TestPlacedWireCarriesSeq(t *testing.T) {
	placed := store.PlacedOrder{Order: store.Order{ID: store.NewID(), MarketID: uuid.New(), Side: "BUY", Outcome: "YES",
		Price: 40, Quantity: 10, FilledQuantity: 4, Status: "PARTIALLY_FILLED", Seq: 17, AccountID: 3},
		Trades: []store.Trade{}}
	raw, err := ginjson.API.Marshal(placedWire{PlacedOrder: placed, Seq: placed.Seq})
	if err != nil {
		t.Fatal(err)
	}
	var got placedWire
	if err := json.Unmarshal(raw, &got); err != nil {
		t.Fatal(err)
	}
	want := placed
	want.AccountID = 0 // not sent: the router knows it
	if got.Seq != 17 || got.PlacedOrder.Seq != 0 || got.ID != want.ID || got.Status != want.Status ||
		got.FilledQuantity != 4 || got.MarketID != want.MarketID || got.Trades == nil {
		t.Fatalf("decoded %+v from %s", got, raw)
	}
	public, _ := json.Marshal(placed)
	if strings.Contains(string(public), "seq") {
		t.Fatalf("the public shape now shows the sequence number: %s", public)
	}
}
