// Package exchangetest drives a running pmx exchange over real HTTP and checks it: the contract
// suite, the invariants of docs/architecture.md §3 in SQL, and the helpers the soak and crash
// tests share. The same suite runs against the standalone exchange and the distributed one.
package exchangetest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/pmx-dev/pmx/apiserver"
	"github.com/pmx-dev/pmx/internal/apitest"
	"github.com/pmx-dev/pmx/internal/feed"
	"github.com/pmx-dev/pmx/internal/kit/auth"
	"github.com/pmx-dev/pmx/internal/kit/httpkit"
	"github.com/pmx-dev/pmx/internal/market"
	"github.com/pmx-dev/pmx/internal/shard"
	"github.com/pmx-dev/pmx/internal/store"
	"github.com/pmx-dev/pmx/internal/store/accounts"
	"github.com/pmx-dev/pmx/internal/storetest"
)

// Target is an exchange under test.
type Target struct {
	URL string // scheme://host:port, without /api/v1
	// MetricsURL is where the exchange serves /metrics (scheme://host:port): a listener of its
	// own, apart from the API.
	MetricsURL string
	// MetricsURLs are more such listeners, one per front, when the target is several fronts behind
	// one address (a Service): the suite's requests reach one of them.
	MetricsURLs []string
	AdminToken  string
	Store       *store.Store // the exchange's database, for checks in SQL
	// CheckBooks compares the books in memory with Postgres, when the target can.
	CheckBooks func(context.Context) error
	// Markets creates markets and drives their lifecycle.
	Markets Markets
	// Events creates events and drives their lifecycle; nil is the admin API's (AdminEvents).
	Events Events
	// AdminMarkets is set when the admin API manages markets (the standalone exchange); the
	// suite then also checks its errors.
	AdminMarkets bool
	Validator    *apitest.Validator
	// AdminValidator, when set, checks every admin API answer against the admin document.
	AdminValidator *apitest.Validator
	// Feed checks every WebSocket message against the AsyncAPI document.
	Feed  *apitest.AsyncValidator
	HTTP  *http.Client
	names atomic.Int64
}

// DevShards is how many shards StartDev runs: more than one, so that every test of the suite
// has markets on different shards trading for the same accounts, as pmx dev runs them.
const DevShards = 2

// StartDev starts the standalone exchange in-process — store, DevShards shards, and API and metrics each on a
// loopback port of their own, as pmx dev serves them — on a fresh database of the test binary's
// shared cluster, and stops it when t ends.
// Options, when given, change the API server's configuration.
func StartDev(t testing.TB, options ...func(*apiserver.Config)) *Target {
	t.Helper()
	ctx := context.Background()
	st := storetest.New(t)
	log := slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelWarn}))
	reg := httpkit.NewRegistry()
	bus := &feed.Bus{}
	sh := shard.NewSet(shard.Config{Store: st, Claim: storetest.Claim(t, st).Token(), Logger: log, Metrics: reg, MaxOpenOrders: SuiteMaxOpenOrders, Feed: bus}, DevShards)
	t.Cleanup(sh.Stop)
	closerCtx, stopCloser := context.WithCancel(ctx)
	closerDone := make(chan struct{})
	go func() {
		defer close(closerDone)
		(&market.Closer{Store: st, Target: sh, Logger: log, Poll: 100 * time.Millisecond}).Run(closerCtx)
	}()
	t.Cleanup(func() { stopCloser(); <-closerDone })
	token := "test-admin-token-0123456789abcdef0123"
	cfg := apiserver.Config{Store: st, Exchange: sh, Logger: log, AdminToken: token, Metrics: reg}
	for _, o := range options {
		o(&cfg)
	}
	api := apiserver.New(cfg)
	t.Cleanup(api.Close)
	feedCtx, stopFeed := context.WithCancel(ctx)
	feedDone := make(chan struct{})
	go func() {
		defer close(feedDone)
		feed.Follow(feedCtx, bus, api.Feed())
	}()
	t.Cleanup(func() { stopFeed(); <-feedDone })
	srv := httptest.NewServer(api.Handler())
	t.Cleanup(srv.Close)
	metrics := httptest.NewServer(httpkit.MetricsHandler(reg)) // as pmx dev's --metrics-addr
	t.Cleanup(metrics.Close)
	tg := &Target{URL: srv.URL, MetricsURL: metrics.URL, AdminToken: token, Store: st, CheckBooks: sh.CheckBooks,
		AdminMarkets: true, Validator: apitest.NewValidator(t), AdminValidator: apitest.NewAdminValidator(t), Feed: apitest.NewAsyncValidator(t),
		HTTP: &http.Client{Timeout: time.Minute}}
	tg.Markets = AdminMarkets{tg}
	return tg
}

