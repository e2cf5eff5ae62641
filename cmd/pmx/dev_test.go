package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pmx-dev/pmx/auth"
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
	o.adminToken = "chosen"
	if tok, source, err := adminToken(o); err != nil || tok != "chosen" || source != "from --admin-token" {
		t.Fatalf("with the flag: %q %q (%v)", tok, source, err)
	}
}
