package apiserver_test

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/pmx-dev/pmx/internal/exchangetest"
	"github.com/pmx-dev/pmx/internal/kit/httpkit"
)

// TestMetricsNotOnAPIPort checks that the API does not serve /metrics, whatever the method or
// credential: it answers 404 not_found as for any unknown path, while the metrics listener beside
// it (pmx's --metrics-addr) serves the requests the API counted. Metrics on the public port would
// tell anyone the exchange's traffic, routes and runtime, and make them pay for every scrape.
func TestMetricsNotOnAPIPort(t *testing.T) {
	tg := exchangetest.StartDev(t)
	key := tg.NewAccount(t, "metrics").Key
	for _, path := range []string{"/metrics", "/metrics/", "/api/v1/metrics", "/admin/v1/metrics"} {
		for _, auth := range []string{"", "Bearer " + key, "Bearer " + tg.AdminToken} {
			for _, method := range []string{http.MethodGet, http.MethodHead} {
				req, err := http.NewRequest(method, tg.URL+path, nil)
				if err != nil {
					t.Fatal(err)
				}
				if auth != "" {
					req.Header.Set("Authorization", auth)
				}
				resp, err := tg.HTTP.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				raw, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if resp.StatusCode == http.StatusOK || strings.Contains(string(raw), "go_goroutines") {
					t.Errorf("%s %s (authorization %t) on the API's port: %d, serves metrics", method, path, auth != "", resp.StatusCode)
				}
				if path == "/metrics" {
					var body httpkit.ErrorBody
					if resp.StatusCode != http.StatusNotFound || (method == http.MethodGet && (json.Unmarshal(raw, &body) != nil || body.Details.Code != "not_found")) {
						t.Errorf("%s /metrics (authorization %t) on the API's port: %d %.200s, want 404 not_found", method, auth != "", resp.StatusCode, raw)
					}
				}
			}
		}
	}

	resp, err := tg.HTTP.Get(tg.MetricsURL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(raw), `pmx_http_requests_total{code="404",method="GET",route="unmatched"}`) {
		t.Errorf("GET /metrics on the metrics listener: %d %.300s, want the API's requests counted", resp.StatusCode, raw)
	}
}
