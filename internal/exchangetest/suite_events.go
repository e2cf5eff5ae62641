package exchangetest

import (
	"context"
	"fmt"
	"net/http"
	"testing"

	"github.com/google/uuid"

	"github.com/pmx-dev/pmx/apiserver"
	"github.com/pmx-dev/pmx/internal/feed"
)

// newEvent creates an OPEN event of the given outcome keys: through the admin API in pmx dev,
// through an Event resource in distributed mode.
func newEvent(t *testing.T, tg *Target, keys ...string) apiserver.Event {
	t.Helper()
	e := tg.events().Create(t, keys...)
	if e.Status != "OPEN" || len(e.Outcomes) != len(keys) {
		t.Fatalf("the new event: %+v", e)
	}
	// An event a test leaves open keeps all its markets on one shard, outweighing that shard
	// when the markets applied next are scheduled (the failover scenarios expect their samples
	// spread): void it once the test is done with it.
	t.Cleanup(func() {
		if row, err := tg.Store.Event(context.Background(), e.ID); err == nil && (row.Status == "OPEN" || row.Status == "CLOSED") {
			tg.events().Cancel(t, e.ID)
		}
	})
	return e
}

// testEventLifecycle moves events as a trader sees it, in every mode: closing, reopening,
// resolving and cancelling an event moves all of its markets together, and GET /event says so.
func testEventLifecycle(t *testing.T, tg *Target) {
	e := newEvent(t, tg, "red", "blue", "green")
	reader := tg.NewAccount(t, "evlife")
	statuses := func(id uuid.UUID, want string) {
		t.Helper()
		var d apiserver.EventDetail
		reader.Expect(t, "GET", "/event?eventId="+id.String(), nil, http.StatusOK, &d)
		if d.Status != want {
			t.Errorf("event %s is %s, want %s", id, d.Status, want)
		}
		for _, o := range d.Outcomes {
			if m := reader.market(t, o.MarketID); m.Status != want {
				t.Errorf("outcome %q's market is %s, want %s", o.Key, m.Status, want)
			}
		}
	}
	if after := tg.events().Close(t, e.ID); after.Status != "CLOSED" {
		t.Fatalf("after closing: %+v", after)
	}
	statuses(e.ID, "CLOSED")
	reader.ExpectError(t, "POST", "/order", OrderBody(e.Outcomes[0].MarketID, "BUY", "YES", 50, 1), http.StatusBadRequest, "market_not_open")
	tg.events().Reopen(t, e.ID)
	statuses(e.ID, "OPEN")
	after := tg.events().Resolve(t, e.ID, "blue")
	if after.Status != "RESOLVED" || after.Resolution == nil || *after.Resolution != "blue" {
		t.Fatalf("after resolving: %+v", after)
	}
	statuses(e.ID, "RESOLVED")
	for _, o := range after.Outcomes {
		if m := reader.market(t, o.MarketID); m.Outcome == nil || *m.Outcome != map[bool]string{true: "YES", false: "NO"}[o.Key == "blue"] {
			t.Errorf("outcome %q's market resolved to %v", o.Key, m.Outcome)
		}
	}
	v := newEvent(t, tg, "a", "b", "c")
	if after := tg.events().Cancel(t, v.ID); after.Status != "CANCELED" {
		t.Fatalf("after cancelling: %+v", after)
	}
	statuses(v.ID, "CANCELED")
}

