package bench

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pmx-dev/pmx/internal/kit/pgcluster"
	"github.com/pmx-dev/pmx/internal/store"
)

// maxConnections is the max_connections a bench's Postgres needs for processes pmx processes (the
// distributed exchange: its shards, fronts and operator) whose pools each open up to pool
// connections (0: store.DefaultMaxConns, as they run on this machine with this process's cores;
// the bench sizes pmx dev's with its shards, devPool), a shard's own connections for its batches
// and its lease, and the bench's: Postgres's default of 100 is outgrown on a many-core machine,
// and a connection refused answers a request 503.
func maxConnections(processes, pool int) int {
	if pool == 0 {
		pool = store.DefaultMaxConns()
	}
	return max(100, processes*(pool+4)+10)
}

// devPool is the pool the bench gives a pmx dev with shards matching shards (Options.DevShards):
// its default and one connection more for each shard. A shard keeps a connection of the pool as
// its own, so with as many shards as the default pool has connections (16 on up to 4 cores) the
// shards would hold them all and the API's requests would wait for one for ever.
func devPool(shards int) int { return store.DefaultMaxConns() + shards }

// withPool is databaseURL with pmx's pool sized to pool connections (pgxpool's pool_max_conns,
// which pmx takes from the URL in place of its default).
func withPool(databaseURL string, pool int) string {
	sep := "?"
	if strings.Contains(databaseURL, "?") {
		sep = "&"
	}
	return databaseURL + sep + "pool_max_conns=" + strconv.Itoa(pool)
}

// startPostgres starts a fresh private cluster in dir/postgres with pmx dev's durable settings and
// room for connections connections (maxConnections), and connects to it for its counters. stop closes the
// connection and stops the cluster; it must be called, also after an error (then it has nothing
// to do). With statements it also loads pg_stat_statements (Options.Statements); the settings in
// extra (Options.PGSettings) come last, over the bench's own.
func startPostgres(ctx context.Context, dir string, connections int, statements bool, extra map[string]string, logger *slog.Logger) (_ *pgcluster.Cluster, _ *pgStats, info PostgresInfo, stop func() error, err error) {
	stop = func() error { return nil }
	settings := map[string]string{"max_connections": strconv.Itoa(connections)}
	if statements {
		maps.Copy(settings, statementSettings)
	}
	maps.Copy(settings, extra)
	cluster, err := pgcluster.Start(ctx, pgcluster.Options{DataDir: filepath.Join(dir, "postgres"), Logger: logger, Settings: settings})
	if err != nil {
		return nil, nil, info, stop, err
	}
	stop = func() error {
		stopCtx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		return cluster.Stop(stopCtx)
	}
	stats, err := connectStats(ctx, cluster.URL())
	if err != nil {
		return nil, nil, info, stop, err
	}
	stopCluster := stop
	stop = func() error {
		stats.close()
		return stopCluster()
	}
	if info, err = stats.settings(ctx, slices.Sorted(maps.Keys(extra))); err != nil {
		return nil, nil, info, stop, err
	}
	return cluster, stats, info, stop, nil
}

// ParseSettings reads server settings given as NAME=VALUE (pmxtools bench --pg-setting) into a
// map, for Options.PGSettings. A name is a Postgres parameter's: letters, digits, _ and . (for an
// extension's); the value is everything after the first =, passed to the server as it is.
func ParseSettings(args []string) (map[string]string, error) {
	if len(args) == 0 {
		return nil, nil
	}
	out := make(map[string]string, len(args))
	for _, a := range args {
		name, value, ok := strings.Cut(a, "=")
		if !ok || !settingName.MatchString(name) || value == "" {
			return nil, fmt.Errorf("%q: want NAME=VALUE, a Postgres setting and its value (e.g. max_wal_size=16GB)", a)
		}
		if _, dup := out[name]; dup {
			return nil, fmt.Errorf("%s is given twice", name)
		}
		out[name] = value
	}
	return out, nil
}

