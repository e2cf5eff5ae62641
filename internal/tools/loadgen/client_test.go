package loadgen

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"syscall"
	"testing"
)

func TestOrderBody(t *testing.T) {
	for _, o := range []order{
		{outcome: outYes, price: 55, qty: 3},
		{sell: true, outcome: outNo, price: 1, qty: 10},
		{sell: true, outcome: outYes, price: 99, qty: 1},
		{outcome: outNo, price: 42, qty: 7},
	} {
		b := appendOrderBody(nil, mktA, o)
		var got struct {
			MarketID string `json:"marketId"`
			Side     string `json:"side"`
			Outcome  string `json:"outcome"`
			Price    int    `json:"price"`
			Quantity int    `json:"quantity"`
		}
		if err := json.Unmarshal(b, &got); err != nil {
			t.Fatalf("%s: %v", b, err)
		}
		side := "BUY"
		if o.sell {
			side = "SELL"
		}
		if got.MarketID != mktA || got.Side != side || got.Outcome != outcomeName(o.outcome) || got.Price != o.price || got.Quantity != o.qty {
			t.Errorf("%+v encoded as %s", o, b)
		}
	}
	if got := string(appendObject1(nil, "orderId", "abc")); got != `{"orderId":"abc"}` {
		t.Errorf("cancel body %s", got)
	}
}

func TestBatchAmendAndCancelBodies(t *testing.T) {
	os := []order{{outcome: outYes, price: 55, qty: 3}, {sell: true, outcome: outNo, price: 40, qty: 1}}
	var batch struct {
		Orders []map[string]any `json:"orders"`
	}
	if b := appendBatchBody(nil, mktA, os); json.Unmarshal(b, &batch) != nil || len(batch.Orders) != 2 {
		t.Fatalf("batch body %s", b)
	}
	for i, o := range os {
		if want := string(appendOrderBody(nil, mktA, o)); !jsonEqual(t, batch.Orders[i], want) {
			t.Errorf("batch placement %d is %v, want %s", i, batch.Orders[i], want)
		}
	}
	for _, c := range []struct {
		price, qty int
		want       string
	}{
		{41, 0, `{"orderId":"o\"1","price":41}`},
		{0, 7, `{"orderId":"o\"1","quantity":7}`},
		{99, 10, `{"orderId":"o\"1","price":99,"quantity":10}`},
	} {
		if got := string(appendAmendBody(nil, `o"1`, c.price, c.qty)); got != c.want {
			t.Errorf("amend body %s, want %s", got, c.want)
		}
	}
	if got := string(appendCancelIDsBody(nil, []openOrder{{id: "a"}, {id: "b"}})); got != `{"orderIds":["a","b"]}` {
		t.Errorf("cancel body %s", got)
	}
}

// jsonEqual tells whether v is the JSON object want decoded.
func jsonEqual(t *testing.T, v map[string]any, want string) bool {
	t.Helper()
	var w map[string]any
	if err := json.Unmarshal([]byte(want), &w); err != nil {
		t.Fatal(err)
	}
	a, _ := json.Marshal(v)
	b, _ := json.Marshal(w)
	return string(a) == string(b)
}

func TestJSONStringMatchesEncodingJSON(t *testing.T) {
	for _, s := range []string{"", "plain", `q"uo\te`, "tab\tnl\ncr\r\x00\x1f", "<a&b>", "héllo ✓", "bad\xffutf8", "\u2028\u2029"} {
		want, _ := json.Marshal(s)
		if got := appendJSONString(nil, s); string(got) != string(want) {
			t.Errorf("appendJSONString(%q) = %s, want %s", s, got, want)
		}
	}
}

func TestTransportCode(t *testing.T) {
	wrap := func(err error) error { return &url.Error{Op: "Post", URL: "http://x", Err: err} }
	for _, c := range []struct {
		err  error
		want string
	}{
		{wrap(context.Canceled), "canceled"},
		{wrap(context.DeadlineExceeded), "timeout"},
		{wrap(&net.OpError{Op: "dial", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}), "connection_refused"},
		{wrap(&net.OpError{Op: "read", Err: os.NewSyscallError("read", syscall.ECONNRESET)}), "connection_reset"},
		{wrap(io.EOF), "connection_reset"},
		{wrap(fmt.Errorf("something else")), "transport"},
	} {
		if got := transportCode(c.err); got != c.want {
			t.Errorf("transportCode(%v) = %q, want %q", c.err, got, c.want)
		}
	}
}
