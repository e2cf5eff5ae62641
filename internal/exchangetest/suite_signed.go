package exchangetest

import (
	"context"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/google/uuid"

	"github.com/pmx-dev/pmx/internal/kit/auth"
)

// Signed requests (internal/kit/auth's signing.go, apiserver/signed.go): a key registered with an
// Ed25519 public key must sign every request, with its secret or its prefix alone; a stale,
// replayed, forged or altered request is refused with nothing done.

// Signer is a client whose key signs its requests.
type Signer struct {
	*Client
	Priv ed25519.PrivateKey
	// Bare sends the key's prefix alone (Authorization: PMX-Ed25519 <prefix>), never its secret.
	Bare bool
}

// NewSigningAccount opens an account whose first key is registered with a new Ed25519 key.
func (tg *Target) NewSigningAccount(t testing.TB, prefix string) *Signer {
	t.Helper()
	pub, priv, err := ed25519.GenerateKey(nil)
	if err != nil {
		t.Fatal(err)
	}
	c := tg.NewAccountWithKey(t, prefix, map[string]any{"publicKey": base64.StdEncoding.EncodeToString(pub)})
	return &Signer{Client: c, Priv: priv}
}

// Request builds a request to the public API (path relative to /api/v1, query included) signed at
// at with the signer's key; body is sent as is.
func (s *Signer) Request(t testing.TB, method, path string, body []byte, at time.Time) *http.Request {
	t.Helper()
	req := s.T.request(t, method, "/api/v1"+path, s.authorization(), body)
	ts, sig := auth.SignRequest(s.Priv, at, method, req.URL.RequestURI(), body)
	req.Header.Set(auth.TimestampHeader, ts)
	req.Header.Set(auth.SignatureHeader, sig)
	return req
}

func (s *Signer) authorization() string {
	if s.Bare {
		prefix, _, _ := strings.Cut(strings.TrimPrefix(s.Key, "pmx_"), "_")
		return auth.SignedScheme + " pmx_" + prefix
	}
	return "Bearer " + s.Key
}

// Send sends a request, checks the answer against the OpenAPI document, and decodes it into out
// unless the status is not want.
func (s *Signer) Send(t testing.TB, req *http.Request, want int, out any) []byte {
	t.Helper()
	status, raw := s.T.Validator.Do(t, s.T.HTTP, req)
	if status != want {
		t.Fatalf("%s %s: status %d, want %d: %s", req.Method, req.URL, status, want, raw)
	}
	if out != nil {
		if err := json.Unmarshal(raw, out); err != nil {
			t.Fatalf("%s %s: %v: %s", req.Method, req.URL, err, raw)
		}
	}
	return raw
}

// Refused sends a request and fails unless it is refused with status and code.
func (s *Signer) Refused(t testing.TB, req *http.Request, status int, code string) ErrorBody {
	t.Helper()
	var e ErrorBody
	s.Send(t, req, status, &e)
	if e.Details.Code != code || e.Error == "" {
		t.Fatalf("%s %s: error %+v, want code %q", req.Method, req.URL, e, code)
	}
	return e
}

// Call is a signed call at the current time that expects want.
func (s *Signer) Call(t testing.TB, method, path string, body any, want int, out any) {
	t.Helper()
	var raw []byte
	if body != nil {
		var err error
		if raw, err = json.Marshal(body); err != nil {
			t.Fatal(err)
		}
	}
	s.Send(t, s.Request(t, method, path, raw, time.Now()), want, out)
}

// signedState is what a refused request must leave as it was: the account's cash and orders.
func signedState(t testing.TB, s *Signer) string {
	t.Helper()
	var a struct{ Available, Locked int64 }
	s.Call(t, "GET", "/account", nil, http.StatusOK, &a)
	var orders struct{ Orders []struct{ ID uuid.UUID } }
	s.Call(t, "GET", "/orders", nil, http.StatusOK, &orders)
	return fmt.Sprintf("available %d, locked %d, %d orders", a.Available, a.Locked, len(orders.Orders))
}

func testSignedRequests(t *testing.T, tg *Target) {
	t.Run("Good", func(t *testing.T) { testSignedGood(t, tg) })
	t.Run("Refusals", func(t *testing.T) { testSignedRefusals(t, tg) })
	t.Run("UnsignedKeys", func(t *testing.T) { testUnsignedKeys(t, tg) })
	t.Run("Feed", func(t *testing.T) { testSignedFeed(t, tg) })
}

