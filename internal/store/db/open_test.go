package db_test

import (
	"context"
	"testing"
	"time"

	"github.com/pmx-dev/pmx/internal/pgtest"
	"github.com/pmx-dev/pmx/internal/store/db"
)

// TestOpenHoldingLeavesRoom: a process whose matching loops keep connections for good gets them on
// top of the default pool, so that all of them held, the pool still hands out the default's
// number. With 16 loops on the default pool of a 2-core machine (16), the loops held every
// connection and each read waited until it timed out.
func TestOpenHoldingLeavesRoom(t *testing.T) {
	ctx := context.Background()
	url := pgtest.NewDatabase(t, pgtest.Shared(t))
	const held = 20 // more than the default pool on any machine up to 4 cores
	pool, err := db.OpenHolding(ctx, url, held)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	if got, want := pool.Config().MaxConns, int32(db.DefaultMaxConns()+held); got != want {
		t.Fatalf("the pool's most connections: %d, want the default %d and %d held", got, db.DefaultMaxConns(), held)
	}
	acquireCtx, cancelAcquire := context.WithTimeout(ctx, 30*time.Second)
	defer cancelAcquire()
	for range held {
		c, err := pool.Acquire(acquireCtx)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Release()
	}
	readCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	var one int
	if err := pool.QueryRow(readCtx, `select 1`).Scan(&one); err != nil {
		t.Fatalf("a read with %d connections held: %v", held, err)
	}

	// A URL's own pool_max_conns is the operator's choice, held or not.
	capped, err := db.OpenHolding(ctx, url+"&pool_max_conns=5", held)
	if err != nil {
		t.Fatal(err)
	}
	defer capped.Close()
	if got := capped.Config().MaxConns; got != 5 {
		t.Fatalf("with pool_max_conns=5 in the URL the pool's most connections are %d", got)
	}
}
