package apiserver

import (
	"encoding/json"
	"errors"
	"net/url"
	"slices"
	"testing"
	"time"

	"github.com/google/uuid"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/pmx-dev/pmx/internal/apijson"
	"github.com/pmx-dev/pmx/internal/domain"
	"github.com/pmx-dev/pmx/internal/kit/httpkit"
	"github.com/pmx-dev/pmx/internal/market/marketspec"
)

// The times the API takes must lie within domain.CheckTime's range once in UTC: RFC 3339 allows
// offsets that carry 9999-12-31 into year 10000 (and 0000-01-01 into year -1), which no JSON
// answer or event can then carry. These cases are each time field's, at the bounds.

// timeCases are RFC 3339 times and whether the API takes them; code is the refusal's.
var timeCases = []struct {
	at   string
	code string // "" when taken
}{
	{"9999-12-31T23:59:59Z", ""},
	{"9999-12-31T23:59:59.999999999Z", ""},
	{"9999-12-31T23:59:59+00:01", ""},
	{"9999-12-31T23:59:59-23:59", "out_of_range"}, // year 10000 in UTC
	{"9999-12-31T23:59:59-00:01", "out_of_range"},
	{"9999-12-31T23:59:59.999999999-00:00", ""},
	{"1970-01-01T00:00:00Z", ""},
	{"1969-12-31T23:59:59.999999999Z", "out_of_range"},
	{"0000-01-01T00:00:00Z", "out_of_range"},
	{"0000-01-01T00:00:00+23:59", "out_of_range"}, // year -1 in UTC
	{"10000-01-01T00:00:00Z", "invalid_value"},
	{"-0001-01-01T00:00:00Z", "invalid_value"},
	{"2031-13-01T00:00:00Z", "invalid_value"},
}

func TestTimesAreBounded(t *testing.T) {
	for _, tc := range timeCases {
		t.Run(tc.at, func(t *testing.T) {
			check := func(what, field string, err error, got time.Time) {
				t.Helper()
				if tc.code == "" {
					if err != nil {
						t.Fatalf("%s refused %s: %v", what, tc.at, err)
					}
					if _, err := json.Marshal(got); err != nil {
						t.Fatalf("%s took %s, which JSON cannot carry: %v", what, tc.at, err)
					}
					return
				}
				var e *httpkit.Error
				if !errors.As(err, &e) || e.Status != 400 || e.Code != tc.code || e.Field != field || e.Message == "" {
					t.Fatalf("%s: got %+v (%v), want 400 %s on %s", what, e, err, tc.code, field)
				}
			}

			r, err := decodeOrder([]byte(with(`"timeInForce":"GTD","expiresAt":"`+tc.at+`","clientOrderId":"c"`)), 1_000_000, testNow)
			check("POST /order", "expiresAt", err, r.ExpiresAt)

			w, err := candleWindowOf(url.Values{"interval": {"1m"}, "to": {tc.at}}, testNow)
			check("GET /market/candles to", "to", err, w.To)
			w, err = candleWindowOf(url.Values{"interval": {"1m"}, "from": {tc.at}, "to": {"9999-12-31T23:59:59.999999999Z"}}, testNow)
			if tc.code == "" {
				err = nil // in range, it spans too long a window: only its range is tested here
			}
			check("GET /market/candles from", "from", err, w.From)

			for _, field := range []string{"closesAt", "resolvesAt"} {
				spec, err := decodeMarket([]byte(`{"question":"Will it?","category":"c","` + field + `":"` + tc.at + `"}`))
				var at time.Time
				if spec.ClosesAt != nil {
					at = spec.ClosesAt.Time
				} else if spec.ResolvesAt != nil {
					at = spec.ResolvesAt.Time
				}
				if tc.code == "invalid_value" {
					// encoding/json's parse error names no field; what matters is the refusal.
					var e *httpkit.Error
					if !errors.As(err, &e) || e.Status != 400 {
						t.Fatalf("POST /admin/v1/markets %s: %v, want a 400", field, err)
					}
					continue
				}
				check("POST /admin/v1/markets "+field, field, err, at)
			}
		})
	}
}

func TestCandleWindow(t *testing.T) {
	tests := []struct {
		name        string
		q           url.Values
		from, to    string
		code, field string
	}{
		{name: "defaults", q: url.Values{"interval": {"1m"}}, from: "2030-01-01T10:20:00Z", to: "2030-01-01T12:00:00Z"},
		{name: "to only", q: url.Values{"interval": {"1h"}, "to": {"2030-01-01T12:00:00+01:00"}}, from: "2029-12-28T07:00:00Z", to: "2030-01-01T11:00:00Z"},
		{name: "the last hours of year 9999", q: url.Values{"interval": {"1h"}, "to": {"9999-12-31T23:59:59Z"}}, from: "9999-12-27T19:59:59Z", to: "9999-12-31T23:59:59Z"},
		{name: "unknown interval", q: url.Values{"interval": {"2m"}}, code: "invalid_value", field: "interval"},
		{name: "to past year 9999 by its offset", q: url.Values{"interval": {"1m"}, "to": {"9999-12-31T23:59:59-23:59"}}, code: "out_of_range", field: "to"},
		{name: "from before 1970", q: url.Values{"interval": {"1d"}, "from": {"1969-12-31T00:00:00Z"}, "to": {"1970-01-02T00:00:00Z"}}, code: "out_of_range", field: "from"},
		{name: "from not before to", q: url.Values{"interval": {"1m"}, "from": {"2030-01-01T12:00:00Z"}, "to": {"2030-01-01T12:00:00Z"}}, code: "out_of_range", field: "from"},
		{name: "too long", q: url.Values{"interval": {"1m"}, "from": {"2029-01-01T12:00:00Z"}}, code: "out_of_range", field: "from"},
		{name: "to not RFC 3339", q: url.Values{"interval": {"1m"}, "to": {"tomorrow"}}, code: "invalid_value", field: "to"},
		{name: "empty to", q: url.Values{"interval": {"1m"}, "to": {""}}, code: "invalid_value", field: "to"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w, err := candleWindowOf(tt.q, testNow)
			if tt.code == "" {
				if err != nil || w.From.Format(time.RFC3339) != tt.from || w.To.Format(time.RFC3339) != tt.to {
					t.Fatalf("got %v to %v, %v; want %s to %s", w.From, w.To, err, tt.from, tt.to)
				}
				return
			}
			var e *httpkit.Error
			if !errors.As(err, &e) || e.Status != 400 || e.Code != tt.code || e.Field != tt.field {
				t.Fatalf("got %+v (%v); want 400 %s on %s", e, err, tt.code, tt.field)
			}
		})
	}
}

