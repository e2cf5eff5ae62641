package apitest

import (
	"slices"
	"strings"
	"testing"
)

// TestAsyncAPIDocument loads the feed's AsyncAPI document and checks the validator tells
// documented messages from broken ones.
func TestAsyncAPIDocument(t *testing.T) {
	v := NewAsyncValidator(t)
	want := []string{"accountEvents", "error", "events", "heartbeat", "market", "pong", "snapshot", "subscribed", "ticker", "unsubscribed"}
	if got := v.ServerTypes(); !slices.Equal(got, want) {
		t.Fatalf("server message types %v, want %v", got, want)
	}
	for _, code := range []int{4001, 4002, 4003} {
		if !v.CloseCodeDocumented(code) {
			t.Errorf("close code %d is not documented", code)
		}
	}
	const m = "0190f6a4-7a55-7c3e-9b1d-2f0e8c4b5a6f"
	for _, tc := range []struct {
		client bool
		msg    string
		err    string // "" when valid
	}{
		{true, `{"op":"subscribe","id":1,"channel":"book","marketId":"` + m + `","resumeFrom":7}`, ""},
		{true, `{"op":"subscribe","channel":"lifecycle"}`, ""},
		{true, `{"op":"ping"}`, ""},
		{true, `{"op":"subscribe","channel":"candles","marketId":"` + m + `"}`, "breaks"},
		{true, `{"op":"dance"}`, "not documented"},
		{false, `{"type":"snapshot","channel":"book","marketId":"` + m + `","seq":3,"status":"OPEN","bids":[{"price":40,"quantity":2}],"asks":[],"lastPrice":null}`, ""},
		{false, `{"type":"events","channel":"book","marketId":"` + m + `","events":[{"seq":4,"type":"level","side":"bid","price":40,"quantity":0,"at":"2030-01-02T03:04:05Z"}]}`, ""},
		{false, `{"type":"events","channel":"book","marketId":"` + m + `","events":[]}`, "breaks"},
		{false, `{"type":"ticker","channel":"ticker","marketId":"` + m + `","seq":4,"bestBid":100,"bestAsk":null,"lastPrice":null}`, "breaks"},
		{false, `{"type":"heartbeat","at":"yesterday"}`, "breaks"},
		{false, `{"type":"pong","id":3}`, ""},
		{true, `{"op":"subscribe","id":2,"channel":"orders","resumeFrom":12}`, ""},
		{false, `{"type":"subscribed","id":2,"channel":"orders","seq":12}`, ""},
		{false, `{"type":"accountEvents","channel":"fills","events":[{"seq":13,"type":"fill","filledQuantity":2,"status":"PARTIALLY_FILLED","at":"2030-01-02T03:04:05Z",` +
			`"fill":{"id":"` + m + `","tradeId":"` + m + `","orderId":"` + m + `","clientOrderId":null,"marketId":"` + m + `","side":"BUY","outcome":"NO","price":60,"quantity":2,"role":"TAKER","createdAt":"2030-01-02T03:04:05Z"}}]}`, ""},
		{false, `{"type":"accountEvents","channel":"orders","events":[{"seq":14,"type":"cancelled","at":"2030-01-02T03:04:05Z","order":{"id":"` + m + `"}}]}`, "breaks"},
		{false, `{"type":"surprise"}`, "not documented"},
	} {
		var err error
		if tc.client {
			err = v.ValidateClient([]byte(tc.msg))
		} else {
			err = v.ValidateServer([]byte(tc.msg))
		}
		switch {
		case tc.err == "" && err != nil:
			t.Errorf("%s: %v", tc.msg, err)
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("%s: got %v, want an error saying %q", tc.msg, err, tc.err)
		}
	}
}
