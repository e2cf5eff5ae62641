package apitest

import (
	"slices"
	"strings"
	"testing"

	"github.com/pmx-dev/pmx/apiserver"
)

// TestAsyncAPIDocument loads the feed's AsyncAPI document and checks the validator tells
// documented messages from broken ones.
func TestAsyncAPIDocument(t *testing.T) {
	v := NewAsyncValidator(t)
	want := []string{"accountEvents", "error", "events", "heartbeat", "market", "pong", "snapshot", "subscribed", "ticker", "unsubscribed"}
	if got := v.ServerTypes(); !slices.Equal(got, want) {
		t.Fatalf("server message types %v, want %v", got, want)
	}
	for _, code := range []int{4001, 4002, 4003, 4004} {
		if !v.CloseCodeDocumented(code) {
			t.Errorf("close code %d is not documented", code)
		}
	}
	// The feed takes the API key as a bearer token or a ws-token in the query; the public feed
	// takes nothing.
	key := SecurityScheme{Name: "apiKey", Type: "http", Scheme: "bearer"}
	token := SecurityScheme{Name: "wsToken", Type: "httpApiKey", In: "query", Param: "token"}
	if got, ok := v.Security("/api/v1/ws"); !ok || !slices.Equal(got, []SecurityScheme{key, token}) {
		t.Errorf("/api/v1/ws security %+v, want %+v", got, []SecurityScheme{key, token})
	}
	if got, ok := v.Security("/api/v1/ws/public"); !ok || len(got) != 0 {
		t.Errorf("/api/v1/ws/public security %+v, want none", got)
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
		{true, `{"op":"subscribe","id":2,"channel":"orders","resumeFrom":"v2.AAw"}`, ""},
		{true, `{"op":"subscribe","id":2,"channel":"orders","resumeFrom":0}`, ""},
		{false, `{"type":"subscribed","id":2,"channel":"orders","cursor":"v2.AAw","seq":12}`, ""},
		{false, `{"type":"accountEvents","channel":"fills","cursor":"v2.AA0","events":[{"seq":13,"type":"fill","filledQuantity":2,"status":"PARTIALLY_FILLED","at":"2030-01-02T03:04:05Z",` +
			`"fill":{"id":"` + m + `","tradeId":"` + m + `","orderId":"` + m + `","clientOrderId":null,"marketId":"` + m + `","side":"BUY","outcome":"NO","price":60,"quantity":2,"role":"TAKER","createdAt":"2030-01-02T03:04:05Z"}}]}`, ""},
		{false, `{"type":"accountEvents","channel":"fills","cursor":"v2.AA0BYQE","events":[{"stream":"a","seq":1,"type":"fill","filledQuantity":2,"status":"PARTIALLY_FILLED","at":"2030-01-02T03:04:05Z",` +
			`"fill":{"id":"` + m + `","tradeId":"` + m + `","orderId":"` + m + `","clientOrderId":null,"marketId":"` + m + `","side":"BUY","outcome":"NO","price":60,"quantity":2,"role":"TAKER","createdAt":"2030-01-02T03:04:05Z"}}]}`, ""},
		{false, `{"type":"accountEvents","channel":"fills","events":[{"seq":13,"type":"fill","filledQuantity":2,"status":"PARTIALLY_FILLED","at":"2030-01-02T03:04:05Z",` +
			`"fill":{"id":"` + m + `","tradeId":"` + m + `","orderId":"` + m + `","clientOrderId":null,"marketId":"` + m + `","side":"BUY","outcome":"NO","price":60,"quantity":2,"role":"TAKER","createdAt":"2030-01-02T03:04:05Z"}}]}`, "breaks"},
		{false, `{"type":"accountEvents","channel":"orders","cursor":"v2.AA4","events":[{"seq":14,"type":"cancelled","at":"2030-01-02T03:04:05Z","order":{"id":"` + m + `"}}]}`, "breaks"},
		{false, `{"type":"surprise"}`, "not documented"},
		// Refusals: the documented codes only, each with its message.
		{false, `{"type":"error","id":4,"channel":"book","marketId":"` + m + `","code":"invalid_resume_from","message":"resumeFrom is beyond the market's last seq"}`, ""},
		{false, `{"type":"error","id":4,"channel":"orders","code":"outdated_cursor","message":"resume from the cursor a fresh subscription's confirmation gives"}`, ""},
		{false, `{"type":"error","id":0,"code":"invalid_message","message":"send one JSON object"}`, ""},
		{false, `{"type":"error","id":4,"code":"seq_too_high","message":"?"}`, "breaks"},
		{false, `{"type":"error","id":4,"code":"rate_limited","message":"wait","retryAfterSeconds":0.25}`, ""},
		// Each event type carries its fields: a trade its id, taker and (YES) price; a level its side.
		{false, `{"type":"events","channel":"trades","marketId":"` + m + `","events":[{"seq":5,"type":"trade","price":40,"quantity":2,"tradeId":"` + m + `","takerSide":"BUY","takerOutcome":"NO","at":"2030-01-02T03:04:05Z"}]}`, ""},
		{false, `{"type":"events","channel":"trades","marketId":"` + m + `","events":[{"seq":5,"type":"trade","price":40,"quantity":2,"takerSide":"BUY","takerOutcome":"NO","at":"2030-01-02T03:04:05Z"}]}`, "breaks"},
		{false, `{"type":"events","channel":"book","marketId":"` + m + `","events":[{"seq":6,"type":"level","price":40,"quantity":0,"at":"2030-01-02T03:04:05Z"}]}`, "breaks"},
		{false, `{"type":"events","channel":"book","marketId":"` + m + `","events":[{"seq":7,"type":"status","quantity":0,"at":"2030-01-02T03:04:05Z"}]}`, "breaks"},
		{false, `{"type":"events","channel":"book","marketId":"` + m + `","events":[{"seq":7,"type":"status","status":"CLOSED","quantity":0,"at":"2030-01-02T03:04:05Z"}]}`, ""},
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

// TestAsyncAPISecurityChecked: a document whose operations leave their credentials unsaid, name
// an undeclared scheme, or disagree on one connection's is refused.
func TestAsyncAPISecurityChecked(t *testing.T) {
	doc := string(apiserver.AsyncAPIDocument)
	const feedSecurity = "    security:\n      - $ref: '#/components/securitySchemes/apiKey'\n      - $ref: '#/components/securitySchemes/wsToken'\n"
	if strings.Count(doc, feedSecurity) != 2 {
		t.Fatalf("the document's feed operations do not list apiKey and wsToken as this test expects")
	}
	for name, broken := range map[string]string{
		"unsaid":     strings.Replace(doc, feedSecurity, "", 1),
		"undeclared": strings.Replace(doc, "securitySchemes/wsToken'\n", "securitySchemes/cookie'\n", 1),
		"disagreeing": strings.Replace(doc, feedSecurity,
			"    security:\n      - $ref: '#/components/securitySchemes/apiKey'\n", 1),
	} {
		if _, err := NewAsyncFromDocument([]byte(broken)); err == nil || !strings.Contains(err.Error(), "security") {
			t.Errorf("%s: got %v, want an error about security", name, err)
		}
	}
}
