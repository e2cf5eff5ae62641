package batches

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pmx-dev/pmx/internal/kit/pgcluster"
	"github.com/pmx-dev/pmx/internal/pgtest"
	"github.com/pmx-dev/pmx/internal/store/db"
)

// TestFailoverErrors names what a failover's errors mean: which leave a commit's outcome unknown
// and which say the database cannot be reached.
func TestFailoverErrors(t *testing.T) {
	opErr := &net.OpError{Op: "read", Net: "unix", Err: errors.New("connection reset by peer")}
	tests := []struct {
		name                 string
		err                  error
		unknown, unreachable bool
	}{
		{"nil", nil, false, false},
		{"connection broken while reading the answer", fmt.Errorf("batch: %w", opErr), true, true},
		{"server closed the connection", io.ErrUnexpectedEOF, true, true},
		{"server error: the transaction rolled back", &pgconn.PgError{Code: "40P01"}, false, false},
		{"unique violation", &pgconn.PgError{Code: "23505"}, false, false},
		{"fenced", &pgconn.PgError{Code: "PX001"}, false, false},
		{"server shutting down", &pgconn.PgError{Code: "57P01"}, false, true},
		{"crash shutdown", &pgconn.PgError{Code: "57P02"}, false, true},
		{"server starting", &pgconn.PgError{Code: "57P03"}, false, true},
		{"connection failure", &pgconn.PgError{Code: "08006"}, false, true},
		{"a standby", &pgconn.PgError{Code: "25006"}, false, true},
		{"too many connections", fmt.Errorf("connect: %w", &pgconn.PgError{Code: "53300"}), false, true},
		{"commit unknown", fmt.Errorf("x: %w: %w", ErrCommitUnknown, opErr), true, true},
		{"some other error", errors.New("boom"), true, false},
		{"no rows", pgx.ErrNoRows, true, false},
		{"canceled by the client", context.Canceled, true, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := commitOutcomeUnknown(tt.err); got != tt.unknown {
				t.Errorf("commitOutcomeUnknown(%v) = %v, want %v", tt.err, got, tt.unknown)
			}
			if got := Unreachable(tt.err); got != tt.unreachable {
				t.Errorf("Unreachable(%v) = %v, want %v", tt.err, got, tt.unreachable)
			}
		})
	}
}

// TestMultiHostURL checks that a multi-host URL with target_session_attrs=read-write, as
// --database-url takes it, reaches the primary whichever host it is listed as, and skips hosts
// that are down.
func TestMultiHostURL(t *testing.T) {
	ctx := context.Background()
	// Two hosts that refuse connections, then the shared cluster (a primary): pgx tries each in turn.
	url := strings.Replace(pgtest.NewDatabase(t, pgtest.Shared(t)), "host=", "host=/nonexistent/a,/nonexistent/b,", 1) +
		"&target_session_attrs=read-write"
	pool, err := db.Open(ctx, url)
	if err != nil {
		t.Fatalf("db.Open(%s): %v", url, err)
	}
	defer pool.Close()
	var readOnly string
	if err := pool.QueryRow(ctx, `show transaction_read_only`).Scan(&readOnly); err != nil || readOnly != "off" {
		t.Fatalf("the multi-host URL reached a server with transaction_read_only %q (%v), want the primary", readOnly, err)
	}
}

// TestTooManyConnections fills a server's max_connections and checks that the refusal of one more
// is an error Unreachable knows (answered 503, to retry), not an internal one: a distributed
// exchange on a many-core machine met it when its processes' pools together outgrew Postgres's
// default 100.
func TestTooManyConnections(t *testing.T) {
	ctx := context.Background()
	// Under /tmp itself, which the server reaches when it runs as another user (root runs it as
	// postgres), unlike t.TempDir's parent.
	dir, err := os.MkdirTemp("", "pmx-toomany-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	cluster, err := pgcluster.Start(ctx, pgcluster.Options{DataDir: filepath.Join(dir, "pg"), Ephemeral: true,
		Settings: map[string]string{"max_connections": "4", "superuser_reserved_connections": "0"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := cluster.Stop(context.Background()); err != nil {
			t.Error(err)
		}
	})
	url := cluster.URL() + "&pool_max_conns=8"
	pool, err := db.Open(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	var held []*pgxpool.Conn
	defer func() {
		for _, c := range held {
			c.Release()
		}
	}()
	for i := range 8 {
		c, err := pool.Acquire(ctx)
		if err == nil {
			held = append(held, c)
			continue
		}
		if len(held) == 0 {
			t.Fatalf("connection %d: %v", i+1, err)
		}
		var pg *pgconn.PgError
		if !errors.As(err, &pg) || pg.Code != "53300" {
			t.Fatalf("connection %d beyond max_connections: %v, want SQLSTATE 53300", i+1, err)
		}
		if !Unreachable(err) {
			t.Fatalf("Unreachable(%v) = false: the request would be answered 500 rather than 503", err)
		}
		return
	}
	t.Fatalf("%d connections opened on a server with max_connections 4", len(held))
}
