package exchangetest

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"net/http"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/pmx-dev/pmx/apiserver"
	"github.com/pmx-dev/pmx/internal/kit/auth"
	"github.com/pmx-dev/pmx/internal/poll"
)

// The key API (apiserver/keys.go): POST and DELETE /api/v1/account/keys with a key of scope keys,
// which makes no key that can do more than itself, and the admin API's POST
// /admin/v1/accounts/{id}/keys.

func testKeyAPI(t *testing.T, tg *Target) {
	t.Run("MakeUseRevoke", func(t *testing.T) { testKeyAPIMakeUseRevoke(t, tg) })
	t.Run("NoEscalation", func(t *testing.T) { testKeyAPINoEscalation(t, tg) })
	t.Run("BadInput", func(t *testing.T) { testKeyAPIBadInput(t, tg) })
	t.Run("Cap", func(t *testing.T) { testKeyAPICap(t, tg) })
}

// adminKey makes a key of c's account through the admin API and returns a client that uses it.
func (tg *Target) adminKey(t *testing.T, c *Client, body map[string]any) (*Client, apiserver.APIKey) {
	t.Helper()
	var out apiserver.NewKey
	tg.Admin(t, "POST", "/admin/v1/accounts/"+c.Account.String()+"/keys", body, http.StatusCreated, &out)
	return &Client{T: tg, Key: out.APIKey, Account: c.Account, Name: c.Name + "/" + out.Key.Scope}, out.Key
}

// newKey makes a key with c's key through the public API and returns a client that uses it.
func (c *Client) newKey(t *testing.T, body map[string]any) (*Client, apiserver.APIKey) {
	t.Helper()
	var out apiserver.NewKey
	c.Expect(t, "POST", "/account/keys", body, http.StatusCreated, &out)
	if !slices.ContainsFunc(keysOf(t, c), func(k apiserver.APIKey) bool { return k.ID == out.Key.ID && !k.Current }) {
		t.Fatalf("the key made, %+v, is not listed", out.Key)
	}
	return &Client{T: c.T, Key: out.APIKey, Account: c.Account, Name: c.Name + "/" + out.Key.Scope}, out.Key
}

func testKeyAPIMakeUseRevoke(t *testing.T, tg *Target) {
	m := tg.NewMarket(t, nil)
	owner := tg.NewAccount(t, "keyapi")
	// An account the admin API opened has no settings page: its operator gives it a keys key.
	manager, mk := tg.adminKey(t, owner, map[string]any{"scope": "keys", "label": "manager"})
	if mk.Scope != "keys" || mk.Label != "manager" || mk.RevokedAt != nil {
		t.Fatalf("the admin API's key: %+v", mk)
	}
	// A trade key makes no key, and revokes none: keys is above trade.
	before := len(keysOf(t, owner))
	owner.ExpectError(t, "POST", "/account/keys", map[string]any{"scope": "read"}, http.StatusForbidden, "insufficient_scope")
	owner.ExpectError(t, "DELETE", "/account/keys/"+mk.ID.String(), nil, http.StatusForbidden, "insufficient_scope")
	if after := len(keysOf(t, owner)); after != before {
		t.Fatalf("refused requests changed the keys: %d, was %d", after, before)
	}

	// The cancel-only desk key: it cancels, and cannot trade.
	desk, dk := manager.newKey(t, map[string]any{"scope": "cancel", "label": "desk"})
	if dk.Scope != "cancel" || dk.Label != "desk" || dk.ExpiresAt != nil || len(dk.IPAllowlist) != 0 || dk.PublicKey != nil {
		t.Fatalf("the desk key: %+v", dk)
	}
	owner.Place(t, m.ID, "BUY", "YES", 40, 5)
	desk.ExpectError(t, "POST", "/order", OrderBody(m.ID, "BUY", "YES", 41, 1), http.StatusForbidden, "insufficient_scope")
	desk.Expect(t, "POST", "/cancel-everything", nil, http.StatusOK, nil)
	if _, locked := owner.Balance(t); locked != 0 {
		t.Fatalf("%d cents still locked after the desk key cancelled everything", locked)
	}
	// A trade key without scope, and a signing key, which signs its requests.
	_, tk := manager.newKey(t, map[string]any{})
	pub, _, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	text := base64.StdEncoding.EncodeToString(pub)
	_, sk := manager.newKey(t, map[string]any{"scope": "trade", "publicKey": text})
	if tk.Scope != "trade" || sk.PublicKey == nil || *sk.PublicKey != text {
		t.Fatalf("keys made without scope and with a public key: %+v, %+v", tk, sk)
	}

	// Revoked, the desk key is refused on every front; the listing shows when.
	manager.Expect(t, "DELETE", "/account/keys/"+dk.ID.String(), nil, http.StatusNoContent, nil)
	poll.Wait(t, 10*time.Second, "the revoked key refused", func() bool {
		status, _ := desk.Do(t, "GET", "/account", nil)
		return status == http.StatusUnauthorized
	})
	desk.ExpectError(t, "GET", "/account", nil, http.StatusUnauthorized, "invalid_api_key")
	desk.ExpectError(t, "POST", "/cancel-everything", nil, http.StatusUnauthorized, "invalid_api_key")
	keys := keysOf(t, manager)
	if i := slices.IndexFunc(keys, func(k apiserver.APIKey) bool { return k.ID == dk.ID }); i < 0 || keys[i].RevokedAt == nil {
		t.Fatalf("the revoked key as listed: %+v", keys)
	}
	// Revoked already, another account's, unknown: not found, nothing changed.
	manager.ExpectError(t, "DELETE", "/account/keys/"+dk.ID.String(), nil, http.StatusNotFound, "key_not_found")
	other := tg.NewAccount(t, "keyapi")
	_, ok := tg.adminKey(t, other, map[string]any{"scope": "read"})
	manager.ExpectError(t, "DELETE", "/account/keys/"+ok.ID.String(), nil, http.StatusNotFound, "key_not_found")
	manager.ExpectError(t, "DELETE", "/account/keys/"+uuid.NewString(), nil, http.StatusNotFound, "key_not_found")
	other.Expect(t, "GET", "/account", nil, http.StatusOK, nil)
	// A keys key may revoke itself: its own answer is the last it gets.
	manager.Expect(t, "DELETE", "/account/keys/"+mk.ID.String(), nil, http.StatusNoContent, nil)
	poll.Wait(t, 10*time.Second, "the manager key refused", func() bool {
		status, _ := manager.Do(t, "GET", "/account", nil)
		return status == http.StatusUnauthorized
	})
	manager.ExpectError(t, "POST", "/account/keys", map[string]any{}, http.StatusUnauthorized, "invalid_api_key")
}

