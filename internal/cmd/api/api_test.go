package api

import (
	"errors"
	"strings"
	"testing"

	"github.com/pmx-dev/pmx/internal/kit/auth"
)

// TestAPIShortAdminTokenRefused checks that pmx api refuses an admin token shorter than 32
// characters before it does anything else.
func TestAPIShortAdminTokenRefused(t *testing.T) {
	o := apiOptions{databaseURL: "postgres://127.0.0.1:1/none", internalToken: "internal", adminToken: "short-token"}
	if err := runAPI(t.Context(), o); !errors.Is(err, auth.ErrShortAdminToken) || !strings.Contains(err.Error(), "openssl rand -hex 32") {
		t.Fatalf("pmx api --admin-token short-token: %v, want ErrShortAdminToken saying how to make one", err)
	}
}
