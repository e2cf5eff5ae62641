package apiserver

import (
	"bytes"
	"encoding/json"
	"errors"
	"testing"

	"github.com/pmx-dev/pmx/engine"
	"github.com/pmx-dev/pmx/httpkit"
)

const testMarket = "123e4567-e89b-12d3-a456-426614174000"

func TestDecodeOrder(t *testing.T) {
	tests := []struct {
		name, body  string
		code, field string
		want        orderRequest
	}{
		{name: "valid", body: `{"marketId":"` + testMarket + `","side":"BUY","outcome":"NO","price":40,"quantity":7}`,
			want: orderRequest{Side: engine.Buy, Outcome: engine.No, Price: 40, Quantity: 7}},
		{name: "10.0 is 10 and unknown fields are ignored", body: `{"marketId":"` + testMarket + `","side":"SELL","outcome":"YES","price":10.0,"quantity":1e1,"note":"x"}`,
			want: orderRequest{Side: engine.Sell, Outcome: engine.Yes, Price: 10, Quantity: 10}},
		{name: "not JSON", body: `{"marketId":`, code: "malformed_json"},
		{name: "not an object", body: `[1,2]`, code: "malformed_json"},
		{name: "null", body: `null`, code: "malformed_json"},
		{name: "empty", body: ``, code: "malformed_json"},
		{name: "missing market", body: `{"side":"BUY","outcome":"NO","price":40,"quantity":7}`, code: "missing_field", field: "marketId"},
		{name: "bad uuid", body: `{"marketId":"abc","side":"BUY","outcome":"NO","price":40,"quantity":7}`, code: "invalid_uuid", field: "marketId"},
		{name: "uuid without dashes", body: `{"marketId":"123e4567e89b12d3a456426614174000","side":"BUY","outcome":"NO","price":40,"quantity":7}`, code: "invalid_uuid", field: "marketId"},
		{name: "market a number", body: `{"marketId":5,"side":"BUY","outcome":"NO","price":40,"quantity":7}`, code: "invalid_type", field: "marketId"},
		{name: "lower-case side", body: `{"marketId":"` + testMarket + `","side":"buy","outcome":"NO","price":40,"quantity":7}`, code: "invalid_value", field: "side"},
		{name: "bad outcome", body: `{"marketId":"` + testMarket + `","side":"BUY","outcome":"MAYBE","price":40,"quantity":7}`, code: "invalid_value", field: "outcome"},
		{name: "null price", body: `{"marketId":"` + testMarket + `","side":"BUY","outcome":"NO","price":null,"quantity":7}`, code: "missing_field", field: "price"},
		{name: "price a string", body: `{"marketId":"` + testMarket + `","side":"BUY","outcome":"NO","price":"40","quantity":7}`, code: "invalid_type", field: "price"},
		{name: "price fractional", body: `{"marketId":"` + testMarket + `","side":"BUY","outcome":"NO","price":40.5,"quantity":7}`, code: "not_an_integer", field: "price"},
		{name: "price 0", body: `{"marketId":"` + testMarket + `","side":"BUY","outcome":"NO","price":0,"quantity":7}`, code: "out_of_range", field: "price"},
		{name: "price 100", body: `{"marketId":"` + testMarket + `","side":"BUY","outcome":"NO","price":100,"quantity":7}`, code: "out_of_range", field: "price"},
		{name: "price bool", body: `{"marketId":"` + testMarket + `","side":"BUY","outcome":"NO","price":true,"quantity":7}`, code: "invalid_type", field: "price"},
		{name: "quantity 0", body: `{"marketId":"` + testMarket + `","side":"BUY","outcome":"NO","price":40,"quantity":0}`, code: "out_of_range", field: "quantity"},
		{name: "quantity negative", body: `{"marketId":"` + testMarket + `","side":"BUY","outcome":"NO","price":40,"quantity":-1}`, code: "out_of_range", field: "quantity"},
		{name: "quantity over the limit", body: `{"marketId":"` + testMarket + `","side":"BUY","outcome":"NO","price":40,"quantity":1000001}`, code: "out_of_range", field: "quantity"},
		{name: "quantity huge", body: `{"marketId":"` + testMarket + `","side":"BUY","outcome":"NO","price":40,"quantity":1e300}`, code: "out_of_range", field: "quantity"},
		{name: "quantity past int64", body: `{"marketId":"` + testMarket + `","side":"BUY","outcome":"NO","price":40,"quantity":99999999999999999999}`, code: "out_of_range", field: "quantity"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := decodeOrder([]byte(tt.body), 1_000_000)
			if tt.code == "" {
				tt.want.Market = got.Market
				if err != nil || got != tt.want || got.Market.String() != testMarket {
					t.Fatalf("got %+v, %v; want %+v", got, err, tt.want)
				}
				return
			}
			var e *httpkit.Error
			if !errors.As(err, &e) || e.Code != tt.code || e.Field != tt.field || e.Status != 400 {
				t.Fatalf("got %+v (%v); want 400 %s on %q", e, err, tt.code, tt.field)
			}
		})
	}
}

// FuzzDecodeOrder checks that any body either decodes into a valid order or fails with a 4xx that
// names a stable code, and never panics.
func FuzzDecodeOrder(f *testing.F) {
	f.Add([]byte(`{"marketId":"` + testMarket + `","side":"BUY","outcome":"NO","price":40,"quantity":7}`))
	f.Add([]byte(`{"marketId":"` + testMarket + `","side":"SELL","outcome":"YES","price":9.0e0,"quantity":"1"}`))
	f.Add([]byte(`{"price":-0,"quantity":1E+2}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		r, err := decodeOrder(body, 1_000_000)
		if err != nil {
			var e *httpkit.Error
			if !errors.As(err, &e) || e.Status < 400 || e.Status > 499 || e.Code == "" {
				t.Fatalf("error %v is not an API 4xx", err)
			}
			return
		}
		o := engine.Order{Side: r.Side, Outcome: r.Outcome, Price: r.Price, Quantity: r.Quantity}
		if o.Validate() != nil || r.Quantity > 1_000_000 {
			t.Fatalf("decoded an invalid order %+v", r)
		}
	})
}

// FuzzObjectString checks that a string field reads exactly as encoding/json reads it, escapes,
// invalid UTF-8 and all.
func FuzzObjectString(f *testing.F) {
	f.Add([]byte(`{"a":"BUY","b":"caf\u00e9 \"q\"","c":"\ud800","d":"` + "\xff\xfe" + `","e":7}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		o, err := decodeObject(body)
		if err != nil {
			return
		}
		for field, v := range o {
			got, err := o.string(field)
			var want string
			wantErr := len(v) == 0 || v[0] != '"' || json.Unmarshal(v, &want) != nil
			if bytes.Equal(v, []byte("null")) {
				wantErr = true
			}
			if (err != nil) != wantErr || got != want {
				t.Fatalf("field %q (%s): got %q, %v; want %q, error %v", field, v, got, err, want, wantErr)
			}
		}
	})
}

func BenchmarkDecodeOrder(b *testing.B) {
	body := []byte(`{"marketId":"` + testMarket + `","side":"BUY","outcome":"YES","price":42,"quantity":10}`)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := decodeOrder(body, 1_000_000); err != nil {
			b.Fatal(err)
		}
	}
}
