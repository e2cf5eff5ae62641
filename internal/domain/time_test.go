package domain

import (
	"encoding/json"
	"errors"
	"testing"
	"time"
)

func TestCheckTime(t *testing.T) {
	parse := func(s string) time.Time {
		t.Helper()
		v, err := time.Parse(time.RFC3339Nano, s)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	tests := []struct {
		at string
		ok bool
	}{
		{"1970-01-01T00:00:00Z", true},
		{"1970-01-01T01:00:00+01:00", true},
		{"2030-01-31T18:00:00Z", true},
		{"9999-12-31T23:59:59Z", true},
		{"9999-12-31T23:59:59.999999999Z", true},
		{"9999-12-31T23:59:59+00:01", true},
		{"1969-12-31T23:59:59.999999999Z", false},
		{"1970-01-01T00:59:59+01:00", false},
		{"0000-01-01T00:00:00Z", false},
		{"0000-01-01T00:00:00+23:59", false}, // year -1 in UTC
		{"9999-12-31T23:59:59-23:59", false}, // year 10000 in UTC
		{"9999-12-31T23:59:59-00:01", false},
	}
	for _, tc := range tests {
		at := parse(tc.at)
		err := CheckTime("expiresAt", at)
		if tc.ok {
			if err != nil {
				t.Errorf("%s: %v", tc.at, err)
			}
			// What the bound is for: every time in range can be written as JSON.
			if _, err := json.Marshal(at); err != nil {
				t.Errorf("%s is in range but encoding/json refuses it: %v", tc.at, err)
			}
			continue
		}
		var e *Error
		if !errors.As(err, &e) || e.Kind != Invalid || e.Code != "out_of_range" || e.Field != "expiresAt" {
			t.Errorf("%s: got %#v, want an out_of_range refusal of expiresAt", tc.at, err)
		}
	}
	if _, err := json.Marshal(LatestTime.Add(time.Nanosecond)); err == nil {
		t.Error("encoding/json writes the first instant past LatestTime: the bound is tighter than it need be")
	}
}
