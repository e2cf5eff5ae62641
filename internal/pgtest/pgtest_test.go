package pgtest_test

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pmx-dev/pmx/internal/kit/pgcluster"
	"github.com/pmx-dev/pmx/internal/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

func query(t *testing.T, c *pgcluster.Cluster, url, sql string) string {
	t.Helper()
	out, err := exec.Command(filepath.Join(c.BinDir(), "psql"), "-X", "-v", "ON_ERROR_STOP=1", "-d", url, "-Atc", sql).CombinedOutput()
	if err != nil {
		t.Fatalf("psql %q: %v: %s", sql, err, out)
	}
	return strings.TrimSpace(string(out))
}

// Each parallel test gets its own database in the shared cluster, isolated from the others.
func TestSharedClusterDatabases(t *testing.T) {
	for _, name := range []string{"a", "b", "c", "a very long sub-test name that is way beyond postgres's sixty-three byte limit"} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			c := pgtest.Shared(t)
			url := pgtest.NewDatabase(t, c)
			query(t, c, url, "create table only_mine(x int); insert into only_mine values (1)")
			if got := query(t, c, url, "select count(*) from only_mine"); got != "1" {
				t.Errorf("count = %q", got)
			}
			if db := query(t, c, url, "select current_database()"); !strings.HasPrefix(db, "t_testsharedclusterdatabases_") || len(db) > 63 {
				t.Errorf("database name %q", db)
			}
		})
	}
}

func TestTemplateClone(t *testing.T) {
	c := pgtest.Shared(t)
	tmplURL := pgtest.NewDatabase(t, c)
	query(t, c, tmplURL, "create table migrated(v int); insert into migrated values (42)")
	tmpl := query(t, c, tmplURL, "select current_database()")
	clone := pgtest.NewDatabaseFrom(t, c, tmpl)
	if got := query(t, c, clone, "select v from migrated"); got != "42" {
		t.Errorf("clone has %q, want 42", got)
	}
}

func TestOwnCluster(t *testing.T) {
	t.Parallel()
	c := pgtest.Start(t)
	if c == pgtest.Shared(t) {
		t.Fatal("Start returned the shared cluster")
	}
	// A short data dir keeps the socket inside it.
	if want := filepath.Join(c.DataDir(), "run"); c.SocketDir() != want {
		t.Errorf("socket dir %s, want %s", c.SocketDir(), want)
	}
	if got := query(t, c, c.URL(), "select current_database()"); got != "pmx" {
		t.Errorf("database %q", got)
	}
}
