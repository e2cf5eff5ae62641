package apiserver_test

import (
	"bytes"
	"encoding/json"
	"math"
	"math/big"
	"slices"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/pmx-dev/pmx/apiserver"
	"github.com/pmx-dev/pmx/internal/apitest"
	"github.com/pmx-dev/pmx/internal/feed"
)

// FuzzParseRequest checks the feed's reader of client messages against the AsyncAPI document:
// it accepts a message exactly when the document allows it (with the rules the document states
// in words: which channels take a marketId and resumeFrom, and that a connection without a key
// has no orders or fills), reads what the message says, and refuses anything else with an error
// message the document describes; it never panics. The references are encoding/json, the
// document's schemas (internal/apitest) and refDuplicate.
func FuzzParseRequest(f *testing.F) {
	const m = `"marketId":"123e4567-e89b-12d3-a456-426614174000"`
	for _, s := range []string{
		`{"op":"ping","id":1}`,
		`{"op":"subscribe","id":2,"channel":"book",` + m + `,"resumeFrom":0}`,
		`{"op":"subscribe","id":3,"channel":"trades",` + m + `,"resumeFrom":1e1}`,
		`{"op":"subscribe","id":4,"channel":"ticker",` + m + `}`,
		`{"op":"subscribe","id":5,"channel":"lifecycle","marketId":null}`,
		`{"op":"subscribe","id":6,"channel":"orders","resumeFrom":9223372036854775807}`,
		`{"op":"subscribe","id":6,"channel":"orders","resumeFrom":0}`,
		`{"op":"subscribe","id":6,"channel":"fills","resumeFrom":"v2.AKwCB3NoYXJkLWECB3NoYXJkLWIB"}`,
		`{"op":"subscribe","id":6,"channel":"fills","resumeFrom":"v2.AIAB"}`,
		`{"op":"subscribe","id":6,"channel":"book",` + m + `,"resumeFrom":"v2."}`,
		`{"op":"unsubscribe","id":7,"channel":"fills"}`,
		`{"op":"unsubscribe","id":-8.0,"channel":"book","marketId":"123E4567-E89B-12D3-A456-426614174000"}`,
		`{"op":"ping","id":9,"op":"ping"}`,
		`{"\u006fp":"ping","Id":10}`,
		`{"op":"ping","id":11} `,
		`{"op":"ping","id":12}{}`,
	} {
		f.Add([]byte(s), false)
		f.Add([]byte(s), true)
	}
	v := apitest.NewAsyncValidator(f)
	keys := documentedKeys(f)
	f.Fuzz(func(t *testing.T, raw []byte, public bool) {
		req, refused := apiserver.ParseRequest(true, raw, public)
		documented, why := conforms(v, keys, raw, public)
		if refused != nil {
			answer, err := json.Marshal(refused)
			if err != nil {
				t.Fatal(err)
			}
			if err := v.ValidateServer(answer); err != nil || refused.Type != "error" || refused.Message == "" {
				t.Fatalf("refused %q with %s: %v", raw, answer, err)
			}
			if documented {
				t.Fatalf("refused %q, which the document allows, with %s", raw, answer)
			}
			return
		}
		if !documented {
			t.Fatalf("accepted %q as %+v: %s", raw, req, why)
		}
		var msg map[string]any
		d := json.NewDecoder(bytes.NewReader(raw))
		d.UseNumber()
		if err := d.Decode(&msg); err != nil {
			t.Fatal(err)
		}
		str := func(k string) string { s, _ := msg[k].(string); return s }
		num := func(k string) (int64, bool) {
			n, ok := msg[k].(json.Number)
			if !ok {
				return 0, false
			}
			r, _ := new(big.Rat).SetString(string(n))
			return r.Num().Int64(), true
		}
		id, _ := num("id")
		resume, resumed := num("resumeFrom")
		if account := req.Channel == "orders" || req.Channel == "fills"; account {
			// A cursor, or the start for 0.
			want := feed.Cursor{}
			if s, ok := msg["resumeFrom"].(string); ok {
				want, _ = feed.ParseCursor(s)
			}
			_, given := msg["resumeFrom"]
			given = given && msg["resumeFrom"] != nil
			if req.ResumeFrom != nil || (req.Cursor != nil) != given || given && req.Cursor.String() != want.String() {
				t.Fatalf("read %q as %+v", raw, req)
			}
			resumed, resume = false, 0
		}
		if req.Op != str("op") || req.ID != id || req.Channel != str("channel") || req.MarketID != str("marketId") ||
			(req.ResumeFrom != nil) != resumed || resumed && *req.ResumeFrom != resume {
			t.Fatalf("read %q as %+v", raw, req)
		}
		if req.MarketID != "" && req.Market.String() != string(bytes.ToLower([]byte(req.MarketID))) {
			t.Fatalf("read marketId %q as %s", req.MarketID, req.Market)
		}
	})
}

