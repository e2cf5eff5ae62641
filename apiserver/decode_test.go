package apiserver

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/pmx-dev/pmx/engine"
	"github.com/pmx-dev/pmx/internal/domain"
	"github.com/pmx-dev/pmx/internal/kit/httpkit"
)

const testMarket = "123e4567-e89b-12d3-a456-426614174000"

// order is a BUY NO placement with the given price and quantity literals.
func order(price, quantity string) string {
	return `{"marketId":"` + testMarket + `","side":"BUY","outcome":"NO","price":` + price + `,"quantity":` + quantity + `}`
}

// testNow is the exchange's time in the decoding tests.
var testNow = time.Date(2030, 1, 1, 12, 0, 0, 0, time.UTC)

// with adds fields to a valid BUY NO placement at 40 for 7.
func with(fields string) string {
	return `{"marketId":"` + testMarket + `","side":"BUY","outcome":"NO","price":40,"quantity":7,` + fields + `}`
}

func TestDecodeOrder(t *testing.T) {
	buy := orderRequest{Side: engine.Buy, Outcome: engine.No, Price: 40, Quantity: 7}
	plus := func(f func(*orderRequest)) orderRequest { r := buy; f(&r); return r }
	tests := []struct {
		name, body  string
		code, field string
		want        orderRequest
		pastExpiry  bool // decoded, with the expiry's refusal kept for when no order has the client order id
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
		// A repeated key is refused, not decided by the last one.
		{name: "price twice", body: `{"price":1000,"marketId":"` + testMarket + `","side":"BUY","outcome":"NO","quantity":7,"price":10}`, code: "duplicate_key", field: "price"},
		{name: "price twice, once escaped", body: `{"marketId":"` + testMarket + `","side":"BUY","outcome":"NO","price":40,"quantity":7,"pr\u0069ce":41}`, code: "duplicate_key", field: "price"},
		{name: "a key twice in an ignored object", body: `{"marketId":"` + testMarket + `","side":"BUY","outcome":"NO","price":40,"quantity":7,"note":[{"a":1},{"b":{"c":1,"c":1}}]}`, code: "duplicate_key", field: "c"},
		{name: "the same key in different objects", body: `{"marketId":"` + testMarket + `","side":"BUY","outcome":"NO","price":40,"quantity":7,"note":[{"price":1},{"price":{"price":1}}]}`,
			want: orderRequest{Side: engine.Buy, Outcome: engine.No, Price: 40, Quantity: 7}},
		// The literal decides, not the float64 it rounds to.
		{name: "price 9.99999999999999999 is not 10", body: order(`9.99999999999999999`, `1`), code: "not_an_integer", field: "price"},
		{name: "quantity 0.99999999999999999999 is not 1", body: order(`40`, `0.99999999999999999999`), code: "not_an_integer", field: "quantity"},
		{name: "quantity 1000000.0000000000000001", body: order(`40`, `1000000.0000000000000001`), code: "not_an_integer", field: "quantity"},
		{name: "price 40 plus a tiny fraction", body: order(`40.000000000000000000001e0`, `1`), code: "not_an_integer", field: "price"},
		{name: "quantity 1e-400", body: order(`40`, `1e-400`), code: "not_an_integer", field: "quantity"},
		{name: "quantity 5e-1", body: order(`40`, `5e-1`), code: "not_an_integer", field: "quantity"},
		{name: "a huge fraction is still a fraction", body: order(`40`, `99999999999999999999.5`), code: "not_an_integer", field: "quantity"},
		{name: "quantity -0.0", body: order(`40`, `-0.0`), code: "out_of_range", field: "quantity"},
		{name: "quantity max int64", body: order(`40`, `9223372036854775807`), code: "out_of_range", field: "quantity"},
		{name: "quantity 1e19", body: order(`40`, `1e19`), code: "out_of_range", field: "quantity"},
		{name: "quantity with a huge exponent", body: order(`40`, `1e999999999999999999999999`), code: "out_of_range", field: "quantity"},
		{name: "quantity with a huge negative exponent", body: order(`40`, `1e-999999999999999999999999`), code: "not_an_integer", field: "quantity"},
		{name: "quantity 0e999999999999999999999999", body: order(`40`, `0e999999999999999999999999`), code: "out_of_range", field: "quantity"},
		{name: "whole numbers in other spellings", body: order(`4000e-2`, `1.5E+1`),
			want: orderRequest{Side: engine.Buy, Outcome: engine.No, Price: 40, Quantity: 15}},
		{name: "leading zeros of a fraction and trailing zeros", body: order(`0.0400000e3`, `1000000.000000000000000000000`),
			want: orderRequest{Side: engine.Buy, Outcome: engine.No, Price: 40, Quantity: 1_000_000}},

		// Order types and client order ids (every field optional; null is left out).
		{name: "every new field null", body: with(`"timeInForce":null,"expiresAt":null,"postOnly":null,"selfTradePrevention":null,"clientOrderId":null`), want: buy},
		{name: "IOC", body: with(`"timeInForce":"IOC"`), want: plus(func(r *orderRequest) { r.TimeInForce = engine.IOC })},
		{name: "FOK, cancel incoming", body: with(`"timeInForce":"FOK","selfTradePrevention":"CANCEL_INCOMING"`),
			want: plus(func(r *orderRequest) { r.TimeInForce, r.SelfTrade = engine.FOK, engine.CancelIncoming })},
		{name: "GTD", body: with(`"timeInForce":"GTD","expiresAt":"2030-01-01T12:00:00.0000015+01:00","postOnly":true`), code: "invalid_value", field: "expiresAt"},
		{name: "GTD in the future", body: with(`"timeInForce":"GTD","expiresAt":"2030-01-01T13:00:00.0000015+01:00","postOnly":true,"clientOrderId":"a.B_9:-z"`),
			want: plus(func(r *orderRequest) {
				r.TimeInForce, r.ExpiresAt, r.PostOnly, r.ClientOrderID = engine.GTD, time.Date(2030, 1, 1, 12, 0, 0, 1000, time.UTC), true, "a.B_9:-z"
			})},
		{name: "GTC post-only, explicit defaults", body: with(`"timeInForce":"GTC","postOnly":true,"selfTradePrevention":"CANCEL_RESTING"`),
			want: plus(func(r *orderRequest) { r.PostOnly = true })},
		{name: "lower-case time in force", body: with(`"timeInForce":"ioc"`), code: "invalid_value", field: "timeInForce"},
		{name: "time in force a number", body: with(`"timeInForce":1`), code: "invalid_type", field: "timeInForce"},
		{name: "GTD without expiry", body: with(`"timeInForce":"GTD"`), code: "missing_field", field: "expiresAt"},
		{name: "expiry without GTD", body: with(`"expiresAt":"2031-01-01T00:00:00Z"`), code: "invalid_value", field: "expiresAt"},
		{name: "expiry with IOC", body: with(`"timeInForce":"IOC","expiresAt":"2031-01-01T00:00:00Z"`), code: "invalid_value", field: "expiresAt"},
		{name: "expiry not RFC 3339", body: with(`"timeInForce":"GTD","expiresAt":"2031-01-01 00:00:00"`), code: "invalid_value", field: "expiresAt"},
		{name: "expiry a number", body: with(`"timeInForce":"GTD","expiresAt":1924992000`), code: "invalid_type", field: "expiresAt"},
		{name: "expiry now", body: with(`"timeInForce":"GTD","expiresAt":"2030-01-01T12:00:00Z"`), code: "invalid_value", field: "expiresAt"},
		{name: "expiry past, with a client order id", body: with(`"timeInForce":"GTD","expiresAt":"2030-01-01T12:00:00Z","clientOrderId":"retry"`),
			want: plus(func(r *orderRequest) { r.TimeInForce, r.ExpiresAt, r.ClientOrderID = engine.GTD, testNow, "retry" }), pastExpiry: true},
		{name: "post-only IOC", body: with(`"timeInForce":"IOC","postOnly":true`), code: "invalid_value", field: "postOnly"},
		{name: "post-only FOK", body: with(`"timeInForce":"FOK","postOnly":true`), code: "invalid_value", field: "postOnly"},
		{name: "post-only false with IOC", body: with(`"timeInForce":"IOC","postOnly":false`), want: plus(func(r *orderRequest) { r.TimeInForce = engine.IOC })},
		{name: "post-only a string", body: with(`"postOnly":"true"`), code: "invalid_type", field: "postOnly"},
		{name: "bad self-trade mode", body: with(`"selfTradePrevention":"CANCEL_BOTH"`), code: "invalid_value", field: "selfTradePrevention"},
		{name: "client order id empty", body: with(`"clientOrderId":""`), code: "invalid_value", field: "clientOrderId"},
		{name: "client order id 64", body: with(`"clientOrderId":"` + strings.Repeat("x", 64) + `"`), want: plus(func(r *orderRequest) { r.ClientOrderID = strings.Repeat("x", 64) })},
		{name: "client order id 65", body: with(`"clientOrderId":"` + strings.Repeat("x", 65) + `"`), code: "invalid_value", field: "clientOrderId"},
		{name: "client order id with a space", body: with(`"clientOrderId":"a b"`), code: "invalid_value", field: "clientOrderId"},
		{name: "client order id with a slash", body: with(`"clientOrderId":"a/b"`), code: "invalid_value", field: "clientOrderId"},
		{name: "client order id not ASCII", body: with(`"clientOrderId":"é"`), code: "invalid_value", field: "clientOrderId"},
		{name: "client order id a number", body: with(`"clientOrderId":7`), code: "invalid_type", field: "clientOrderId"},
		{name: "client order id twice", body: with(`"clientOrderId":"a","clientOrderId":"b"`), code: "duplicate_key", field: "clientOrderId"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := decodeOrder([]byte(tt.body), 1_000_000, testNow)
			if tt.code == "" {
				tt.want.Market = got.Market
				var e *httpkit.Error
				if late := got.pastExpiry; (late != nil) != tt.pastExpiry || late != nil && (!errors.As(late, &e) || e.Field != "expiresAt") {
					t.Fatalf("the refusal kept for a past expiry: %v; want one: %t", late, tt.pastExpiry)
				}
				got.pastExpiry = nil
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

func TestFirstDuplicate(t *testing.T) {
	many := func(last string) string {
		var b strings.Builder
		b.WriteString(`{`)
		for i := range 40 {
			fmt.Fprintf(&b, `"k%d":%d,`, i, i)
		}
		return b.String() + `"` + last + `":0}`
	}
	tests := []struct{ body, want string }{
		{`{}`, ""},
		{` {"a" : 1 , "b" : [ ] , "c" : { } } `, ""},
		{`{"a":1,"a":1}`, "a"},
		{`{"a":"x\"y","b":true,"c":null,"b":false}`, "b"},
		{`{"a":{"b":1,"c":2},"d":{"b":1,"c":2}}`, ""},
		{`{"a":[{"b":1},{"b":2}],"c":[[{"d":1,"e":{"d":2}}]]}`, ""},
		{`{"a":[1,{"b":[{"c":0,"c":1}]}]}`, "c"},
		{`{"x":{"b":1,"b":2},"a":1,"a":2}`, "b"}, // the first in the text
		{`{"\u00e9":1,"é":2}`, "é"},
		{`{"\ud800":1,"` + "\xff" + `":2}`, "\ufffd"}, // both decode to U+FFFD
		{`{"a\\":1,"a\\\\":2,"a\"":3}`, ""},
		{`[{"a":1,"a":2}]`, "a"},
		{many("k39"), "k39"},
		{many("k0"), "k0"},
		{many("k40"), ""},
	}
	for _, tt := range tests {
		if !json.Valid([]byte(tt.body)) {
			t.Fatalf("%s is not valid JSON", tt.body)
		}
		got, ok := firstDuplicate([]byte(tt.body))
		if got != tt.want || ok != (tt.want != "") {
			t.Errorf("firstDuplicate(%s) = %q, %v; want %q", tt.body, got, ok, tt.want)
		}
	}
}

// FuzzDecodeOrder checks that any body either decodes into a valid order or fails with a 4xx that
// names a stable code, and never panics; and, against the references below, that a body with a
// repeated key is refused and that price and quantity are read exactly from their literals.
func FuzzDecodeOrder(f *testing.F) {
	f.Add([]byte(order(`40`, `7`)))
	f.Add([]byte(`{"marketId":"` + testMarket + `","side":"SELL","outcome":"YES","price":9.0e0,"quantity":"1"}`))
	f.Add([]byte(`{"price":-0,"quantity":1E+2}`))
	f.Add([]byte(order(`9.99999999999999999`, `1`)))
	f.Add([]byte(order(`40`, `0.99999999999999999999`)))
	f.Add([]byte(order(`4000e-2`, `1.5E+1`)))
	f.Add([]byte(order(`40`, `7,"price":41`)))
	f.Add([]byte(order(`40`, `7,"x":[{"a":1,"a":2}]`)))
	f.Add([]byte(with(`"timeInForce":"GTD","expiresAt":"2030-01-01T13:00:00.0000015+01:00","postOnly":true,"clientOrderId":"a.B_9:-z"`)))
	f.Add([]byte(with(`"timeInForce":"FOK","selfTradePrevention":"CANCEL_INCOMING","postOnly":false`)))
	f.Add([]byte(with(`"timeInForce":"IOC","expiresAt":null,"clientOrderId":"A"`)))
	f.Add([]byte(with(`"timeInForce":"GTD","expiresAt":"9999-12-31T23:59:59.999999999Z"`)))
	f.Add([]byte(with(`"timeInForce":"GTD","expiresAt":"9999-12-31T23:59:59-23:59"`)))
	f.Add([]byte(with(`"timeInForce":"GTD","expiresAt":"0000-01-01T00:00:00+23:59","clientOrderId":"old"`)))
	f.Fuzz(func(t *testing.T, body []byte) {
		r, err := decodeOrder(body, 1_000_000, testNow)
		var e *httpkit.Error
		if err != nil && (!errors.As(err, &e) || e.Status < 400 || e.Status > 499 || e.Code == "") {
			t.Fatalf("error %v is not an API 4xx", err)
		}
		var fields map[string]json.RawMessage
		if json.Unmarshal(body, &fields) != nil || fields == nil {
			if err == nil || e.Code != "malformed_json" {
				t.Fatalf("not a JSON object, yet %+v, %v", r, err)
			}
			return
		}
		if key, dup := refDuplicate(body); dup || (err != nil && e.Code == "duplicate_key") {
			if !dup || err == nil || e.Code != "duplicate_key" || e.Field != key {
				t.Fatalf("first repeated key %q (%v); got %+v, %v", key, dup, r, err)
			}
			return
		}
		if err != nil && e.Field == "expiresAt" && !slices.Contains([]string{"missing_field", "invalid_type", "invalid_value", "out_of_range"}, e.Code) {
			t.Fatalf("expiresAt %s refused with an undocumented code: %v", fields["expiresAt"], err)
		}
		if err != nil {
			if e.Code == "not_an_integer" || e.Code == "out_of_range" && e.Field != "expiresAt" {
				lo, hi := int64(1), int64(99)
				if e.Field == "quantity" {
					hi = 1_000_000
				}
				if _, code := refInteger(fields[e.Field], lo, hi); code != e.Code {
					t.Fatalf("%s %s: got %s, reference %q", e.Field, fields[e.Field], e.Code, code)
				}
			}
			return
		}
		o := engine.Order{Side: r.Side, Outcome: r.Outcome, Price: r.Price, Quantity: r.Quantity, TimeInForce: r.TimeInForce,
			PostOnly: r.PostOnly, SelfTrade: r.SelfTrade}
		if o.Validate() != nil || r.Quantity > 1_000_000 {
			t.Fatalf("decoded an invalid order %+v", r)
		}
		if r.TimeInForce == engine.GTD {
			// Its placement's events carry it: it must be one JSON can write.
			if _, err := json.Marshal(r.ExpiresAt); err != nil || !domain.TimeInRange(r.ExpiresAt) {
				t.Fatalf("decoded expiry %v from %s, out of range (%v)", r.ExpiresAt, fields["expiresAt"], err)
			}
		}
		past := !r.ExpiresAt.IsZero() && !r.ExpiresAt.After(testNow)
		if (r.TimeInForce == engine.GTD) != !r.ExpiresAt.IsZero() || past != (r.pastExpiry != nil) || past && r.ClientOrderID == "" {
			t.Fatalf("decoded an order with time in force %s, expiry %v, client order id %q (%v)", r.TimeInForce, r.ExpiresAt, r.ClientOrderID, r.pastExpiry)
		}
		if _, given := fields["clientOrderId"]; r.ClientOrderID != "" && !domain.ValidClientOrderID(r.ClientOrderID) || r.ClientOrderID == "" && given && string(fields["clientOrderId"]) != "null" {
			t.Fatalf("decoded client order id %q from %s", r.ClientOrderID, fields["clientOrderId"])
		}
		if n, code := refInteger(fields["price"], 1, 99); code != "" || n != int64(r.Price) {
			t.Fatalf("price %s decoded as %d; reference %d %q", fields["price"], r.Price, n, code)
		}
		if n, code := refInteger(fields["quantity"], 1, 1_000_000); code != "" || n != r.Quantity {
			t.Fatalf("quantity %s decoded as %d; reference %d %q", fields["quantity"], r.Quantity, n, code)
		}
	})
}

// FuzzObjectString checks that a string field reads exactly as encoding/json reads it, escapes,
// invalid UTF-8 and all; that a number field reads as the exact value of its literal, by the
// reference refInteger; and that an object with a repeated key, at any depth, is refused.
func FuzzObjectString(f *testing.F) {
	f.Add([]byte(`{"a":"BUY","b":"caf\u00e9 \"q\"","c":"\ud800","d":"` + "\xff\xfe" + `","e":7}`))
	f.Add([]byte(`{"a":9.99999999999999999,"b":1e19,"c":-12.5e1,"d":0.99999999999999999999,"e":1E-3}`))
	f.Add([]byte(`{"a":{"b":[{"c":1,"\u0063":2}]}}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		o, err := decodeObject(body)
		var e *httpkit.Error
		if err != nil && (!errors.As(err, &e) || e.Status != 400) {
			t.Fatalf("error %v is not a 400", err)
		}
		var fields map[string]json.RawMessage
		if json.Unmarshal(body, &fields) != nil || fields == nil {
			if err == nil || e.Code != "malformed_json" {
				t.Fatalf("not a JSON object, yet %v", err)
			}
			return
		}
		key, dup := refDuplicate(body)
		if dup != (err != nil) || dup && (e.Code != "duplicate_key" || e.Field != key) {
			t.Fatalf("first repeated key %q (%v); got %v", key, dup, err)
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
			if c := v[0]; c != '-' && (c < '0' || c > '9') {
				continue
			}
			const lo, hi = -99, 1 << 40
			n, err := o.integer(field, lo, hi)
			wantN, wantCode := refInteger(v, lo, hi)
			if code := codeOf(err); n != wantN || code != wantCode {
				t.Fatalf("field %q (%s): got %d %q; reference %d %q", field, v, n, code, wantN, wantCode)
			}
		}
	})
}

func codeOf(err error) string {
	var e *httpkit.Error
	if errors.As(err, &e) {
		return e.Code
	}
	return ""
}

// refInteger is the reference for reading a JSON number literal as an integer in [lo, hi]: the
// literal's exact value, by math/big, and the code of its refusal, if any.
func refInteger(lit json.RawMessage, lo, hi int64) (int64, string) {
	mantissa, exp, _ := strings.Cut(strings.ToLower(string(lit)), "e")
	r, ok := new(big.Rat).SetString(mantissa)
	if !ok {
		panic("not a number: " + string(lit))
	}
	// big.Rat would build 10^exp; past len(lit)+20 only the exponent's sign matters: a nonzero
	// value is then at least 10^20, or below 10^-20.
	e, err := strconv.ParseInt(exp, 10, 64)
	switch limit := int64(len(lit) + 20); {
	case exp == "" || r.Sign() == 0:
	case (err != nil || e > limit) && !strings.HasPrefix(exp, "-"):
		return 0, "out_of_range"
	case err != nil || e < -limit:
		return 0, "not_an_integer"
	default:
		r, _ = new(big.Rat).SetString(string(lit))
	}
	switch {
	case !r.IsInt():
		return 0, "not_an_integer"
	case !r.Num().IsInt64() || r.Num().Int64() < lo || r.Num().Int64() > hi:
		return 0, "out_of_range"
	}
	return r.Num().Int64(), ""
}

// refDuplicate is the reference for firstDuplicate, on encoding/json's tokens: the first key that
// repeats one of its object's, in the order of the text.
func refDuplicate(body []byte) (string, bool) {
	type level struct {
		keys     map[string]bool // nil in an array
		wantsKey bool
	}
	var stack []*level
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber() // a float64 would fail on 1e1000
	for {
		tok, err := dec.Token()
		if err != nil {
			return "", false
		}
		if n := len(stack); n > 0 && stack[n-1].wantsKey {
			if tok == json.Delim('}') {
				stack = stack[:n-1]
			} else {
				key := tok.(string)
				if stack[n-1].keys[key] {
					return key, true
				}
				stack[n-1].keys[key] = true
				stack[n-1].wantsKey = false
				continue
			}
		} else {
			switch tok {
			case json.Delim('{'):
				stack = append(stack, &level{keys: map[string]bool{}, wantsKey: true})
				continue
			case json.Delim('['):
				stack = append(stack, &level{})
				continue
			case json.Delim(']'), json.Delim('}'):
				stack = stack[:n-1]
			}
		}
		// A value ended: an object's next token is a key (or its end).
		if n := len(stack); n > 0 && stack[n-1].keys != nil {
			stack[n-1].wantsKey = true
		}
	}
}

func BenchmarkDecodeOrder(b *testing.B) {
	body := []byte(`{"marketId":"` + testMarket + `","side":"BUY","outcome":"YES","price":42,"quantity":10}`)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := decodeOrder(body, 1_000_000, testNow); err != nil {
			b.Fatal(err)
		}
	}
}
