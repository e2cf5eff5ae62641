package httpkit

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"reflect"
	"slices"
	"strings"
	"testing"
	"testing/iotest"
	"time"
	"unicode/utf8"

	"github.com/gin-gonic/gin"
	"github.com/gin-gonic/gin/binding"
	ginjson "github.com/gin-gonic/gin/codec/json"
	"github.com/gin-gonic/gin/render"
	"github.com/google/uuid"

	"github.com/pmx-dev/pmx/engine"
	"github.com/pmx-dev/pmx/internal/exchange"
	"github.com/pmx-dev/pmx/internal/records"
)

// Times as the API holds them (microseconds, UTC), and the awkward cases of RFC 3339 with
// nanoseconds: trailing zeros trimmed, no fraction at all, another zone, the zero time.
var (
	tMicro  = time.Date(2027, 1, 31, 18, 0, 0, 123456000, time.UTC)
	tWhole  = time.Date(2027, 6, 1, 0, 0, 0, 0, time.UTC)
	tNano   = time.Date(2026, 12, 31, 23, 59, 59, 999999999, time.UTC)
	tTrail  = time.Date(2026, 3, 4, 5, 6, 7, 120000000, time.UTC)
	tZone   = time.Date(2026, 3, 4, 5, 6, 7, 1000, time.FixedZone("", -(3*3600+30*60)))
	tZero   time.Time
	tNow    = time.Now() // with a monotonic reading
	someURL = "https://example.com/q?a=1&b=<2>"
	someTxt = "Will it rain in Paris? <b>\"yes\"</b> & \u2028\u2029 \x00\x01\x08\x0c\x1f\x7f é € 𝄞 \xff"
	yes     = "YES"
	price   = 42
)

// testMarket is a market id.
const testMarket = "123e4567-e89b-12d3-a456-426614174000"

// Tagged shapes of request and error bodies, like those the API reads and writes: the codec must
// write and read them as encoding/json does.
type (
	placeShape struct {
		Account  int64     `json:"account"`
		Market   uuid.UUID `json:"market"`
		Side     string    `json:"side"`
		Outcome  string    `json:"outcome"`
		Price    int       `json:"price"`
		Quantity int64     `json:"quantity"`
	}
	cancelAllShape struct {
		Account int64       `json:"account"`
		Markets []uuid.UUID `json:"markets"`
	}
	codeShape struct {
		Code   string `json:"code"`
		Status string `json:"status,omitempty"`
	}
)

func testTrade(i int) records.Trade {
	return records.Trade{ID: uuid.MustParse("0190f6a4-7a55-7c3e-9b1d-2f0e8c4b5a6" + string(rune('0'+i))),
		MarketID: uuid.MustParse(testMarket), Outcome: "YES", Side: "BUY", Price: 55 + i, Quantity: int64(3 + i),
		YesPrice: 55 + i, CreatedAt: tMicro}
}

func testOrder() records.Order {
	return records.Order{ID: uuid.MustParse("0190f6a4-7a55-7c3e-9b1d-2f0e8c4b5a6f"), MarketID: uuid.MustParse(testMarket),
		Side: "BUY", Outcome: "YES", Price: 57, Quantity: 10, FilledQuantity: 7, Status: engine.StatusPartiallyFilled,
		CreatedAt: tMicro, UpdatedAt: tNano, Seq: 99, AccountID: 7}
}

func testPlaced() records.PlacedOrder {
	return records.PlacedOrder{Order: testOrder(), Trades: []records.Trade{testTrade(1), testTrade(2)}}
}

func testMarkets() []records.Market {
	return []records.Market{
		{ID: uuid.MustParse(testMarket), Question: "Rain?", Category: "weather", Status: "OPEN", LabelA: "Yes", LabelB: "No",
			CreatedAt: tMicro, UpdatedAt: tWhole},
		{ID: uuid.MustParse(testMarket), URL: &someURL, Question: someTxt, Description: &someTxt, Category: "a&b",
			Status: "RESOLVED", ClosesAt: &tTrail, ResolvesAt: &tZone, Resolved: true, Outcome: &yes, LabelA: "<A>",
			LabelB: "B", CreatedAt: tZero, UpdatedAt: tNow, Name: &someTxt, LastTradePrice: &price, Epoch: 3},
	}
}

func testDepth() engine.Depth {
	lv := []engine.Level{{Price: 55, Quantity: 10, Total: 10}, {Price: 54, Quantity: 5, Total: 15}}
	return engine.Depth{Yes: engine.View{Bids: lv, Asks: []engine.Level{}, LastTradePrice: 55},
		No: engine.View{Asks: lv}} // NO bids nil: the shard's wire snapshot keeps them null
}

