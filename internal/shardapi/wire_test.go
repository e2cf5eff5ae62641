package shardapi

import (
	"encoding/json"
	"reflect"
	"testing"
	"time"

	ginjson "github.com/gin-gonic/gin/codec/json"
	"github.com/google/uuid"

	"github.com/pmx-dev/pmx/engine"
	"github.com/pmx-dev/pmx/internal/records"
	"github.com/pmx-dev/pmx/internal/store"
)

// The internal API carries the rows a shard answers with whole — the sequence number and account
// that the public shape of an order leaves out included — through the JSON codec gin uses on the
// shard and encoding/json on the router.
func TestPlacedOrderCrossesWhole(t *testing.T) {
	placed := records.PlacedOrder{Order: records.Order{ID: store.NewID(), MarketID: uuid.New(), Side: "BUY", Outcome: "YES",
		Price: 40, Quantity: 10, FilledQuantity: 4, Status: engine.StatusPartiallyFilled, Seq: 17, AccountID: 3,
		CreatedAt: time.Date(2027, 1, 2, 3, 4, 5, 6000, time.UTC), UpdatedAt: time.Date(2027, 1, 2, 3, 4, 5, 7000, time.UTC)},
		Trades: []records.Trade{{ID: store.NewID(), Price: 40, Quantity: 4, YesPrice: 40}}}
	raw, err := ginjson.API.Marshal(placed)
	if err != nil {
		t.Fatal(err)
	}
	var got records.PlacedOrder
	if err := json.Unmarshal(raw, &got); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, placed) {
		t.Fatalf("decoded %+v from %s, want %+v", got, raw, placed)
	}
}
