package shardproto

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	ginjson "github.com/gin-gonic/gin/codec/json"
	"github.com/google/uuid"

	"github.com/pmx-dev/pmx/engine"
	"github.com/pmx-dev/pmx/internal/domain"
	"github.com/pmx-dev/pmx/internal/exchange"
	"github.com/pmx-dev/pmx/internal/feed"
	"github.com/pmx-dev/pmx/internal/records"
)

// v1Case is one message of version 1: the value a process works with, the message it is sent
// as, and how a receiver decodes the message back into such a value.
type v1Case struct {
	name   string
	value  any                         // what the sender has
	wire   func() any                  // what it sends (v1.go's conversion)
	decode func([]byte) (any, error)   // what the receiver makes of the bytes
	check  func(t *testing.T, got any) // nil: got must equal value
}

func decodeAs[W any, V any](convert func(W) V) func([]byte) (any, error) {
	return func(raw []byte) (any, error) {
		var w W
		err := json.Unmarshal(raw, &w)
		return convert(w), err
	}
}

func v1Cases() []v1Case {
	at := time.Date(2027, 1, 2, 3, 4, 5, 6000, time.UTC)
	later := at.Add(90 * time.Minute)
	m := uuid.MustParse("0b6f6f4e-3c1e-4d7a-9b2e-8f1a2c3d4e5f")
	other := uuid.MustParse("6a1d2c3b-4e5f-4a7b-8c9d-0e1f2a3b4c5d")
	coid, placement, reason := "client-1", "fingerprint", "USER"
	place := exchange.PlaceRequest{Account: 7, Market: m, Side: engine.Sell, Outcome: engine.No, Price: 41, Quantity: 12,
		TimeInForce: engine.GTD, ExpiresAt: later, PostOnly: true, SelfTrade: engine.CancelIncoming, ClientOrderID: coid, Placement: placement}
	cancel := exchange.CancelRequest{Account: 7, Market: m, Seq: 19, Reason: engine.ReasonUser}
	amend := exchange.AmendRequest{Account: 7, Market: m, Seq: 19, Side: engine.Buy, Outcome: engine.Yes, Price: 44, Remaining: 3}
	order := records.Order{ID: uuid.MustParse("11111111-2222-4333-8444-555555555555"), MarketID: m, Side: "SELL", Outcome: "NO",
		Price: 41, Quantity: 12, FilledQuantity: 5, Status: engine.StatusPartiallyFilledCancelled, CreatedAt: at, UpdatedAt: later,
		Seq: 19, AccountID: 7, TimeInForce: "GTD", ExpiresAt: &later, PostOnly: true, SelfTrade: "CANCEL_INCOMING",
		ClientOrderID: &coid, Placement: &placement, CancelReason: &reason, Priority: 3}
	plain := records.Order{ID: uuid.MustParse("22222222-3333-4444-8555-666666666666"), MarketID: m, Side: "BUY", Outcome: "YES",
		Price: 60, Quantity: 1, Status: engine.StatusOpen, CreatedAt: at, UpdatedAt: at, Seq: 20, AccountID: 8}
	placed := records.PlacedOrder{Order: order, Trades: []records.Trade{{ID: uuid.MustParse("33333333-4444-4555-8666-777777777777"),
		MarketID: m, Outcome: "NO", Side: "SELL", Price: 41, Quantity: 5, YesPrice: 59, CreatedAt: at}}}
	snap := &exchange.Snapshot{Status: domain.MarketOpen, Epoch: 4, Seq: 88, Depth: engine.Depth{
		Yes: engine.View{Bids: []engine.Level{{Price: 40, Quantity: 3, Total: 3}, {Price: 39, Quantity: 2, Total: 5}},
			Asks: []engine.Level{{Price: 45, Quantity: 1, Total: 1}}, LastTradePrice: 42},
		No: engine.View{Bids: []engine.Level{{Price: 55, Quantity: 1, Total: 1}}, LastTradePrice: 58}}}
	refusal := &domain.Error{Kind: domain.Conflict, Code: "insufficient_funds", Field: "quantity", Message: "not enough cash"}
	batch := feed.Batch{Market: m, First: 5, Last: 6, Status: "CLOSED", Events: json.RawMessage(`[{"type":"status"}]`)}

	same := func(v any) func() any { return func() any { return v } }
	return []v1Case{
		{name: "place", value: place, wire: func() any { return PlaceToV1(place) }, decode: decodeAs(PlaceV1.Request)},
		{name: "cancel", value: cancel, wire: func() any { return CancelToV1(cancel) }, decode: decodeAs(CancelV1.Request)},
		{name: "amend", value: amend, wire: func() any { return AmendToV1(amend) }, decode: decodeAs(AmendV1.Request)},
		{name: "cancel-all", value: CancelAllV1{Account: 7, Markets: []uuid.UUID{m, other}},
			wire: same(CancelAllV1{Account: 7, Markets: []uuid.UUID{m, other}}), decode: decodeAs(func(w CancelAllV1) CancelAllV1 { return w })},
		{name: "order", value: order, wire: func() any { return OrderToV1(order) }, decode: decodeAs(OrderV1.Order)},
		{name: "order-plain", value: plain, wire: func() any { return OrderToV1(plain) }, decode: decodeAs(OrderV1.Order)},
		{name: "placed", value: placed, wire: func() any { return PlacedToV1(placed) }, decode: decodeAs(PlacedV1.Placed)},
		{name: "placed-no-trades", value: records.PlacedOrder{Order: plain}, wire: func() any { return PlacedToV1(records.PlacedOrder{Order: plain}) },
			decode: decodeAs(PlacedV1.Placed)},
		{name: "orders", value: []records.Order{order, plain}, wire: func() any { return OrdersToV1([]records.Order{order, plain}) },
			decode: decodeAs(OrdersOf)},
		{name: "book", value: *snap, wire: func() any { return SnapshotToV1(snap) }, decode: decodeAs(SnapshotV1.Snapshot)},
		{name: "book-settled", value: exchange.Snapshot{Status: domain.MarketResolved, Epoch: 2, Seq: 9},
			wire: func() any { return SnapshotToV1(&exchange.Snapshot{Status: domain.MarketResolved, Epoch: 2, Seq: 9}) }, decode: decodeAs(SnapshotV1.Snapshot)},
		{name: "refused", value: error(refusal), wire: func() any { _, w, _ := ErrorOf(refusal); return w },
			decode: decodeAs(func(w ErrorV1) error { return w.Err(409) }),
			check: func(t *testing.T, got any) {
				if e := (*domain.Error)(nil); !errors.As(got.(error), &e) || *e != *refusal {
					t.Errorf("decoded %#v, want %#v", got, refusal)
				}
			}},
		{name: "not-owner", value: exchange.ErrNotOwner, wire: func() any { _, w, _ := ErrorOf(exchange.ErrNotOwner); return w },
			decode: decodeAs(func(w ErrorV1) error { return w.Err(421) }),
			check: func(t *testing.T, got any) {
				if !errors.Is(got.(error), exchange.ErrNotOwner) {
					t.Errorf("decoded %v, want exchange.ErrNotOwner", got)
				}
			}},
		{name: "place-many", value: []PlaceResultV1{{Placed: ptr(PlacedToV1(placed))}, {Error: RefusalResult(refusal)}},
			wire:   same([]PlaceResultV1{{Placed: ptr(PlacedToV1(placed))}, {Error: RefusalResult(refusal)}}),
			decode: decodeAs(func(w []PlaceResultV1) []PlaceResultV1 { return w })},
		{name: "cancel-many", value: []CancelResultV1{{Order: ptr(OrderToV1(plain))}, {Error: RefusalResult(refusal)}},
			wire:   same([]CancelResultV1{{Order: ptr(OrderToV1(plain))}, {Error: RefusalResult(refusal)}}),
			decode: decodeAs(func(w []CancelResultV1) []CancelResultV1 { return w })},
		{name: "feed-batch", value: batch, wire: func() any { return FeedBatchToV1(batch) }, decode: decodeAs(FeedBatchV1.Batch)},
		{name: "transition", value: TransitionV1{Market: m, Action: "resolve YES"}, wire: func() any { return TransitionToV1(m, domain.ResolveYes) },
			decode: decodeAs(func(w TransitionV1) TransitionV1 { return w })},
		// The books call (books.go), an optional call added to version 1 (issue 51).
		{name: "books", value: BooksV1{Markets: []uuid.UUID{m, other}, Epochs: []int64{4, 7}},
			wire: same(BooksV1{Markets: []uuid.UUID{m, other}, Epochs: []int64{4, 7}}), decode: decodeAs(func(w BooksV1) BooksV1 { return w })},
		{name: "books-answer", value: []exchange.Snapshot{*snap}, wire: func() any { return booksAnswer(snap) },
			decode: decodeAs(func(w []BookResultV1) []BookResultV1 { return w }),
			check: func(t *testing.T, got any) {
				ws := got.([]BookResultV1)
				if len(ws) != 2 || ws[0].Book == nil || !reflect.DeepEqual(ws[0].Book.Snapshot(), *snap) ||
					ws[1].Error == nil || !errors.Is(ws[1].Error.Err(http.StatusMisdirectedRequest), exchange.ErrNotOwner) {
					t.Errorf("decoded %+v, want the book and not_owner", ws)
				}
			}},
	}
}