// over returns a copy of tg whose requests go through h.
func (tg *Target) over(h *http.Client) *Target {
	return &Target{URL: tg.URL, MetricsURL: tg.MetricsURL, MetricsURLs: tg.MetricsURLs, AdminToken: tg.AdminToken,
		Store: tg.Store, CheckBooks: tg.CheckBooks, Markets: tg.Markets, Events: tg.Events, AdminMarkets: tg.AdminMarkets,
		Validator: tg.Validator, AdminValidator: tg.AdminValidator, Feed: tg.Feed, HTTP: h}
}

// Client is one account's API key, or none.
type Client struct {
	T       *Target
	Key     string
	Account uuid.UUID
	Name    string
}

// Anonymous is a client without a key.
func (tg *Target) Anonymous() *Client { return &Client{T: tg} }

// NewAccount opens an account through the admin API.
func (tg *Target) NewAccount(t testing.TB, prefix string) *Client {
	t.Helper()
	return tg.NewAccountWithKey(t, prefix, nil)
}

// NewAccountWithKey opens an account through the admin API, its first key made as key says
// (the admin API's scope, expiresAt and ipAllowlist; nil for a key that may do everything).
func (tg *Target) NewAccountWithKey(t testing.TB, prefix string, key map[string]any) *Client {
	t.Helper()
	name := fmt.Sprintf("%s-%d", prefix, tg.names.Add(1))
	var out struct {
		Account apiserver.Account `json:"account"`
		APIKey  string            `json:"apiKey"`
	}
	body := map[string]any{"name": name}
	for k, v := range key {
		body[k] = v
	}
	tg.Admin(t, "POST", "/admin/v1/accounts", body, http.StatusCreated, &out)
	return &Client{T: tg, Key: out.APIKey, Account: out.Account.ID, Name: name}
}

// AddKey makes another key of c's account, as spec says, straight in the exchange's database
// (keys are made on the settings pages, which need a password, or with a new account by the admin
// API), and returns a client that uses it.
func (tg *Target) AddKey(t testing.TB, c *Client, spec auth.KeySpec) *Client {
	t.Helper()
	ctx := context.Background()
	var account int64
	if err := tg.Store.Pool.QueryRow(ctx, `select id from accounts where uid = $1`, c.Account).Scan(&account); err != nil {
		t.Fatal(err)
	}
	key, prefix, hash := auth.NewKey()
	err := tg.Store.InsertAPIKey(ctx, accounts.APIKey{ID: uuid.New(), AccountID: account, Prefix: prefix, Label: spec.Label,
		Scope: spec.Scope, CreatedAt: time.Now().UTC().Truncate(time.Microsecond), ExpiresAt: spec.ExpiresAt, Allowlist: spec.Allowlist}, hash)
	if err != nil {
		t.Fatal(err)
	}
	return &Client{T: tg, Key: key, Account: c.Account, Name: c.Name + "/" + string(spec.Scope)}
}

// Admin calls the admin API and decodes the answer into out, failing unless the status is want.
func (tg *Target) Admin(t testing.TB, method, path string, body any, want int, out any) {
	t.Helper()
	tg.AdminAs(t, "Bearer "+tg.AdminToken, method, path, body, want, out)
}

// AdminAs is Admin with the Authorization header given ("" for none). With an AdminValidator,
// the answer is checked against the admin document.
func (tg *Target) AdminAs(t testing.TB, authorization, method, path string, body any, want int, out any) {
	t.Helper()
	var status int
	var raw []byte
	if tg.AdminValidator != nil {
		status, raw = tg.AdminValidator.Do(t, tg.HTTP, tg.request(t, method, path, authorization, body))
	} else {
		status, raw = tg.do(t, method, path, authorization, body, false)
	}
	if status != want {
		t.Fatalf("%s %s: status %d, want %d: %s", method, path, status, want, raw)
	}
	if out != nil {
		if err := json.Unmarshal(raw, out); err != nil {
			t.Fatalf("%s %s: %v: %s", method, path, err, raw)
		}
	}
}

// NewMarket creates an OPEN market, ready to trade.
func (tg *Target) NewMarket(t testing.TB, fields map[string]any) apiserver.Market {
	t.Helper()
	return tg.Markets.Create(t, fields)
}

// do sends a request; body is JSON-encoded unless it is a string or []byte, sent as is. Public
// API answers are checked against the OpenAPI document.
func (tg *Target) do(t testing.TB, method, path, authorization string, body any, validate bool) (int, []byte) {
	t.Helper()
	req := tg.request(t, method, path, authorization, body)
	if validate {
		return tg.Validator.Do(t, tg.HTTP, req)
	}
	resp, err := tg.HTTP.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	return resp.StatusCode, raw
}

