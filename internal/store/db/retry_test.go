package db

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/tern/v2/migrate"
)

// TestRetryDeadlocks: a migration that Postgres failed as a deadlock's victim runs again, up to
// the attempts allowed; any other error, and success, end it at once.
func TestRetryDeadlocks(t *testing.T) {
	deadlock := migrate.MigrationPgError{MigrationName: "035_fees.sql", PgError: &pgconn.PgError{Code: "40P01", Message: "deadlock detected"}}
	other := migrate.MigrationPgError{MigrationName: "035_fees.sql", PgError: &pgconn.PgError{Code: "42P07", Message: "relation already exists"}}
	for _, c := range []struct {
		name  string
		fails []error // what each run returns, then nil
		runs  int
		err   error
	}{
		{"succeeds at once", nil, 1, nil},
		{"a deadlock, then success", []error{deadlock}, 2, nil},
		{"deadlocks until the last attempt", []error{deadlock, deadlock, deadlock}, 4, nil},
		{"deadlocks every time", []error{deadlock, deadlock, deadlock, deadlock, deadlock}, 4, deadlock},
		{"another error", []error{other, deadlock}, 1, other},
		{"a deadlock, then another error", []error{deadlock, other}, 2, other},
	} {
		t.Run(c.name, func(t *testing.T) {
			runs := 0
			err := retryDeadlocks(context.Background(), 4, time.Millisecond, func() error {
				runs++
				if runs <= len(c.fails) {
					return c.fails[runs-1]
				}
				return nil
			})
			if runs != c.runs || !errors.Is(err, c.err) {
				t.Errorf("ran %d times, returned %v; want %d times, %v", runs, err, c.runs, c.err)
			}
		})
	}

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	runs := 0
	err := retryDeadlocks(ctx, 4, time.Hour, func() error { runs++; return deadlock })
	if runs != 1 || !errors.Is(err, context.Canceled) {
		t.Errorf("with its context ended: ran %d times, returned %v; want once, the deadlock and context.Canceled", runs, err)
	}
}
