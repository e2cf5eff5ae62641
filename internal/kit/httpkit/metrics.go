package httpkit

import (
	"net/http"
	"strconv"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// httpMetrics counts and times every request by route, for /metrics.
type httpMetrics struct {
	requests *prometheus.CounterVec
	duration *prometheus.HistogramVec
}

// HTTPMetrics is middleware that counts and times every request by route, method and status, in
// reg. Every gin engine of the exchange runs it, innermost: it first turns an answer gin failed to
// write into a 500 (answerUnwritten), so that what it counts is what the client got.
func HTTPMetrics(reg prometheus.Registerer) gin.HandlerFunc {
	return newHTTPMetrics(reg).middleware
}

func newHTTPMetrics(reg prometheus.Registerer) *httpMetrics {
	m := &httpMetrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "pmx_http_requests_total", Help: "HTTP requests answered, by route, method and status code.",
		}, []string{"route", "method", "code"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "pmx_http_request_duration_seconds", Help: "Time to answer an HTTP request, by route and method.",
			Buckets: prometheus.ExponentialBuckets(0.0001, 2, 16), // 100µs to ~3s
		}, []string{"route", "method"}),
	}
	reg.MustRegister(m.requests, m.duration)
	return m
}

// middleware records each request once it is answered. Every label value comes from a closed
// set, whatever a client sends: the route is a matched route template or "unmatched", the method
// one of HTTP's or "other", the code one the server wrote. A label value taken from the request
// as it is would let anyone add series without bound (20,000 invented methods once took /metrics
// to 116 MB).
func (m *httpMetrics) middleware(c *gin.Context) {
	start := time.Now()
	c.Next()
	answerUnwritten(c)
	route := c.FullPath()
	if route == "" {
		route = "unmatched"
	}
	method := methodLabel(c.Request.Method)
	m.requests.WithLabelValues(route, method, strconv.Itoa(c.Writer.Status())).Inc()
	m.duration.WithLabelValues(route, method).Observe(time.Since(start).Seconds())
}

// methodLabel is a request's method as a label value: one of HTTP's methods, or "other".
func methodLabel(method string) string {
	switch method {
	case http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch,
		http.MethodDelete, http.MethodOptions, http.MethodConnect, http.MethodTrace:
		return method
	}
	return "other"
}

// MetricsHandler serves a registry's metrics in the Prometheus format at GET /metrics, and answers
// 404 to anything else. Every process serves it on a listener of its own (pmx's --metrics-addr),
// never beside the public or internal API: what a process counts is for its operators, and a
// scrape, which writes every series, is no work to let anyone ask for.
func MetricsHandler(g prometheus.Gatherer) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(g, promhttp.HandlerOpts{}))
	return mux
}

// NewRegistry is a metrics registry with the Go runtime's and the process's collectors, for one
// process to share between its parts.
func NewRegistry() *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return reg
}