// rawAndMarshaler covers values that carry their own JSON.
type rawAndMarshaler struct {
	Raw     json.RawMessage  `json:"raw"`
	NilRaw  json.RawMessage  `json:"nilRaw"`
	Custom  spacedMarshaler  `json:"custom"`
	PCustom *spacedMarshaler `json:"pCustom"`
	Text    uuid.UUID        `json:"text"`
	Omitted string           `json:"omitted,omitempty"`
	Skipped int              `json:"-"`
}

// seqPlaced has the shape of a placement as a shard answers it (the public shape embedded, with
// the sequence number that records.Order hides under json:"-" added back under its own tag): a
// field hidden in an embedded struct and shown by the outer one. A local copy, so that this test
// does not follow the wire type's name.
type seqPlaced struct {
	records.PlacedOrder
	Seq int64 `json:"seq"`
}

type spacedMarshaler struct{}

func (spacedMarshaler) MarshalJSON() ([]byte, error) {
	return []byte(" { \"b\" : [ 1 , \"<&>\" ] ,\n \"a\" : null } "), nil
}

// responses are the API's answers, public and internal, as the handlers pass them to c.JSON.
func responses() map[string]any {
	placed := testPlaced()
	noFill := records.PlacedOrder{Order: testOrder(), Trades: []records.Trade{}}
	depth := testDepth()
	cursor := "MTcwMDAwMDAwMDAwMDAwMC4xMjNlNDU2Nw"
	return map[string]any{
		"market":               testMarkets()[1],
		"markets":              gin.H{"markets": testMarkets()},
		"markets empty":        gin.H{"markets": []records.Market{}},
		"order":                testOrder(),
		"placed with trades":   placed,
		"placed no fill":       noFill,
		"placed nil trades":    records.PlacedOrder{Order: testOrder()}, // null, as encoding/json
		"placed pointer":       &placed,
		"placed with seq":      seqPlaced{PlacedOrder: placed, Seq: 1234},
		"trades":               []records.Trade{testTrade(1), testTrade(2), testTrade(3)},
		"trades empty":         []records.Trade{},
		"cancelled nil":        []records.Order(nil),
		"cancelled":            []records.Order{testOrder(), testOrder()},
		"positions":            gin.H{"positions": []records.Position{{ID: uuid.New(), MarketID: uuid.New(), MarketQuestion: someTxt, MarketStatus: "OPEN", Outcome: "NO", Quantity: 3, LockedQuantity: 1, CreatedAt: tMicro, UpdatedAt: tZone}}},
		"positions empty":      gin.H{"positions": []records.Position{}},
		"account":              records.Account{UID: uuid.New(), Name: someTxt, Available: 1_000_000, Locked: 12345, CreatedAt: tMicro, ID: 5},
		"admin account":        gin.H{"account": records.Account{UID: uuid.New(), Name: "alice"}, "apiKey": "pmx_abc&<>"},
		"orders page":          gin.H{"orders": []records.Order{testOrder()}, "nextCursor": &cursor},
		"orders last page":     gin.H{"orders": []records.Order{}, "nextCursor": (*string)(nil)},
		"book":                 gin.H{"orderBookYes": depth.Yes, "orderBookNo": depth.No},
		"book empty":           gin.H{"orderBookYes": engine.View{}, "orderBookNo": engine.View{LastTradePrice: 1}},
		"error":                ErrorBody{Error: "not enough available cash: a BUY locks price × quantity cents", Details: ErrorDetails{Code: "insufficient_funds", Field: "quantity"}},
		"error no field":       ErrorBody{Error: "no such endpoint: GET /api/v1/<script>&x=\"1\"", Details: ErrorDetails{Code: "not_found"}},
		"error odd text":       ErrorBody{Error: someTxt, Details: ErrorDetails{Code: "invalid_value", Field: someTxt}},
		"internal snapshot":    &exchange.Snapshot{Status: "OPEN", Epoch: 4, Depth: depth},
		"internal empty snap":  &exchange.Snapshot{Status: "OPEN"},
		"internal error":       codeShape{Code: "not_owner"},
		"internal place wire":  placeShape{Account: 7, Market: uuid.MustParse(testMarket), Side: "BUY", Outcome: "NO", Price: 40, Quantity: 7},
		"internal cancel all":  cancelAllShape{Account: 7, Markets: []uuid.UUID{uuid.MustParse(testMarket)}},
		"raw and marshalers":   rawAndMarshaler{Raw: json.RawMessage(` {"z": 1, "a": "<x>"} `), Custom: spacedMarshaler{}, PCustom: &spacedMarshaler{}},
		"raw with \\u0008":     rawAndMarshaler{Raw: json.RawMessage(`"a\u0008b\u000cc\b"`)},
		"text like \\u000c":    `\u000c \\u0008 \u000`,
		"map key order":        map[string]any{"orders": 1, "order": 2, "orderBookYes": 3, "orderBookNo": 4, "nextCursor": 5, "Orders": 6, "": 7, "é": 8, "a_b": 9, "a1": 10},
		"int keys sorted":      map[int]string{10: "a", 9: "b", -1: "c"},
		"nil map":              map[string]int(nil),
		"nil interface":        gin.H{"x": nil},
		"html in values":       map[string]string{"a": "<&>"},
		"big numbers":          []int64{0, -1, 1 << 62, -(1 << 63)},
		"string with newlines": "line\nline\r\ttab\"quote\\",
	}
}

