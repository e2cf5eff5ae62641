package apiserver

import (
	"slices"
	"strings"
	"testing"

	"github.com/pmx-dev/pmx/internal/kit/auth"
	"github.com/pmx-dev/pmx/internal/storetest"
)

// TestEveryRouteHasAScope fails on a keyed /api/v1 route registered outside the scope table
// (routes), so that no endpoint can be added without saying what a key needs to call it, and
// checks the table against the rule its comment states.
func TestEveryRouteHasAScope(t *testing.T) {
	s := New(Config{Store: storetest.New(t)})
	t.Cleanup(s.Close)
	scoped := map[string]auth.Scope{"GET /api/v1/ws": wsScope}
	for _, r := range s.routes() {
		key := r.method + " /api/v1" + r.path
		if _, dup := scoped[key]; dup {
			t.Errorf("%s is in the scope table twice", key)
		}
		scoped[key] = r.scope
	}
	unkeyed := []string{"GET /api/v1/openapi.yaml", "GET /api/v1/asyncapi.yaml", "GET /api/v1/ws/public"}
	seen := 0
	for _, r := range s.engine.Routes() {
		key := r.Method + " " + r.Path
		if !strings.HasPrefix(r.Path, "/api/v1/") || slices.Contains(unkeyed, key) {
			continue
		}
		seen++
		if _, ok := scoped[key]; !ok {
			t.Errorf("%s is registered without a scope: add it to routes (apiserver/routes.go)", key)
		}
	}
	if seen != len(scoped) {
		t.Errorf("%d keyed routes registered, %d in the scope table", seen, len(scoped))
	}
	cancels := []string{"POST /api/v1/cancel-order", "POST /api/v1/cancel-everything", "POST /api/v1/orders/cancel", "POST /api/v1/heartbeat"}
	for key, scope := range scoped {
		var want auth.Scope
		switch {
		case strings.HasPrefix(key, "GET "), key == "POST /api/v1/ws-token":
			want = auth.ScopeRead
		case slices.Contains(cancels, key):
			want = auth.ScopeCancel
		case strings.HasPrefix(key, "POST /api/v1/account/keys"), strings.HasPrefix(key, "DELETE /api/v1/account/keys/"):
			want = auth.ScopeKeys
		default:
			want = auth.ScopeTrade
		}
		if scope != want {
			t.Errorf("%s needs %s, want %s", key, scope, want)
		}
	}
}
