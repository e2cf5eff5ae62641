package bench

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// shardMetrics is a pmx process's exposition of two shards' counters, as the shard package
// registers them (held, read and the database's seconds only when withHeld: a newer build).
func shardMetrics(withHeld bool) string {
	s := `# TYPE pmx_shard_batches_total counter
pmx_shard_batches_total{shard="0"} 100
pmx_shard_batches_total{shard="1"} 50
# TYPE pmx_shard_batch_commands histogram
pmx_shard_batch_commands_bucket{shard="0",le="+Inf"} 100
pmx_shard_batch_commands_sum{shard="0"} 900
pmx_shard_batch_commands_count{shard="0"} 100
pmx_shard_batch_commands_bucket{shard="1",le="+Inf"} 50
pmx_shard_batch_commands_sum{shard="1"} 300
pmx_shard_batch_commands_count{shard="1"} 50
# TYPE pmx_shard_commands_pipelined_total counter
pmx_shard_commands_pipelined_total{shard="0"} 800
pmx_shard_commands_pipelined_total{shard="1"} 200
# TYPE pmx_shard_batches_rerun_total counter
pmx_shard_batches_rerun_total{shard="0"} 1
pmx_shard_batches_rerun_total{shard="1"} 2
# TYPE pmx_shard_batch_failures_total counter
pmx_shard_batch_failures_total{shard="0"} 0
pmx_shard_batch_failures_total{shard="1"} 3
`
	if withHeld {
		s += `# TYPE pmx_shard_database_seconds_total counter
pmx_shard_database_seconds_total{shard="0"} 7.5
pmx_shard_database_seconds_total{shard="1"} 2.25
# TYPE pmx_shard_commands_held_total counter
pmx_shard_commands_held_total{shard="0"} 7
pmx_shard_commands_held_total{shard="1"} 5
# TYPE pmx_shard_batches_read_total counter
pmx_shard_batches_read_total{shard="0"} 4
pmx_shard_batches_read_total{shard="1"} 6
# TYPE pmx_shard_acquires_total counter
pmx_shard_acquires_total{shard="0"} 2
pmx_shard_acquires_total{shard="1"} 1
# TYPE pmx_shard_acquire_seconds_total counter
pmx_shard_acquire_seconds_total{shard="0"} 0.004
pmx_shard_acquire_seconds_total{shard="1"} 0.002
# TYPE pmx_shard_acquires_aside_total counter
pmx_shard_acquires_aside_total{shard="0"} 5
pmx_shard_acquires_aside_total{shard="1"} 3
# TYPE pmx_shard_acquire_aside_seconds_total counter
pmx_shard_acquire_aside_seconds_total{shard="0"} 0.01
pmx_shard_acquire_aside_seconds_total{shard="1"} 0.006
`
	}
	return s
}

func serveMetrics(t *testing.T, body string, status int) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; version=0.0.4")
		w.WriteHeader(status)
		_, _ = w.Write([]byte(body))
	}))
	t.Cleanup(srv.Close)
	return srv.URL + "/metrics"
}

// TestScrapeShards reads the shard counters of a shard process and a front (which has none) over
// HTTP and sums every shard's series; a build without the held and read counters gives -1 for
// them, which a difference keeps.
func TestScrapeShards(t *testing.T) {
	ctx := context.Background()
	front := serveMetrics(t, "# TYPE pmx_http_requests_total counter\npmx_http_requests_total 3\n", http.StatusOK)
	got, _, err := scrapeShards(ctx, []string{serveMetrics(t, shardMetrics(true), http.StatusOK), front})
	if err != nil {
		t.Fatal(err)
	}
	want := ShardCounters{Batches: 150, Commands: 1200, Pipelined: 1000, Held: 12, Read: 10, Rerun: 3, Acquires: 3, AcquireSeconds: 0.006,
		Aside: 8, AsideSeconds: 0.016, Failures: 3, DatabaseSeconds: 9.75, Shards: 2}
	if got != want {
		t.Errorf("scrapeShards = %+v, want %+v", got, want)
	}
	d := got.sub(ShardCounters{Batches: 50, Commands: 200, Pipelined: 100, Held: 2, Read: 1, Rerun: 1, Acquires: 1, AcquireSeconds: 0.002,
		Aside: 2, AsideSeconds: 0.004, Failures: 1, DatabaseSeconds: 1.75, Shards: 2})
	if want := (ShardCounters{Batches: 100, Commands: 1000, Pipelined: 900, Held: 10, Read: 9, Rerun: 2, Acquires: 2, AcquireSeconds: 0.004,
		Aside: 6, AsideSeconds: 0.012, Failures: 2, DatabaseSeconds: 8, Shards: 2}); d != want {
		t.Errorf("sub = %+v, want %+v", d, want)
	}
	if busy := d.DatabaseBusy(); busy != -1 {
		t.Errorf("busy without the time it was over = %v, want -1", busy)
	}
	d.Seconds = 5
	if busy := d.DatabaseBusy(); busy != 0.8 { // 8 s over two shards' 5 s
		t.Errorf("busy = %v, want 0.8", busy)
	}

	old, _, err := scrapeShards(ctx, []string{serveMetrics(t, shardMetrics(false), http.StatusOK)})
	if err != nil {
		t.Fatal(err)
	}
	if old.Held != -1 || old.Read != -1 || old.Acquires != -1 || old.AcquireSeconds != -1 || old.Aside != -1 || old.AsideSeconds != -1 ||
		old.DatabaseSeconds != -1 || old.Batches != 150 {
		t.Errorf("a build without held, read and the database's seconds: %+v, want them -1 and the rest read", old)
	}
	if d := old.sub(old); d.Held != -1 || d.Read != -1 || d.DatabaseSeconds != -1 || d.Batches != 0 {
		t.Errorf("sub of a build without held and read: %+v", d)
	}
	if none, _, err := scrapeShards(ctx, nil); err != nil || none.Batches != 0 || none.Held != -1 {
		t.Errorf("no process to read: %+v, %v", none, err)
	}

	if _, _, err := scrapeShards(ctx, []string{serveMetrics(t, "", http.StatusServiceUnavailable)}); err == nil || !strings.Contains(err.Error(), "503") {
		t.Errorf("a metrics endpoint answering 503: err %v, want it named", err)
	}
	if _, _, err := scrapeShards(ctx, []string{serveMetrics(t, "pmx_shard_batches_total{ 1\n", http.StatusOK)}); err == nil {
		t.Error("metrics that do not parse: no error")
	}
}
