package feed

import (
	"encoding/json"
	"testing"
	"time"
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
