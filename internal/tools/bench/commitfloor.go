package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pmx-dev/pmx/internal/clock"
	"github.com/pmx-dev/pmx/internal/tools/loadgen"
)

// The commit floor: what one durable Postgres transaction costs on this machine, in the shape of
// the smallest batch a shard commits (begin, one insert and commit, sent in one round trip), on a
// fresh private cluster with the settings the bench gives pmx dev (fsync, synchronous_commit and
// full_page_writes on). It is timed back to back and after idle gaps: on some machines, virtual
// ones above all, a round trip and a flush to disk cost more after a pause, and at a low rate every
// placement comes after one. A bare round trip (select 1) is timed the same way, to tell the wake-up
// from the flush.

// DefaultCommitGaps are the idle gaps bench commit times transactions after: back to back, about
// the gap between batches at 1,000 orders/s, and about the gap at 100 orders/s.
var DefaultCommitGaps = []time.Duration{0, time.Millisecond, 10 * time.Millisecond}

// CommitFloorOptions configures CommitFloor.
type CommitFloorOptions struct {
	Gaps   []time.Duration // the idle time before each transaction: one row of the result each
	Count  int             // transactions (and as many round trips) timed at each gap
	Dir    string          // where the cluster goes; "": a temporary folder, removed at the end
	Logger *slog.Logger
}

// CommitFloorRow is what was measured at one gap. Durations are those of one round trip each,
// from the send to the last answer.
type CommitFloorRow struct {
	Gap          time.Duration `json:"gap"`
	Idle         time.Duration `json:"idle"`         // the median idle time measured before a send
	RoundTripP50 time.Duration `json:"roundTripP50"` // select 1
	RoundTripP90 time.Duration `json:"roundTripP90"`
	CommitP50    time.Duration `json:"commitP50"` // begin; insert one row; commit
	CommitP90    time.Duration `json:"commitP90"`
	CommitP99    time.Duration `json:"commitP99"`
}

// CommitFloorResult is what CommitFloor measured.
type CommitFloorResult struct {
	Machine Machine          `json:"machine"` // with the cluster's Postgres
	Count   int              `json:"count"`
	Rows    []CommitFloorRow `json:"rows"`
}

// CommitFloor starts a private cluster and times, at each gap, o.Count round trips and o.Count
// durable transactions on one connection, alternating them, each after the gap.
func CommitFloor(ctx context.Context, o CommitFloorOptions) (_ *CommitFloorResult, err error) {
	switch {
	case o.Count < 1:
		return nil, fmt.Errorf("bench commit: %d transactions per gap: give at least 1 (--count)", o.Count)
	case len(o.Gaps) == 0:
		return nil, errors.New("bench commit: no gap to time after: give at least one (--gaps 0,1ms)")
	}
	if i := slices.IndexFunc(o.Gaps, func(g time.Duration) bool { return g < 0 }); i >= 0 {
		return nil, fmt.Errorf("bench commit: gap %v is negative: give pauses of 0 or more (--gaps)", o.Gaps[i])
	}
	dir := o.Dir
	if dir == "" {
		if dir, err = os.MkdirTemp("", "pmx-commit-floor-"); err != nil {
			return nil, err
		}
		defer os.RemoveAll(dir)
		// Postgres runs as its own user when pmx runs as root: it must reach its data folder.
		if err := os.Chmod(dir, 0o711); err != nil {
			return nil, err
		}
	}
	_, stats, info, stopPostgres, err := startPostgres(ctx, dir, maxConnections(1, 0), false, nil, o.Logger)
	defer func() {
		if stopErr := stopPostgres(); stopErr != nil && err == nil {
			err = stopErr
		}
	}()
	if err != nil {
		return nil, err
	}
	res := &CommitFloorResult{Machine: machineInfo(), Count: o.Count}
	res.Machine.Postgres = info
	conn := stats.conn
	sleeper := clock.NewSleeper()
	defer sleeper.Close()
	// A cluster kept in --data-dir from an earlier run has the table already: start it afresh.
	if _, err := conn.Exec(ctx, `drop table if exists commit_floor; create table commit_floor (
		id bigint generated always as identity primary key,
		value bigint not null,
		created_at timestamptz not null default now())`); err != nil {
		return nil, fmt.Errorf("while creating the commit floor's table: %w", err)
	}
	for _, gap := range o.Gaps {
		trips, commits := make([]time.Duration, 0, o.Count), make([]time.Duration, 0, o.Count)
		idles := make([]time.Duration, 0, 2*o.Count)
		for i := range o.Count {
			idle, d, err := timeAfter(ctx, sleeper, gap, conn, func(q *pgx.Batch) { q.Queue("select 1") })
			if err != nil {
				return nil, err
			}
			trips, idles = append(trips, d), append(idles, idle)
			if idle, d, err = timeAfter(ctx, sleeper, gap, conn, func(q *pgx.Batch) {
				q.Queue("begin")
				q.Queue("insert into commit_floor (value) values ($1)", int64(i))
				q.Queue("commit")
			}); err != nil {
				return nil, err
			}
			commits, idles = append(commits, d), append(idles, idle)
		}
		slices.Sort(trips)
		slices.Sort(commits)
		slices.Sort(idles)
		res.Rows = append(res.Rows, CommitFloorRow{Gap: gap, Idle: quantile(idles, 0.5),
			RoundTripP50: quantile(trips, 0.5), RoundTripP90: quantile(trips, 0.9),
			CommitP50: quantile(commits, 0.5), CommitP90: quantile(commits, 0.9), CommitP99: quantile(commits, 0.99)})
	}
	return res, nil
}

