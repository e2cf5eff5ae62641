package loadgen

import (
	"encoding/json"
	"reflect"
	"testing"

	gojson "github.com/goccy/go-json"
)

// The bots decode responses with goccy/go-json. On every well-formed body (all the server
// writes) it must decode exactly what encoding/json decodes.

const placedBody = `{"id":"0190f6a4-7a55-7c3e-9b1d-2f0e8c4b5a6f","marketId":"` + mktA + `","side":"BUY","outcome":"YES",` +
	`"price":57,"quantity":10,"filledQuantity":7,"status":"PARTIALLY_FILLED","createdAt":"2027-01-31T18:00:00.123456Z",` +
	`"updatedAt":"2027-01-31T18:00:00.123456Z","trades":[{"id":"0190f6a4-7a55-7c3e-9b1d-2f0e8c4b5a61","marketId":"` + mktA + `",` +
	`"outcome":"YES","side":"BUY","price":56,"quantity":4,"yesPrice":56,"createdAt":"2027-01-31T18:00:00.123456Z"},` +
	`{"id":"0190f6a4-7a55-7c3e-9b1d-2f0e8c4b5a62","marketId":"` + mktA + `","outcome":"YES","side":"BUY","price":57,` +
	`"quantity":3,"yesPrice":57,"createdAt":"2027-01-31T18:00:00.123456Z"}]}`

func TestGoccyDecodesAsEncodingJSON(t *testing.T) {
	type book = bookAnswer
	type markets struct {
		Markets []struct {
			ID     string `json:"id"`
			Status string `json:"status"`
		} `json:"markets"`
	}
	type apiKey struct {
		APIKey string `json:"apiKey"`
	}
	cases := []struct {
		body string
		into func() any
	}{
		{placedBody, func() any { return new(orderResp) }},
		{`{"id":"o1","status":"OPEN","quantity":5,"filledQuantity":0,"trades":[]}`, func() any { return new(orderResp) }},
		{`{"id":"o1","status":"FILLED","trades":null}`, func() any { return new(orderResp) }},
		{`{"ID":"o1","Status":"OPEN","QUANTITY":5}`, func() any { return new(orderResp) }}, // case-insensitive names
		{`{"id":"a\u0026b\bc\f\"\\\/\u00e9\ud834\udd1e\ud800"}`, func() any { return new(orderResp) }},
		{`{"id":"o1","quantity":1e2}`, func() any { return new(orderResp) }}, // an error for both
		{`{"id":"o1","quantity":"5"}`, func() any { return new(orderResp) }}, // an error for both
		{`{"id":"o1","quantity":99999999999999999999}`, func() any { return new(orderResp) }},
		{`[` + placedBody + `,` + placedBody + `]`, func() any { return new([]orderResp) }},
		{`[]`, func() any { return new([]orderResp) }},
		{`null`, func() any { return new([]orderResp) }},
		{`{"positions":[{"id":"p","marketId":"` + mktA + `","marketQuestion":"Rain \u003c 5mm?","marketStatus":"OPEN","outcome":"NO",` +
			`"quantity":3,"lockedQuantity":1,"createdAt":"2027-01-31T18:00:00Z","updatedAt":"2027-01-31T18:00:00Z"}]}`, func() any { return new(positionsResp) }},
		{`{"positions":[]}`, func() any { return new(positionsResp) }},
		{`{"error":"not enough available cash: a BUY locks price × quantity cents","details":{"code":"insufficient_funds","field":"quantity"}}`, func() any { return new(apiError) }},
		{`{"error":"x","details":{"code":"not_found"}}`, func() any { return new(apiError) }},
		{"404 page not found", func() any { return new(apiError) }},
		{``, func() any { return new(apiError) }},
		{`{"orderBookYes":{"bids":[{"price":55,"quantity":10,"total":10}],"asks":[],"lastTradePrice":null},"orderBookNo":{"bids":[],"asks":[],"lastTradePrice":45}}`, func() any { return new(book) }},
		{`{"orderBookYes":{"bids":[],"asks":[{"price":60,"quantity":1,"total":1}],"lastTradePrice":55}}`, func() any { return new(book) }},
		{`{"markets":[{"id":"` + mktA + `","status":"OPEN","url":null,"closesAt":null},{"id":"` + mktB + `","status":"CLOSED"}]}`, func() any { return new(markets) }},
		{`{"account":{"id":"x","name":"a"},"apiKey":"pmx_abc"}`, func() any { return new(apiKey) }},
		{`{"results":[{"status":201,"order":` + placedBody + `},{"status":400,"error":"too many","details":{"code":"too_many_open_orders","field":"marketId"}},` +
			`{"status":503,"error":"x","details":{"code":"unavailable"}}]}`, func() any { return new(batchResp) }},
		{`{"results":[]}`, func() any { return new(batchResp) }},
		{`{"cancelled":[{"id":"o1","marketId":"` + mktA + `","side":"SELL","outcome":"NO","price":30,"quantity":6,"filledQuantity":1,` +
			`"status":"PARTIALLY_FILLED_CANCELLED"}],"errors":[{"orderId":"0190f6a4-7a55-7c3e-9b1d-2f0e8c4b5a6f","error":"gone",` +
			`"details":{"code":"order_not_open"}}]}`, func() any { return new(cancelManyResp) }},
		{`{"cancelled":[],"errors":[]}`, func() any { return new(cancelManyResp) }},
		// Truncated bodies (a response cut short): errors for both.
		{placedBody[:len(placedBody)/2], func() any { return new(orderResp) }},
		{placedBody[:len(placedBody)-1], func() any { return new(orderResp) }},
		{`{"positions":[`, func() any { return new(positionsResp) }},
	}
	for _, c := range cases {
		want, got := c.into(), c.into()
		werr := json.Unmarshal([]byte(c.body), want)
		gerr := gojson.Unmarshal([]byte(c.body), got)
		if (werr == nil) != (gerr == nil) || werr == nil && !reflect.DeepEqual(want, got) {
			t.Errorf("%.80s:\n goccy         %+v, %v\n encoding/json %+v, %v", c.body, got, gerr, want, werr)
		}
	}
}

// BenchmarkJSONDecodePlaced decodes a placement's answer with two fills, as a bot does after each
// POST /order.
func BenchmarkJSONDecodePlaced(b *testing.B) {
	body := []byte(placedBody)
	b.Run("encoding_json", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var r orderResp
			if err := json.Unmarshal(body, &r); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("goccy", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var r orderResp
			if err := gojson.Unmarshal(body, &r); err != nil {
				b.Fatal(err)
			}
		}
	})
}
