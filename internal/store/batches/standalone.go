package batches

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// The standalone exchange (pmx dev) serves every market of its database from books it keeps in
// memory, so it must be the only process doing so: a second one would match the same resting
// orders again, and its batches would overwrite the first's. Distributed mode guards its shards
// with ownership and epochs (fence_markets); the standalone exchange guards its database with two
// advisory locks of that database and a fencing token:
//
//   - the process's claim (claimKey): a session lock that the process holds, for its whole life,
//     on a connection of its own (ClaimStandalone). A second pmx dev waits for it briefly, since
//     the session of a process that was just killed ends within milliseconds, and is then refused.
//   - its batches' mark (batchKey): a shared transaction lock that every standalone batch takes
//     when it begins (Begin.Claim, Batch.Claim). A killed process's last batch may still be
//     running in Postgres: its begin, statement and commit arrive together, and Postgres runs them
//     to the end without the client. So a new process, once it holds the claim and before it
//     loads any book, takes batchKey once, exclusively (Claim.Fence). That waits for those batches
//     to end, and the books are then loaded from what they wrote.
//   - the token (table standalone_claim, migration 021): Fence raises it while it holds batchKey,
//     and each batch checks, once it holds the mark, that the token it carries is still the
//     database's (standalone_batch when it begins with BeginBatch; an unlocked batch in its
//     accounts' statement, claimCheck), failing with ClaimLost otherwise. The claim's session can end
//     while its process lives on (Postgres restarted, or someone ended the session): another
//     process may then claim the database, and the token keeps the first from writing anything
//     more. The first, meanwhile, claims the database again if it can (Claim.Keep), or stops.
//
// Both locks are of the two-key form, pmx's space and a number within it, which no lock of the
// one-key form (the client order ids', queueClientOrderIDs) can collide with.
const (
	lockSpace int32 = 0x706d7864 // "pmxd"
	claimKey  int32 = 1
	batchKey  int32 = 2
)

// ErrClaimed is the error of ClaimStandalone, and of Claim.Keep, when another standalone exchange
// holds the database.
var ErrClaimed = errors.New("another pmx dev is serving this database")

// Claim is a standalone exchange's hold on its database (ClaimStandalone); Close lets it go.
type Claim struct {
	cfg   *pgx.ConnConfig
	mu    sync.Mutex
	conn  *pgx.Conn
	token int64
}

// ClaimStandalone claims the database for one standalone exchange. It waits up to wait for a
// process that held the claim and is going away to let it go; if another one still holds it, the
// error wraps ErrClaimed and names that process's Postgres session. The claim holds until Close,
// or until its session ends (Keep). It changes nothing in the database, and needs none of its
// schema: claim first, then migrate, then Fence, before loading any book.
func (s *Writer) ClaimStandalone(ctx context.Context, wait time.Duration) (*Claim, error) {
	cfg := s.Pool.Config().ConnConfig
	conn, err := claimOn(ctx, cfg, wait)
	if errors.Is(err, ErrClaimed) {
		return nil, fmt.Errorf("%w: stop it, or give this one a database of its own (--database-url)", err)
	}
	if err != nil {
		return nil, err
	}
	return &Claim{cfg: cfg, conn: conn}, nil
}

// claimOn connects and takes claimKey for the session; when another session holds it past wait,
// the error wraps ErrClaimed and names that session.
func claimOn(ctx context.Context, cfg *pgx.ConnConfig, wait time.Duration) (*pgx.Conn, error) {
	conn, err := pgx.ConnectConfig(ctx, cfg.Copy())
	if err != nil {
		return nil, fmt.Errorf("while claiming the database: %w", err)
	}
	if err := lockWithin(ctx, conn, claimKey, wait); err != nil {
		if lockTimedOut(err) {
			err = fmt.Errorf("%w (%s)", ErrClaimed, holder(ctx, conn, claimKey))
		} else {
			err = fmt.Errorf("while claiming the database: %w", err)
		}
		conn.Close(context.Background())
		return nil, err
	}
	return conn, nil
}

