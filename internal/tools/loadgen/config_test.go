package loadgen

import (
	"strings"
	"testing"
	"time"
)

func TestConfigDefaultsAndBounds(t *testing.T) {
	c, err := Config{AdminToken: "t", Duration: time.Second}.withDefaults()
	if err != nil {
		t.Fatal(err)
	}
	if c.URL != DefaultURL || c.Bots != DefaultBots || c.RequestTimeout != DefaultRequestTimeout || c.Seed == 0 || c.Mix != MixBasic {
		t.Errorf("defaults not applied: %+v", c)
	}
	for _, bad := range []Config{
		{AdminToken: "t"},       // unbounded
		{Duration: time.Second}, // no token
		{AdminToken: "t", Duration: time.Second, Bots: -1}, // bots
		{AdminToken: "t", Duration: time.Second, Rate: -1},
		{AdminToken: "t", Orders: -5, Duration: time.Second},
		{AdminToken: "t", Duration: time.Second, URL: "127.0.0.1:8080"},
		{AdminToken: "t", Duration: time.Second, URL: "ftp://host"},
		{AdminToken: "t", Duration: time.Second, Mix: "hft"},
		{AdminToken: "t", Duration: time.Second, Warmup: -time.Second},
		{AdminToken: "t", Orders: 100, Warmup: time.Second},                        // no measured duration
		{AdminToken: "t", Orders: 100, Duration: time.Second, Warmup: time.Second}, // a budget with a warm-up
	} {
		if _, err := bad.withDefaults(); err == nil {
			t.Errorf("%+v accepted", bad)
		}
	}
	for _, m := range Mixes {
		if _, err := (Config{AdminToken: "t", Orders: 100, Mix: m}).withDefaults(); err != nil {
			t.Errorf("mix %s refused: %v", m, err)
		}
	}
	if _, err := (Config{AdminToken: "t", Duration: time.Second, Mix: "hft"}).withDefaults(); err == nil ||
		!strings.Contains(err.Error(), "basic, market-maker") {
		t.Errorf("an unknown mix: %v, want the mixes named", err)
	}
	if _, err := (Config{AdminToken: "t", Orders: 100}).withDefaults(); err != nil {
		t.Errorf("orders alone should bound a run: %v", err)
	}
	if _, err := (Config{AdminToken: "t", Duration: time.Second, Warmup: time.Second}).withDefaults(); err != nil {
		t.Errorf("a warm-up before a measured duration: %v", err)
	}
}

func TestNormalizeURL(t *testing.T) {
	for in, want := range map[string]string{
		"http://127.0.0.1:8080":          "http://127.0.0.1:8080",
		"http://127.0.0.1:8080/":         "http://127.0.0.1:8080",
		"http://localhost:8080/api/v1/":  "http://localhost:8080",
		"https://pmx.example/prefix/":    "https://pmx.example/prefix",
		" http://[::1]:9000/api/v1 ":     "http://[::1]:9000",
		"https://pmx.example/x/api/v1//": "https://pmx.example/x",
	} {
		got, err := normalizeURL(in)
		if err != nil || got != want {
			t.Errorf("normalizeURL(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
}
