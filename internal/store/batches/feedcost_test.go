package batches

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/pmx-dev/pmx/internal/store/db/dbtest"
)

// TestAccountEventsCost measures what the account feed's rows add to a batch's statement: the
// same batch of 31 accounts' cash updates (how many accounts a basic-mix batch touches under
// closed loop) committed with no events, with two events of 150 bytes and of 700 bytes an
// account, alternated round by round on one connection, reporting the backend's CPU (/proc) and
// the wall time per batch. The cluster is a test one (fsync off), so the figures are the
// statement's work, not the commit's flush. It is skipped unless PMX_PGCOST is set
// (docs/performance.md, issue 39):
//
//	PMX_PGCOST=1 go test -run TestAccountEventsCost -v ./internal/store/batches
func TestAccountEventsCost(t *testing.T) {
	if os.Getenv("PMX_PGCOST") == "" {
		t.Skip("set PMX_PGCOST to measure")
	}
	ctx := context.Background()
	st := newTestStore(t)
	conn := testConn(t, st)
	var backend int
	if err := conn.QueryRow(ctx, `select pg_backend_pid()`).Scan(&backend); err != nil {
		t.Fatal(err)
	}
	const accounts = 31
	var ids []int64
	for i := range accounts {
		ids = append(ids, dbtest.Account(t, st.Pool, fmt.Sprintf("cost%d", i), 1_000))
	}
	cpu := func() time.Duration {
		raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", backend))
		if err != nil {
			t.Fatal(err)
		}
		f := strings.Fields(string(raw[strings.LastIndexByte(string(raw), ')')+2:]))
		utime, _ := strconv.ParseInt(f[11], 10, 64)
		stime, _ := strconv.ParseInt(f[12], 10, 64)
		return time.Duration(utime+stime) * 10 * time.Millisecond // USER_HZ is 100 on Linux
	}
	// A JSON array of two events of about size bytes: the store stores it as it is.
	payload := func(size int) []byte {
		return []byte(`[{"type":"fill","x":"` + strings.Repeat("x", size/2-30) + `"},{"type":"fill","x":"` +
			strings.Repeat("x", size/2-30) + `"}]`)
	}
	variants := []struct {
		name   string
		events []byte
	}{{"no account events", nil}, {"2 events an account, 150 bytes", payload(150)}, {"2 events an account, 700 bytes", payload(700)}}
	run := func(events []byte) (time.Duration, time.Duration) {
		cpu0, start, n := cpu(), time.Now(), 0
		for n < 20 || time.Since(start) < 2*time.Second {
			b := &Batch{Now: time.Now().UTC(), Unlocked: true}
			for _, id := range ids {
				d := CashDelta{Account: id} // the row is updated all the same, as a batch's cash part does
				if events != nil {
					d.EventCount, d.Events = 2, events
				}
				b.Cash = append(b.Cash, d)
			}
			if _, err := CommitBatch(ctx, conn, b); err != nil {
				t.Fatal(err)
			}
			n++
		}
		return (cpu() - cpu0) / time.Duration(n), time.Since(start) / time.Duration(n)
	}
	for _, v := range variants {
		run(v.events) // warm: prepared statements, generic plans
	}
	t.Logf("| round | %s | %s | %s |", variants[0].name, variants[1].name, variants[2].name)
	t.Logf("|---|---|---|---|")
	for round := 1; round <= 3; round++ {
		var cells []string
		for _, v := range variants {
			c, w := run(v.events)
			cells = append(cells, fmt.Sprintf("%.0f µs CPU, %.0f µs wall", float64(c.Microseconds()), float64(w.Microseconds())))
		}
		t.Logf("| %d | %s |", round, strings.Join(cells, " | "))
	}
}
