package feed

import (
	"bytes"
	"encoding/json"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/pmx-dev/pmx/internal/apijson"
)

// TestEncode pins the events' JSON, as the API shows it, and checks it reads back as it was and
// as encoding/json writes it.
func TestEncode(t *testing.T) {
	at := time.Date(2030, 1, 2, 3, 4, 5, 6000, time.UTC)
	events := []Event{
		{Seq: 7, Type: TypeLevel, Side: "bid", Price: 40, Quantity: 0, At: at},
		{Seq: 8, Type: TypeTrade, Price: 41, Quantity: 3, TradeID: "0190f6a4-7a55-7c3e-9b1d-2f0e8c4b5a6f", TakerSide: "BUY", TakerOutcome: "NO", At: at},
		{Seq: 9, Type: TypeStatus, Status: "CLOSED", At: at},
	}
	raw, err := Encode(events)
	if err != nil {
		t.Fatal(err)
	}
	const want = `[{"seq":7,"type":"level","side":"bid","price":40,"quantity":0,"at":"2030-01-02T03:04:05.000006Z"},` +
		`{"seq":8,"type":"trade","price":41,"quantity":3,"tradeId":"0190f6a4-7a55-7c3e-9b1d-2f0e8c4b5a6f","takerSide":"BUY","takerOutcome":"NO","at":"2030-01-02T03:04:05.000006Z"},` +
		`{"seq":9,"type":"status","quantity":0,"status":"CLOSED","at":"2030-01-02T03:04:05.000006Z"}]`
	if string(raw) != want {
		t.Fatalf("encoded:\n%s\nwant:\n%s", raw, want)
	}
	if std, _ := json.Marshal(events); string(std) != want {
		t.Fatalf("encoding/json writes:\n%s", std)
	}
	back, err := Decode(raw)
	if err != nil || len(back) != len(events) {
		t.Fatalf("decoded %v, %v", back, err)
	}
	for i := range events {
		if back[i] != events[i] {
			t.Errorf("event %d read back as %+v, want %+v", i, back[i], events[i])
		}
	}
}

// TestAccountEncoding pins an account batch's JSON as kept (no seqs) and checks DecodeAccount
// numbers the events from the batch's first, and refuses a batch whose numbers do not match.
func TestAccountEncoding(t *testing.T) {
	at := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	events := []AccountEvent{
		{Type: AccountFill, FilledQuantity: 2, Status: "PARTIALLY_FILLED", At: at},
		{Type: AccountSettled, At: at},
	}
	raw, err := EncodeAccount(events)
	if err != nil {
		t.Fatal(err)
	}
	const want = `[{"type":"fill","filledQuantity":2,"status":"PARTIALLY_FILLED","at":"2030-01-02T03:04:05Z"},{"type":"settled","at":"2030-01-02T03:04:05Z"}]`
	if string(raw) != want {
		t.Fatalf("encoded:\n%s\nwant:\n%s", raw, want)
	}
	back, err := DecodeAccount(raw, "shard-2", 41, 42)
	if err != nil || len(back) != 2 || back[0].Seq != 41 || back[1].Seq != 42 || back[0].Status != "PARTIALLY_FILLED" ||
		back[0].Stream != "shard-2" || back[1].Stream != "shard-2" {
		t.Fatalf("decoded %+v, %v", back, err)
	}
	if _, err := DecodeAccount(raw, "", 41, 43); err == nil {
		t.Error("two events numbered 41 to 43 were accepted")
	}
}

// TestMoveNumberKept checks that an amend's move number (AccountEvent.Priority) is kept in the
// stored batch, read by TermsOf, and never in what a client gets: DecodeAccount leaves it out, and
// the events encode for the API as before.
func TestMoveNumberKept(t *testing.T) {
	at := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	id := uuid.MustParse("00000000-0000-0000-0000-000000000001")
	events := []AccountEvent{
		{Type: AccountAmended, Order: &apijson.Order{ID: id, Price: 40, Quantity: 10}, At: at, Priority: 17},
		{Type: AccountAmended, Order: &apijson.Order{ID: id, Price: 40, Quantity: 8}, At: at}, // in place
	}
	raw, err := EncodeAccount(events)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(raw, []byte(`"at":"2030-01-02T03:04:05Z","priority":17}`)) || bytes.Count(raw, []byte(`"priority"`)) != 1 {
		t.Fatalf("kept as %s", raw)
	}
	terms, err := TermsOf(raw, "s", 5, 6, 9)
	if err != nil || len(terms) != 2 || terms[0].Priority != 17 || terms[1].Priority != 0 || terms[0].Price != 40 || terms[1].Quantity != 8 {
		t.Fatalf("TermsOf: %+v, %v", terms, err)
	}
	back, err := DecodeAccount(raw, "s", 5, 6)
	if err != nil || len(back) != 2 || back[0].Priority != 0 {
		t.Fatalf("decoded %+v, %v", back, err)
	}
	wire, err := json.Marshal(back)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(wire, []byte("priority")) {
		t.Fatalf("a client would get the move's number: %s", wire)
	}
	plain, err := EncodeAccount(events[1:])
	if err != nil || bytes.Contains(plain, []byte("priority")) {
		t.Fatalf("a batch without a move kept as %s, %v", plain, err)
	}
	// A batch written before the number was told reads as 0 (not told).
	old := bytes.Replace(raw, []byte(`,"priority":17`), nil, 1)
	if terms, err := TermsOf(old, "s", 5, 6, 9); err != nil || terms[0].Priority != 0 {
		t.Fatalf("an old batch: %+v, %v", terms, err)
	}
}