// TestJSONAPIIsGoccy checks that the codec is installed for gin (render and binding).
func TestJSONAPIIsGoccy(t *testing.T) {
	if _, ok := ginjson.API.(goccyJSON); !ok {
		t.Fatalf("gin's json.API is %T, want goccyJSON", ginjson.API)
	}
}

// TestJSONSameBytes requires the new codec to write exactly what encoding/json writes for every
// answer of the API, through each path gin takes: Marshal (c.JSON) and the Encoder.
func TestJSONSameBytes(t *testing.T) {
	for name, v := range responses() {
		t.Run(name, func(t *testing.T) {
			want, err := json.Marshal(v)
			if err != nil {
				t.Fatal(err)
			}
			got, err := ginjson.API.Marshal(v)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, want) {
				t.Fatalf("Marshal differs:\n got %s\nwant %s", got, want)
			}

			for _, html := range []bool{true, false} {
				var wb, gb bytes.Buffer
				we := json.NewEncoder(&wb)
				we.SetEscapeHTML(html)
				ge := ginjson.API.NewEncoder(&gb)
				ge.SetEscapeHTML(html)
				if err := we.Encode(v); err != nil {
					t.Fatal(err)
				}
				if err := ge.Encode(v); err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(gb.Bytes(), wb.Bytes()) {
					t.Fatalf("Encoder (escape HTML %v) differs:\n got %s\nwant %s", html, gb.Bytes(), wb.Bytes())
				}
			}

			want, _ = json.MarshalIndent(v, "", "    ")
			got, err = ginjson.API.MarshalIndent(v, "", "    ")
			if err != nil || !bytes.Equal(got, want) {
				t.Fatalf("MarshalIndent differs (%v):\n got %s\nwant %s", err, got, want)
			}
		})
	}
}

// TestJSONSameBytesStrings compares the encoding of many strings (every ASCII byte, the
// separators, invalid UTF-8, random runes) in the error body, the one answer that echoes text.
func TestJSONSameBytesStrings(t *testing.T) {
	var cases []string
	for c := 0; c < 0x80; c++ {
		cases = append(cases, "a"+string(rune(c))+"b")
	}
	cases = append(cases, "\u2028", "\u2029", "\ufffd", "\xff", "\xc3", "\xed\xa0\x80", "\xf4\x90\x80\x80", "a\xe2\x80b", "𝄞\xf0")
	rng := rand.New(rand.NewPCG(1, 2))
	for range 2000 {
		b := make([]byte, rng.IntN(24))
		for i := range b {
			b[i] = byte(rng.IntN(256))
		}
		cases = append(cases, string(b))
		var sb strings.Builder
		for range rng.IntN(12) {
			sb.WriteRune(rune(rng.IntN(0x30000)))
		}
		cases = append(cases, sb.String())
	}
	for _, s := range cases {
		v := ErrorBody{Error: s, Details: ErrorDetails{Code: "x", Field: s}}
		want, _ := json.Marshal(v)
		got, err := ginjson.API.Marshal(v)
		if err != nil || !bytes.Equal(got, want) {
			t.Fatalf("%q (valid UTF-8 %v): got %s (%v), want %s", s, utf8.ValidString(s), got, err, want)
		}
	}
}

// TestJSONMapKeysWithEscapes checks map keys that JSON escapes: encoding/json sorts them by the key
// itself, and goccy before v0.11 by its escaped form (the API's maps are gin.H with identifier
// keys, so no answer had them).
func TestJSONMapKeysWithEscapes(t *testing.T) {
	for _, v := range []map[string]int{
		{"<": 1, "B": 2},
		{"&": 1, "'": 2, "\"": 3, "\\": 4, "\u2028": 5, "\x01": 6, "a": 7, "\xff": 8},
	} {
		want, _ := json.Marshal(v)
		got, err := ginjson.API.Marshal(v)
		if err != nil || !bytes.Equal(got, want) {
			t.Errorf("goccy %s (%v), encoding/json %s", got, err, want)
		}
	}
}

