package main

import (
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/spf13/cobra"
)

// TestMetricsFlag checks --metrics-addr's default in each command that serves HTTP itself: the
// loopback for pmx dev, every interface for api and shard, as in their pods; $PMX_METRICS_ADDR
// overrides them.
func TestMetricsFlag(t *testing.T) {
	defaults := func() map[string]string {
		got := map[string]string{}
		for _, cmd := range []*cobra.Command{newDevCommand(), newAPICommand(), newShardCommand()} {
			got[cmd.Name()] = cmd.Flags().Lookup("metrics-addr").DefValue
		}
		return got
	}
	t.Setenv("PMX_METRICS_ADDR", "")
	if got := defaults(); got["dev"] != "127.0.0.1:9090" || got["api"] != ":9090" || got["shard"] != ":9090" {
		t.Errorf("--metrics-addr defaults %v, want 127.0.0.1:9090 for dev and :9090 for api and shard", got)
	}
	t.Setenv("PMX_METRICS_ADDR", "127.0.0.1:0")
	for name, def := range defaults() {
		if def != "127.0.0.1:0" {
			t.Errorf("pmx %s --metrics-addr defaults to %q with $PMX_METRICS_ADDR=127.0.0.1:0", name, def)
		}
	}
}

// TestStartMetrics checks the metrics listener: it serves the registry at /metrics and nothing
// else, empty and "0" turn it off, an address it cannot listen on names the flag, and stop closes
// the listener.
func TestStartMetrics(t *testing.T) {
	log := slog.New(slog.DiscardHandler)
	reg := prometheus.NewRegistry()
	c := prometheus.NewCounter(prometheus.CounterOpts{Name: "pmx_test_total", Help: "A counter."})
	reg.MustRegister(c)
	c.Inc()

	for _, off := range []string{"", "0"} {
		addr, stop, err := startMetrics(off, reg, log)
		if err != nil || addr != "" {
			t.Errorf("startMetrics(%q) = %q, %v; want no listener", off, addr, err)
		}
		stop()
	}

	addr, stop, err := startMetrics("127.0.0.1:0", reg, log)
	if err != nil {
		t.Fatal(err)
	}
	get := func(path string) (int, string) {
		resp, err := http.Get("http://" + addr + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}
	if code, body := get("/metrics"); code != http.StatusOK || !strings.Contains(body, "pmx_test_total 1") {
		t.Errorf("GET /metrics: %d %.200s", code, body)
	}
	if code, _ := get("/api/v1/markets"); code != http.StatusNotFound {
		t.Errorf("GET /api/v1/markets on the metrics listener: %d, want 404", code)
	}

	if _, _, err := startMetrics(addr, reg, log); err == nil || !strings.Contains(err.Error(), "--metrics-addr") {
		t.Errorf("a second listener on %s: %v, want an error naming --metrics-addr", addr, err)
	}
	stop()
	if c, err := net.Dial("tcp", addr); err == nil {
		c.Close()
		t.Errorf("%s still accepts connections after stop", addr)
	}
}
