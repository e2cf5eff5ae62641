package dev

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pmx-dev/pmx/internal/kit/auth"
)

// TestDevAdminTokenCreatedOnce checks that pmx dev writes a fresh token into the data dir when it
// finds none, and finds that same token on the next start.
func TestDevAdminTokenCreatedOnce(t *testing.T) {
	t.Setenv(auth.AdminTokenEnv, "")
	o := devOptions{dataDir: t.TempDir()}
	path := filepath.Join(o.dataDir, auth.AdminTokenFile)
	first, source, err := adminToken(o)
	if err != nil || first == "" || source != "in "+path {
		t.Fatalf("first start: %q %q (%v)", first, source, err)
	}
	if b, err := os.ReadFile(path); err != nil || strings.TrimSpace(string(b)) != first {
		t.Fatalf("the file holds %q (%v), want %q", b, err, first)
	}
	again, source, err := adminToken(o)
	if err != nil || again != first || source != "in "+path {
		t.Fatalf("second start: %q %q (%v), want %q", again, source, err, first)
	}
	o.adminToken = "chosen-0123456789abcdef0123456789"
	if tok, source, err := adminToken(o); err != nil || tok != o.adminToken || source != "from --admin-token" {
		t.Fatalf("with the flag: %q %q (%v)", tok, source, err)
	}
}

// TestDevShortAdminTokenRefused checks that pmx dev refuses to start with an admin token shorter
// than 32 characters, and does not replace it with one of its own.
func TestDevShortAdminTokenRefused(t *testing.T) {
	t.Setenv(auth.AdminTokenEnv, "")
	o := devOptions{dataDir: t.TempDir(), adminToken: "short-token"}
	if tok, _, err := adminToken(o); !errors.Is(err, auth.ErrShortAdminToken) || tok != "" {
		t.Fatalf("with --admin-token short-token: %q (%v), want ErrShortAdminToken", tok, err)
	}
	o.adminToken = ""
	path := filepath.Join(o.dataDir, auth.AdminTokenFile)
	if err := os.WriteFile(path, []byte("short-token\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if tok, _, err := adminToken(o); !errors.Is(err, auth.ErrShortAdminToken) || tok != "" {
		t.Fatalf("with a short token in %s: %q (%v), want ErrShortAdminToken", path, tok, err)
	}
	if b, _ := os.ReadFile(path); string(b) != "short-token\n" {
		t.Fatalf("pmx dev replaced the short token with %q", b)
	}
}