// testKeyAPINoEscalation: a keys key makes no key that may do more, for longer or from more
// places than itself; what a body leaves out the new key takes from its maker.
func testKeyAPINoEscalation(t *testing.T, tg *Target) {
	owner := tg.NewAccount(t, "escalation")
	expires := time.Now().UTC().Add(24 * time.Hour).Truncate(time.Second)
	// Every address, as two halves: a range wider than either is asking for more.
	halves := []string{"0.0.0.0/1", "128.0.0.0/1", "::/0"}
	fenced, _ := tg.adminKey(t, owner, map[string]any{"scope": "keys", "expiresAt": expires.Format(time.RFC3339), "ipAllowlist": halves})
	before := len(keysOf(t, owner))
	e := fenced.ExpectError(t, "POST", "/account/keys", map[string]any{"expiresAt": expires.Add(time.Second).Format(time.RFC3339)},
		http.StatusForbidden, "exceeds_own_key")
	if e.Details.Field != "expiresAt" {
		t.Errorf("a key outliving its maker refused on %q, want expiresAt", e.Details.Field)
	}
	e = fenced.ExpectError(t, "POST", "/account/keys", map[string]any{"ipAllowlist": []string{"0.0.0.0/0"}}, http.StatusForbidden, "exceeds_own_key")
	if e.Details.Field != "ipAllowlist" {
		t.Errorf("a key wider than its maker refused on %q, want ipAllowlist", e.Details.Field)
	}
	if after := len(keysOf(t, owner)); after != before {
		t.Fatalf("refused requests made keys: %d, was %d", after, before)
	}
	// Left out, the expiry and the allowlist are the maker's; within them, the body's own.
	_, inherited := fenced.newKey(t, map[string]any{"scope": "keys"})
	if inherited.ExpiresAt == nil || !inherited.ExpiresAt.Equal(expires) || !slices.Equal(inherited.IPAllowlist, halves) {
		t.Fatalf("a key made without expiry or allowlist by a fenced key: %+v", inherited)
	}
	sooner := expires.Add(-time.Hour)
	_, narrow := fenced.newKey(t, map[string]any{"scope": "read", "expiresAt": sooner.Format(time.RFC3339), "ipAllowlist": []string{"10.0.0.0/8"}})
	if narrow.ExpiresAt == nil || !narrow.ExpiresAt.Equal(sooner) || !slices.Equal(narrow.IPAllowlist, []string{"10.0.0.0/8"}) {
		t.Fatalf("a key narrower than its maker: %+v", narrow)
	}
}

