package pgtest

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"
)

// TestReplicatedFailover checks the pair a failover test relies on: a commit acknowledged by the
// primary is on the promoted standby, the multi-host URL with target_session_attrs=read-write
// reaches the primary before and after, and a new standby makes the pair synchronous again.
func TestReplicatedFailover(t *testing.T) {
	ctx := context.Background()
	r := StartReplicated(t, 3)
	exec := func(sql string) {
		t.Helper()
		conn, err := pgx.Connect(ctx, r.URL())
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close(ctx)
		if _, err := conn.Exec(ctx, sql); err != nil {
			t.Fatal(err)
		}
	}
	count := func() int {
		t.Helper()
		conn, err := pgx.Connect(ctx, r.URL())
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close(ctx)
		var n int
		if err := conn.QueryRow(ctx, `select count(*) from t`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	exec(`create table t (n int)`)
	exec(`insert into t values (1)`)
	r.KillPrimary()
	r.Promote()
	if r.Primary() != 1 {
		t.Fatalf("primary is node %d after the failover, want 1", r.Primary())
	}
	if n := count(); n != 1 {
		t.Fatalf("the promoted standby has %d rows, want 1", n)
	}
	exec(`insert into t values (2)`)
	r.NewStandby()
	exec(`insert into t values (3)`)
	r.KillPrimary()
	r.Promote()
	if n := count(); n != 3 {
		t.Fatalf("the second promoted standby has %d rows, want 3", n)
	}
}
