package exchangetest

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/pmx-dev/pmx/internal/pgtest"
	"github.com/pmx-dev/pmx/pgcluster"
)

// TestSecondDevRefused starts a second pmx dev on a database that one already serves: two would
// serve the same markets from two books, so the second must exit with an error that says so and
// how to mend it, having changed nothing; the first goes on serving.
func TestSecondDevRefused(t *testing.T) {
	bin := BuildPMX(t)
	dbURL := pgtest.NewDatabase(t, pgtest.Shared(t))
	const token = "second-dev-token"
	first, base := startDevProcess(t, bin, dbURL, token)
	tg := processTarget(t, base, dbURL, token)
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
