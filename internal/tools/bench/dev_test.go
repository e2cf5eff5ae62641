package bench

import (
	"bytes"
	"slices"
	"testing"
)

func TestAPILine(t *testing.T) {
	for line, want := range map[string]string{
		"  API:       http://127.0.0.1:41234/api/v1":  "http://127.0.0.1:41234",
		"  API:       http://127.0.0.1:8080/api/v1\r": "http://127.0.0.1:8080",
		"  Admin API: http://127.0.0.1:8080/admin/v1": "",
		"pmx is running.": "",
	} {
		got := ""
		if m := apiLine.FindStringSubmatch(line); m != nil {
			got = m[1]
		}
		if got != want {
			t.Errorf("%q: got %q, want %q", line, got, want)
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