// TestJSONRender checks c.JSON end to end: the bytes a handler writes are encoding/json's.
func TestJSONRender(t *testing.T) {
	gin.SetMode(gin.ReleaseMode)
	v := testPlaced()
	w := httptest.NewRecorder()
	c, _ := gin.CreateTestContext(w)
	c.JSON(http.StatusCreated, v)
	want, _ := json.Marshal(v)
	if w.Code != http.StatusCreated || w.Header().Get("Content-Type") != "application/json; charset=utf-8" || !bytes.Equal(w.Body.Bytes(), want) {
		t.Fatalf("c.JSON wrote %d %q %s; want %s", w.Code, w.Header().Get("Content-Type"), w.Body.Bytes(), want)
	}
}

// TestJSONBinding checks the internal API's request binding (c.ShouldBindJSON) decodes what
// encoding/json decodes, and rejects what it rejects.
func TestJSONBinding(t *testing.T) {
	// bind binds as c.ShouldBindJSON does, from a body read whole and from one read a byte at a
	// time (the stream decoder refilling its buffer at every byte); both must agree.
	bind := func(body string, out any) error {
		err := binding.JSON.Bind(httptest.NewRequest(http.MethodPost, "/", strings.NewReader(body)), out)
		again := reflect.New(reflect.TypeOf(out).Elem())
		req := httptest.NewRequest(http.MethodPost, "/", iotest.OneByteReader(strings.NewReader(body)))
		err2 := binding.JSON.Bind(req, again.Interface())
		if (err == nil) != (err2 == nil) || err == nil && !reflect.DeepEqual(out, again.Interface()) {
			t.Errorf("%.60s: read whole %v, byte by byte %v", body, err, err2)
		}
		return err
	}
	var many strings.Builder
	many.WriteString(`{"account":7,"markets":[`)
	for i := range 2000 {
		if i > 0 {
			many.WriteByte(',')
		}
		many.WriteString(`"` + uuid.NewSHA1(uuid.NameSpaceOID, []byte{byte(i), byte(i >> 8)}).String() + `"`)
	}
	many.WriteString(`]}`)
	for _, body := range []string{
		`{"account":7,"market":"` + testMarket + `","side":"BUY","outcome":"NO","price":40,"quantity":7}`,
		`{"account":7,"market":"` + testMarket + `","side":"BUY","outcome":"NO","price":40,"quantity":7,"extra":[1,{"a":null}]}`,
		`{"ACCOUNT":7,"Market":"` + testMarket + `"}`,
		`{"account":7} trailing`,
		`{"account":"7"}`,
		`{"market":"not a uuid"}`,
		`{"price":1.5}`,
		`{"account":7`,
		`[]`,
		`null`,
		``,
	} {
		// On an error the handler answers bad_request and drops the value, which the decoders
		// leave filled differently: only a success must give the same value.
		var want, got placeShape
		werr := json.NewDecoder(strings.NewReader(body)).Decode(&want)
		gerr := bind(body, &got)
		if (werr == nil) != (gerr == nil) || werr == nil && want != got {
			t.Errorf("%s: got %+v, %v; want %+v, %v", body, got, gerr, want, werr)
		}
	}
	for _, body := range []string{
		`{"account":7,"markets":["` + testMarket + `"]}`,
		`{"account":7,"markets":[]}`,
		`{"account":7,"markets":null}`,
		`{"account":7}`,
		`{"account":7,"markets":["x"]}`,
		many.String(),
	} {
		var want, got cancelAllShape
		werr := json.NewDecoder(strings.NewReader(body)).Decode(&want)
		gerr := bind(body, &got)
		if (werr == nil) != (gerr == nil) || werr == nil && (want.Account != got.Account ||
			!slices.Equal(want.Markets, got.Markets) || (want.Markets == nil) != (got.Markets == nil)) {
			t.Errorf("%s: got %+v, %v; want %+v, %v", body, got, gerr, want, werr)
		}
	}
}

// BenchmarkJSON renders a placement's answer with two fills: encoding/json against the codec
// gin now uses, by Marshal and through gin's render.WriteJSON (what c.JSON does).
func BenchmarkJSON(b *testing.B) {
	v := testPlaced()
	b.Run("PlacedOrder/encoding_json", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := json.Marshal(v); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("PlacedOrder/goccy", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := ginjson.API.Marshal(v); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("PlacedOrder/gin_render_goccy", func(b *testing.B) {
		b.ReportAllocs()
		w := &discardWriter{h: http.Header{}}
		for b.Loop() {
			if err := render.WriteJSON(w, v); err != nil {
				b.Fatal(err)
			}
		}
	})
}

type discardWriter struct{ h http.Header }

func (w *discardWriter) Header() http.Header         { return w.h }
func (w *discardWriter) Write(p []byte) (int, error) { return len(p), nil }
func (w *discardWriter) WriteHeader(int)             {}
