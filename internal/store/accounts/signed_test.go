package accounts

import (
	"context"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/pmx-dev/pmx/internal/pgtest"
	"github.com/pmx-dev/pmx/internal/store/db/dbtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// TestFirstSignedRequest: a signed request is first once per key and message, whichever front
// asks; the sweep forgets only what is older than the hold.
func TestFirstSignedRequest(t *testing.T) {
	ctx := context.Background()
	st := New(dbtest.New(t))
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

// BenchmarkFirstSignedRequest is what refusing replays costs a signed request: one insert into
// the unlogged table over a loopback connection, one caller at a time (its latency) and 8 at once
// (the throughput of many fronts' requests).
func BenchmarkFirstSignedRequest(b *testing.B) {
	st := New(dbtest.New(b))
	key := uuid.New()
	var n atomic.Int64
	insert := func(b *testing.B) {
		msg := strconv.AppendInt([]byte("1767225600000\nGET\n/api/v1/account\n"), n.Add(1), 10)
		if ok, err := st.FirstSignedRequest(context.Background(), key, msg); err != nil || !ok {
			b.Fatal(ok, err)
		}
	}
	b.Run("Serial", func(b *testing.B) {
		for b.Loop() {
			insert(b)
		}
	})
	b.Run("Parallel8", func(b *testing.B) {
		b.SetParallelism(8)
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				insert(b)
			}
		})
	})
}
