// Package store owns pmx's Postgres schema and every SQL statement the exchange runs: migrations,
// the reads the API serves, and the writes a shard commits for a batch of orders.
package store

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"runtime"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/tern/v2/migrate"
)

//go:embed migrations/*.sql
var migrations embed.FS

// versionTable records which migrations have run.
const versionTable = "schema_version"

// Errors the store translates from Postgres into domain terms.
var (
	ErrNotFound = errors.New("not found")
	ErrConflict = errors.New("already exists")
)

// Store is the exchange's database.
type Store struct {
	// Pool is the connection pool every method uses. Production code goes through the methods;
	// tests reach it for raw SQL.
	Pool *pgxpool.Pool
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
func Open(ctx context.Context, url string) (*Store, error) {
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("while parsing the database URL: %w", err)
	}
	if !strings.Contains(url, "pool_max_conns") {
		cfg.MaxConns = int32(DefaultMaxConns())
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
	return &Store{Pool: pool}, nil
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

// Close closes every connection.
func (s *Store) Close() { s.Pool.Close() }

// Ping checks that the database answers.
func (s *Store) Ping(ctx context.Context) error { return s.Pool.Ping(ctx) }

// Acquire takes a connection of the pool for the caller's own use, until it releases it.
func (s *Store) Acquire(ctx context.Context) (*pgxpool.Conn, error) { return s.Pool.Acquire(ctx) }

// Migrate brings the schema up to date with the migrations embedded in this binary, returning the
// version before and after. Concurrent callers are safe: tern serialises them with an advisory lock.
// A schema newer than this binary's migrations (from > to) is left as it is: a later release
// migrated it, and each migration keeps the schema usable by the release before it.
func (s *Store) Migrate(ctx context.Context) (from, to int32, err error) {
	conn, err := s.Pool.Acquire(ctx)
	if err != nil {
		return 0, 0, fmt.Errorf("while migrating: %w", err)
	}
	defer conn.Release()
	return migrateConn(ctx, conn.Conn())
}

func migrateConn(ctx context.Context, conn *pgx.Conn) (from, to int32, err error) {
	m, err := migrate.NewMigrator(ctx, conn, versionTable)
	if err != nil {
		return 0, 0, fmt.Errorf("while migrating: %w", err)
	}
	sub, err := fs.Sub(migrations, "migrations")
	if err != nil {
		return 0, 0, err
	}
	if err := m.LoadMigrations(sub); err != nil {
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
	if err := m.Migrate(ctx); err != nil {
		return from, 0, fmt.Errorf("while migrating from version %d: %w", from, err)
	}
	return from, int32(len(m.Migrations)), nil
}
