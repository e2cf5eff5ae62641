package pgtest

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pmx-dev/pmx/internal/kit/pgcluster"
	"github.com/pmx-dev/pmx/internal/poll"
)

// Replicated is a primary and a synchronous streaming standby, for tests of a database failover:
// the primary can be killed, the standby promoted and a new standby cloned from the new primary,
// as many times as the pair was given nodes for. Every node listens on a unix socket in a
// directory fixed when the pair starts, so one multi-host URL (URL) reaches whichever node is
// the primary now or later.
//
// The nodes keep Ephemeral's fsync off: a test kills postgres processes, not the machine, and the
// kernel keeps what a killed process wrote. synchronous_commit is on, and each primary names its
// standby in synchronous_standby_names, so a commit is acknowledged only once the standby has
// it: what a test checks after a failover.
type Replicated struct {
	t       testing.TB
	dir     string
	nodes   []*pgcluster.Cluster // by index; nil until started
	primary int                  // index of the current primary
	standby int                  // index of the current standby; -1 while there is none
	killed  map[int]bool
}

// standbyName is every standby's application_name, which its primary's synchronous_standby_names
// names.
const standbyName = "pmxstandby"

// StartReplicated starts node 0 as the primary and node 1 as its synchronous standby; nodes is
// how many the pair may ever use (each failover uses one more), at least 2. Everything is stopped
// and removed when t ends.
func StartReplicated(t testing.TB, nodes int) *Replicated {
	t.Helper()
	if nodes < 2 {
		t.Fatalf("pgtest: StartReplicated needs at least 2 nodes, got %d", nodes)
	}
	dir, err := os.MkdirTemp("", "pmxpgrepl-")
	if err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	// The server user must enter dir to reach each node's data and socket directories.
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	r := &Replicated{t: t, dir: dir, nodes: make([]*pgcluster.Cluster, nodes), standby: -1, killed: map[int]bool{}}
	t.Cleanup(func() { removeAll(t, dir) })
	t.Cleanup(r.stopAll)
	r.nodes[0] = r.startNode(0, nil)
	r.NewStandby()
	return r
}

func (r *Replicated) nodeDir(i int) string { return filepath.Join(r.dir, fmt.Sprintf("n%d", i)) }

// socketDir is where node i listens: pgcluster's DataDir/run, short enough under the temp dir.
func (r *Replicated) socketDir(i int) string { return filepath.Join(r.nodeDir(i), "run") }

// URL is a multi-host URL naming every node the pair may use, with
// target_session_attrs=read-write: a client connects to whichever is the primary.
func (r *Replicated) URL() string {
	hosts := make([]string, len(r.nodes))
	for i := range r.nodes {
		hosts[i] = r.socketDir(i)
	}
	return fmt.Sprintf("postgres://postgres@/pmx?host=%s&port=5432&sslmode=disable&target_session_attrs=read-write",
		strings.Join(hosts, ","))
}

// PrimaryURL is the URL of the current primary alone.
func (r *Replicated) PrimaryURL() string { return r.nodes[r.primary].URL() }

// Primary is the current primary's index.
func (r *Replicated) Primary() int { return r.primary }

func (r *Replicated) startNode(i int, settings map[string]string) *pgcluster.Cluster {
	r.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	all := map[string]string{"synchronous_commit": "on", "wal_level": "replica", "hot_standby": "on"}
	for k, v := range settings {
		all[k] = v
	}
	logger := slog.New(slog.NewTextHandler(tbWriter{r.t}, &slog.HandlerOptions{Level: slog.LevelWarn}))
	c, err := pgcluster.Start(ctx, pgcluster.Options{DataDir: r.nodeDir(i), Ephemeral: true, Logger: logger, Settings: all})
	if err != nil {
		r.t.Fatalf("pgtest: node %d: %v", i, err)
	}
	if c.SocketDir() != r.socketDir(i) {
		r.t.Fatalf("pgtest: node %d listens in %s, not %s", i, c.SocketDir(), r.socketDir(i))
	}
	return c
}