// FuzzCandleWindow checks that any candles query is either a window JSON can carry, of at most
// maxCandles intervals, whose given times are within the exchange's range, or a documented 400 on
// one of the query's fields.
func FuzzCandleWindow(f *testing.F) {
	f.Add("interval=1m")
	f.Add("interval=1h&to=9999-12-31T23:59:59Z")
	f.Add("interval=1d&to=9999-12-31T23:59:59-23:59")
	f.Add("interval=5m&from=0000-01-01T00:00:00%2B23:59&to=0000-01-02T00:00:00Z")
	f.Add("interval=1m&from=2030-01-01T11:00:00.5Z&to=2030-01-01T12:00:00%2B00:00")
	f.Add("interval=1m&to=&from=1970-01-01T00:00:00Z")
	f.Fuzz(func(t *testing.T, query string) {
		q, err := url.ParseQuery(query)
		if err != nil {
			return
		}
		w, err := candleWindowOf(q, testNow)
		if err != nil {
			var e *httpkit.Error
			if !errors.As(err, &e) || e.Status != 400 || !slices.Contains([]string{"interval", "from", "to"}, e.Field) ||
				!slices.Contains([]string{"invalid_value", "out_of_range"}, e.Code) || e.Message == "" {
				t.Fatalf("%q: refused with %v, not a documented 400", query, err)
			}
			return
		}
		if _, err := json.Marshal(map[string]any{"from": w.From, "to": w.To}); err != nil {
			t.Fatalf("%q: took a window JSON cannot carry: %v", query, err)
		}
		for _, field := range []string{"from", "to"} {
			at := map[string]time.Time{"from": w.From, "to": w.To}[field]
			if q.Has(field) && !domain.TimeInRange(at) {
				t.Fatalf("%q: took %s %v, out of range", query, field, at)
			}
		}
		if !w.From.Before(w.To) || w.To.Sub(w.From) > maxCandles*w.Every || candleIntervals[w.Interval] != w.Every {
			t.Fatalf("%q: took window %+v", query, w)
		}
	})
}

// FuzzDecodeMarket checks that any admin market body is either a spec whose market the API can
// answer with (its times within range, its JSON encodable) or a 400 with a code, and never panics.
func FuzzDecodeMarket(f *testing.F) {
	f.Add([]byte(`{"question":"Will it?","category":"c"}`))
	f.Add([]byte(`{"question":"Will it?","category":"c","closesAt":"2030-01-01T00:00:00Z","resolvesAt":"9999-12-31T23:59:59Z"}`))
	f.Add([]byte(`{"question":"Will it?","category":"c","resolvesAt":"9999-12-31T23:59:59-23:59"}`))
	f.Add([]byte(`{"question":"Will it?","category":"c","closesAt":"0000-01-01T00:00:00+23:59"}`))
	f.Add([]byte(`{"question":"Will it?","category":"c","url":"https://example.com","labelA":"A","labelB":"B","description":"d"}`))
	f.Add([]byte(`{"question":"Will it?","Question":"Or?","category":"c"}`))
	f.Add([]byte(`{"question":7,"category":"c","closesAt":1}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		spec, err := decodeMarket(body)
		if err != nil {
			var e *httpkit.Error
			if !errors.As(err, &e) || e.Status != 400 || e.Code == "" || e.Message == "" {
				t.Fatalf("%q: refused with %v, not a 400 with a code", body, err)
			}
			return
		}
		for _, at := range []*time.Time{timeOf(spec.ClosesAt), timeOf(spec.ResolvesAt)} {
			if at != nil && !domain.TimeInRange(*at) {
				t.Fatalf("%q: took a time out of range, %v", body, at)
			}
		}
		if err := marketspec.Validate(&spec); err != nil {
			t.Fatalf("%q: took a spec the Market's rules refuse: %v", body, err)
		}
		row := marketspec.Row(uuid.New(), spec, nil, testNow)
		if _, err := json.Marshal(apijson.MarketOf(&row)); err != nil {
			t.Fatalf("%q: took a market whose answer JSON cannot carry: %v", body, err)
		}
	})
}

func timeOf(t *metav1.Time) *time.Time {
	if t == nil {
		return nil
	}
	return &t.Time
}