// request builds a request; body is sent as it is (string, []byte) or as JSON.
func (tg *Target) request(t testing.TB, method, path, authorization string, body any) *http.Request {
	t.Helper()
	var r io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		r = bytes.NewBufferString(b)
	case []byte:
		r = bytes.NewReader(b)
	default:
		raw, err := json.Marshal(b)
		if err != nil {
			t.Fatal(err)
		}
		r = bytes.NewReader(raw)
	}
	req, err := http.NewRequest(method, tg.URL+path, r)
	if err != nil {
		t.Fatal(err)
	}
	if authorization != "" {
		req.Header.Set("Authorization", authorization)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	return req
}

// DoResponse is Do, returning the response (its body read and closed) for its headers.
func (c *Client) DoResponse(t testing.TB, method, path string, body any) (*http.Response, []byte) {
	t.Helper()
	auth := ""
	if c.Key != "" {
		auth = "Bearer " + c.Key
	}
	return c.T.Validator.DoResponse(t, c.T.HTTP, c.T.request(t, method, "/api/v1"+path, auth, body))
}

// Do calls the public API (path relative to /api/v1) with the client's key, validates the answer
// against the OpenAPI document, and returns it.
func (c *Client) Do(t testing.TB, method, path string, body any) (int, []byte) {
	t.Helper()
	auth := ""
	if c.Key != "" {
		auth = "Bearer " + c.Key
	}
	return c.T.do(t, method, "/api/v1"+path, auth, body, true)
}

// Expect calls the public API, fails unless the status is want, and decodes the answer into out.
func (c *Client) Expect(t testing.TB, method, path string, body any, want int, out any) []byte {
	t.Helper()
	status, raw := c.Do(t, method, path, body)
	if status != want {
		t.Fatalf("%s %s (%s): status %d, want %d: %s", method, path, c.Name, status, want, raw)
	}
	if out != nil {
		if err := json.Unmarshal(raw, out); err != nil {
			t.Fatalf("%s %s: %v: %s", method, path, err, raw)
		}
	}
	return raw
}

// ErrorBody is the shape of every error answer.
type ErrorBody struct {
	Error   string `json:"error"`
	Details struct {
		Code  string `json:"code"`
		Field string `json:"field"`
	} `json:"details"`
}

// ExpectError calls the public API and fails unless it answers status with details.code code.
func (c *Client) ExpectError(t testing.TB, method, path string, body any, status int, code string) ErrorBody {
	t.Helper()
	var e ErrorBody
	c.Expect(t, method, path, body, status, &e)
	if e.Details.Code != code || e.Error == "" {
		t.Fatalf("%s %s: error %+v, want code %q", method, path, e, code)
	}
	return e
}

// Place places an order and expects it accepted.
func (c *Client) Place(t testing.TB, market uuid.UUID, side, outcome string, price, quantity int) apiserver.PlacedOrder {
	t.Helper()
	var o apiserver.PlacedOrder
	c.Expect(t, "POST", "/order", OrderBody(market, side, outcome, price, quantity), http.StatusCreated, &o)
	return o
}

// OrderBody is a POST /order body.
func OrderBody(market uuid.UUID, side, outcome string, price, quantity int) map[string]any {
	return map[string]any{"marketId": market, "side": side, "outcome": outcome, "price": price, "quantity": quantity}
}

// Balance is an account's cash.
func (c *Client) Balance(t testing.TB) (available, locked int64) {
	t.Helper()
	var a apiserver.Account
	c.Expect(t, "GET", "/account", nil, http.StatusOK, &a)
	return a.Available, a.Locked
}

// Positions returns the client's holdings keyed by market and outcome.
func (c *Client) Positions(t testing.TB) map[string]apiserver.Position {
	t.Helper()
	var out struct {
		Positions []apiserver.Position `json:"positions"`
	}
	c.Expect(t, "GET", "/positions", nil, http.StatusOK, &out)
	m := map[string]apiserver.Position{}
	for _, p := range out.Positions {
		m[p.MarketID.String()+"/"+p.Outcome] = p
	}
	return m
}

// Book is the answer of GET /market/order-book.
type Book struct {
	Yes View  `json:"orderBookYes"`
	No  View  `json:"orderBookNo"`
	Seq int64 `json:"seq"` // the feed's last event the book reflects
}

// View is one outcome's view of a book.
type View struct {
	Bids           []Level `json:"bids"`
	Asks           []Level `json:"asks"`
	LastTradePrice *int    `json:"lastTradePrice"`
}

// Level is one price level.
type Level struct {
	Price    int   `json:"price"`
	Quantity int64 `json:"quantity"`
	Total    int64 `json:"total"`
}

// Book reads a market's order book.
func (c *Client) Book(t testing.TB, market uuid.UUID) Book {
	t.Helper()
	var b Book
	c.Expect(t, "GET", "/market/order-book?marketId="+market.String(), nil, http.StatusOK, &b)
	return b
}

// testWriter sends log lines to the test's log, shown when it fails.
type testWriter struct{ t testing.TB }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}
