package accounts

import (
	"context"
	"crypto/ed25519"
	"net/netip"
	"reflect"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/pmx-dev/pmx/internal/kit/auth"
	"github.com/pmx-dev/pmx/internal/store/db/dbtest"
)

// TestKeysByPrefix reads several keys in one statement: each with its own fields (a key with every
// restriction beside one with none, whose nulls stay nil rather than taking the other's), a
// revoked one marked so, and a prefix no key has left out; no prefix reads no key.
func TestKeysByPrefix(t *testing.T) {
	ctx := context.Background()
	st := New(dbtest.New(t))
	now := time.Now().UTC().Truncate(time.Microsecond)
	acct, err := st.CreateAccount(ctx, "keys", 1000, now)
	if err != nil {
		t.Fatal(err)
	}
	expires := now.Add(time.Hour)
	pub, _, err := ed25519.GenerateKey(nil)
	if err != nil {
		t.Fatal(err)
	}
	full := APIKey{ID: uuid.New(), AccountID: acct.ID, Prefix: "pmx_full", Label: "full", Scope: auth.ScopeRead,
		CreatedAt: now, ExpiresAt: &expires, Allowlist: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}, PublicKey: pub}
	plain := APIKey{ID: uuid.New(), AccountID: acct.ID, Prefix: "pmx_plain", Label: "plain", Scope: auth.ScopeTrade, CreatedAt: now}
	revoked := APIKey{ID: uuid.New(), AccountID: acct.ID, Prefix: "pmx_revoked", Label: "revoked", Scope: auth.ScopeTrade, CreatedAt: now}
	for _, k := range []APIKey{full, plain, revoked} {
		if err := st.InsertAPIKey(ctx, k, []byte("hash of "+k.Prefix)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := st.RevokeAPIKey(ctx, acct.ID, revoked.ID, now); err != nil {
		t.Fatal(err)
	}

	// plain is read after full (the rows come in the index's order), so a field left over from
	// full's row would show in plain's record.
	got, err := st.KeysByPrefix(ctx, []string{"pmx_full", "pmx_plain", "pmx_revoked", "pmx_none"})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]KeyRecord{
		"pmx_full": {ID: full.ID, Prefix: "pmx_full", AccountID: acct.ID, Hash: []byte("hash of pmx_full"), Scope: auth.ScopeRead,
			ExpiresAt: &expires, Allowlist: full.Allowlist, PublicKey: pub},
		"pmx_plain": {ID: plain.ID, Prefix: "pmx_plain", AccountID: acct.ID, Hash: []byte("hash of pmx_plain"), Scope: auth.ScopeTrade},
		"pmx_revoked": {ID: revoked.ID, Prefix: "pmx_revoked", AccountID: acct.ID, Hash: []byte("hash of pmx_revoked"),
			Scope: auth.ScopeTrade, Revoked: true},
	}
	if len(got) != len(want) {
		t.Fatalf("read %d keys, want %d: %+v", len(got), len(want), got)
	}
	for prefix, w := range want {
		g, ok := got[prefix]
		if ok && g.ExpiresAt != nil && w.ExpiresAt != nil && g.ExpiresAt.Equal(*w.ExpiresAt) {
			g.ExpiresAt = w.ExpiresAt // the same instant, whatever its location
		}
		if !ok || !reflect.DeepEqual(g, w) {
			t.Errorf("key %s: got %+v, want %+v", prefix, g, w)
		}
	}

	if got, err := st.KeysByPrefix(ctx, nil); err != nil || len(got) != 0 {
		t.Errorf("KeysByPrefix(nil) = %v, %v; want no keys", got, err)
	}
}
