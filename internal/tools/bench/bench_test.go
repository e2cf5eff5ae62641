package bench

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pmx-dev/pmx/engine"
	"github.com/pmx-dev/pmx/internal/tools/loadgen"
)

// testWriter sends progress lines to the test log.
type testWriter struct{ t testing.TB }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// TestRunSmoke builds pmx and benches it for a moment with each mix: a real pmx dev on a real
// durable cluster. It checks that the figures are sane, never how fast anything is.
func TestRunSmoke(t *testing.T) {
	bin := buildPMX(t)
	for _, mix := range loadgen.Mixes {
		t.Run(string(mix), func(t *testing.T) { smoke(t, bin, mix) })
	}
	t.Run("distributed", func(t *testing.T) { smokeDistributed(t, bin) })
}

// buildPMX builds pmx into the test's temporary folder.
func buildPMX(t *testing.T) string {
	bin := filepath.Join(t.TempDir(), "pmx")
	// Without symbols the (large) binary links in half the time.
	if out, err := exec.Command("go", "build", "-ldflags=-s -w", "-o", bin, "github.com/pmx-dev/pmx/cmd/pmx").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// smokeDistributed runs a short distributed bench: a kube-apiserver and etcd (from `make
// k8s-bins`, as the tests' control planes), the operator, two shards and two fronts.
func smokeDistributed(t *testing.T, bin string) {
	assets := os.Getenv("KUBEBUILDER_ASSETS")
	if assets == "" {
		found, _ := filepath.Glob(filepath.Join("..", "bin", "k8s", "*"))
		if len(found) == 0 {
			t.Fatal("no kube-apiserver and etcd: run make k8s-bins (make test does)")
		}
		assets = found[len(found)-1]
	}
	res, text := run(t, Options{PMX: bin, Bots: 4, Markets: 2, Duration: time.Second, Command: "test",
		Distributed: true, Shards: 2, Fronts: 2, KubeAssets: assets, ShardArgs: []string{"--shards=1"},
		Fees: &engine.Fees{Taker: 10000, Maker: 0}})
	if !strings.Contains(text, "2 pmx shard, 2 pmx api") || res.Distributed == nil {
		t.Errorf("the report does not describe the distributed exchange: %+v", res.Distributed)
	}
	checkFees(t, res, text)
	checkRun(t, res, loadgen.MixBasic)
}

// run runs a bench (with at most 3 minutes for it) and returns its result and report.
func run(t *testing.T, o Options) (*Result, string) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	o.Progress = testWriter{t}
	res, err := Run(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	var text bytes.Buffer
	if err := res.WriteText(&text); err != nil {
		t.Fatal(err)
	}
	t.Log("\n" + text.String())
	return res, text.String()
}

// smoke runs a short bench of pmx dev; the basic mix's also reads pg_stat_statements, gives its
// Postgres a setting and warms its WAL, the others' run pmx dev with two shards through the latency
// proxy, after a warm-up.
func smoke(t *testing.T, bin string, mix loadgen.Mix) {
	statements := mix == loadgen.MixBasic
	o := Options{PMX: bin, Bots: 4, Markets: 2, Duration: time.Second, Mix: mix, Command: "test", Statements: statements}
	if statements {
		o.PGSettings = map[string]string{"max_wal_size": "2GB"}
		o.WarmWALMiB = 128
	} else {
		o.DevShards, o.DBLatency = 2, time.Millisecond
		o.Fees = &engine.Fees{Taker: 10000, Maker: -5000}
		o.Warmup = 500 * time.Millisecond
	}
	res, text := run(t, o)
	checkRun(t, res, mix)
	// With a warm-up, its placements are reported apart from the run's; checkRun checked that
	// the run's figures, taken after it, still add up.
	if w := res.Runs[0].Loadgen.Warmup; statements != (w == nil) || !statements && (w.Orders <= 0 || w.Failed != 0 ||
		res.WarmupSeconds != 0.5 || !strings.Contains(text, "per run after a warm-up of 500ms") || !strings.Contains(text, "warm-up, run 1: 500ms before it")) ||
		statements && strings.Contains(text, "warm-up,") {
		t.Errorf("the warm-up: %+v, %vs in the report", w, res.WarmupSeconds)
	}
	if !statements {
		checkFees(t, res, text)
	} else if res.Runs[0].FeesTaken != nil || res.Fees != nil {
		t.Errorf("fees reported unasked: %+v, %+v", res.Fees, res.Runs[0].FeesTaken)
	}
	if !statements && (res.DevShards != 2 || res.DBLatencyUs != 1000 || res.DevPool < 2 || !strings.Contains(text, "pmx dev with 2 shards") ||
		!strings.Contains(text, "adding 1.00ms to every round trip")) {
		t.Errorf("the report does not say pmx dev's shards and the database's latency: %d shards, %dµs", res.DevShards, res.DBLatencyUs)
	}
	if sh := res.Runs[0].Shards; !statements && (sh == nil || sh.Shards != 2) {
		t.Errorf("pmx dev ran %+v shards, want 2", sh)
	}
	// 128 MiB of WAL fill eight files of 16 MiB, which the checkpoint after them recycles as the
	// next ones (pmx's migrations and the bench's markets and accounts then use up one at most); a
	// fresh cluster has at most the one it preallocates.
	switch r := res.Runs[0]; {
	case statements && (r.WALFilesReady < 5 || res.WarmWALMiB != 128 || !strings.Contains(text, "warmed before each run: 128 MiB")):
		t.Errorf("a warmed WAL: %d files ready at the start, %d MiB in the report", r.WALFilesReady, res.WarmWALMiB)
	case !statements && (r.WALFilesReady > 1 || res.WarmWALMiB != 0 || strings.Contains(text, "warmed before")):
		t.Errorf("a cold WAL: %d files ready at the start, %d MiB warmed in the report", r.WALFilesReady, res.WarmWALMiB)
	case !strings.Contains(text, fmt.Sprintf("WAL files: %d ready at the start, ", r.WALFilesReady)):
		t.Errorf("the report does not give the WAL files")
	}
	if got := res.Machine.Postgres.Settings; statements && (got["max_wal_size"] != "2GB" || !strings.Contains(text, "max_wal_size 2GB")) {
		t.Errorf("Postgres took the settings %v, want max_wal_size 2GB in them and in the report", got)
	}
	if st := res.Runs[0].Statements; !statements && st != nil {
		t.Errorf("statements reported unasked: %+v", st)
	} else if statements {
		checkStatements(t, res.Runs[0], text)
	}
}

// checkStatements checks a run's statements: every order went through a batch, whose accounts'
// statement (cash, one a transaction at most) must be among the costliest, within the time of all
// statements.
func checkStatements(t *testing.T, r RunResult, text string) {
	t.Helper()
	st := r.Statements
	if st == nil || len(st.Top) == 0 || !(st.ExecUsPerOrder > 0) {
		t.Fatalf("no statements measured: %+v", st)
	}
	var sum float64
	var cash *Statement
	for i, s := range st.Top {
		sum += s.ExecUsPerOrder
		if strings.HasPrefix(s.Kind, "cash") {
			cash = &st.Top[i]
		}
	}
	switch {
	case cash == nil:
		t.Errorf("the batches' accounts statement is not among the costliest: %+v", st.Top)
	case cash.Calls <= 0 || !(cash.ExecUsPerCall > 0) || cash.Calls > r.Transactions:
		t.Errorf("the accounts statement: %+v, in %d transactions", *cash, r.Transactions)
	case sum > st.ExecUsPerOrder*1.0001:
		t.Errorf("the costliest statements take %.1fµs an order, more than all statements' %.1fµs", sum, st.ExecUsPerOrder)
	case !strings.Contains(text, "statements, run 1:"):
		t.Errorf("the report does not show the statements")
	}
}

// checkRun checks the one closed-loop run of a smoke bench of 4 bots on 2 markets.
func checkRun(t *testing.T, res *Result, mix loadgen.Mix) {
	t.Helper()
	if len(res.Runs) != 1 || res.Mix != mix {
		t.Fatalf("%d runs of the %s mix, want 1 of %s", len(res.Runs), res.Mix, mix)
	}
	r := res.Runs[0]
	switch {
	case r.Mode != "closed" || r.Loadgen == nil || r.Loadgen.Markets != 2 || r.Loadgen.Bots != 4 || r.Loadgen.Mix != mix:
		t.Errorf("the run is not the one asked for: %+v", r)
	case r.Orders <= 0 || r.OrdersPerSec <= 0 || r.P50Us <= 0 || r.P99Us < r.P50Us:
		t.Errorf("orders %d, %.1f/s, p50 %dµs, p99 %dµs", r.Orders, r.OrdersPerSec, r.P50Us, r.P99Us)
	case r.Failed != 0:
		t.Errorf("%d requests failed: %+v", r.Failed, r.Loadgen.Errors)
	case !(r.TransactionsPerOrder > 0 && r.TransactionsPerOrder < 10):
		t.Errorf("%.2f transactions per order (%d in all)", r.TransactionsPerOrder, r.Transactions)
	case !(r.CPU.PMX > 0 && r.CPU.Postgres > 0 && r.CPUPerOrderUs > 0):
		t.Errorf("CPU %+v, %.0fµs per order", r.CPU, r.CPUPerOrderUs)
	case r.Shards == nil || r.Shards.Batches <= 0 || r.Shards.Commands < r.Orders || r.Shards.Held < 0 || r.Shards.Read < 0 ||
		r.Shards.Pipelined+r.Shards.Held > r.Shards.Commands:
		// Every placement is a command of a batch; a command joins the batch built meanwhile, or is
		// held, or neither.
		t.Errorf("shard counters %+v for %d orders", r.Shards, r.Orders)
	case r.Server == nil || r.Server.Batches != r.Shards.Batches || r.Server.Orders <= 0 ||
		mix == loadgen.MixBasic && r.Server.Orders < r.Orders || r.Server.BatchP99.AtMost <= 0 || r.Server.OrderP99.AtMost <= 0 ||
		r.Server.Commits <= 0 || r.Server.CommitP99 == nil || r.Server.CommitP99.AtMost <= 0:
		// The batches are counted where a batch commits, as the shards' counter does, and every
		// batch sends its commit; pmx (on a front, in the distributed exchange) answered every
		// single placement the bots counted (the market-maker mix places most in batches, another
		// route), and a second is far below 3.28s.
		t.Errorf("server times %+v for %d orders and %d batches", r.Server, r.Orders, r.Shards.Batches)
	case r.LockWaits == nil || r.LockWaits.Samples < 1 || r.LockWaits.RowMean < 0 || r.LockWaits.AnyMean < r.LockWaits.RowMean ||
		r.LockWaits.AnyMax < r.LockWaits.RowMax:
		// The sampler takes its first sample as the load starts; a row lock is a lock.
		t.Errorf("lock waits %+v", r.LockWaits)
	case !(r.WALBytesPerOrder > 100) || r.WALFPIPerOrder < 0 || r.Checkpoints < 0 || r.WALFilesReady < 0 ||
		r.WALFilesCreated < 0 && r.Checkpoints == 0:
		// An order's rows alone take more than 100 bytes of WAL.
		t.Errorf("WAL: %.0f bytes and %.2f full-page images per order, %d checkpoints", r.WALBytesPerOrder, r.WALFPIPerOrder, r.Checkpoints)
	}
	if mix == loadgen.MixMarketMaker {
		var batched int64
		for _, k := range r.Loadgen.Requests {
			if k.Kind == "place-batch" {
				batched = k.ItemsOK
			}
		}
		if batched == 0 || r.Orders <= batched {
			t.Errorf("%d orders, %d of them in batches: want both kinds of placement", r.Orders, batched)
		}
	}
	if pg := res.Machine.Postgres; pg.Fsync != "on" || pg.SynchronousCommit != "on" {
		t.Errorf("the cluster is not durable: %+v", pg)
	}
}

// checkFees checks a run with every market under a schedule (Options.Fees): the report says the
// schedule and what the run's trades paid, which under a taker rate of 10000 is something when
// the run made a fill (each fill's taker pays at least a cent; a short run on a busy machine may
// make none, which is not this check's to judge).
func checkFees(t *testing.T, res *Result, text string) {
	t.Helper()
	if res.Fees == nil || !strings.Contains(text, "every market's schedule: taker 10000") {
		t.Errorf("the report does not give the markets' fee schedule: %+v", res.Fees)
	}
	r := res.Runs[0]
	f := r.FeesTaken
	if f == nil || !strings.Contains(text, "fees, run 1: the exchange took") {
		t.Fatalf("the report does not say what the run's trades paid: %+v", f)
	}
	if r.Fills > 0 && f.Trades == 0 || f.Trades > 0 && f.Net <= 0 {
		t.Errorf("%d fills, and %d trades paid fees (%d cents net), under a taker rate of 10000 basis points", r.Fills, f.Trades, f.Net)
	}
}
