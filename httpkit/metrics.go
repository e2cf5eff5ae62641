package httpkit

import (
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
// reg.
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

// middleware records each request once it is answered.
func (m *httpMetrics) middleware(c *gin.Context) {
	start := time.Now()
	c.Next()
	route := c.FullPath()
	if route == "" {
		route = "unmatched"
	}
	m.requests.WithLabelValues(route, c.Request.Method, strconv.Itoa(c.Writer.Status())).Inc()
	m.duration.WithLabelValues(route, c.Request.Method).Observe(time.Since(start).Seconds())
}

// MetricsHandler serves a registry's metrics in the Prometheus format.
func MetricsHandler(g prometheus.Gatherer) gin.HandlerFunc {
	h := promhttp.HandlerFor(g, promhttp.HandlerOpts{})
	return gin.WrapH(h)
}

// NewRegistry is a metrics registry with the Go runtime's and the process's collectors, for one
// process to share between its parts.
func NewRegistry() *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return reg
}