// NewStandby clones the next unused node from the primary (pg_basebackup), starts it streaming
// from the primary, waits until it is caught up, and makes it the primary's synchronous standby.
func (r *Replicated) NewStandby() {
	r.t.Helper()
	i := r.primary
	for j := range r.nodes {
		if r.nodes[j] == nil {
			i = j
			break
		}
	}
	if i == r.primary {
		r.t.Fatalf("pgtest: all %d nodes are used; give StartReplicated more", len(r.nodes))
	}
	p := r.nodes[r.primary]
	pgdata := filepath.Join(r.nodeDir(i), "pgdata")
	if err := os.MkdirAll(r.nodeDir(i), 0o755); err != nil {
		r.t.Fatalf("pgtest: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	// Run as ourselves: a client; pgcluster hands the files to the server user when it starts.
	cmd := exec.CommandContext(ctx, filepath.Join(p.BinDir(), "pg_basebackup"), "-D", pgdata,
		"-h", p.SocketDir(), "-p", "5432", "-U", "postgres", "--checkpoint=fast", "--wal-method=stream", "--no-sync")
	if out, err := cmd.CombinedOutput(); err != nil {
		r.t.Fatalf("pgtest: pg_basebackup for node %d: %v\n%s", i, err, out)
	}
	if err := os.WriteFile(filepath.Join(pgdata, "standby.signal"), nil, 0o600); err != nil {
		r.t.Fatalf("pgtest: %v", err)
	}
	r.nodes[i] = r.startNode(i, map[string]string{
		"primary_conninfo": fmt.Sprintf("host=%s port=5432 user=postgres application_name=%s", p.SocketDir(), standbyName),
		// Once its primary is gone the standby retries every wal_retrieve_retry_interval (5 s by
		// default); a promotion is not held up by it then.
		"wal_retrieve_retry_interval": "100ms",
	})
	r.standby = i
	streaming := func(ctx context.Context) (bool, error) {
		var n int
		err := r.query(ctx, r.primary, func(conn *pgx.Conn) error {
			return conn.QueryRow(ctx, `select count(*) from pg_stat_replication
				where application_name = $1 and state = 'streaming'`, standbyName).Scan(&n)
		})
		return n == 1, err
	}
	if err := poll.Until(ctx, time.Minute, streaming); err != nil {
		r.t.Fatalf("pgtest: node %d did not stream from node %d: %v", i, r.primary, err)
	}
	r.setSyncStandby(ctx, r.primary, standbyName)
	sync := func(ctx context.Context) (bool, error) {
		var n int
		err := r.query(ctx, r.primary, func(conn *pgx.Conn) error {
			return conn.QueryRow(ctx, `select count(*) from pg_stat_replication
				where application_name = $1 and sync_state = 'sync'`, standbyName).Scan(&n)
		})
		return n == 1, err
	}
	if err := poll.Until(ctx, time.Minute, sync); err != nil {
		r.t.Fatalf("pgtest: node %d did not become node %d's synchronous standby: %v", i, r.primary, err)
	}
}

// setSyncStandby sets synchronous_standby_names on node i ("" for none) and reloads it.
func (r *Replicated) setSyncStandby(ctx context.Context, i int, name string) {
	r.t.Helper()
	err := r.query(ctx, i, func(conn *pgx.Conn) error {
		if _, err := conn.Exec(ctx, `alter system set synchronous_standby_names = '`+strings.ReplaceAll(name, "'", "''")+`'`); err != nil {
			return err
		}
		_, err := conn.Exec(ctx, `select pg_reload_conf()`)
		return err
	})
	if err != nil {
		r.t.Fatalf("pgtest: while setting node %d's synchronous standby: %v", i, err)
	}
}

func (r *Replicated) query(ctx context.Context, i int, f func(*pgx.Conn) error) error {
	conn, err := pgx.Connect(ctx, r.nodes[i].URL())
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	return f(conn)
}

// KillPrimary kills every process of the primary's server at once with SIGKILL, as a lost node
// would, and waits until the postmaster is gone.
func (r *Replicated) KillPrimary() {
	r.t.Helper()
	c := r.nodes[r.primary]
	// postgres runs in a process group of its own (pgcluster): the postmaster and its backends.
	if err := syscall.Kill(-c.Pid(), syscall.SIGKILL); err != nil {
		r.t.Fatalf("pgtest: while killing node %d: %v", r.primary, err)
	}
	select {
	case <-c.Done():
	case <-time.After(time.Minute):
		r.t.Fatalf("pgtest: node %d's postgres outlived SIGKILL by a minute", r.primary)
	}
	r.killed[r.primary] = true
}

// Promote promotes the standby (pg_promote, which waits until it is done) and makes it the
// primary. Until NewStandby gives it one, the new primary runs without a synchronous standby,
// as a three-node cluster whose other standby takes over the synchronous role would: its commits
// do not wait.
func (r *Replicated) Promote() {
	r.t.Helper()
	if r.standby < 0 {
		r.t.Fatal("pgtest: no standby to promote")
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	err := r.query(ctx, r.standby, func(conn *pgx.Conn) error {
		var ok bool
		if err := conn.QueryRow(ctx, `select pg_promote(true, 60)`).Scan(&ok); err != nil {
			return err
		}
		if !ok {
			return fmt.Errorf("pg_promote did not finish in 60 s")
		}
		return nil
	})
	if err != nil {
		r.t.Fatalf("pgtest: while promoting node %d: %v", r.standby, err)
	}
	r.primary, r.standby = r.standby, -1
	// The clone copied the old primary's synchronous_standby_names, which names no one now.
	r.setSyncStandby(ctx, r.primary, "")
}

// stopAll stops every node; those KillPrimary killed only release their resources.
func (r *Replicated) stopAll() {
	for i, c := range r.nodes {
		if c == nil {
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		err := c.Stop(ctx)
		cancel()
		if err != nil && !r.killed[i] {
			r.t.Errorf("pgtest: node %d: %v", i, err)
		}
	}
}