var settingName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_.]*$`)

// pgStats reads the counters of the bench's Postgres cluster over one connection of its own.
type pgStats struct {
	conn    *pgx.Conn
	version int // server_version_num
}

func connectStats(ctx context.Context, url string) (*pgStats, error) {
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return nil, fmt.Errorf("while connecting to the bench's Postgres: %w", err)
	}
	if err := conn.Ping(ctx); err != nil {
		conn.Close(context.Background())
		return nil, fmt.Errorf("while connecting to the bench's Postgres: %w", err)
	}
	p := &pgStats{conn: conn}
	if err := conn.QueryRow(ctx, `select current_setting('server_version_num')::int`).Scan(&p.version); err != nil {
		conn.Close(context.Background())
		return nil, fmt.Errorf("while reading the bench's Postgres version: %w", err)
	}
	return p, nil
}

func (p *pgStats) close() { _ = p.conn.Close(context.Background()) }

// pgCounters are the cluster's running totals a run is measured by, read before and after it.
type pgCounters struct {
	transactions int64 // finished, committed or rolled back, in every database
	walBytes     int64 // WAL written (pg_current_wal_lsn)
	walFPI       int64 // full-page images in it (pg_stat_wal)
	checkpoints  int64 // checkpoints completed, timed or requested
	// walFiles are the WAL segment files in pg_wal; walReady those of them past the one being
	// written (made ahead: recycled by a checkpoint, or preallocated), which the WAL opens when it
	// reaches them instead of creating and zero-filling a file while the commits wait.
	walFiles, walReady int64
}

// sub is what the counters went up by since base (walReady is not a counter: it is c's).
func (c pgCounters) sub(base pgCounters) pgCounters {
	return pgCounters{transactions: c.transactions - base.transactions, walBytes: c.walBytes - base.walBytes,
		walFPI: c.walFPI - base.walFPI, checkpoints: c.checkpoints - base.checkpoints,
		walFiles: c.walFiles - base.walFiles, walReady: c.walReady}
}

// counters reads the cluster's counters. A backend publishes its counts when it goes idle, at most
// once a second, and when it exits; see waitClientsGone for reading final figures.
func (p *pgStats) counters(ctx context.Context) (pgCounters, error) {
	var c pgCounters
	// Postgres 17 moved the checkpoints' counts from pg_stat_bgwriter to pg_stat_checkpointer.
	checkpoints := `(select checkpoints_timed + checkpoints_req from pg_stat_bgwriter)`
	if p.version >= 170000 {
		checkpoints = `(select num_timed + num_requested from pg_stat_checkpointer)`
	}
	err := p.conn.QueryRow(ctx, `select (select coalesce(sum(xact_commit + xact_rollback), 0)::bigint from pg_stat_database),
		(pg_current_wal_lsn() - '0/0')::bigint, (select wal_fpi from pg_stat_wal), `+checkpoints+`, w.files, w.ready
		from (select count(*) as files, count(*) filter (where name > pg_walfile_name(pg_current_wal_lsn())) as ready
		      from pg_ls_waldir() where name ~ '^[0-9A-F]{24}$') as w`).
		Scan(&c.transactions, &c.walBytes, &c.walFPI, &c.checkpoints, &c.walFiles, &c.walReady)
	if err != nil {
		return c, fmt.Errorf("while reading the Postgres counters: %w", err)
	}
	return c, nil
}

// warmWAL writes mib MiB of WAL and then checkpoints, so that the checkpoint recycles the files
// that WAL filled as the next ones to write (up to max_wal_size of them), as a server that has been
// running for a while has them: a fresh cluster has none, and creates and zero-fills each file the
// WAL reaches while the commits waiting for the WAL's flush wait for that too. The WAL is logical
// decoding messages, which nothing reads and no table keeps.
func (p *pgStats) warmWAL(ctx context.Context, mib int) error {
	if _, err := p.conn.Exec(ctx, `select pg_logical_emit_message(false, 'pmxtools bench', repeat('x', 1048576))
		from generate_series(1, $1)`, mib); err != nil {
		return fmt.Errorf("while writing WAL to warm it: %w", err)
	}
	if _, err := p.conn.Exec(ctx, `checkpoint`); err != nil {
		return fmt.Errorf("while checkpointing to recycle the WAL written to warm it: %w", err)
	}
	return nil
}

// waitClientsGone waits until no client backend but ours is connected. A backend writes out its
// pending statistics before it leaves pg_stat_activity, so once pmx dev's connections are gone
// pg_stat_database counts all of its transactions.
func (p *pgStats) waitClientsGone(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for delay := 2 * time.Millisecond; ; delay = min(2*delay, 100*time.Millisecond) {
		var n int
		err := p.conn.QueryRow(ctx, `select count(*) from pg_stat_activity
			where backend_type = 'client backend' and pid <> pg_backend_pid()`).Scan(&n)
		if err != nil {
			return fmt.Errorf("while waiting for pmx dev's connections to close: %w", err)
		}
		if n == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%d connections to Postgres were still open after pmx dev stopped: %w", n, ctx.Err())
		case <-time.After(delay):
		}
	}
}

// scheduledMarkets lists the OPEN markets placed on a shard (distributed mode).
func (p *pgStats) scheduledMarkets(ctx context.Context) ([]string, error) {
	rows, err := p.conn.Query(ctx, `select id::text from markets where status = 'OPEN' and shard is not null`)
	if err != nil {
		return nil, fmt.Errorf("while reading the markets: %w", err)
	}
	return pgx.CollectRows(rows, pgx.RowTo[string])
}

// settings reads the server's version and durability settings, and the values of the settings
// named (those the bench was asked to give it), for the report.
func (p *pgStats) settings(ctx context.Context, names []string) (PostgresInfo, error) {
	var info PostgresInfo
	err := p.conn.QueryRow(ctx, `select current_setting('server_version'), current_setting('fsync'),
		current_setting('synchronous_commit'), current_setting('full_page_writes')`).
		Scan(&info.Version, &info.Fsync, &info.SynchronousCommit, &info.FullPageWrites)
	if err != nil {
		return info, fmt.Errorf("while reading the Postgres settings: %w", err)
	}
	for _, name := range names {
		var v string
		if err := p.conn.QueryRow(ctx, `select current_setting($1)`, name).Scan(&v); err != nil {
			return info, fmt.Errorf("while reading the Postgres setting %s: %w", name, err)
		}
		if info.Settings == nil {
			info.Settings = map[string]string{}
		}
		info.Settings[name] = v
	}
	return info, nil
}

// FeesTaken is what a run's fills paid the exchange (RunResult.FeesTaken).
type FeesTaken struct {
	Net    int64 `json:"net"`    // cents: fees less rebates
	Trades int64 `json:"trades"` // trades whose taker or maker paid a fee
}

// feesTaken sums the fees of the run's trades (each run has a database of its own).
func (p *pgStats) feesTaken(ctx context.Context) (*FeesTaken, error) {
	var f FeesTaken
	err := p.conn.QueryRow(ctx, `select coalesce(sum(taker_fee + maker_fee), 0)::bigint,
		count(*) filter (where taker_fee > 0 or maker_fee > 0) from trades`).Scan(&f.Net, &f.Trades)
	if err != nil {
		return nil, fmt.Errorf("bench: reading the fees the trades paid: %w", err)
	}
	return &f, nil
}
