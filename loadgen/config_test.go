package loadgen

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestResolveAdminTokenOrder(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, AdminTokenFile), []byte("from-file\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	env := func(v string) func(string) string {
		return func(k string) string {
			if k == AdminTokenEnv {
				return v
			}
			return ""
		}
	}
	for _, c := range []struct {
		name, flag, env, dir, want, source string
	}{
		{"flag first", "from-flag", "from-env", dir, "from-flag", "--admin-token"},
		{"then the environment", "", "from-env", dir, "from-env", "$PMX_ADMIN_TOKEN"},
		{"then the file", "", "", dir, "from-file", filepath.Join(dir, AdminTokenFile)},
		{"blank values do not count", "  ", " ", dir, "from-file", filepath.Join(dir, AdminTokenFile)},
	} {
		t.Run(c.name, func(t *testing.T) {
			tok, src, err := ResolveAdminToken(c.flag, env(c.env), c.dir)
			if err != nil || tok != c.want || src != c.source {
				t.Errorf("got %q from %q (%v), want %q from %q", tok, src, err, c.want, c.source)
			}
		})
	}
}

func TestResolveAdminTokenNamesAllThreeSources(t *testing.T) {
	dir := t.TempDir()
	empty := t.TempDir()
	if err := os.WriteFile(filepath.Join(empty, AdminTokenFile), []byte(" \n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{dir, empty} {
		_, _, err := ResolveAdminToken("", func(string) string { return "" }, d)
		if err == nil {
			t.Fatalf("no error for %s", d)
		}
		for _, want := range []string{"--admin-token", AdminTokenEnv, filepath.Join(d, AdminTokenFile)} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("error %q does not name %s", err, want)
			}
		}
	}
}

func TestConfigDefaultsAndBounds(t *testing.T) {
	c, err := Config{AdminToken: "t", Duration: time.Second}.withDefaults()
	if err != nil {
		t.Fatal(err)
	}
	if c.URL != DefaultURL || c.Bots != DefaultBots || c.RequestTimeout != DefaultRequestTimeout || c.Seed == 0 {
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
	} {
		if _, err := bad.withDefaults(); err == nil {
			t.Errorf("%+v accepted", bad)
		}
	}
	if _, err := (Config{AdminToken: "t", Orders: 100}).withDefaults(); err != nil {
		t.Errorf("orders alone should bound a run: %v", err)
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