// Fence makes the claim the database's only writer: it waits up to drain for every standalone
// batch still running in Postgres, a killed process's last among them, to end, and gives the claim
// a token of its own (Token), which fails the batches of every earlier claim from then on.
func (c *Claim) Fence(ctx context.Context, drain time.Duration) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := lockWithin(ctx, c.conn, batchKey, drain); err != nil {
		if lockTimedOut(err) {
			return fmt.Errorf("a batch of an earlier pmx dev was still running in this database after %v (%s): "+
				"wait for it to end, or end its session, then start again", drain, holder(ctx, c.conn, batchKey))
		}
		return fmt.Errorf("while waiting for the batches of an earlier pmx dev: %w", err)
	}
	err := c.conn.QueryRow(ctx, `insert into standalone_claim (token) values (1)
		on conflict (id) do update set token = standalone_claim.token + 1 returning token`).Scan(&c.token)
	if _, unlockErr := c.conn.Exec(ctx, "select pg_advisory_unlock($1, $2)", lockSpace, batchKey); err == nil {
		err = unlockErr
	}
	if err != nil {
		return fmt.Errorf("while fencing the database: %w", err)
	}
	return nil
}

// Token is the claim's fencing token (Fence), for its batches to carry (Begin.Claim, Batch.Claim):
// 0 before Fence.
func (c *Claim) Token() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.token
}

// ClaimLost reports whether a batch failed because the claim whose token it carried is no longer
// the database's: another standalone exchange has claimed it since.
func ClaimLost(err error) bool {
	var pg *pgconn.PgError
	return errors.As(err, &pg) && pg.Code == "PX002"
}

// Keep watches the claim's session until ctx ends, and returns nil then. When the session ends
// under it (Postgres restarted, or the session was ended), it claims the database again, trying
// every retry while Postgres cannot be reached and waiting up to wait for the claim; it returns
// an error, wrapping ErrClaimed, once another process holds the claim or has raised the token:
// the database is that process's, whose batches alone now commit, and this one must stop. Close
// the claim only after Keep has returned.
func (c *Claim) Keep(ctx context.Context, log *slog.Logger, wait, retry time.Duration) error {
	for {
		c.mu.Lock()
		conn := c.conn
		c.mu.Unlock()
		_, err := conn.WaitForNotification(ctx) // none come: it returns when the session ends
		if ctx.Err() != nil {
			return nil
		}
		log.Warn("the session holding this pmx dev's claim on its database ended; claiming it again", "err", err)
		conn.Close(context.Background())
		if conn, err = c.reclaim(ctx, log, wait, retry); conn == nil {
			return err
		}
		c.mu.Lock()
		c.conn = conn
		c.mu.Unlock()
		log.Info("claimed the database again", "token", c.Token())
	}
}

// reclaim claims the database again for Keep, trying every retry until it can, and checks that
// the token is still the claim's. It returns the claim's new session; or none, with the error that
// ends Keep: nil when ctx ended, one wrapping ErrClaimed when another process took the database.
func (c *Claim) reclaim(ctx context.Context, log *slog.Logger, wait, retry time.Duration) (*pgx.Conn, error) {
	for attempt := 1; ; attempt++ {
		conn, err := claimOn(ctx, c.cfg, wait)
		if errors.Is(err, ErrClaimed) {
			return nil, fmt.Errorf("%w: it claimed the database while this one's hold on it was lost, and this one stops", err)
		}
		if err == nil {
			var token int64
			if err = conn.QueryRow(ctx, "select coalesce((select token from standalone_claim), 0)").Scan(&token); err == nil {
				if mine := c.Token(); token != mine {
					conn.Close(context.Background())
					return nil, fmt.Errorf("%w: it claimed the database while this one's hold on it was lost (fencing token %d, this one's %d), and this one stops",
						ErrClaimed, token, mine)
				}
				return conn, nil
			}
			conn.Close(context.Background())
		}
		if ctx.Err() != nil {
			return nil, nil
		}
		if attempt == 1 || attempt%30 == 0 {
			log.Warn("cannot claim the database again yet; retrying", "err", err, "attempts", attempt)
		}
		select {
		case <-ctx.Done():
			return nil, nil
		case <-time.After(retry):
		}
	}
}

// Close gives the claim up.
func (c *Claim) Close(ctx context.Context) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.conn.Close(ctx)
}

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
