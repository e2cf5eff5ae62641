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
