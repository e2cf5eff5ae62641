package bench

import (
	"bytes"
	"regexp"
	"slices"
	"testing"
)

// TestBannerLines reads the lines of pmx's banner that say where its API and its metrics are.
func TestBannerLines(t *testing.T) {
	for _, c := range []struct {
		re         *regexp.Regexp
		line, want string
	}{
		{apiLine, "  API:       http://127.0.0.1:41234/api/v1", "http://127.0.0.1:41234"},
		{apiLine, "  API:       http://127.0.0.1:8080/api/v1\r", "http://127.0.0.1:8080"},
		{apiLine, "  Admin API: http://127.0.0.1:8080/admin/v1", ""},
		{apiLine, "pmx is running.", ""},
		{metricsBanner, "  Metrics:   http://127.0.0.1:43123/metrics", "http://127.0.0.1:43123/metrics"},
		{metricsBanner, "Metrics: http://[::1]:9090/metrics  ", "http://[::1]:9090/metrics"},
		{metricsBanner, "  API:       http://127.0.0.1:8080/api/v1", ""},
		{metricsBanner, "  Metrics:   (off)", ""},
	} {
		got := ""
		if m := c.re.FindStringSubmatch(c.line); m != nil {
			got = m[1]
		}
		if got != c.want {
			t.Errorf("%s on %q: got %q, want %q", c.re, c.line, got, c.want)
		}
	}
}

func TestLineWatcher(t *testing.T) {
	var out bytes.Buffer
	var lines []string
	w := &lineWatcher{w: &out, match: func(l string) { lines = append(lines, l) }}
	for _, chunk := range []string{"pmx is ", "running.\n  API: x\n", "partial", " line\nrest"} {
		if n, err := w.Write([]byte(chunk)); n != len(chunk) || err != nil {
			t.Fatalf("Write = %d, %v", n, err)
		}
	}
	want := []string{"pmx is running.", "  API: x", "partial line"}
	if !slices.Equal(lines, want) || out.String() != "pmx is running.\n  API: x\npartial line\nrest" {
		t.Fatalf("lines %q, copied %q", lines, out.String())
	}
}
