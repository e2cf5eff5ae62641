package feed

import (
	"bytes"
	"fmt"
	"time"

	json "github.com/goccy/go-json"
	"github.com/google/uuid"
)

// Terms is what an "accepted" or "amended" event of an account's feed says of its order's terms:
// what the audit needs to replay an order an amend moved (internal/audit), and what the pruning
// of the feeds keeps of it, for ever, in order_terms (migration 037, feedlog.PruneEvents). Both
// read it from a batch with TermsOf, the one reader of that rule.
type Terms struct {
	Order    uuid.UUID
	Amended  bool      // false: the terms accepted; true: an amend's
	Price    int       // the order's price after the event
	Quantity int64     // its quantity after the event
	Filled   int64     // how much had filled when the event ran (0 when accepted)
	At       time.Time // when its batch committed, to the microsecond as Postgres keeps times
	// Priority: the number of the market's order sequence an amend that moved the order took
	// (AccountEvent.Priority); 0 for one that kept its place, for the terms accepted, and for
	// every amend kept before the feeds told it (then the audit deduces the number).
	Priority int64
	// Where the event sits: its number in its account's stream of Holder, and its batch's
	// position (account_events.position), which orders an order's events across streams.
	Holder   string
	Seq      int64
	Position int64
}

// termsEvent is the part of an AccountEvent that TermsOf reads.
type termsEvent struct {
	Type  string `json:"type"`
	Order *struct {
		ID             uuid.UUID `json:"id"`
		Price          int       `json:"price"`
		Quantity       int64     `json:"quantity"`
		FilledQuantity int64     `json:"filledQuantity"`
	} `json:"order"`
	At       time.Time `json:"at"`
	Priority int64     `json:"priority"`
}

var (
	acceptedType = []byte(`"` + AccountAccepted + `"`)
	amendedType  = []byte(`"` + AccountAmended + `"`)
)

// TermsOf reads the terms events of a batch of an account's feed (its events as kept, numbered
// first to last in the stream of holder, at position): those of every order, oldest first, and
// none without reading the events when the batch holds neither type.
func TermsOf(raw []byte, holder string, first, last, position int64) ([]Terms, error) {
	if !bytes.Contains(raw, acceptedType) && !bytes.Contains(raw, amendedType) {
		return nil, nil
	}
	var events []termsEvent
	if err := json.Unmarshal(raw, &events); err != nil {
		return nil, fmt.Errorf("reading the events %d to %d of stream %q: %w", first, last, holder, err)
	}
	if int64(len(events)) != last-first+1 {
		return nil, fmt.Errorf("reading the events %d to %d of stream %q: the batch holds %d", first, last, holder, len(events))
	}
	var out []Terms
	for i, e := range events {
		if e.Order == nil || e.Type != AccountAccepted && e.Type != AccountAmended {
			continue
		}
		out = append(out, Terms{Order: e.Order.ID, Amended: e.Type == AccountAmended, Price: e.Order.Price,
			Quantity: e.Order.Quantity, Filled: e.Order.FilledQuantity, At: e.At.Truncate(time.Microsecond),
			Priority: e.Priority, Holder: holder, Seq: first + int64(i), Position: position})
	}
	return out, nil
}
