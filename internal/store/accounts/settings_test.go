package accounts

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/pmx-dev/pmx/internal/store/db"
	"github.com/pmx-dev/pmx/internal/store/db/dbtest"
)

// TestAccountNamesAnyCase checks that names are unique whatever their case, through both ways of
// opening an account, and that a name in any case finds its account's password.
func TestAccountNamesAnyCase(t *testing.T) {
	ctx := context.Background()
	st := New(dbtest.New(t))
	now := time.Now()
	a, err := st.CreateAccountWithPassword(ctx, "Alice", 100, "$hash", now)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.CreateAccount(ctx, "ALICE", 100, now); !errors.Is(err, db.ErrConflict) {
		t.Fatalf("CreateAccount(ALICE) with Alice taken: %v, want db.ErrConflict", err)
	}
	if _, err := st.CreateAccountWithPassword(ctx, "alice", 100, "$other", now); !errors.Is(err, db.ErrConflict) {
		t.Fatalf("CreateAccountWithPassword(alice) with Alice taken: %v, want db.ErrConflict", err)
	}
	for _, name := range []string{"Alice", "alice", "ALICE", "aLiCe"} {
		id, hash, err := st.PasswordHash(ctx, name)
		if err != nil || id != a.ID || hash != "$hash" {
			t.Fatalf("PasswordHash(%q) = %d, %q, %v; want %d, $hash", name, id, hash, err, a.ID)
		}
	}
}
