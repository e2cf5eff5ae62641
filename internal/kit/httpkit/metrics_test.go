package httpkit

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/prometheus/client_golang/prometheus"
)

// TestMetricsLabelsClosed sends requests with hundreds of invented methods, to routes that exist
// and to paths that do not: the number of series must not grow with them.
func TestMetricsLabelsClosed(t *testing.T) {
	gin.SetMode(gin.ReleaseMode)
	reg := prometheus.NewRegistry()
	e := gin.New()
	e.HandleMethodNotAllowed = true
	e.Use(HTTPMetrics(reg))
	e.GET("/markets/:id", func(c *gin.Context) { c.Status(http.StatusOK) })
	series := func() int {
		mfs, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, mf := range mfs {
			n += len(mf.GetMetric())
		}
		return n
	}
	for i := range 300 {
		for _, path := range []string{"/markets/1", fmt.Sprintf("/nowhere/%d", i)} {
			req := httptest.NewRequest("M"+fmt.Sprint(i), path, nil)
			e.ServeHTTP(httptest.NewRecorder(), req)
		}
		e.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodGet, fmt.Sprintf("/markets/%d", i), nil))
	}
	if n := series(); n > 10 {
		t.Fatalf("%d series after 900 requests with 300 methods and 300 paths; labels must come from a closed set", n)
	}
	mfs, _ := reg.Gather()
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if v := l.GetValue(); strings.HasPrefix(v, "M") || strings.HasPrefix(v, "/nowhere") {
					t.Errorf("label %s=%q comes from the request", l.GetName(), v)
				}
			}
		}
	}
}

// TestMetricsHandlerServesOnlyMetrics checks that the metrics listener's handler answers GET (and
// HEAD) /metrics with the registry's metrics, and nothing else: no other path, no other method.
func TestMetricsHandlerServesOnlyMetrics(t *testing.T) {
	reg := prometheus.NewRegistry()
	c := prometheus.NewCounter(prometheus.CounterOpts{Name: "pmx_test_total", Help: "A counter."})
	reg.MustRegister(c)
	c.Inc()
	h := MetricsHandler(reg)
	for _, tc := range []struct {
		method, path string
		want         int
	}{
		{http.MethodGet, "/metrics", http.StatusOK},
		{http.MethodHead, "/metrics", http.StatusOK},
		{http.MethodPost, "/metrics", http.StatusMethodNotAllowed},
		{http.MethodGet, "/", http.StatusNotFound},
		{http.MethodGet, "/metrics/", http.StatusNotFound},
		{http.MethodGet, "/healthz", http.StatusNotFound},
		{http.MethodGet, "/api/v1/markets", http.StatusNotFound},
	} {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(tc.method, tc.path, nil))
		if rec.Code != tc.want {
			t.Errorf("%s %s: %d, want %d", tc.method, tc.path, rec.Code, tc.want)
		}
		if tc.method == http.MethodGet && tc.want == http.StatusOK && !strings.Contains(rec.Body.String(), "pmx_test_total 1") {
			t.Errorf("GET /metrics does not serve the registry:\n%.300s", rec.Body.String())
		}
	}
}

// TestUnwritableAnswerIs500 answers with a body JSON cannot encode (a time past year 9999): the
// client must get a 500 with an error body, not a 200 with an empty one, and the metrics count
// the 500.
func TestUnwritableAnswerIs500(t *testing.T) {
	gin.SetMode(gin.ReleaseMode)
	reg := prometheus.NewRegistry()
	e := gin.New()
	e.Use(HTTPMetrics(reg))
	far := time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)
	e.GET("/far", func(c *gin.Context) { c.JSON(http.StatusOK, gin.H{"at": far}) })
	e.GET("/near", func(c *gin.Context) { c.JSON(http.StatusCreated, gin.H{"at": far.AddDate(-1, 0, 0)}) })
	for _, tc := range []struct {
		path   string
		status int
		code   string
	}{{"/far", http.StatusInternalServerError, "internal"}, {"/near", http.StatusCreated, ""}} {
		w := httptest.NewRecorder()
		e.ServeHTTP(w, httptest.NewRequest(http.MethodGet, tc.path, nil))
		var body struct {
			Error   string       `json:"error"`
			Details ErrorDetails `json:"details"`
		}
		if err := json.Unmarshal(w.Body.Bytes(), &body); err != nil {
			t.Fatalf("%s: %d answered %q, not JSON: %v", tc.path, w.Code, w.Body, err)
		}
		if w.Code != tc.status || body.Details.Code != tc.code || tc.code != "" && body.Error == "" {
			t.Errorf("%s: %d %s, want %d with code %q", tc.path, w.Code, w.Body, tc.status, tc.code)
		}
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	counted := map[string]bool{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "code" {
					counted[l.GetValue()] = true
				}
			}
		}
	}
	if !counted["500"] || counted["200"] {
		t.Errorf("the metrics counted codes %v, want the 500 and no 200", counted)
	}
}
