package apiserver

import (
	"testing"

	"github.com/google/uuid"

	"github.com/pmx-dev/pmx/internal/feed"
)

func TestParseRequest(t *testing.T) {
	const m = `"marketId":"` + testMarket + `"`
	seq := func(n int64) *int64 { return &n }
	for _, tt := range []struct {
		name   string
		msg    string
		public bool
		want   wsRequest // when accepted
		code   string    // when refused
		id     int64     // the refusal's id
	}{
		{name: "ping", msg: `{"op":"ping","id":3}`, want: wsRequest{Op: "ping", ID: 3}},
		{name: "ping without an id", msg: `{"op":"ping"}`, want: wsRequest{Op: "ping"}},
		{name: "null is absent", msg: `{"op":"ping","id":null}`, want: wsRequest{Op: "ping"}},
		{name: "book", msg: `{"op":"subscribe","id":1,"channel":"book",` + m + `}`,
			want: wsRequest{Op: "subscribe", ID: 1, Channel: "book", MarketID: testMarket, Market: uuid.MustParse(testMarket)}},
		{name: "resume", msg: `{"op":"subscribe","id":1,"channel":"trades",` + m + `,"resumeFrom":1.2e1}`,
			want: wsRequest{Op: "subscribe", ID: 1, Channel: "trades", MarketID: testMarket, Market: uuid.MustParse(testMarket), ResumeFrom: seq(12)}},
		{name: "orders from 0, the start", msg: `{"op":"subscribe","channel":"orders","resumeFrom":0}`,
			want: wsRequest{Op: "subscribe", Channel: "orders", Cursor: feed.Cursor{}}},
		{name: "fills from a cursor", msg: `{"op":"subscribe","channel":"fills","resumeFrom":"v2.AAUHc2hhcmQtYQI"}`,
			want: wsRequest{Op: "subscribe", Channel: "fills", Cursor: feed.Cursor{"": 5, "shard-a": 2}}},
		{name: "lifecycle", msg: `{"op":"subscribe","channel":"lifecycle","marketId":null}`, public: true,
			want: wsRequest{Op: "subscribe", Channel: "lifecycle"}},
		{name: "unsubscribe", msg: `{"op":"unsubscribe","id":-2,"channel":"ticker",` + m + `}`,
			want: wsRequest{Op: "unsubscribe", ID: -2, Channel: "ticker", MarketID: testMarket, Market: uuid.MustParse(testMarket)}},
		{name: "escaped key", msg: `{"\u006fp":"ping","id":4}`, want: wsRequest{Op: "ping", ID: 4}},

		{name: "not JSON", msg: `not json`, code: "invalid_message"},
		{name: "not an object", msg: `[{"op":"ping","id":5}]`, code: "invalid_message"},
		{name: "two objects", msg: `{"op":"ping","id":5}{"op":"ping","id":6}`, code: "invalid_message"},
		{name: "data after the object", msg: `{"op":"ping","id":5} x`, code: "invalid_message"},
		{name: "repeated key", msg: `{"op":"ping","id":5,"op":"subscribe"}`, code: "invalid_message"},
		{name: "key in another case", msg: `{"OP":"ping","id":5}`, code: "invalid_message", id: 5},
		{name: "unknown key", msg: `{"op":"ping","id":5,"extra":true}`, code: "invalid_message", id: 5},
		{name: "ping with a channel", msg: `{"op":"ping","id":5,"channel":"book"}`, code: "invalid_message", id: 5},
		{name: "unsubscribe with resumeFrom", msg: `{"op":"unsubscribe","id":5,"channel":"book",` + m + `,"resumeFrom":1}`,
			code: "invalid_message", id: 5},
		{name: "no op", msg: `{"id":5}`, code: "invalid_message", id: 5},
		{name: "unknown op", msg: `{"op":"dance","id":5}`, code: "invalid_message", id: 5},
		{name: "id a string", msg: `{"op":"ping","id":"5"}`, code: "invalid_message"},
		{name: "id a fraction", msg: `{"op":"ping","id":5.5}`, code: "invalid_message"},
		{name: "id too large", msg: `{"op":"ping","id":1e19}`, code: "invalid_message"},
		{name: "channel a number", msg: `{"op":"subscribe","id":5,"channel":1}`, code: "invalid_message", id: 5},
		{name: "unknown channel", msg: `{"op":"subscribe","id":5,"channel":"candles",` + m + `}`, code: "unknown_channel", id: 5},
		{name: "no channel", msg: `{"op":"subscribe","id":5}`, code: "unknown_channel", id: 5},
		{name: "no market", msg: `{"op":"subscribe","id":5,"channel":"book"}`, code: "invalid_market_id", id: 5},
		{name: "market not a UUID", msg: `{"op":"subscribe","id":5,"channel":"book","marketId":"nope"}`, code: "invalid_market_id", id: 5},
		{name: "market in braces", msg: `{"op":"subscribe","id":5,"channel":"book","marketId":"{` + testMarket + `}"}`,
			code: "invalid_market_id", id: 5},
		{name: "market without hyphens", msg: `{"op":"subscribe","id":5,"channel":"book","marketId":"123e4567e89b12d3a456426614174000"}`,
			code: "invalid_market_id", id: 5},
		{name: "lifecycle with a market", msg: `{"op":"subscribe","id":5,"channel":"lifecycle",` + m + `}`, code: "invalid_message", id: 5},
		{name: "lifecycle with an empty market", msg: `{"op":"subscribe","id":5,"channel":"lifecycle","marketId":""}`, code: "invalid_message", id: 5},
		{name: "lifecycle resumed", msg: `{"op":"subscribe","id":5,"channel":"lifecycle","resumeFrom":1}`, code: "invalid_message", id: 5},
		{name: "orders with a market", msg: `{"op":"subscribe","id":5,"channel":"orders",` + m + `}`, code: "invalid_message", id: 5},
		{name: "orders without a key", msg: `{"op":"subscribe","id":5,"channel":"fills"}`, public: true, code: "key_required", id: 5},
		{name: "ticker resumed", msg: `{"op":"subscribe","id":5,"channel":"ticker",` + m + `,"resumeFrom":1}`, code: "invalid_resume_from", id: 5},
		{name: "resume from -1", msg: `{"op":"subscribe","id":5,"channel":"book",` + m + `,"resumeFrom":-1}`, code: "invalid_resume_from", id: 5},
		{name: "resume from a fraction", msg: `{"op":"subscribe","id":5,"channel":"book",` + m + `,"resumeFrom":1.5}`, code: "invalid_resume_from", id: 5},
		{name: "resume from a string", msg: `{"op":"subscribe","id":5,"channel":"book",` + m + `,"resumeFrom":"1"}`, code: "invalid_message", id: 5},
		{name: "orders from a seq", msg: `{"op":"subscribe","id":5,"channel":"orders","resumeFrom":7}`, code: "outdated_cursor", id: 5},
		{name: "orders from a seq as a string", msg: `{"op":"subscribe","id":5,"channel":"orders","resumeFrom":"7"}`, code: "outdated_cursor", id: 5},
		{name: "orders from a damaged cursor", msg: `{"op":"subscribe","id":5,"channel":"orders","resumeFrom":"v2.A"}`, code: "invalid_resume_from", id: 5},
		{name: "orders from a fraction", msg: `{"op":"subscribe","id":5,"channel":"orders","resumeFrom":1.5}`, code: "invalid_message", id: 5},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got, refused := parseRequest(true, []byte(tt.msg), tt.public)
			switch {
			case tt.code == "" && refused != nil:
				t.Fatalf("refused: %+v", *refused)
			case tt.code == "":
				if got.Op != tt.want.Op || got.ID != tt.want.ID || got.Channel != tt.want.Channel || got.MarketID != tt.want.MarketID ||
					got.Market != tt.want.Market || (got.ResumeFrom == nil) != (tt.want.ResumeFrom == nil) ||
					got.ResumeFrom != nil && *got.ResumeFrom != *tt.want.ResumeFrom ||
					(got.Cursor == nil) != (tt.want.Cursor == nil) || got.Cursor.String() != tt.want.Cursor.String() {
					t.Fatalf("read %+v, want %+v", got, tt.want)
				}
			case refused == nil:
				t.Fatalf("accepted as %+v, want %s", got, tt.code)
			case refused.Type != "error" || refused.Code != tt.code || refused.ID != tt.id || refused.Message == "":
				t.Fatalf("refused with %+v, want %s for id %d", *refused, tt.code, tt.id)
			}
		})
	}
	if _, refused := parseRequest(false, []byte(`{"op":"ping","id":1}`), false); refused == nil || refused.Code != "invalid_message" {
		t.Fatalf("a binary message: %+v", refused)
	}
}