func ptr[T any](v T) *T { return &v }

// booksAnswer is a books call's answer of snap and a market the shard does not own, as the shard
// sends it.
func booksAnswer(snap *exchange.Snapshot) []BookResultV1 {
	_, notOwner, _ := ErrorOf(exchange.ErrNotOwner)
	return []BookResultV1{{Book: ptr(SnapshotToV1(snap))}, {Error: &notOwner}}
}

// TestV1Golden holds version 1 of the internal protocol to the bytes in testdata/v1:
// what the builds before the protocol had a version sent (their JSON of the same values, with the
// Go field names of the time), so that this build and the one before it read each other. A field
// renamed in a process's type changes nothing here; one renamed in v1.go, or an enum renumbered,
// fails. The files are never rewritten: a change to them is a new version.
func TestV1Golden(t *testing.T) {
	for _, c := range v1Cases() {
		t.Run(c.name, func(t *testing.T) {
			want, err := os.ReadFile(filepath.Join("testdata", "v1", c.name+".json"))
			if err != nil {
				t.Fatal(err)
			}
			want = bytes.TrimSpace(want)
			// The shard encodes with gin's codec, the router with encoding/json: both must send
			// the same bytes.
			for codec, marshal := range map[string]func(any) ([]byte, error){"encoding/json": json.Marshal, "gin": ginjson.API.Marshal} {
				got, err := marshal(c.wire())
				if err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(got, want) {
					t.Errorf("%s sends\n%s\nversion 1 is\n%s", codec, got, want)
				}
			}
			got, err := c.decode(want)
			if err != nil {
				t.Fatalf("decoding %s: %v", want, err)
			}
			if c.check != nil {
				c.check(t, got)
			} else if !reflect.DeepEqual(got, c.value) {
				t.Errorf("decoded\n%#v\nwant\n%#v", got, c.value)
			}
		})
	}
}