// timeAfter idles for gap, then sends the statements queue queues in one round trip. It returns
// how long it idled and how long their answers took.
func timeAfter(ctx context.Context, sleeper *clock.Sleeper, gap time.Duration, conn *pgx.Conn, queue func(*pgx.Batch)) (idle, took time.Duration, err error) {
	var q pgx.Batch
	queue(&q)
	idleFrom := time.Now()
	for {
		if err := ctx.Err(); err != nil {
			return 0, 0, err
		}
		left := gap - time.Since(idleFrom)
		if left <= 0 {
			break
		}
		sleeper.Sleep(min(left, 100*time.Millisecond)) // a long gap still sees Ctrl-C
	}
	start := time.Now()
	if err := conn.SendBatch(ctx, &q).Close(); err != nil {
		return 0, 0, fmt.Errorf("bench commit: %w", err)
	}
	return start.Sub(idleFrom), time.Since(start), nil
}

// quantile is the q-quantile of sorted durations (nearest rank).
func quantile(sorted []time.Duration, q float64) time.Duration {
	i := int(q*float64(len(sorted))+0.5) - 1
	return sorted[max(0, min(len(sorted)-1, i))]
}

// WriteText prints the result as a short table.
func (r *CommitFloorResult) WriteText(w io.Writer) error {
	var b strings.Builder
	fmt.Fprintf(&b, "commit floor: PostgreSQL %s (fsync %s, synchronous_commit %s), fresh and private; %d cores (%s), %s\n",
		r.Machine.Postgres.Version, r.Machine.Postgres.Fsync, r.Machine.Postgres.SynchronousCommit, r.Machine.Cores, r.Machine.CPU, r.Machine.OS)
	fmt.Fprintf(&b, "%d round trips and %d transactions per gap, one connection, each after the gap\n\n", r.Count, r.Count)
	const row = "%-8s %9s %14s %9s   %12s %9s %9s\n"
	fmt.Fprintf(&b, row, "gap", "idle", "select 1 p50", "p90", "commit p50", "p90", "p99")
	lat := loadgen.FormatLatency
	for _, x := range r.Rows {
		fmt.Fprintf(&b, row, x.Gap.String(), lat(x.Idle), lat(x.RoundTripP50), lat(x.RoundTripP90), lat(x.CommitP50), lat(x.CommitP90), lat(x.CommitP99))
	}
	b.WriteString("\nidle: the median pause measured before a send;\n" +
		"select 1: one round trip, nothing written; commit: begin, an insert of one row and commit, in one\n" +
		"round trip, as a shard's smallest batch; it waits for its WAL to reach the disk\n")
	_, err := io.WriteString(w, b.String())
	return err
}
