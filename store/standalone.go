package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// The standalone exchange (pmx dev) serves every market of its database from books it keeps in
// memory, so it must be the only process doing so: a second one would match the same resting
// orders again, and its batches would overwrite the first's. Distributed mode guards its shards
// with ownership and epochs (fence_markets); the standalone exchange guards its database with two
// advisory locks of that database:
//
//   - the process's claim (claimKey): a session lock that the process holds, for its whole life,
//     on a connection of its own. A second pmx dev waits for it briefly, since the session of a
//     process that was just killed ends within milliseconds, and is then refused.
//   - its batches' mark (batchKey): a shared transaction lock that every standalone batch takes
//     when it begins (Begin.Standalone, Batch.Standalone). A killed process's last batch may
//     still be running in Postgres: its begin, statement and commit arrive together, and Postgres
//     runs them to the end without the client. So a new process, once it holds the claim and
//     before it loads any book, takes batchKey once, exclusively. That waits for those batches to
//     end, and the books are then loaded from what they wrote.
//
// Both are locks of the two-key form, pmx's space and a number within it, which no lock of the
// one-key form (the client order ids', queueClientOrderIDs) can collide with.
const (
	lockSpace int32 = 0x706d7864 // "pmxd"
	claimKey  int32 = 1
	batchKey  int32 = 2
)

// ErrClaimed is the error of ClaimStandalone when another standalone exchange holds the database.
var ErrClaimed = errors.New("another pmx dev is serving this database")

// Claim is a standalone exchange's hold on its database (ClaimStandalone); Close lets it go.
type Claim struct {
	conn *pgx.Conn
}

// ClaimStandalone claims the database for one standalone exchange. It waits up to wait for a
// process that held the claim and is going away to let it go; if another one still holds it, the
// error wraps ErrClaimed and names that process's Postgres session. Holding the claim, it then
// waits up to drain for every standalone batch still running in Postgres, a killed process's last
// among them, to end. Call it before loading any book; the claim holds until Close, or until its
// connection is lost.
func (s *Store) ClaimStandalone(ctx context.Context, wait, drain time.Duration) (*Claim, error) {
	conn, err := pgx.ConnectConfig(ctx, s.Pool.Config().ConnConfig.Copy())
	if err != nil {
		return nil, fmt.Errorf("while claiming the database: %w", err)
	}
	fail := func(err error) (*Claim, error) {
		conn.Close(context.Background())
		return nil, err
	}
	if err := lockWithin(ctx, conn, claimKey, wait); err != nil {
		if lockTimedOut(err) {
			return fail(fmt.Errorf("%w (%s): stop it, or give this one a database of its own (--database-url)",
				ErrClaimed, holder(ctx, conn, claimKey)))
		}
		return fail(fmt.Errorf("while claiming the database: %w", err))
	}
	if err := lockWithin(ctx, conn, batchKey, drain); err != nil {
		if lockTimedOut(err) {
			return fail(fmt.Errorf("a batch of an earlier pmx dev was still running in this database after %v (%s): "+
				"wait for it to end, or end its session, then start again", drain, holder(ctx, conn, batchKey)))
		}
		return fail(fmt.Errorf("while waiting for the batches of an earlier pmx dev: %w", err))
	}
	if _, err := conn.Exec(ctx, "select pg_advisory_unlock($1, $2)", lockSpace, batchKey); err != nil {
		return fail(fmt.Errorf("while claiming the database: %w", err))
	}
	return &Claim{conn: conn}, nil
}

// Close gives the claim up.
func (c *Claim) Close(ctx context.Context) error { return c.conn.Close(ctx) }

// lockWithin takes one of pmx's advisory locks for the session, waiting at most timeout.
func lockWithin(ctx context.Context, conn *pgx.Conn, key int32, timeout time.Duration) error {
	if _, err := conn.Exec(ctx, "select set_config('lock_timeout', $1, false)", fmt.Sprintf("%dms", max(timeout.Milliseconds(), 1))); err != nil {
		return err
	}
	_, err := conn.Exec(ctx, "select pg_advisory_lock($1, $2)", lockSpace, key)
	if _, resetErr := conn.Exec(ctx, "select set_config('lock_timeout', '0', false)"); err == nil {
		err = resetErr
	}
	return err
}

// lockTimedOut says whether err is Postgres giving up on a lock (lock_not_available).
func lockTimedOut(err error) bool {
	var pg *pgconn.PgError
	return errors.As(err, &pg) && pg.Code == "55P03"
}

// holder names the sessions holding an advisory lock of this database, for an error message.
func holder(ctx context.Context, conn *pgx.Conn, key int32) string {
	var pids []int32
	err := conn.QueryRow(ctx, `select coalesce(array_agg(l.pid order by l.pid), '{}') from pg_locks l
		where l.locktype = 'advisory' and l.granted and l.objsubid = 2
		  and l.database = (select oid from pg_database where datname = current_database())
		  and l.classid = $1::bigint::oid and l.objid = $2::bigint::oid`,
		int64(uint32(lockSpace)), int64(uint32(key))).Scan(&pids)
	switch {
	case err != nil:
		return "its Postgres session could not be found: " + err.Error()
	case len(pids) == 0:
		return "its Postgres session has just ended"
	case len(pids) == 1:
		return fmt.Sprintf("its Postgres session: pid %d", pids[0])
	default:
		return fmt.Sprintf("its Postgres sessions: pids %v", pids)
	}
}