// documentedKeys reads the keys each op's message may have from the document's schemas of the
// client's messages.
func documentedKeys(t testing.TB) map[string][]string {
	raw, err := yaml.YAMLToJSON(apiserver.AsyncAPIDocument)
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Components struct {
			Schemas map[string]struct {
				Properties map[string]struct {
					Const string `json:"const"`
				} `json:"properties"`
			} `json:"schemas"`
		} `json:"components"`
	}
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	keys := map[string][]string{}
	for _, name := range []string{"Subscribe", "Unsubscribe", "Ping"} {
		s := doc.Components.Schemas[name]
		op := s.Properties["op"].Const
		for k := range s.Properties {
			keys[op] = append(keys[op], k)
		}
	}
	if len(keys) != 3 {
		t.Fatalf("the document's client messages: %v", keys)
	}
	return keys
}

// conforms says whether the document allows a client's message, and if not why: one JSON object,
// each key once, valid against its op's schema once the null members of its op's keys are left
// out (null counts as absent, as in the REST bodies), with whole numbers that fit an int64 (the
// document says integer), and the channels' rules the document gives in words.
func conforms(v *apitest.AsyncValidator, keys map[string][]string, raw []byte, public bool) (bool, string) {
	if !json.Valid(raw) {
		return false, "not JSON"
	}
	if key, dup := apiserver.RefDuplicate(raw); dup {
		return false, "repeats " + key
	}
	var msg map[string]any
	d := json.NewDecoder(bytes.NewReader(raw))
	d.UseNumber()
	if d.Decode(&msg) != nil || msg == nil {
		return false, "not an object"
	}
	op, _ := msg["op"].(string)
	for k, x := range msg {
		if x == nil && slices.Contains(keys[op], k) {
			delete(msg, k)
		}
	}
	for _, k := range []string{"id", "resumeFrom"} {
		if n, ok := msg[k].(json.Number); ok {
			r, ok := new(big.Rat).SetString(string(n))
			if !ok || !r.IsInt() || r.Num().Cmp(big.NewInt(math.MinInt64)) < 0 || r.Num().Cmp(big.NewInt(math.MaxInt64)) > 0 {
				return false, k + " is not an int64"
			}
		}
	}
	stripped, err := json.Marshal(msg)
	if err != nil {
		return false, err.Error()
	}
	if err := v.ValidateClient(stripped); err != nil {
		return false, err.Error()
	}
	if msg["op"] == "ping" {
		return true, ""
	}
	_, market := msg["marketId"]
	_, resume := msg["resumeFrom"]
	cursor, isCursor := msg["resumeFrom"].(string)
	switch msg["channel"] {
	case "book", "trades":
		return market && !isCursor, "no marketId, or a resumeFrom string"
	case "ticker":
		return market && !resume, "no marketId, or resumeFrom"
	case "lifecycle":
		return !market && !resume, "marketId or resumeFrom"
	case "orders", "fills":
		if market || public {
			return false, "marketId, or no key"
		}
		if n, ok := msg["resumeFrom"].(json.Number); ok {
			r, _ := new(big.Rat).SetString(string(n))
			return r.Sign() == 0, "a seq of the feed's first form"
		}
		if _, err := feed.ParseCursor(cursor); isCursor && err != nil {
			return false, "not a cursor"
		}
		return true, ""
	}
	return false, "unknown channel"
}