func testKeyAPIBadInput(t *testing.T, tg *Target) {
	owner := tg.NewAccount(t, "keyinput")
	manager, _ := tg.adminKey(t, owner, map[string]any{"scope": "keys"})
	before := len(keysOf(t, owner))
	for _, tc := range []struct {
		body        any
		code, field string
	}{
		{body: "[]", code: "malformed_json"},
		{body: map[string]any{"scope": "admin"}, code: "invalid_value", field: "scope"},
		{body: map[string]any{"scope": 2}, code: "invalid_type", field: "scope"},
		{body: map[string]any{"label": "two\nlines"}, code: "invalid_value", field: "label"},
		{body: map[string]any{"publicKey": "not a key"}, code: "invalid_value", field: "publicKey"},
		{body: map[string]any{"expiresAt": "2020-01-01T00:00:00Z"}, code: "invalid_value", field: "expiresAt"},
		{body: map[string]any{"ipAllowlist": []string{"10.0.0.1/8"}}, code: "invalid_value", field: "ipAllowlist"},
	} {
		e := manager.ExpectError(t, "POST", "/account/keys", tc.body, http.StatusBadRequest, tc.code)
		if e.Details.Field != tc.field {
			t.Errorf("POST /account/keys %v: refused on %q, want %q", tc.body, e.Details.Field, tc.field)
		}
		var ae ErrorBody
		tg.Admin(t, "POST", "/admin/v1/accounts/"+owner.Account.String()+"/keys", tc.body, http.StatusBadRequest, &ae)
		if ae.Details.Code != tc.code || ae.Details.Field != tc.field {
			t.Errorf("POST /admin/v1/accounts/{id}/keys %v: %+v, want %s on %q", tc.body, ae.Details, tc.code, tc.field)
		}
	}
	manager.ExpectError(t, "DELETE", "/account/keys/not-a-key", nil, http.StatusBadRequest, "invalid_uuid")
	if after := len(keysOf(t, owner)); after != before {
		t.Fatalf("refused requests made keys: %d, was %d", after, before)
	}
	var e ErrorBody
	tg.Admin(t, "POST", "/admin/v1/accounts/not-an-account/keys", map[string]any{}, http.StatusBadRequest, &e)
	if e.Details.Code != "invalid_uuid" {
		t.Errorf("the admin route with a malformed id: %+v", e.Details)
	}
	tg.Admin(t, "POST", "/admin/v1/accounts/"+uuid.NewString()+"/keys", map[string]any{}, http.StatusNotFound, &e)
	if e.Details.Code != "account_not_found" {
		t.Errorf("the admin route with an unknown account: %+v", e.Details)
	}
	tg.AdminAs(t, "", "POST", "/admin/v1/accounts/"+owner.Account.String()+"/keys", map[string]any{}, http.StatusUnauthorized, nil)
}

// testKeyAPICap: an account holds at most auth.MaxKeys active keys, however they are made; a
// revoked key no longer counts.
func testKeyAPICap(t *testing.T, tg *Target) {
	owner := tg.NewAccount(t, "keycap")
	manager, _ := tg.adminKey(t, owner, map[string]any{"scope": "keys"})
	for n := len(keysOf(t, owner)); n < auth.MaxKeys; n++ {
		tg.AddKey(t, owner, auth.KeySpec{Scope: auth.ScopeRead})
	}
	manager.ExpectError(t, "POST", "/account/keys", map[string]any{}, http.StatusConflict, "too_many_keys")
	var e ErrorBody
	tg.Admin(t, "POST", "/admin/v1/accounts/"+owner.Account.String()+"/keys", map[string]any{}, http.StatusConflict, &e)
	if e.Details.Code != "too_many_keys" {
		t.Errorf("the admin route past the cap: %+v", e.Details)
	}
	var count int
	if err := tg.Store.Pool.QueryRow(context.Background(), `select count(*) from api_keys k join accounts a on a.id = k.account_id
		where a.uid = $1`, owner.Account).Scan(&count); err != nil || count != auth.MaxKeys {
		t.Fatalf("%d keys (%v), want %d: a refusal made one", count, err, auth.MaxKeys)
	}
	keys := keysOf(t, owner)
	manager.Expect(t, "DELETE", "/account/keys/"+keys[0].ID.String(), nil, http.StatusNoContent, nil) // the newest, a read key
	manager.newKey(t, map[string]any{"scope": "read"})
}

// CheckKeyRevokedAcrossFronts checks that a key revoked through the API on one front is refused by
// every other, each of which had the key in its cache: the revocation reaches them as the settings
// page's does (store.RevokeAPIKey's notification), within a bound of seconds.
func CheckKeyRevokedAcrossFronts(t *testing.T, fronts []*Target) {
	owner := fronts[0].NewAccount(t, "revoked")
	manager, _ := fronts[0].adminKey(t, owner, map[string]any{"scope": "keys"})
	made, k := manager.newKey(t, map[string]any{"scope": "read"})
	users := make([]*Client, len(fronts))
	for i, tg := range fronts {
		users[i] = &Client{T: tg, Key: made.Key, Account: made.Account, Name: made.Name}
		users[i].Expect(t, "GET", "/account", nil, http.StatusOK, nil) // now in that front's cache
	}
	manager.Expect(t, "DELETE", "/account/keys/"+k.ID.String(), nil, http.StatusNoContent, nil)
	users[0].ExpectError(t, "GET", "/account", nil, http.StatusUnauthorized, "invalid_api_key") // the revoking front: at once
	for i, c := range users[1:] {
		poll.Wait(t, 10*time.Second, "the revoked key refused by front "+strconv.Itoa(i+1), func() bool {
			status, _ := c.Do(t, "GET", "/account", nil)
			return status == http.StatusUnauthorized
		})
		c.ExpectError(t, "GET", "/account", nil, http.StatusUnauthorized, "invalid_api_key")
	}
}