// TestTransitionActions checks that every lifecycle action has its spelling on the wire and
// comes back as itself.
func TestTransitionActions(t *testing.T) {
	for _, a := range []domain.MarketAction{domain.CloseMarket, domain.ReopenMarket, domain.ResolveYes, domain.ResolveNo, domain.CancelMarket} {
		w := TransitionToV1(uuid.New(), a)
		if got, ok := w.MarketAction(); !ok || got != a {
			t.Errorf("%q travels as %q and comes back as %q (%t)", a, w.Action, got, ok)
		}
	}
	if _, ok := (TransitionV1{Action: "settle"}).MarketAction(); ok {
		t.Error(`"settle" read as an action`)
	}
}

// Both ends tell a version error from any other: its message names both versions, and it is
// exchange.ErrUnavailable (the caller answers "try again") and never an outcome unknown.
func TestVersionError(t *testing.T) {
	e := &VersionError{Peer: "the shard at 10.0.0.1:8090", PeerSpeak: []int{2, 3}, Speaks: []int{1}}
	if msg := e.Error(); !bytes.Contains([]byte(msg), []byte("speaks version 2 or 3, this build speaks 1")) {
		t.Errorf("message %q does not name both versions", msg)
	}
	if !errors.Is(e, exchange.ErrUnavailable) || errors.Is(e, exchange.ErrOutcomeUnknown) {
		t.Error("a version error must be exchange.ErrUnavailable and not exchange.ErrOutcomeUnknown")
	}
	for _, c := range []struct {
		header  string
		version int
		ok      bool
	}{{"", 1, true}, {"1", 1, true}, {"2", 2, true}, {"x", 0, false}, {"0", 0, false}, {"-1", -1, false}} {
		h := http.Header{}
		if c.header != "" {
			h.Set(ProtocolHeader, c.header)
		}
		if v, ok := VersionOf(h); ok != c.ok || (ok && v != c.version) {
			t.Errorf("header %q: version %d (%t), want %d (%t)", c.header, v, ok, c.version, c.ok)
		}
	}
}

// TestV1OrderGroup: the order group id, an addition to version 1, travels with a placement and
// an order, and is left out of the message when there is none, so that a message without one is the
// bytes TestV1Golden holds and a shard of the release before reads the rest of it as ever.
func TestV1OrderGroup(t *testing.T) {
	group := uuid.New()
	p := exchange.PlaceRequest{Account: 7, Market: uuid.New(), Side: engine.Buy, Outcome: engine.Yes, Price: 40, Quantity: 3, OrderGroupID: group}
	raw, err := json.Marshal(PlaceToV1(p))
	if err != nil {
		t.Fatal(err)
	}
	var back PlaceV1
	if err := json.Unmarshal(raw, &back); err != nil || back.Request() != p {
		t.Fatalf("a placement in group %s came back as %+v (%v) from %s", group, back.Request(), err, raw)
	}
	o := records.Order{ID: uuid.New(), OrderGroupID: &group}
	raw, err = json.Marshal(OrderToV1(o))
	if err != nil {
		t.Fatal(err)
	}
	var order OrderV1
	if err := json.Unmarshal(raw, &order); err != nil || order.Order().OrderGroupID == nil || *order.Order().OrderGroupID != group {
		t.Fatalf("an order of group %s came back as %+v (%v)", group, order.Order(), err)
	}
	p.OrderGroupID = uuid.Nil
	o.OrderGroupID = nil
	for _, v := range []any{PlaceToV1(p), OrderToV1(o)} {
		if raw, _ := json.Marshal(v); bytes.Contains(raw, []byte("OrderGroupID")) {
			t.Errorf("a message without a group names one: %s", raw)
		}
	}
}
