package feed

import (
	"fmt"
	"time"

	json "github.com/goccy/go-json"

	"github.com/pmx-dev/pmx/internal/apijson"
)

// Each account has a feed of its own beside the markets': its private events, in one stream per
// holder, the shard that committed them (docs/architecture.md §11; "" the stream every feed began
// with), each numbered by a gapless sequence of the holder's own in commit order. A batch writes
// an account's events as one row, a JSON array of AccountEvent without their numbers, which are
// the row's first to last in its holder's stream (store.AccountEvents); they are read with GET
// /account/events and followed live on the WebSocket's orders and fills channels, from a Cursor
// (cursor.go): the last seq seen of each stream. Reads merge the streams in the order their rows
// took their positions, so that a market that moved from one shard to another keeps its events in
// commit order; the live hub keeps that order too (accounttopic.go).

// Account event types.
const (
	AccountAccepted  = "accepted"  // an order was accepted (Order: as it stood then, before any fill)
	AccountAmended   = "amended"   // an order's price or quantity changed (Order: its new terms, before any fill they made)
	AccountFill      = "fill"      // an order of the account traded (Fill, and the order's FilledQuantity and Status after it)
	AccountCancelled = "cancelled" // an order left the book unfilled in part or whole (Order: with its cancelReason)
	AccountSettled   = "settled"   // a market settled and paid a holding (Settlement)
	AccountConverted = "converted" // NO shares of an event's outcomes became YES of the others and cash (Conversion)
)

// Private channels, of the connection's account.
const (
	ChannelOrders = "orders" // every event of the account's feed, gapless
	ChannelFills  = "fills"  // its fill events
)

// AccountEvent is one event of an account's feed. Every order event (accepted, amended,
// cancelled) carries the order's whole state right after the event, so a client keeps its orders
// by replacing each with the latest; a fill event carries the fill and what it changed of its
// order, its filled quantity and status (and its updatedAt, the event's at): kept small, as
// fills are most of the events.
type AccountEvent struct {
	// Where the event sits in the feed: its seq in the stream of holder Stream. Both are left out
	// where kept (the row's holder and numbers give them), and Stream on the wire for the stream "".
	Stream     string              `json:"stream,omitempty"`
	Seq        int64               `json:"seq,omitempty"`
	Type       string              `json:"type"`
	Order      *apijson.Order      `json:"order,omitempty"`
	Fill       *apijson.Fill       `json:"fill,omitempty"`
	Settlement *apijson.Settlement `json:"settlement,omitempty"`
	Conversion *apijson.Conversion `json:"conversion,omitempty"`
	// Fill events: the order's filled quantity and status after the fill.
	FilledQuantity int64     `json:"filledQuantity,omitempty"`
	Status         string    `json:"status,omitempty"`
	At             time.Time `json:"at"` // when the change committed (the batch's time)
	// Priority, on an "amended" event of an amend that moved its order to the back of its price
	// (engine.OrderState.AmendKeepsPriority false): the number of its market's order sequence the
	// move took, its place in time, as orders.priority keeps its last move's. Kept in the stored
	// batch (EncodeAccount, as "priority"), for pmx audit to replay every move at its number
	// (TermsOf); never sent to a client: DecodeAccount leaves it 0, and the API's JSON has no
	// such field.
	Priority int64 `json:"-"`
}

// keptEvent is an AccountEvent as a batch keeps it when it holds a move's number.
type keptEvent struct {
	*AccountEvent
	Priority int64 `json:"priority,omitempty"`
}

// EncodeAccount writes an account's events, without their numbers, as a JSON array: each as
// the API's JSON has it, and an amend's move with its number as "priority" (AccountEvent.Priority).
func EncodeAccount(events []AccountEvent) ([]byte, error) {
	moved := false
	for i := range events {
		if events[i].Priority != 0 {
			moved = true
			break
		}
	}
	if !moved { // most batches: no wrapping
		return json.Marshal(events)
	}
	kept := make([]keptEvent, len(events))
	for i := range events {
		kept[i] = keptEvent{&events[i], events[i].Priority}
	}
	return json.Marshal(kept)
}

// DecodeAccount reads the events of an account's batch and numbers them first to last in the
// stream of holder.
func DecodeAccount(raw []byte, holder string, first, last int64) ([]AccountEvent, error) {
	var events []AccountEvent
	if err := json.Unmarshal(raw, &events); err != nil {
		return nil, err
	}
	if int64(len(events)) != last-first+1 {
		return nil, fmt.Errorf("%d events numbered %d to %d", len(events), first, last)
	}
	for i := range events {
		events[i].Stream, events[i].Seq = holder, first+int64(i)
	}
	return events, nil
}

// AccountEventsMessage carries events of the connection's account, each stream's in sequence
// order: on the orders channel every event (gapless: each seq is the one after the last of its
// stream), on the fills channel its fills. Cursor is where the feed stands after them: what to
// resume from.
type AccountEventsMessage struct {
	Type    string         `json:"type"` // "accountEvents"
	Channel string         `json:"channel"`
	Events  []AccountEvent `json:"events"`
	Cursor  string         `json:"cursor"`
}

// AccountPage reads an account's batches, in the order of their positions
// (AccountLog.AccountEventsAfter), into its events after the cursor after, at most limit, and
// those of the streams of upTo only, each up to its seq there (nil: every stream, to its end);
// next is the cursor after them.
func AccountPage(batches []Batch, after Cursor, limit int, upTo Cursor) (events []AccountEvent, next Cursor, err error) {
	events, next = []AccountEvent{}, after.Clone()
	for _, b := range batches {
		got, err := DecodeAccount(b.Events, b.Holder, b.First, b.Last)
		if err != nil {
			return nil, nil, fmt.Errorf("while reading the events %d to %d of stream %q: %w", b.First, b.Last, b.Holder, err)
		}
		for _, e := range got {
			if len(events) == limit {
				return events, next, nil
			}
			if e.Seq <= next[e.Stream] || upTo != nil && e.Seq > upTo[e.Stream] {
				continue
			}
			events = append(events, e)
			next[e.Stream] = e.Seq
		}
	}
	return events, next, nil
}