// testAdminEvents covers the admin API's refusals of events: bad events, moves the event's
// status forbids, a lone market of an event refusing to move (market_in_event), and every
// route's refusals of the token and the event id.
func testAdminEvents(t *testing.T, tg *Target) {
	if !tg.AdminMarkets {
		t.Skip("events are managed by Event resources here")
	}
	e := newEvent(t, tg, "red", "blue", "green")
	var refusal ErrorBody
	for _, body := range []map[string]any{
		{"question": "q", "category": "c", "outcomes": []map[string]any{{"key": "only", "label": "Only"}}},
		{"question": "q", "category": "c", "outcomes": []map[string]any{{"key": "a", "label": "A"}, {"key": "a", "label": "B"}}},
		{"question": "q", "category": "c", "outcomes": []map[string]any{{"key": "Not a label", "label": "A"}, {"key": "b", "label": "B"}}},
	} {
		tg.Admin(t, "POST", "/admin/v1/events", body, http.StatusBadRequest, &refusal)
		if refusal.Details.Code != "invalid_outcomes" {
			t.Errorf("%v: refused with %+v, want invalid_outcomes", body, refusal.Details)
		}
	}
	tg.Admin(t, "POST", "/admin/v1/events", map[string]any{"name": e.Name, "question": "q", "category": "c",
		"outcomes": []map[string]any{{"key": "a", "label": "A"}, {"key": "b", "label": "B"}}}, http.StatusConflict, nil)
	tg.AdminAs(t, "", "POST", "/admin/v1/events", map[string]any{}, http.StatusUnauthorized, nil)

	path := "/admin/v1/events/" + e.ID.String()
	tg.Admin(t, "POST", "/admin/v1/markets/"+e.Outcomes[0].MarketID.String()+"/close", nil, http.StatusConflict, &refusal)
	if refusal.Details.Code != "market_in_event" {
		t.Errorf("closing a market of an event alone: %+v, want market_in_event", refusal.Details)
	}
	tg.events().Close(t, e.ID)
	tg.Admin(t, "POST", path+"/close", nil, http.StatusConflict, nil)
	tg.events().Reopen(t, e.ID)
	tg.Admin(t, "POST", path+"/resolve", map[string]any{"outcome": "purple"}, http.StatusBadRequest, &refusal)
	tg.events().Resolve(t, e.ID, "blue")
	for _, action := range []string{"close", "reopen", "cancel", "resolve"} {
		body := map[string]any{"outcome": "red"}
		tg.Admin(t, "POST", path+"/"+action, body, http.StatusConflict, nil)
		tg.Admin(t, "POST", "/admin/v1/events/42/"+action, body, http.StatusBadRequest, nil)
		tg.Admin(t, "POST", "/admin/v1/events/"+uuid.NewString()+"/"+action, body, http.StatusNotFound, &refusal)
		tg.AdminAs(t, "", "POST", path+"/"+action, body, http.StatusUnauthorized, nil)
	}
}

// market reads one market over the public API.
func (c *Client) market(t *testing.T, id uuid.UUID) apiserver.Market {
	t.Helper()
	var m apiserver.Market
	c.Expect(t, "GET", "/market?marketId="+id.String(), nil, http.StatusCreated, &m) // 201: the contract
	return m
}

// testEventSettlement is the black-box check of an event: 4 outcomes, 4 accounts trading every
// book, two of them converting NO shares (convertBeforeResolution), then resolution; each account's cash afterwards is what it held plus what its positions
// were owed (100 per YES of the winner and per NO of every other outcome), and the exchange holds
// nothing for the event (the invariants, the event's ledger among them, are checked after the suite).
func testEventSettlement(t *testing.T, tg *Target) {
	e := newEvent(t, tg, "w", "x", "y", "z")
	accounts := make([]*Client, 4)
	for i := range accounts {
		accounts[i] = tg.NewAccount(t, fmt.Sprintf("ev%d", i))
	}
	for i, o := range e.Outcomes {
		for j := range 2 { // two pairs of accounts mint in every book
			yes, no := accounts[(i+2*j)%4], accounts[(i+2*j+1)%4]
			price := 20 + 10*i + j
			yes.Place(t, o.MarketID, "BUY", "YES", price, 3+j)
			no.Place(t, o.MarketID, "BUY", "NO", 100-price, 3+j)
		}
	}
	convertBeforeResolution(t, e, accounts)
	const winner = 2
	owed := make([]int64, len(accounts))
	before := make([]int64, len(accounts))
	for a, c := range accounts {
		before[a], _ = c.Balance(t)
		held := c.Positions(t)
		for i, o := range e.Outcomes {
			yes, no := held[o.MarketID.String()+"/YES"].Quantity, held[o.MarketID.String()+"/NO"].Quantity
			if i == winner {
				owed[a] += 100 * yes
			} else {
				owed[a] += 100 * no
			}
		}
	}
	tg.events().Resolve(t, e.ID, e.Outcomes[winner].Key)
	for a, c := range accounts {
		if after, locked := c.Balance(t); after != before[a]+owed[a] || locked != 0 {
			t.Errorf("account %d holds %d (%d locked), want %d + %d owed", a, after, locked, before[a], owed[a])
		}
		for k, p := range c.Positions(t) {
			if p.Quantity != 0 {
				t.Errorf("account %d still holds %d of %s", a, p.Quantity, k)
			}
		}
	}
	var refusal ErrorBody
	accounts[0].Expect(t, "POST", "/event/convert", map[string]any{"eventId": e.ID, "outcomes": []string{"z"}, "quantity": 1},
		http.StatusConflict, &refusal)
	if refusal.Details.Code != "event_not_open" {
		t.Errorf("converting on a resolved event: %+v, want event_not_open", refusal.Details)
	}
}