func testSignedGood(t *testing.T, tg *Target) {
	m := tg.NewMarket(t, nil)
	s := tg.NewSigningAccount(t, "signed")
	var listed struct{ Keys []struct{ PublicKey *string } }
	s.Call(t, "GET", "/account/keys", nil, http.StatusOK, &listed)
	want := base64.StdEncoding.EncodeToString(s.Priv.Public().(ed25519.PublicKey))
	if len(listed.Keys) != 1 || listed.Keys[0].PublicKey == nil || *listed.Keys[0].PublicKey != want {
		t.Fatalf("the signing key is listed as %+v, want its public key %s", listed.Keys, want)
	}
	// With the secret and without it, with a query and with a body.
	for _, bare := range []bool{false, true} {
		s.Bare = bare
		s.Call(t, "GET", "/orders?marketId="+m.ID.String(), nil, http.StatusOK, nil)
		var placed struct{ ID uuid.UUID }
		s.Call(t, "POST", "/order", OrderBody(m.ID, "BUY", "YES", 30, 1), http.StatusCreated, &placed)
		s.Call(t, "POST", "/cancel-order", map[string]any{"orderId": placed.ID}, http.StatusOK, nil)
	}
	// At the edge of the window either way.
	s.Send(t, s.Request(t, "GET", "/account", nil, time.Now().Add(-auth.SignatureWindow+time.Second)), http.StatusOK, nil)
	s.Send(t, s.Request(t, "GET", "/account", nil, time.Now().Add(auth.SignatureWindow-time.Second)), http.StatusOK, nil)
}

func testSignedRefusals(t *testing.T, tg *Target) {
	m := tg.NewMarket(t, nil)
	s := tg.NewSigningAccount(t, "signed")
	s.Call(t, "POST", "/order", OrderBody(m.ID, "BUY", "YES", 30, 2), http.StatusCreated, nil)
	before := signedState(t, s)
	order, _ := json.Marshal(OrderBody(m.ID, "BUY", "YES", 31, 1))
	other := []byte(strings.Replace(string(order), `"price":31`, `"price":32`, 1))
	_, wrong, _ := ed25519.GenerateKey(nil)
	for _, bare := range []bool{false, true} {
		s.Bare = bare
		now := time.Now()
		// Unsigned, and malformed.
		unsigned := s.T.request(t, "POST", "/api/v1/order", s.authorization(), order)
		s.Refused(t, unsigned, http.StatusUnauthorized, "invalid_signature")
		req := s.Request(t, "POST", "/order", order, now)
		req.Header.Set(auth.TimestampHeader, strings.TrimSuffix(req.Header.Get(auth.TimestampHeader), "000")+".000")
		s.Refused(t, req, http.StatusUnauthorized, "invalid_signature")
		req = s.Request(t, "POST", "/order", order, now)
		req.Header.Set(auth.SignatureHeader, "not base64")
		s.Refused(t, req, http.StatusUnauthorized, "invalid_signature")
		// Stale and from the future.
		s.Refused(t, s.Request(t, "POST", "/order", order, now.Add(-auth.SignatureWindow-time.Second)), http.StatusUnauthorized, "stale_request")
		s.Refused(t, s.Request(t, "POST", "/order", order, now.Add(auth.SignatureWindow+time.Second)), http.StatusUnauthorized, "stale_request")
		// The body changed after signing.
		req = s.Request(t, "POST", "/order", order, now)
		changed := s.T.request(t, "POST", "/api/v1/order", s.authorization(), other)
		changed.Header = req.Header.Clone()
		s.Refused(t, changed, http.StatusUnauthorized, "invalid_signature")
		// The query changed after signing, or was added.
		req = s.Request(t, "GET", "/orders?marketId="+m.ID.String(), nil, now)
		changed = s.T.request(t, "GET", "/api/v1/orders?marketId="+uuid.NewString(), s.authorization(), nil)
		changed.Header = req.Header.Clone()
		s.Refused(t, changed, http.StatusUnauthorized, "invalid_signature")
		req = s.Request(t, "GET", "/orders", nil, now)
		changed = s.T.request(t, "GET", "/api/v1/orders?marketId="+m.ID.String(), s.authorization(), nil)
		changed.Header = req.Header.Clone()
		s.Refused(t, changed, http.StatusUnauthorized, "invalid_signature")
		// Signed by another key.
		forged := &Signer{Client: s.Client, Priv: wrong, Bare: bare}
		forged.Refused(t, forged.Request(t, "POST", "/order", order, now), http.StatusUnauthorized, "invalid_signature")
	}
	if after := signedState(t, s); after != before {
		t.Fatalf("refused signed requests changed the account: %s, was %s", after, before)
	}
	// A request sent twice is accepted once: the order is placed once.
	s.Bare = false
	req := s.Request(t, "POST", "/order", order, time.Now())
	again := s.T.request(t, "POST", "/api/v1/order", "", order)
	again.Header = req.Header.Clone()
	s.Send(t, req, http.StatusCreated, nil)
	after := signedState(t, s)
	s.Refused(t, again, http.StatusUnauthorized, "replayed_request")
	if now := signedState(t, s); now != after {
		t.Fatalf("a replayed order changed the account: %s, was %s", now, after)
	}
}

