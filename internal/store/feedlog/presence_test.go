package feedlog

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/pmx-dev/pmx/internal/pgtest"
	"github.com/pmx-dev/pmx/internal/store/db/dbtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// TestLastPresenceLeaves checks the cancel-on-disconnect record when an account's connections on
// two fronts close at the same moment: whichever order Postgres runs the two ends in, the last
// one trips the account's switch (neither end may count on the other front's record still being
// there, as two concurrent statements each would from its own snapshot).
func TestLastPresenceLeaves(t *testing.T) {
	ctx := context.Background()
	st := New(dbtest.New(t))
	const rounds = 60
	for i := range rounds {
		account := dbtest.Account(t, st.Pool, fmt.Sprintf("presence-%d", i), 1_000)
		fronts := []uuid.UUID{uuid.New(), uuid.New()}
		for _, f := range fronts {
			if err := st.TouchPresence(ctx, f, []int64{account}); err != nil {
				t.Fatal(err)
			}
		}
		var wg sync.WaitGroup
		start := make(chan struct{})
		tripped := make([]bool, len(fronts))
		errs := make([]error, len(fronts))
		for j, f := range fronts {
			wg.Go(func() {
				<-start
				tripped[j], errs[j] = st.LeavePresence(ctx, f, account, time.Minute)
			})
		}
		close(start)
		wg.Wait()
		for _, err := range errs {
			if err != nil {
				t.Fatal(err)
			}
		}
		if tripped[0] == tripped[1] {
			t.Fatalf("round %d: both fronts' last connections closed together, and the ends tripped the switch %v (want exactly one)", i, tripped)
		}
		var n int
		if err := st.Pool.QueryRow(ctx, `select count(*) from heartbeats where account_id = $1 and tripped is not null`, account).Scan(&n); err != nil || n != 1 {
			t.Fatalf("round %d: the account's switch tripped %d times (%v), want once", i, n, err)
		}
	}
}
