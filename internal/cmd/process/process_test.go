package process

import (
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

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
		addr, stop, err := StartMetrics(off, reg, log)
		if err != nil || addr != "" {
			t.Errorf("StartMetrics(%q) = %q, %v; want no listener", off, addr, err)
		}
		stop()
	}

	addr, stop, err := StartMetrics("127.0.0.1:0", reg, log)
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

	if _, _, err := StartMetrics(addr, reg, log); err == nil || !strings.Contains(err.Error(), "--metrics-addr") {
		t.Errorf("a second listener on %s: %v, want an error naming --metrics-addr", addr, err)
	}
	stop()
	if c, err := net.Dial("tcp", addr); err == nil {
		c.Close()
		t.Errorf("%s still accepts connections after stop", addr)
	}
}
