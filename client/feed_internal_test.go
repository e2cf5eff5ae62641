package client

import (
	"encoding/json"
	"errors"
	"testing"
)

// TestFeedSequenceRule is the rule a Feed applies to each message of a subscription: events after
// the last seq, one after another on gapless channels (book, orders), in order on the others
// (trades, fills); what was sent again dropped; a book snapshot starting over.
func TestFeedSequenceRule(t *testing.T) {
	const market = "6f1c2a8e-3b4d-4c5e-9f60-718293a4b5c6"
	events := func(seqs ...int) json.RawMessage {
		var es []map[string]any
		for _, s := range seqs {
			es = append(es, map[string]any{"seq": s, "type": "level", "side": "bid", "price": 50, "quantity": 1, "at": "2026-11-25T00:00:00Z"})
		}
		b, _ := json.Marshal(es)
		return b
	}
	seq := func(n int) *int { return &n }
	type step struct {
		m       wireMessage
		wantSeq int
		kept    int   // events delivered
		err     error // ErrGap or nil
	}
	tests := []struct {
		name  string
		steps []step
	}{
		{"book from a snapshot", []step{
			{wireMessage{Type: "snapshot", Channel: "book", MarketID: market, Seq: seq(5)}, 5, 0, nil},
			{wireMessage{Type: "events", Channel: "book", MarketID: market, Events: events(6, 7)}, 7, 2, nil},
			{wireMessage{Type: "events", Channel: "book", MarketID: market, Events: events(8)}, 8, 1, nil},
		}},
		{"book gap", []step{
			{wireMessage{Type: "snapshot", Channel: "book", MarketID: market, Seq: seq(5)}, 5, 0, nil},
			{wireMessage{Type: "events", Channel: "book", MarketID: market, Events: events(6, 8)}, 0, 0, ErrGap},
		}},
		{"book resent events dropped", []step{
			{wireMessage{Type: "snapshot", Channel: "book", MarketID: market, Seq: seq(5)}, 5, 0, nil},
			{wireMessage{Type: "events", Channel: "book", MarketID: market, Events: events(4, 5, 6)}, 6, 1, nil},
		}},
		{"book snapshot starts over", []step{
			{wireMessage{Type: "snapshot", Channel: "book", MarketID: market, Seq: seq(5)}, 5, 0, nil},
			{wireMessage{Type: "snapshot", Channel: "book", MarketID: market, Seq: seq(50)}, 50, 0, nil},
			{wireMessage{Type: "events", Channel: "book", MarketID: market, Events: events(51)}, 51, 1, nil},
		}},
		{"trades skip", []step{
			{wireMessage{Type: "events", Channel: "trades", MarketID: market, Events: events(3, 9)}, 9, 2, nil},
			{wireMessage{Type: "events", Channel: "trades", MarketID: market, Events: events(9, 20)}, 20, 1, nil},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := (&Client{}).Feed()
			for i, s := range tt.steps {
				out, err := f.accept(s.m)
				if !errors.Is(err, s.err) {
					t.Fatalf("step %d: %v, want %v", i, err, s.err)
				}
				if err != nil {
					continue
				}
				if out.Seq != s.wantSeq || len(out.Events) != s.kept {
					t.Fatalf("step %d: seq %d with %d events, want %d with %d", i, out.Seq, len(out.Events), s.wantSeq, s.kept)
				}
			}
		})
	}

	t.Run("orders gap", func(t *testing.T) {
		f := (&Client{}).Feed()
		ok := wireMessage{Type: "accountEvents", Channel: "orders", Cursor: "v2.AAs", Events: json.RawMessage(`[{"seq":11,"type":"accepted","at":"2026-11-25T00:00:00Z"}]`)}
		if out, err := f.accept(ok); err != nil || out.Seq != 11 || out.Cursor != "v2.AAs" {
			t.Fatalf("seq 11: %v, %+v", err, out)
		}
		// Another stream's first event, then the first stream's next: each follows on in its own.
		other := wireMessage{Type: "accountEvents", Channel: "orders", Cursor: "v2.AAsBYQQ", Events: json.RawMessage(`[{"stream":"a","seq":4,"type":"accepted","at":"2026-11-25T00:00:00Z"},{"seq":12,"type":"accepted","at":"2026-11-25T00:00:00Z"}]`)}
		if out, err := f.accept(other); err != nil || len(out.AccountEvents) != 2 || out.Cursor != "v2.AAsBYQQ" {
			t.Fatalf("stream a's 4 and 12: %v, %+v", err, out)
		}
		if c, _ := f.Cursor(Subscription{Channel: ChannelOrders}); c != "v2.AAsBYQQ" {
			t.Fatalf("the cursor to resume from: %q", c)
		}
		gap := wireMessage{Type: "accountEvents", Channel: "orders", Events: json.RawMessage(`[{"stream":"a","seq":6,"type":"accepted","at":"2026-11-25T00:00:00Z"}]`)}
		if _, err := f.accept(gap); !errors.Is(err, ErrGap) {
			t.Fatalf("stream a's 6 after 4: %v, want %v", err, ErrGap)
		}
	})
}
