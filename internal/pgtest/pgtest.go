// Package pgtest gives tests throwaway PostgreSQL clusters (see package pgcluster), Ephemeral
// (fsync off) and removed afterwards.
//
// One cluster per test binary is the cheap pattern (initdb costs about a second, a database about
// 50ms):
//
//	func TestMain(m *testing.M) { pgtest.Main(m) }
//
//	func TestSomething(t *testing.T) {
//		url := pgtest.NewDatabase(t, pgtest.Shared(t)) // a fresh database, dropped after the test
//		...
//	}
//
// Start gives a test its own cluster instead, stopped by t.Cleanup.
//
// The server cannot outlive the test process: pgcluster gives it a parent-death signal on Linux,
// so even a test killed by -timeout or SIGKILL leaves no postgres behind (only its temp directory).
package pgtest

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pmx-dev/pmx/internal/kit/pgcluster"
)

// startTimeout bounds initdb plus startup, generous for loaded CI machines.
const startTimeout = 2 * time.Minute

// Start starts a cluster private to t, stopped and deleted when t ends.
func Start(t testing.TB) *pgcluster.Cluster {
	t.Helper()
	c, dir, err := start(slog.New(slog.NewTextHandler(tbWriter{t}, nil)))
	if dir != "" {
		// Registered first so that it runs after Stop.
		t.Cleanup(func() { removeAll(t, dir) })
	}
	if err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := c.Stop(ctx); err != nil {
			t.Errorf("pgtest: %v", err)
		}
	})
	return c
}

// start creates the cluster in a fresh directory under os.TempDir rather than t.TempDir: when tests
// run as root, postgres runs as an unprivileged user who cannot enter t.TempDir's 0700 parent.
// pgcluster opens up the search bit of the directory it is given; /tmp is world-searchable.
func start(logger *slog.Logger) (*pgcluster.Cluster, string, error) {
	dir, err := os.MkdirTemp("", "pmxpgtest-")
	if err != nil {
		return nil, "", fmt.Errorf("while creating cluster dir: %w", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	c, err := pgcluster.Start(ctx, pgcluster.Options{DataDir: dir, Ephemeral: true, Logger: logger})
	return c, dir, err
}

var shared struct {
	inMain bool // set by Run before any test, read-only afterwards
	once   sync.Once
	c      *pgcluster.Cluster
	dir    string
	err    error
}

// Main is the whole body of a TestMain for packages that use Shared: it runs the tests, stops the
// shared cluster (if any test asked for it) and exits.
func Main(m *testing.M) { os.Exit(Run(m)) }

// Run runs the tests like m.Run and then stops the shared cluster, for a TestMain that has more to
// do. A failure to stop turns a zero exit code into 1.
func Run(m *testing.M) int { return RunWith(m, nil) }

// RunWith is Run with setup called before the first test, where the shared cluster may already be
// used: for what every test and example of the binary shares (an example has no *testing.T to
// start a server with). The function setup returns, if any, runs after the last test.
func RunWith(m *testing.M, setup func() (teardown func())) int {
	shared.inMain = true
	var teardown func()
	if setup != nil {
		teardown = setup()
	}
	code := m.Run()
	if teardown != nil {
		teardown() // before the cluster stops: what setup started may use it
	}
	if shared.c != nil {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := shared.c.Stop(ctx); err != nil {
			fmt.Fprintf(os.Stderr, "pgtest: %v\n", err)
			code = max(code, 1)
		}
	}
	if shared.dir != "" {
		os.RemoveAll(shared.dir)
	}
	return code
}

// Shared returns the test binary's shared cluster, started by the first caller. It requires
// TestMain to call Main or Run, which stop it after the last test.
func Shared(t testing.TB) *pgcluster.Cluster {
	t.Helper()
	if !shared.inMain {
		t.Fatal("pgtest.Shared needs the package's TestMain to call pgtest.Main(m) (or pgtest.Run)")
	}
	shared.once.Do(func() {
		// Test logs are per test; the shared cluster outlives them, so it only reports problems.
		logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
		shared.c, shared.dir, shared.err = start(logger)
	})
	if shared.err != nil {
		t.Fatalf("pgtest: shared cluster: %v", shared.err)
	}
	return shared.c
}

var dbSeq atomic.Int64

// NewDatabase creates a database with a unique name derived from t.Name() in c and returns its URL.
// It is dropped (with its connections terminated) when t ends.
func NewDatabase(t testing.TB, c *pgcluster.Cluster) string {
	t.Helper()
	return NewDatabaseFrom(t, c, "")
}

// NewDatabaseFrom is NewDatabase with the database cloned from template (see
// pgcluster.Cluster.CreateDatabaseFrom); "" means an empty database.
func NewDatabaseFrom(t testing.TB, c *pgcluster.Cluster, template string) string {
	t.Helper()
	name := DatabaseName(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := c.CreateDatabaseFrom(ctx, name, template); err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := c.DropDatabase(ctx, name); err != nil {
			t.Errorf("pgtest: %v", err)
		}
	})
	return c.URLFor(name)
}

var unsafeChars = regexp.MustCompile(`[^a-z0-9_]+`)

// DatabaseName returns a new database name, unique within the process and recognisable as t's:
// "t_" + lower-cased t.Name() squeezed to [a-z0-9_] and shortened + "_" + a sequence number, at
// most 63 bytes (PostgreSQL's identifier limit).
func DatabaseName(t testing.TB) string {
	base := strings.Trim(unsafeChars.ReplaceAllString(strings.ToLower(t.Name()), "_"), "_")
	seq := fmt.Sprintf("_%d", dbSeq.Add(1))
	if maxBase := 63 - len("t_") - len(seq); len(base) > maxBase {
		base = base[:maxBase]
	}
	return "t_" + base + seq
}

// removeAll deletes a cluster dir; root can delete the server user's files, and a non-root caller
// owns them.
func removeAll(t testing.TB, dir string) {
	if err := os.RemoveAll(dir); err != nil {
		t.Errorf("pgtest: while removing %s: %v", dir, err)
	}
}

// tbWriter sends slog output to t.Log, shown only for failed or verbose tests.
type tbWriter struct{ t testing.TB }

func (w tbWriter) Write(p []byte) (int, error) {
	w.t.Helper()
	w.t.Log(strings.TrimSuffix(string(p), "\n"))
	return len(p), nil
}

var _ io.Writer = tbWriter{}
