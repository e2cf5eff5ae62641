package bench

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestCommitFloor runs the commit floor briefly on a real private cluster and checks that its
// figures are sane, never how fast anything is.
func TestCommitFloor(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	gaps := []time.Duration{0, 2 * time.Millisecond}
	res, err := CommitFloor(ctx, CommitFloorOptions{Gaps: gaps, Count: 5}) // in a temporary folder it removes
	if err != nil {
		t.Fatal(err)
	}
	if pg := res.Machine.Postgres; pg.Fsync != "on" || pg.SynchronousCommit != "on" {
		t.Errorf("the cluster is not durable: %+v", pg)
	}
	if len(res.Rows) != len(gaps) || res.Count != 5 {
		t.Fatalf("%d rows of %d, want %d of 5", len(res.Rows), res.Count, len(gaps))
	}
	for i, r := range res.Rows {
		switch {
		case r.Gap != gaps[i] || r.Idle < r.Gap:
			t.Errorf("row %d: gap %v idled %v, want gap %v and at least as long an idle", i, r.Gap, r.Idle, gaps[i])
		case !(0 < r.RoundTripP50 && r.RoundTripP50 <= r.RoundTripP90):
			t.Errorf("row %d: round trip p50 %v p90 %v", i, r.RoundTripP50, r.RoundTripP90)
		case !(0 < r.CommitP50 && r.CommitP50 <= r.CommitP90 && r.CommitP90 <= r.CommitP99):
			t.Errorf("row %d: commit p50 %v p90 %v p99 %v", i, r.CommitP50, r.CommitP90, r.CommitP99)
		}
	}
	var out bytes.Buffer
	if err := res.WriteText(&out); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"fsync on", "commit p50", "2ms "} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("the table lacks %q:\n%s", want, out.String())
		}
	}
}

// TestCommitFloorRefusesBadOptions checks that nothing starts for a run that cannot measure, and
// that the error names the flag to mend.
func TestCommitFloorRefusesBadOptions(t *testing.T) {
	for _, c := range []struct {
		o    CommitFloorOptions
		want string
	}{
		{CommitFloorOptions{Gaps: DefaultCommitGaps}, "--count"},
		{CommitFloorOptions{Gaps: nil, Count: 5}, "--gaps"},
		{CommitFloorOptions{Gaps: []time.Duration{0, -time.Millisecond}, Count: 5}, "gap -1ms is negative"},
	} {
		_, err := CommitFloor(context.Background(), c.o)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: error %v, want one that says %q", c.o, err, c.want)
		}
	}
}

func TestQuantile(t *testing.T) {
	sorted := []time.Duration{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}
	for _, c := range []struct {
		q    float64
		want time.Duration
	}{{0.5, 5}, {0.9, 9}, {0.99, 10}, {0, 1}, {1, 10}} {
		if got := quantile(sorted, c.q); got != c.want {
			t.Errorf("quantile(%v) = %v, want %v", c.q, got, c.want)
		}
	}
	if got := quantile([]time.Duration{7}, 0.99); got != 7 {
		t.Errorf("quantile of one = %v", got)
	}
}

// TestCommitFloorKeepsItsCluster runs the commit floor twice on a cluster kept in a folder of the
// caller's (--data-dir): the second run starts its table afresh.
func TestCommitFloorKeepsItsCluster(t *testing.T) {
	dir, err := os.MkdirTemp("", "pmx-commit-floor-test-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o711); err != nil { // Postgres's own user must enter it when tests run as root
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for run := range 2 {
		res, err := CommitFloor(ctx, CommitFloorOptions{Gaps: []time.Duration{0}, Count: 2, Dir: dir})
		if err != nil {
			t.Fatalf("run %d: %v", run+1, err)
		}
		if len(res.Rows) != 1 || res.Rows[0].CommitP50 <= 0 {
			t.Fatalf("run %d: %+v", run+1, res.Rows)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "postgres")); err != nil {
		t.Errorf("the cluster is not kept in the folder: %v", err)
	}
}
