package bench

import (
	"context"
	"math"
	"net/http"
	"reflect"
	"strconv"
	"testing"
)

// serverMetrics is a pmx process's exposition of the three histograms of ServerTimes: two shards'
// batches (the 99th percentile of their 200 in the bucket up to 6.4ms), their commits (of 200,
// 195 within 1.6ms and the rest within 3.2ms; left out when !commits, as a pmx without the
// histogram exports) and the placements a front answered (of 100, 99 within 12.8ms), beside a
// route that does not count.
func serverMetrics(scale int, commits bool) string {
	n := func(v int) string { return strconv.Itoa(v * scale) }
	c := ""
	if commits {
		c = `# TYPE pmx_shard_commit_seconds histogram
pmx_shard_commit_seconds_bucket{shard="0",le="0.0016"} ` + n(95) + `
pmx_shard_commit_seconds_bucket{shard="0",le="0.0032"} ` + n(100) + `
pmx_shard_commit_seconds_bucket{shard="0",le="+Inf"} ` + n(100) + `
pmx_shard_commit_seconds_sum{shard="0"} 0.1
pmx_shard_commit_seconds_count{shard="0"} ` + n(100) + `
pmx_shard_commit_seconds_bucket{shard="1",le="0.0016"} ` + n(100) + `
pmx_shard_commit_seconds_bucket{shard="1",le="0.0032"} ` + n(100) + `
pmx_shard_commit_seconds_bucket{shard="1",le="+Inf"} ` + n(100) + `
pmx_shard_commit_seconds_sum{shard="1"} 0.05
pmx_shard_commit_seconds_count{shard="1"} ` + n(100) + `
`
	}
	return c + `# TYPE pmx_shard_batch_seconds histogram
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
// shard's batches and commits. A pmx without the commits' histogram gives the other two.
func TestServerTimes(t *testing.T) {
	ctx := context.Background()
	read := func(scale int, commits bool) serverHistograms {
		t.Helper()
		_, h, err := scrapeShards(ctx, []string{serveMetrics(t, serverMetrics(scale, commits), http.StatusOK)})
		if err != nil {
			t.Fatal(err)
		}
		return h
	}
	before := read(1, true)
	got := read(3, true).times(before)
	want := ServerTimes{Batches: 400, Commits: 400, Orders: 200, BatchP99: Quantile{Over: 0.0032, AtMost: 0.0064},
		CommitP99: &Quantile{Over: 0.0016, AtMost: 0.0032}, OrderP99: Quantile{Over: 0.0064, AtMost: 0.0128}}
	if got == nil || !reflect.DeepEqual(*got, want) {
		t.Fatalf("times = %+v, want %+v", got, want)
	}
	if s := got.BatchP99.String() + ", " + got.CommitP99.String() + ", " + got.OrderP99.String(); s != "at most 6.40ms, at most 3.20ms, at most 12.8ms" {
		t.Errorf("as text: %s", s)
	}
	older := read(3, false).times(read(1, false))
	if older == nil || older.Commits != 0 || older.CommitP99 != nil || older.BatchP99 != want.BatchP99 {
		t.Errorf("from a pmx without the commits' histogram: %+v, want the batches' and placements' alone", older)
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
