package shard

import (
	"context"
	"log/slog"
	"slices"
	"testing"
	"time"

	"github.com/pmx-dev/pmx/internal/cmd/process"
	"github.com/pmx-dev/pmx/internal/logtest"
	"github.com/pmx-dev/pmx/internal/pgtest"
	"github.com/pmx-dev/pmx/internal/poll"
	pmxshard "github.com/pmx-dev/pmx/internal/shard"
	"github.com/pmx-dev/pmx/internal/store"
	"github.com/pmx-dev/pmx/internal/store/bookkeeping"
	"github.com/pmx-dev/pmx/internal/storetest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// The messages of handOver's that the tests look for in a shard's log.
const (
	waitingMsg = "waiting for the pool's successors"
	handedMsg  = "handed the markets left over to the pool's successors"
)

// shardProcess is a pmx shard run in the test's own process (runShard, as its pod runs it), on a
// free port; stop is its SIGTERM.
type shardProcess struct {
	name string
	stop context.CancelFunc
	done chan struct{}
	err  error
	logs *logtest.Buffer
}

// startShard starts pmx shard name in pool on the database at url; the process is stopped, and
// waited for, when t ends.
func startShard(t *testing.T, url, name, pool string) *shardProcess {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	p := &shardProcess{name: name, stop: cancel, done: make(chan struct{}), logs: &logtest.Buffer{}}
	o := shardOptions{maxOpenOrders: pmxshard.DefaultMaxOpenOrders, eventRetention: pmxshard.DefaultEventRetention, shards: 1,
		databaseURL: url, name: name, pool: pool, addr: "127.0.0.1:0", internalToken: "stop-test-internal-token",
		process: process.Options{LogLevel: "info"}, logger: slog.New(slog.NewTextHandler(p.logs, nil))}
	go func() {
		defer close(p.done)
		p.err = runShard(ctx, o)
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case <-p.done:
		case <-time.After(time.Minute):
			t.Errorf("shard %s still running a minute after its stop; its log:\n%s", name, p.logs)
		}
	})
	return p
}

// wait waits for the process to return, for at most timeout, and returns its error.
func (p *shardProcess) wait(t *testing.T, timeout time.Duration) error {
	t.Helper()
	select {
	case <-p.done:
		return p.err
	case <-time.After(timeout):
		t.Fatalf("shard %s still running %v after its stop; its log:\n%s", p.name, timeout, p.logs)
		return nil
	}
}

// stopRig is a migrated database and a store on it, for shard processes to share.
type stopRig struct {
	url string
	st  *store.Store
}