// testUnsignedKeys: a key without a public key cannot send its prefix alone, nor signature headers.
func testUnsignedKeys(t *testing.T, tg *Target) {
	c := tg.NewAccount(t, "unsigned")
	_, priv, _ := ed25519.GenerateKey(nil)
	s := &Signer{Client: c, Priv: priv}
	s.Refused(t, s.Request(t, "GET", "/account", nil, time.Now()), http.StatusUnauthorized, "invalid_signature")
	s.Bare = true
	s.Refused(t, s.Request(t, "GET", "/account", nil, time.Now()), http.StatusUnauthorized, "invalid_api_key")
	c.Expect(t, "GET", "/account", nil, http.StatusOK, nil)

	// The admin API refuses a public key that is not one, and opens no account.
	var e ErrorBody
	tg.Admin(t, "POST", "/admin/v1/accounts", map[string]any{"name": fmt.Sprintf("badkey-%d", tg.names.Add(1)),
		"publicKey": "c2hvcnQ="}, http.StatusBadRequest, &e)
	if e.Details.Field != "publicKey" || e.Details.Code != "invalid_value" {
		t.Fatalf("a malformed public key: %+v, want a 400 on publicKey", e)
	}
}

// testSignedFeed: the feed's upgrade is signed like any request; a ws-token fetched by a signed
// request connects without a signature of its own.
func testSignedFeed(t *testing.T, tg *Target) {
	s := tg.NewSigningAccount(t, "signed")
	dial := func(req *http.Request) (*websocket.Conn, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		ws, resp, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(req.URL.String(), "http"), &websocket.DialOptions{HTTPHeader: req.Header})
		if resp != nil && resp.Body != nil {
			resp.Body.Close()
		}
		return ws, err
	}
	for _, bare := range []bool{false, true} {
		s.Bare = bare
		ws, err := dial(s.Request(t, "GET", "/ws?cancelOnDisconnect=false", nil, time.Now()))
		if err != nil {
			t.Fatalf("a signed upgrade: %v", err)
		}
		ws.CloseNow()
		unsigned := s.T.request(t, "GET", "/api/v1/ws", s.authorization(), nil)
		if _, err := dial(unsigned); err == nil || !strings.Contains(err.Error(), "401") {
			t.Fatalf("an unsigned upgrade of a signing key: %v, want a 401", err)
		}
		var tok struct{ Token string }
		s.Call(t, "POST", "/ws-token", nil, http.StatusCreated, &tok)
		f, err := s.DialFeedQuery(context.Background(), "token="+tok.Token)
		if err != nil {
			t.Fatalf("a token fetched by a signed request: %v", err)
		}
		f.Close()
	}
}

// CheckSignedReplayAcrossFronts sends a signed request to one front and the same request to each
// other: every other front refuses it as replayed, and the order is placed once.
func CheckSignedReplayAcrossFronts(t *testing.T, fronts []*Target) {
	m := fronts[0].NewMarket(t, nil)
	s := fronts[0].NewSigningAccount(t, "replay")
	body, _ := json.Marshal(OrderBody(m.ID, "BUY", "YES", 30, 1))
	first := s.Request(t, "POST", "/order", body, time.Now())
	s.Send(t, first, http.StatusCreated, nil)
	for i, tg := range fronts[1:] {
		other := &Signer{Client: &Client{T: tg, Key: s.Key, Account: s.Account, Name: s.Name}, Priv: s.Priv}
		again := other.T.request(t, "POST", "/api/v1/order", first.Header.Get("Authorization"), body)
		again.Header = first.Header.Clone()
		if e := other.Refused(t, again, http.StatusUnauthorized, "replayed_request"); e.Error == "" {
			t.Fatalf("front %d: no message", i+1)
		}
	}
	var orders struct{ Orders []struct{ ID uuid.UUID } }
	s.Call(t, "GET", "/orders", nil, http.StatusOK, &orders)
	if len(orders.Orders) != 1 {
		t.Fatalf("%d orders after one signed order sent to %d fronts, want 1", len(orders.Orders), len(fronts))
	}
}
