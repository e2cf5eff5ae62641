package shardserver

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestMetricsNotOnInternalPort checks that a shard's internal API does not serve /metrics, with or
// without the internal token: the process serves it on a listener of its own (pmx's --metrics-addr).
func TestMetricsNotOnInternalPort(t *testing.T) {
	h := Server{Token: "internal-token"}.Handler()
	for _, path := range []string{"/metrics", "/internal/v1/metrics"} {
		for _, auth := range []string{"", "Bearer internal-token"} {
			req := httptest.NewRequest(http.MethodGet, path, nil)
			if auth != "" {
				req.Header.Set("Authorization", auth)
			}
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			if rec.Code == http.StatusOK || strings.Contains(rec.Body.String(), "go_goroutines") {
				t.Errorf("GET %s (token %t): %d, serves metrics", path, auth != "", rec.Code)
			}
			if path == "/metrics" && rec.Code != http.StatusNotFound {
				t.Errorf("GET /metrics (token %t): %d, want 404", auth != "", rec.Code)
			}
		}
	}
}

// TestEveryCallBehindTheToken checks the routes table: each call once, under /internal/v1/, and
// refused without the internal token before its handler runs.
func TestEveryCallBehindTheToken(t *testing.T) {
	h := Server{Token: "internal-token"}.Handler()
	seen := map[string]bool{}
	for _, r := range (&handlers{}).routes() {
		key := r.method + " " + r.path
		if seen[key] || !strings.HasPrefix(r.path, "/internal/v1/") || r.handle == nil {
			t.Errorf("route %s: registered twice, outside /internal/v1/, or without a handler", key)
		}
		seen[key] = true
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(r.method, r.path, strings.NewReader("{}")))
		if rec.Code != http.StatusUnauthorized {
			t.Errorf("%s without the token: %d, want 401", key, rec.Code)
		}
	}
}
