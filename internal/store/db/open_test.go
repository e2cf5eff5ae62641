package db

import (
	"context"
	"os"
	"strings"
	"testing"

	"github.com/pmx-dev/pmx/internal/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// TestApplicationName: a pmx process's connections tell Postgres which process they are, unless
// the database URL names them itself.
func TestApplicationName(t *testing.T) {
	ctx := context.Background()
	url := pgtest.NewDatabase(t, pgtest.Shared(t))
	sep := "?"
	if strings.Contains(url, "?") {
		sep = "&"
	}
	host, err := os.Hostname()
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ url, want string }{
		{url, "pmx " + host}, // host names here are short of Postgres's 63 bytes
		{url + sep + "application_name=trader-tools", "trader-tools"},
	} {
		pool, err := Open(ctx, tc.url)
		if err != nil {
			t.Fatal(err)
		}
		var got string
		err = pool.QueryRow(ctx, `select application_name from pg_stat_activity where pid = pg_backend_pid()`).Scan(&got)
		pool.Close()
		if err != nil {
			t.Fatal(err)
		}
		if got != tc.want {
			t.Errorf("a connection opened with %s is named %q in pg_stat_activity, want %q", tc.url, got, tc.want)
		}
	}
}
