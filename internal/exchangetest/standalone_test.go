package exchangetest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/pmx-dev/pmx/internal/kit/pgcluster"
	"github.com/pmx-dev/pmx/internal/pgtest"
	"github.com/pmx-dev/pmx/internal/poll"
)

// devOnItsDatabase starts a pmx dev process on a database of its own, with the admin token token.
func devOnItsDatabase(t *testing.T, token string) (bin, dbURL string, p *Process, tg *Target) {
	bin = BuildPMX(t)
	dbURL = pgtest.NewDatabase(t, pgtest.Shared(t))
	p, base := startDevProcess(t, bin, dbURL, token)
	return bin, dbURL, p, processTarget(t, base, dbURL, token)
}

// TestSecondDevRefused starts a second pmx dev on a database that one already serves: two would
// serve the same markets from two books, so the second must exit with an error that says so and
// how to mend it, having changed nothing; the first goes on serving.
func TestSecondDevRefused(t *testing.T) {
	const token = "second-dev-admin-token-0123456789abcdef"
	bin, dbURL, first, tg := devOnItsDatabase(t, token)
	m := tg.NewMarket(t, nil)

	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "dev", "--database-url", dbURL, "--addr", "127.0.0.1:0", "--metrics-addr", "",
		"--markets", "", "--admin-token", token, "--data-dir", t.TempDir())
	cmd.SysProcAttr = &syscall.SysProcAttr{}
	pgcluster.SetParentDeathSignal(cmd.SysProcAttr, syscall.SIGKILL)
	cmd.Env = append(os.Environ(), "PMX_ADMIN_TOKEN=", "PMX_DATABASE_URL=")
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || ctx.Err() != nil {
		t.Fatalf("a second pmx dev on the database: %v (want it to exit with an error); output:\n%s", err, out)
	}
	for _, want := range []string{"another pmx dev is serving this database", "--database-url"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("the second pmx dev's output does not say %q:\n%s", want, out)
		}
	}

	// The first still serves: a placement trades as before.
	alice, bob := tg.NewAccount(t, "first-a"), tg.NewAccount(t, "first-b")
	alice.Place(t, m.ID, "BUY", "YES", 40, 2)
	if o := bob.Place(t, m.ID, "BUY", "NO", 60, 2); o.FilledQuantity != 2 {
		t.Errorf("after the second pmx dev was refused, a crossing order filled %d of 2", o.FilledQuantity)
	}
	CheckInvariants(t, tg)
	first.Stop()
}

// TestDevStopsWhenClaimLost ends the Postgres session through which a running pmx dev holds its
// database, as a restart of Postgres would, while a second pmx dev waits for that database: the
// second takes it and serves, and the first, finding its claim taken, exits with an error that
// says so, instead of serving the same markets from a second book.
func TestDevStopsWhenClaimLost(t *testing.T) {
	const token = "claim-lost-admin-token-0123456789abcdef"
	bin, dbURL, first, tg := devOnItsDatabase(t, token)
	m := tg.NewMarket(t, nil)

	// Once the second waits for the claim, end the first's hold on it.
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	ended := make(chan error, 1)
	go func() {
		waiting := func(ctx context.Context) (bool, error) {
			var n int
			err := tg.Store.Pool.QueryRow(ctx, `select count(*) from pg_locks where locktype = 'advisory' and not granted
				and database = (select oid from pg_database where datname = current_database())`).Scan(&n)
			return n > 0, err
		}
		if err := poll.Until(ctx, 30*time.Second, waiting); err != nil {
			ended <- fmt.Errorf("the second pmx dev never waited for the claim: %w", err)
			return
		}
		var n int
		ended <- tg.Store.Pool.QueryRow(ctx, `select count(pg_terminate_backend(pid)) from pg_locks
			where locktype = 'advisory' and granted and objsubid = 2 and classid = $1::bigint::oid and objid = 1
			  and database = (select oid from pg_database where datname = current_database())`, 0x706d7864).Scan(&n)
	}()
	second, secondBase := startDevProcess(t, bin, dbURL, token)
	if err := <-ended; err != nil {
		t.Fatal(err)
	}

	select {
	case <-first.done:
	case <-time.After(time.Minute):
		t.Fatalf("the first pmx dev still runs a minute after another took its database:\n%s", first.Output())
	}
	if first.cmd.ProcessState.Success() {
		t.Errorf("the first pmx dev exited successfully after losing its database; want an error")
	}
	for _, want := range []string{"another pmx dev is serving this database", "this one stops"} {
		if !strings.Contains(first.Output(), want) {
			t.Errorf("the first pmx dev's output does not say %q:\n%s", want, first.Output())
		}
	}

	// The second serves the market, from what the first wrote.
	tg2 := processTarget(t, secondBase, dbURL, token)
	alice, bob := tg2.NewAccount(t, "second-a"), tg2.NewAccount(t, "second-b")
	alice.Place(t, m.ID, "BUY", "YES", 40, 2)
	if o := bob.Place(t, m.ID, "BUY", "NO", 60, 2); o.FilledQuantity != 2 {
		t.Errorf("on the second pmx dev, a crossing order filled %d of 2", o.FilledQuantity)
	}
	CheckInvariants(t, tg2)
	second.Stop()
}
