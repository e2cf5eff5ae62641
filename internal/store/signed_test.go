package store

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"
)

// TestFirstSignedRequest: a signed request is first once per key and message, whichever front
// asks; the sweep forgets only what is older than the hold.
func TestFirstSignedRequest(t *testing.T) {
	ctx := context.Background()
	st := newTestStore(t)
	key, other := uuid.New(), uuid.New()
	first := func(key uuid.UUID, msg string) bool {
		t.Helper()
		ok, err := st.FirstSignedRequest(ctx, key, []byte(msg))
		if err != nil {
			t.Fatal(err)
		}
		return ok
	}
	if !first(key, "a") || first(key, "a") || !first(key, "b") || !first(other, "a") {
		t.Fatal("want each key and message first once")
	}
	if _, err := st.Pool.Exec(ctx, `update signed_requests set seen_at = now() - interval '2 minutes'
		where digest = (select digest from signed_requests order by seen_at limit 1)`); err != nil {
		t.Fatal(err)
	}
	if err := st.SweepSignedRequests(ctx, time.Minute); err != nil {
		t.Fatal(err)
	}
	var left int
	if err := st.Pool.QueryRow(ctx, `select count(*) from signed_requests`).Scan(&left); err != nil || left != 2 {
		t.Fatalf("%d requests remembered after the sweep (%v), want the 2 younger than the hold", left, err)
	}
	var persistence string
	if err := st.Pool.QueryRow(ctx, `select relpersistence from pg_class where relname = 'signed_requests'`).Scan(&persistence); err != nil || persistence != "u" {
		t.Fatalf("signed_requests persistence %q (%v), want unlogged", persistence, err)
	}
}