func newStopRig(t *testing.T) stopRig {
	t.Helper()
	url := pgtest.NewDatabase(t, pgtest.Shared(t))
	st, err := store.Open(t.Context(), url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(st.Close)
	if _, _, err := st.Migrate(t.Context()); err != nil {
		t.Fatal(err)
	}
	return stopRig{url: url, st: st}
}

// waitLive waits until the shard is registered and live.
func (r stopRig) waitLive(t *testing.T, name string) {
	t.Helper()
	poll.Wait(t, 30*time.Second, "shard "+name+" to be live", func() bool {
		live, err := r.st.LiveShards(t.Context(), time.Minute)
		return err == nil && slices.ContainsFunc(live, func(s bookkeeping.Shard) bool { return s.Name == name })
	})
}

// ownedMarket creates an OPEN market of pool and gives it to shard, returning its ownership.
func (r stopRig) ownedMarket(t *testing.T, pool, shard string) store.Ownership {
	t.Helper()
	id := storetest.Market(t, r.st)
	if _, err := r.st.SetMarketPlacement(t.Context(), id, pool, false); err != nil {
		t.Fatal(err)
	}
	o, err := r.st.Assign(t.Context(), id, shard)
	if err != nil {
		t.Fatal(err)
	}
	return o
}

// TestStopWaitsForThePoolsSuccessors: a shard of pool p that owns a market stops while p expects
// another shard, p-shard-1, that is not live yet (a ShardPool replacing the chart's shards, whose
// pods start as the old ones stop). The stopping shard waits for it rather than releasing the
// market, and once p-shard-1 has started hands it the market by the planned handoff: one move,
// p-shard-1's, never without an owner.
func TestStopWaitsForThePoolsSuccessors(t *testing.T) {
	r := newStopRig(t)
	ctx := t.Context()
	if err := r.st.ExpectShards(ctx, "p", []string{"p-shard-0", "p-shard-1"}); err != nil {
		t.Fatal(err)
	}
	old := startShard(t, r.url, "p-shard-0", "p")
	r.waitLive(t, "p-shard-0")
	before := r.ownedMarket(t, "p", "p-shard-0")

	old.stop()
	// Only once it waits does p-shard-1 start: the handoff that finds it is the wait's.
	poll.Wait(t, 30*time.Second, "p-shard-0 to wait for its pool's successors", func() bool { return old.logs.Says(waitingMsg) })
	startShard(t, r.url, "p-shard-1", "p")
	if err := old.wait(t, time.Minute); err != nil {
		t.Fatalf("p-shard-0 stopped with %v", err)
	}
	o, err := r.st.Owner(ctx, before.Market)
	if err != nil || o.Shard != "p-shard-1" || o.Epoch != before.Epoch+1 {
		t.Fatalf("the market after p-shard-0 stopped: %+v (%v); want p-shard-1's at epoch %d (one planned move); p-shard-0's log:\n%s",
			o, err, before.Epoch+1, old.logs)
	}
	if !old.logs.Says(handedMsg) {
		t.Errorf("p-shard-0's log does not say it handed the market to a successor:\n%s", old.logs)
	}
	// The pool deleted: p-shard-1, stopped as the test ends, has nothing to wait for.
	if err := r.st.ExpectShards(ctx, "p", nil); err != nil {
		t.Fatal(err)
	}
}

// TestStopWithoutSuccessors: a stopping shard that no live shard of its pool can relieve waits for
// nothing, and its market is released as before, when nothing is coming: its pool expects no
// other shard (a single-replica pool's rolling update, whose new pod has the stopping one's name
// and starts only once it has exited), or expects nothing at all (the chart's own StatefulSet,
// which no ShardPool runs, scaled down).
func TestStopWithoutSuccessors(t *testing.T) {
	r := newStopRig(t)
	if err := r.st.ExpectShards(t.Context(), "q", []string{"q-shard-0"}); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ what, name, pool string }{
		{"the pool expects the stopping shard alone", "q-shard-0", "q"},
		{"the pool expects nothing", "pmx-shard-0", "default"},
	} {
		t.Run(c.name, func(t *testing.T) {
			ctx := t.Context()
			p := startShard(t, r.url, c.name, c.pool)
			r.waitLive(t, c.name)
			before := r.ownedMarket(t, c.pool, c.name)
			p.stop()
			if err := p.wait(t, time.Minute); err != nil {
				t.Fatalf("%s stopped with %v", c.name, err)
			}
			// It read the expectation for successorsLag and found nothing to wait for.
			if p.logs.Says(waitingMsg) {
				t.Errorf("%s: %s waited for successors; its log:\n%s", c.what, c.name, p.logs)
			}
			o, err := r.st.Owner(ctx, before.Market)
			if err != nil || o.Shard != "" || o.Epoch != before.Epoch+1 {
				t.Errorf("%s: the market after %s stopped: %+v (%v); want released at epoch %d", c.what, c.name, o, err, before.Epoch+1)
			}
		})
	}
}

// TestHandOver tables handOver's rules with scripted reads of the pool's successors (one entry a
// read; the last repeats) and a handoff that leaves one unit for want of a live shard until a
// given read has been made: no wait when nothing is expected (after successorsLag), a wait that
// hands over once a successor's name leaves the list, an expectation written only after the
// first handoff, and a wait given up at successorsWait. stopped is set in the past for the cases
// that end at a bound, so that each takes well under a second.
func TestHandOver(t *testing.T) {
	for _, c := range []struct {
		name     string
		since    time.Duration // how long before the call the SIGTERM came (stopped)
		reads    [][]string
		live     int // the read (from 1) from which the handoff finds a live shard; 0: never
		handOffs int
		handed   int
		says     []string
	}{
		{"nothing expected", successorsLag - 300*time.Millisecond, [][]string{nil}, 0, 1, 0, nil},
		{"a successor goes live", 0, [][]string{{"a", "b"}, {"a", "b"}, {"b"}}, 3, 2, 1, []string{waitingMsg, handedMsg}},
		// The SIGTERM set ahead, so that no stall of a busy machine ends successorsLag first.
		{"the expectation written late", -time.Minute, [][]string{nil, nil, {"a"}, {}}, 4, 3, 1, []string{waitingMsg, handedMsg}},
		{"none comes in time", successorsWait - 300*time.Millisecond, [][]string{{"a"}}, 0, 1, 0, []string{waitingMsg, "gave up waiting"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			reads, handOffs := 0, 0
			successors := func(context.Context) ([]string, error) {
				reads++
				return c.reads[min(reads, len(c.reads))-1], nil
			}
			handOff := func(context.Context) (handed, stayed int) {
				handOffs++
				if c.live > 0 && reads >= c.live {
					return 1, 0
				}
				return 0, 1
			}
			logs := &logtest.Buffer{}
			handed := handOver(t.Context(), time.Now().Add(-c.since), successors, handOff, slog.New(slog.NewTextHandler(logs, nil)))
			if handed != c.handed || handOffs != c.handOffs {
				t.Errorf("handed %d markets in %d handoffs; want %d in %d", handed, handOffs, c.handed, c.handOffs)
			}
			for _, msg := range c.says {
				if !logs.Says(msg) {
					t.Errorf("the log does not say %q:\n%s", msg, logs)
				}
			}
			if len(c.says) == 0 && logs.String() != "" {
				t.Errorf("logged while waiting for nothing:\n%s", logs)
			}
		})
	}
}