// convertBeforeResolution has two of testEventSettlement's accounts convert: account 1 holds NO
// of w (3) and y (4) and converts 2 of each (k = 2: YES of x and z and 200 cents), retrying by
// its clientRequestId; account 0 holds NO of z (3) and x (4) and converts all 4 of x (k = 1: YES
// of w, y and z, no cash), then has none left to convert.
func convertBeforeResolution(t *testing.T, e apiserver.Event, accounts []*Client) {
	t.Helper()
	convert := func(c *Client, status int, body map[string]any) (out apiserver.Conversion) {
		t.Helper()
		body["eventId"] = e.ID
		c.Expect(t, "POST", "/event/convert", body, status, &out)
		return out
	}
	cash, _ := accounts[1].Balance(t)
	heldBefore := accounts[1].Positions(t)
	req := map[string]any{"outcomes": []string{"w", "y"}, "quantity": 2, "clientRequestId": "conv-1"}
	first := convert(accounts[1], http.StatusCreated, req)
	if first.Cash != 200 || first.Quantity != 2 || first.EventID != e.ID {
		t.Errorf("the conversion: %+v, want 200 cents for 2 of w and y", first)
	}
	if again := convert(accounts[1], http.StatusOK, req); again.ID != first.ID {
		t.Errorf("the retry answered %+v, want conversion %s", again, first.ID)
	}
	var converted []apiserver.Conversion // the account's feed carries it once, the retry adding nothing
	for _, ev := range accounts[1].accountEvents(t, feed.Cursor{}, 100).Events {
		if ev.Type == feed.AccountConverted {
			converted = append(converted, *ev.Conversion)
		}
	}
	if len(converted) != 1 || converted[0].ID != first.ID || converted[0].Cash != 200 {
		t.Errorf("the account's feed has converted events %+v, want conversion %s once", converted, first.ID)
	}
	if after, _ := accounts[1].Balance(t); after != cash+200 {
		t.Errorf("account 1 holds %d after converting, want %d", after, cash+200)
	}
	held := accounts[1].Positions(t)
	for i, want := range map[int]int64{1: 2, 3: 2} {
		k := e.Outcomes[i].MarketID.String() + "/YES"
		if got := held[k].Quantity - heldBefore[k].Quantity; got != want {
			t.Errorf("account 1 gained %d YES of %s, want %d", got, e.Outcomes[i].Key, want)
		}
	}
	var refusal ErrorBody
	accounts[1].Expect(t, "POST", "/event/convert", map[string]any{"eventId": e.ID, "outcomes": []string{"w", "y"},
		"quantity": 3, "clientRequestId": "conv-1"}, http.StatusConflict, &refusal)
	if refusal.Details.Code != "client_request_id_reused" {
		t.Errorf("reusing a clientRequestId: %+v", refusal.Details)
	}
	if c := convert(accounts[0], http.StatusCreated, map[string]any{"outcomes": []string{"x"}, "quantity": 4}); c.Cash != 0 {
		t.Errorf("converting one outcome paid %d cents, want 0", c.Cash)
	}
	for _, tc := range []struct {
		body   map[string]any
		status int
		code   string
	}{
		{map[string]any{"eventId": e.ID, "outcomes": []string{"x"}, "quantity": 1}, http.StatusBadRequest, "insufficient_shares"},
		{map[string]any{"eventId": e.ID, "outcomes": []string{"x", "x"}, "quantity": 1}, http.StatusBadRequest, "invalid_outcomes"},
		{map[string]any{"eventId": e.ID, "outcomes": []string{"nope"}, "quantity": 1}, http.StatusBadRequest, "invalid_outcomes"},
		{map[string]any{"eventId": e.ID, "outcomes": []string{}, "quantity": 1}, http.StatusBadRequest, "invalid_outcomes"},
		{map[string]any{"eventId": e.ID, "outcomes": []string{"z"}, "quantity": 0}, http.StatusBadRequest, "invalid_quantity"},
		{map[string]any{"eventId": uuid.New(), "outcomes": []string{"z"}, "quantity": 1}, http.StatusNotFound, "event_not_found"},
	} {
		accounts[0].Expect(t, "POST", "/event/convert", tc.body, tc.status, &refusal)
		if refusal.Details.Code != tc.code {
			t.Errorf("%v: refused with %+v, want %s", tc.body, refusal.Details, tc.code)
		}
	}
}
