package shardclient

import (
	"bytes"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/pmx-dev/pmx/engine"
	"github.com/pmx-dev/pmx/internal/shardproto"
)

// FuzzInternalRequest sends arbitrary bodies to each of the shard's POST calls over real HTTP, on
// a real shard and Postgres, and checks that the shard decodes and checks them without fault:
// every answer is a success or a 400/409 in the API's error shape, never a 5xx (a request that
// passed the checks and then failed its batch, which would fail every other request in it).
// The seeds are version 1's messages (internal/shardproto/testdata/v1) and their near misses.
//
//	go test ./internal/shardclient -run '^$' -fuzz FuzzInternalRequest -fuzztime 60s
func FuzzInternalRequest(f *testing.F) {
	paths := []string{shardproto.PathPlace, shardproto.PathCancel, shardproto.PathAmend, shardproto.PathPlaceMany, shardproto.PathCancelMany, shardproto.PathCancelAll, shardproto.PathTransition,
		shardproto.PathHandoff, shardproto.PathTakeOver, shardproto.PathBooks, shardproto.PathQueuePositions}
	seeds := map[string]string{"place": shardproto.PathPlace, "cancel": shardproto.PathCancel, "amend": shardproto.PathAmend,
		"cancel-all": shardproto.PathCancelAll, "transition": shardproto.PathTransition, "books": shardproto.PathBooks}
	for name, path := range seeds {
		raw, err := os.ReadFile(filepath.Join("..", "shardproto", "testdata", "v1", name+".json"))
		if err != nil {
			f.Fatal(err)
		}
		raw = bytes.TrimSpace(raw)
		for i, p := range paths {
			if p == path {
				f.Add(uint8(i), raw)
				f.Add(uint8(i+3), append(append([]byte("["), raw...), ']')) // as many-at-once, or a wrong shape
			}
		}
		f.Add(uint8(0), bytes.Replace(raw, []byte(`"Price":41`), []byte(`"Price":1e400`), 1))
		f.Add(uint8(2), bytes.Replace(raw, []byte(`"Side":2`), []byte(`"Side":256`), 1))
	}
	f.Add(uint8(0), []byte(`{"Account":1,"Market":"0b6f6f4e-3c1e-4d7a-9b2e-8f1a2c3d4e5f","Side":1,"Outcome":1,"Price":40,"Quantity":1,"Placement":"\ud800"}`))
	f.Add(uint8(6), []byte(`{"market":"0b6f6f4e-3c1e-4d7a-9b2e-8f1a2c3d4e5f","action":"resolve YES"}`))
	f.Add(uint8(5), []byte(`{"account":1,"markets":null}`))
	f.Add(uint8(3), []byte(`null`))
	f.Add(uint8(7), []byte(`{"markets":["0b6f6f4e-3c1e-4d7a-9b2e-8f1a2c3d4e5f"],"to":"shard-2"}`))
	f.Add(uint8(8), []byte(`{"markets":["0b6f6f4e-3c1e-4d7a-9b2e-8f1a2c3d4e5f"],"epochs":[1]}`))
	f.Add(uint8(8), []byte(`{"markets":["0b6f6f4e-3c1e-4d7a-9b2e-8f1a2c3d4e5f"],"epochs":[]}`))
	f.Add(uint8(9), []byte(`{"markets":["0b6f6f4e-3c1e-4d7a-9b2e-8f1a2c3d4e5f"],"epochs":[-1]}`))
	f.Add(uint8(9), []byte(`{"markets":["0b6f6f4e-3c1e-4d7a-9b2e-8f1a2c3d4e5f","6a1d2c3b-4e5f-4a7b-8c9d-0e1f2a3b4c5d"],"epochs":[0,0]}`))
	f.Add(uint8(10), []byte(`{"account":1,"market":"0b6f6f4e-3c1e-4d7a-9b2e-8f1a2c3d4e5f","epoch":0,"seqs":[1,2]}`))
	f.Add(uint8(10), []byte(`{"account":1,"market":"0b6f6f4e-3c1e-4d7a-9b2e-8f1a2c3d4e5f","epoch":0,"seqs":[1,1]}`))
	f.Add(uint8(10), []byte(`{"account":1,"market":"0b6f6f4e-3c1e-4d7a-9b2e-8f1a2c3d4e5f","epoch":-1,"seqs":[]}`))
	r := newInternalRig(f)
	f.Fuzz(func(t *testing.T, which uint8, body []byte) {
		// The rig's market and account, wherever the body names "the" market or account.
		text := strings.ReplaceAll(string(body), "0b6f6f4e-3c1e-4d7a-9b2e-8f1a2c3d4e5f", r.market.String())
		r.t = t
		status, raw := r.do(http.MethodPost, paths[int(which)%len(paths)], text)
		if status >= 500 {
			t.Fatalf("POST %s %q: %d %s", paths[int(which)%len(paths)], text, status, raw)
		}
		if status >= 300 {
			var e apiError
			if err := json.Unmarshal(raw, &e); err != nil || e.Error == "" || e.Details.Code == "" {
				t.Fatalf("POST %s %q: %d %s, not in the API's error shape", paths[int(which)%len(paths)], text, status, raw)
			}
		}
	})
}

// FuzzPlaceDecode decodes arbitrary placements as the shard does and checks that what passes the
// checks is an order the engine takes and crosses the wire unchanged: encoded as version 1 and
// decoded again, it is the same request.
func FuzzPlaceDecode(f *testing.F) {
	raw, err := os.ReadFile(filepath.Join("..", "shardproto", "testdata", "v1", "place.json"))
	if err != nil {
		f.Fatal(err)
	}
	f.Add(bytes.TrimSpace(raw))
	f.Add([]byte(`{"Account":1,"Market":"0b6f6f4e-3c1e-4d7a-9b2e-8f1a2c3d4e5f","Side":1,"Outcome":2,"Price":99,"Quantity":1}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		var w shardproto.PlaceV1
		if json.Unmarshal(body, &w) != nil {
			return
		}
		r := w.Request()
		if shardproto.CheckPlace(&r) != nil {
			return
		}
		o := engine.Order{Side: r.Side, Outcome: r.Outcome, Price: r.Price, Quantity: r.Quantity, TimeInForce: r.TimeInForce,
			PostOnly: r.PostOnly, SelfTrade: r.SelfTrade}
		if err := o.Validate(); err != nil {
			t.Fatalf("%s passed the checks, and the engine refuses it: %v", body, err)
		}
		again, err := json.Marshal(shardproto.PlaceToV1(r))
		if err != nil {
			t.Fatal(err)
		}
		var back shardproto.PlaceV1
		if err := json.Unmarshal(again, &back); err != nil {
			t.Fatal(err)
		}
		got := back.Request()
		if !got.ExpiresAt.Equal(r.ExpiresAt) {
			t.Fatalf("expiry %v came back as %v", r.ExpiresAt, got.ExpiresAt)
		}
		got.ExpiresAt = r.ExpiresAt
		if !reflect.DeepEqual(got, r) {
			t.Fatalf("%s crossed as %s and came back as %+v, want %+v", body, again, got, r)
		}
	})
}
