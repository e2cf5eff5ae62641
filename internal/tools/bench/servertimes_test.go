package bench

import (
	"context"
	"math"
	"net/http"
	"strconv"
	"testing"
)

// serverMetrics is a pmx process's exposition of the two histograms of ServerTimes: two shards'
// batches (the 99th percentile of their 200 in the bucket up to 6.4ms) and the placements a front
// answered (of 100, 99 within 12.8ms), beside a route that does not count.
func serverMetrics(scale int) string {
	n := func(v int) string { return strconv.Itoa(v * scale) }
	return `# TYPE pmx_shard_batch_seconds histogram
pmx_shard_batch_seconds_bucket{shard="0",le="0.0032"} ` + n(90) + `
pmx_shard_batch_seconds_bucket{shard="0",le="0.0064"} ` + n(99) + `
pmx_shard_batch_seconds_bucket{shard="0",le="+Inf"} ` + n(100) + `
pmx_shard_batch_seconds_sum{shard="0"} 0.3
pmx_shard_batch_seconds_count{shard="0"} ` + n(100) + `
pmx_shard_batch_seconds_bucket{shard="1",le="0.0032"} ` + n(100) + `
pmx_shard_batch_seconds_bucket{shard="1",le="0.0064"} ` + n(100) + `
pmx_shard_batch_seconds_bucket{shard="1",le="+Inf"} ` + n(100) + `
pmx_shard_batch_seconds_sum{shard="1"} 0.1
pmx_shard_batch_seconds_count{shard="1"} ` + n(100) + `
# TYPE pmx_http_request_duration_seconds histogram
pmx_http_request_duration_seconds_bucket{method="POST",route="/api/v1/order",le="0.0064"} ` + n(50) + `
pmx_http_request_duration_seconds_bucket{method="POST",route="/api/v1/order",le="0.0128"} ` + n(99) + `
pmx_http_request_duration_seconds_bucket{method="POST",route="/api/v1/order",le="+Inf"} ` + n(100) + `
pmx_http_request_duration_seconds_sum{method="POST",route="/api/v1/order"} 1
pmx_http_request_duration_seconds_count{method="POST",route="/api/v1/order"} ` + n(100) + `
pmx_http_request_duration_seconds_bucket{method="GET",route="/api/v1/order",le="0.0064"} 0
pmx_http_request_duration_seconds_bucket{method="GET",route="/api/v1/order",le="0.0128"} 0
pmx_http_request_duration_seconds_bucket{method="GET",route="/api/v1/order",le="+Inf"} ` + n(1000) + `
pmx_http_request_duration_seconds_sum{method="GET",route="/api/v1/order"} 1000
pmx_http_request_duration_seconds_count{method="GET",route="/api/v1/order"} ` + n(1000) + `
`
}

// TestServerTimes reads the histograms over HTTP before and after a load, and takes the 99th
// percentiles of what they counted in between: only POST /api/v1/order's placements, every
// shard's batches.
func TestServerTimes(t *testing.T) {
	ctx := context.Background()
	_, before, err := scrapeShards(ctx, []string{serveMetrics(t, serverMetrics(1), http.StatusOK)})
	if err != nil {
		t.Fatal(err)
	}
	_, after, err := scrapeShards(ctx, []string{serveMetrics(t, serverMetrics(3), http.StatusOK)})
	if err != nil {
		t.Fatal(err)
	}
	got := after.times(before)
	want := ServerTimes{Batches: 400, Orders: 200, BatchP99: Quantile{Over: 0.0032, AtMost: 0.0064},
		OrderP99: Quantile{Over: 0.0064, AtMost: 0.0128}}
	if got == nil || *got != want {
		t.Fatalf("times = %+v, want %+v", got, want)
	}
	if s := got.BatchP99.String() + ", " + got.OrderP99.String(); s != "at most 6.40ms, at most 12.8ms" {
		t.Errorf("as text: %s", s)
	}
	if none := before.times(before); none != nil {
		t.Errorf("nothing counted between two readings: %+v, want nil", none)
	}
	if none := newServerHistograms().times(newServerHistograms()); none != nil {
		t.Errorf("a pmx without the histograms: %+v, want nil", none)
	}
}

func TestHistogramQuantile(t *testing.T) {
	inf := math.Inf(1)
	for _, c := range []struct {
		name string
		h    histogram
		q    float64
		want Quantile
		text string
	}{
		{"empty", histogram{}, 0.99, Quantile{}, "-"},
		{"first bucket", histogram{0.0001: 100, 0.0002: 100, inf: 100}, 0.99, Quantile{AtMost: 0.0001}, "at most 100µs"},
		{"exactly at a bound", histogram{0.001: 99, 0.002: 100, inf: 100}, 0.99, Quantile{AtMost: 0.001}, "at most 1.00ms"},
		{"just past one", histogram{0.001: 98, 0.002: 100, inf: 100}, 0.99, Quantile{Over: 0.001, AtMost: 0.002}, "at most 2.00ms"},
		{"past the largest bound", histogram{0.001: 50, 3.2768: 90, inf: 100}, 0.99, Quantile{Over: 3.2768}, "over 3.28s"},
		{"the median", histogram{0.001: 50, 0.002: 100, inf: 100}, 0.5, Quantile{AtMost: 0.001}, "at most 1.00ms"},
	} {
		got := c.h.quantile(c.q)
		if got != c.want || got.String() != c.text {
			t.Errorf("%s: quantile(%v) = %+v %q, want %+v %q", c.name, c.q, got, got.String(), c.want, c.text)
		}
	}
}
