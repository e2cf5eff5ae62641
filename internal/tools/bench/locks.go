package bench

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
)

// LockSampleInterval is how often a run's lock waits are sampled (pg_stat_activity).
const LockSampleInterval = 100 * time.Millisecond

// LockWaits is how many of Postgres's client backends were waiting on locks during a run's load,
// and what all of them were doing, from pg_stat_activity, sampled every LockSampleInterval on the
// bench's own connection (never counted itself).
//
// A backend waiting on a row shows wait_event_type 'Lock' with wait_event 'transactionid' (it
// waits for the transaction that holds the row, whose id Postgres keeps in the row itself: the
// first to want a locked row waits so) or 'tuple' (it queues behind that first waiter, for the
// row's place in line). Those two are "row locks" here. A 'transactionid' wait also arises when
// an insert meets a uniqueness conflict with an uncommitted row, which is a wait on a row too.
// Every other 'Lock' wait (on a relation, an advisory lock, extending a table, ...) is counted
// only in the Any figures. Backends waiting on Postgres's internal LWLocks (WALWrite, ...) are not
// waiting on a lock in this sense and are counted in neither.
type LockWaits struct {
	Samples int `json:"samples"`
	// IntervalMs is the time between samples, in milliseconds.
	IntervalMs float64 `json:"intervalMs"`
	// RowMean and RowMax are the backends waiting on row locks, per sample: the mean and the most.
	RowMean float64 `json:"rowLocksMean"`
	RowMax  int     `json:"rowLocksMax"`
	// AnyMean and AnyMax are those waiting on any lock (wait_event_type 'Lock'), row locks too.
	AnyMean float64 `json:"locksMean"`
	AnyMax  int     `json:"locksMax"`
	// Backends is what the client backends not idle were doing, mean per sample, by activity (see
	// activityOf): "running", "idle in transaction", or the wait they were in as
	// "wait_event_type:wait_event" ("IO:WALSync", "LWLock:WALWrite", "Lock:transactionid", ...).
	// An activity seen in no sample is absent.
	Backends map[string]float64 `json:"backendsMean,omitempty"`
}

// lockSample is one reading of pg_stat_activity: backends waiting on row locks, on any lock, and
// the backends not idle by activity.
type lockSample struct {
	row, lock int
	backends  map[string]int
}

// activityOf names what a client backend is doing from its pg_stat_activity row: "running" when
// active with no wait event (on a CPU, or in a wait Postgres does not report), its state when it
// is not active ("idle in transaction": its transaction waits for the client, pmx or the round
// trip to it), else its wait as "wait_event_type:wait_event".
func activityOf(state, waitType, wait string) string {
	switch {
	case state != "active":
		return state
	case waitType == "":
		return "running"
	}
	return waitType + ":" + wait
}

// lockTally adds up lock samples into LockWaits.
type lockTally struct {
	interval  time.Duration
	n         int
	row, lock int64 // sums
	rowMax    int
	lockMax   int
	backends  map[string]int64 // sums
}

func (t *lockTally) add(s lockSample) {
	t.n++
	t.row += int64(s.row)
	t.lock += int64(s.lock)
	t.rowMax, t.lockMax = max(t.rowMax, s.row), max(t.lockMax, s.lock)
	if t.backends == nil {
		t.backends = make(map[string]int64)
	}
	for a, n := range s.backends {
		t.backends[a] += int64(n)
	}
}

// waits is the tally so far; with no sample its means and maxima are 0.
func (t *lockTally) waits() LockWaits {
	w := LockWaits{Samples: t.n, IntervalMs: float64(t.interval) / float64(time.Millisecond), RowMax: t.rowMax, AnyMax: t.lockMax}
	if t.n > 0 {
		w.RowMean = float64(t.row) / float64(t.n)
		w.AnyMean = float64(t.lock) / float64(t.n)
		if len(t.backends) > 0 {
			w.Backends = make(map[string]float64, len(t.backends))
		}
		for a, n := range t.backends {
			w.Backends[a] = float64(n) / float64(t.n)
		}
	}
	return w
}

// lockWaits reads what the client backends but ours that are not idle are doing: how many wait
// on row locks and on any lock, and how many are in each activity (see LockWaits). Reading
// pg_stat_activity takes no lock and touches no table: it copies the backends' status from shared
// memory.
func (p *pgStats) lockWaits(ctx context.Context) (lockSample, error) {
	s := lockSample{backends: make(map[string]int)}
	rows, err := p.conn.Query(ctx, `select coalesce(state, ''), coalesce(wait_event_type, ''), coalesce(wait_event, ''), count(*)
		from pg_stat_activity
		where backend_type = 'client backend' and pid <> pg_backend_pid() and state <> 'idle'
		group by 1, 2, 3`)
	if err != nil {
		return s, fmt.Errorf("while reading the backends' activity (pg_stat_activity): %w", err)
	}
	var state, waitType, wait string
	var n int
	_, err = pgx.ForEachRow(rows, []any{&state, &waitType, &wait, &n}, func() error {
		if waitType == "Lock" {
			s.lock += n
			if wait == "transactionid" || wait == "tuple" {
				s.row += n
			}
		}
		s.backends[activityOf(state, waitType, wait)] += n
		return nil
	})
	if err != nil {
		return s, fmt.Errorf("while reading the backends' activity (pg_stat_activity): %w", err)
	}
	return s, nil
}

// lockSampler samples the lock waits on the bench's connection every interval until stopped; the
// connection is the sampler's alone from start to stop.
type lockSampler struct {
	stopCh chan struct{}
	done   chan struct{}
	once   sync.Once

	mu    sync.Mutex
	tally lockTally
	err   error
}

// startLockSampler takes a first sample at once, then one every interval. Each query runs on a
// context that is never cancelled (a cancelled query would close the connection, which the run
// reads its final counters on), bounded by a minute.
func startLockSampler(p *pgStats, interval time.Duration) *lockSampler {
	s := &lockSampler{stopCh: make(chan struct{}), done: make(chan struct{}), tally: lockTally{interval: interval}}
	go func() {
		defer close(s.done)
		tick := time.NewTicker(interval)
		defer tick.Stop()
		for {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			sample, err := p.lockWaits(ctx)
			cancel()
			s.mu.Lock()
			if err != nil {
				s.err = err
			} else {
				s.tally.add(sample)
			}
			s.mu.Unlock()
			if err != nil {
				return
			}
			select {
			case <-s.stopCh:
				return
			case <-tick.C:
			}
		}
	}()
	return s
}

// samples is how many samples were taken so far.
func (s *lockSampler) samples() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.tally.n
}

// stop stops the sampling, waits for a query in flight to finish (then the connection is free
// again) and returns the tally, or the error that ended the sampling early. It may be called again.
func (s *lockSampler) stop() (LockWaits, error) {
	s.once.Do(func() { close(s.stopCh) })
	<-s.done
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.tally.waits(), s.err
}
