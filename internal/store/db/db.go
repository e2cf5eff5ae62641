// Package db is the store's shared plumbing, what every concern of internal/store needs: opening
// the connection pool, the schema's migrations (embedded here) and migrating to them, the errors
// the store translates Postgres's into, new row ids, listing cursors, the small helpers that read
// rows, and the rows two concerns share (Ownership, EventBatch, AccountEvents). It runs no statement of any one concern.
package db

import (
	"context"
	"embed"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"io/fs"
	"os"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/tern/v2/migrate"

	"github.com/pmx-dev/pmx/internal/domain"
)

//go:embed migrations/*.sql
var migrations embed.FS

// VersionTable records which migrations have run.
const VersionTable = "schema_version"

// Errors the store translates from Postgres into domain terms.
var (
	ErrNotFound = errors.New("not found")
	ErrConflict = errors.New("already exists")
)

// Cursor is a position in a newest-first listing (orders, markets): the last row of a page.
type Cursor struct {
	CreatedAt time.Time
	ID        uuid.UUID
	Outcome   string // settlements only: the last row's outcome, after its market
}

// NotFound turns pgx's no-rows error into ErrNotFound, naming what was looked for; any other
// error is returned as it is.
func NotFound(err error, what string) error {
	if errors.Is(err, pgx.ErrNoRows) {
		return fmt.Errorf("%s: %w", what, ErrNotFound)
	}
	return err
}

// uniqueViolation is Postgres's SQLSTATE for a duplicate key.
const uniqueViolation = "23505"

// IsUniqueViolation reports whether err is Postgres's refusal of a duplicate key.
func IsUniqueViolation(err error) bool {
	var pg *pgconn.PgError
	return errors.As(err, &pg) && pg.Code == uniqueViolation
}

// DefaultMaxConns is the most connections one process's pool opens when its database URL sets no
// pool_max_conns: pgxpool's own default, 4 on a 2-core machine, makes concurrent requests queue
// for a connection. It follows GOMAXPROCS, which Go sets from a container's CPU limit, rather than
// the node's cores. Every pmx process has such a pool, so Postgres's max_connections must cover
// their sum (docs/operations.md, "Database connections").
func DefaultMaxConns() int {
	return max(16, 4*runtime.GOMAXPROCS(0))
}

// Open connects to the database at url and checks that it answers.
func Open(ctx context.Context, url string) (*pgxpool.Pool, error) { return OpenHolding(ctx, url, 0) }

// OpenHolding is Open for a process that holds held of its pool's connections for good (a
// matching loop keeps one for its batches): where the URL sets no pool_max_conns, the pool gets
// them on top of DefaultMaxConns, so that what the process holds never starves its other work.
// Without them, `pmx dev --shards 16` on 2 cores gave all 16 of its default connections to its
// matching loops, and every read waited for one until it timed out.
func OpenHolding(ctx context.Context, url string, held int) (*pgxpool.Pool, error) {
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("while parsing the database URL: %w", err)
	}
	if !strings.Contains(url, "pool_max_conns") {
		cfg.MaxConns = int32(DefaultMaxConns() + max(held, 0))
	}
	if _, ok := cfg.ConnConfig.RuntimeParams["application_name"]; !ok {
		cfg.ConnConfig.RuntimeParams["application_name"] = ApplicationName()
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("while connecting to the database: %w", err)
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("while connecting to the database: %w", err)
	}
	return pool, nil
}

// ApplicationName is what a pmx process's connections tell Postgres they are, where the database
// URL names nothing (application_name): "pmx " and the host's name, a pod's name on Kubernetes, so
// that pg_stat_activity and Postgres's log say which process each connection belongs to. Postgres
// keeps 63 bytes of it.
func ApplicationName() string {
	host, err := os.Hostname()
	if err != nil || host == "" {
		return "pmx"
	}
	name := "pmx " + host
	if len(name) > 63 {
		name = name[:63]
	}
	return name
}

// Migrations are the schema's migrations, as tern loads them.
func Migrations() fs.FS {
	sub, err := fs.Sub(migrations, "migrations")
	if err != nil {
		panic(err) // the directory is embedded: it is there
	}
	return sub
}

// Migrate brings the schema up to date with the migrations embedded in this binary, returning the
// version before and after. Concurrent callers are safe: tern serialises them with an advisory lock.
// A schema newer than this binary's migrations (from > to) is left as it is: a later release
// migrated it, and each migration keeps the schema usable by the release before it.
func Migrate(ctx context.Context, pool *pgxpool.Pool) (from, to int32, err error) {
	conn, err := pool.Acquire(ctx)
	if err != nil {
		return 0, 0, fmt.Errorf("while migrating: %w", err)
	}
	defer conn.Release()
	return MigrateConn(ctx, conn.Conn())
}

