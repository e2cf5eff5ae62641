package main

import (
	"bytes"
	"encoding/json"
	"slices"
	"strings"
	"testing"
)

func TestRun(t *testing.T) {
	in := `["sum by (le) (rate(a_bucket{job=\"x\"}[5m])) / on() group_left b", "up == 0 and up offset 1h", "vector(1)"]`
	var out bytes.Buffer
	if err := run(strings.NewReader(in), &out); err != nil {
		t.Fatal(err)
	}
	var got [][]string
	if err := json.Unmarshal(out.Bytes(), &got); err != nil {
		t.Fatal(err)
	}
	want := [][]string{{"a_bucket", "b"}, {"up"}, {}}
	if !slices.EqualFunc(got, want, slices.Equal) {
		t.Errorf("got %q, want %q", got, want)
	}
}

func TestRunRefusesWhatDoesNotParse(t *testing.T) {
	for _, in := range []string{`["rate(a[5m]"]`, `"not an array"`, ``} {
		if err := run(strings.NewReader(in), &bytes.Buffer{}); err == nil {
			t.Errorf("%s: no error", in)
		}
	}
}