// MigrateConn is Migrate on one connection.
func MigrateConn(ctx context.Context, conn *pgx.Conn) (from, to int32, err error) {
	m, err := migrate.NewMigrator(ctx, conn, VersionTable)
	if err != nil {
		return 0, 0, fmt.Errorf("while migrating: %w", err)
	}
	if err := m.LoadMigrations(Migrations()); err != nil {
		return 0, 0, fmt.Errorf("while loading migrations: %w", err)
	}
	if from, err = m.GetCurrentVersion(ctx); err != nil {
		return 0, 0, fmt.Errorf("while migrating: %w", err)
	}
	if known := int32(len(m.Migrations)); from > known {
		// A later release has migrated the database: this one is running beside it during a
		// rolling upgrade (or was rolled back). Every migration leaves the schema usable by the
		// release before it (docs/architecture.md §9), so it serves without migrating.
		return from, known, nil
	}
	if err := retryDeadlocks(ctx, migrateAttempts, migrateBackoff, func() error { return m.Migrate(ctx) }); err != nil {
		return from, 0, fmt.Errorf("while migrating from version %d: %w", from, err)
	}
	return from, int32(len(m.Migrations)), nil
}

// During a rolling upgrade the release before keeps trading while this one migrates, and a
// migration that alters a table its batches write can meet one of them in a deadlock, which
// Postgres breaks by failing one side; when that is the migration, nothing of it is kept (tern runs
// each in a transaction of its own), and running it again once the batch has gone succeeds. So a
// migration failed by a deadlock runs again, up to migrateAttempts times in all, migrateBackoff
// more apart each time.
const (
	migrateAttempts = 5
	migrateBackoff  = 100 * time.Millisecond
)

// retryDeadlocks runs run until it returns anything but a deadlock's error (SQLSTATE 40P01), at
// most attempts times, waiting backoff, then twice that, and so on, in between.
func retryDeadlocks(ctx context.Context, attempts int, backoff time.Duration, run func() error) error {
	for attempt := 1; ; attempt++ {
		err := run()
		var pg *pgconn.PgError
		if err == nil || attempt >= attempts || !errors.As(err, &pg) || pg.Code != "40P01" {
			return err
		}
		select {
		case <-ctx.Done():
			return errors.Join(err, ctx.Err())
		case <-time.After(time.Duration(attempt) * backoff):
		}
	}
}

// LockOfAccount takes a transaction-scoped advisory lock on what of an account's kind names (its
// keys, its order groups), so that the count a cap is checked against cannot change under the
// transaction from another front; a hash collision only makes two accounts' requests wait.
func LockOfAccount(ctx context.Context, tx pgx.Tx, kind string, account int64) error {
	h := fnv.New64a()
	h.Write([]byte(kind))
	h.Write(binary.BigEndian.AppendUint64(nil, uint64(account)))
	_, err := tx.Exec(ctx, `select pg_advisory_xact_lock($1)`, int64(h.Sum64()))
	return err
}

// Ownership is who owns a market and under which epoch: the operator's books (package
// bookkeeping) record it, and a batch (package batches) locks and checks it.
type Ownership struct {
	Market uuid.UUID
	Shard  string // "" when nobody does
	Epoch  int64
	Status domain.MarketStatus
}

// EventBatch is what one batch changed in one market: its feed events numbered First to Last, as a
// JSON array (feed.Encode).
type EventBatch struct {
	Market      uuid.UUID
	First, Last int64
	Events      []byte
}

// AccountEvents is what a committed batch added to one account's feed: its events, numbered
// First to Last in the stream of its holder (the shard that committed them, by its holder name;
// docs/architecture.md §11), as a JSON array without their numbers.
type AccountEvents struct {
	Account     int64
	Holder      string
	First, Last int64
	// Position orders the streams' batches for a merged read (account_events.position): set by
	// the reads of the feed, 0 where the batch was just written.
	Position int64
	Events   []byte
}

// AccountStream is where one stream of an account's feed stands: its holder, the first seq still
// kept (0: none is) and the last used.
type AccountStream struct {
	Holder      string
	First, Last int64
}

// breakingMark is the line a migration carries when the previous release's processes cannot run
// beside it (docs/architecture.md §9): an upgrade across it replaces every process at once.
const breakingMark = "-- pmx: the previous release cannot run beside this migration"

// BreakingSince lists the migrations after version that carry breakingMark, by file name.
func BreakingSince(version int) ([]string, error) {
	entries, err := fs.ReadDir(Migrations(), ".")
	if err != nil {
		return nil, err
	}
	var out []string
	for _, e := range entries {
		n, err := strconv.Atoi(strings.SplitN(e.Name(), "_", 2)[0])
		if err != nil || n <= version {
			continue
		}
		raw, err := fs.ReadFile(Migrations(), e.Name())
		if err != nil {
			return nil, err
		}
		if strings.Contains(string(raw), breakingMark) {
			out = append(out, e.Name())
		}
	}
	return out, nil
}
