package bench

import (
	"bytes"
	"encoding/json"
	"maps"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/pmx-dev/pmx/internal/tools/loadgen"
)

func sampleResult() *Result {
	machine := Machine{Cores: 2, CPU: "Example CPU", OS: "linux", Arch: "amd64", GoVersion: "go1.26.8",
		Postgres: PostgresInfo{Version: "15.18", Fsync: "on", SynchronousCommit: "on", FullPageWrites: "on",
			Settings: map[string]string{"shared_buffers": "4GB", "max_wal_size": "16GB"}}}
	closed := newRunResult(0, &loadgen.Report{Mode: "closed", Seconds: 20, Orders: 30_000, OrdersPerSec: 1500,
		Requests: []loadgen.KindStats{{Kind: "place", P50Us: 38_123, P99Us: 95_040, P999Us: 140_400}, {Kind: "cancel", P50Us: 1}}},
		pgCounters{transactions: 36_000, walBytes: 90_000_000, walFPI: 3_000, checkpoints: 1}, cpuSample{pmx: 24 * time.Second, postgres: 12 * time.Second, loadgen: 4 * time.Second, machine: 44 * time.Second})
	open := newRunResult(20_000, &loadgen.Report{Mode: "open", TargetRate: 20_000, Seconds: 20, Orders: 31_234, OrdersPerSec: 1561.7, Failed: 12,
		Requests: []loadgen.KindStats{{Kind: "place", P50Us: 8_100_000, P99Us: 17_990_000, P999Us: 18_500_000}}},
		pgCounters{transactions: 30_000}, cpuSample{pmx: 25 * time.Second, postgres: 13 * time.Second, loadgen: 2 * time.Second})
	none := newRunResult(500, &loadgen.Report{Mode: "open", TargetRate: 500, Seconds: 1}, pgCounters{transactions: 3}, cpuSample{})
	closed.Shards = &ShardCounters{Batches: 1000, Commands: 29_300, Pipelined: 29_000, Held: 117, Read: 4, Acquires: 20,
		AcquireSeconds: 0.024, Aside: 12, AsideSeconds: 0.0144, DatabaseSeconds: 3.6, Shards: 1, Seconds: 4}
	closed.WALFilesReady = 40
	closed.Server = &ServerTimes{Batches: 1000, Commits: 1001, Orders: 30_000, BatchP99: Quantile{Over: 0.0032, AtMost: 0.0064},
		CommitP99: &Quantile{Over: 0.0008, AtMost: 0.0016}, OrderP99: Quantile{Over: 3.2768}}
	closed.LockWaits = &LockWaits{Samples: 200, IntervalMs: 100, RowMean: 1.6, RowMax: 7, AnyMean: 1.7, AnyMax: 8,
		Backends: map[string]float64{"running": 3.6, "Lock:transactionid": 1.5, "IO:WALSync": 0.3, "Lock:tuple": 0.1,
			"idle in transaction": 0.3, "Lock:advisory": 0.004, "LWLock:WALWrite": 0.0049}}
	open.LockWaits = &LockWaits{Samples: 200, IntervalMs: 100} // none waited
	none.LockWaits = &LockWaits{IntervalMs: 100}               // no sample taken
	open.Shards = &ShardCounters{Batches: 10, Commands: 20, Pipelined: 5, Held: -1, Read: -1, Rerun: 2, Failures: 1, Acquires: -1,
		AcquireSeconds: -1, Aside: -1, AsideSeconds: -1, DatabaseSeconds: -1, Shards: 1, Seconds: 20}
	return &Result{Command: "pmxtools bench --sweep 20000,500", PMX: "/bin/pmx", Machine: machine, Bots: 64, Markets: 8,
		DurationSeconds: 20, Seed: 1, Mix: loadgen.MixMarketMaker, Runs: []RunResult{*closed, *open, *none}}
}

func TestNewRunResult(t *testing.T) {
	r := sampleResult().Runs[0]
	if r.P50Us != 38_123 || r.P99Us != 95_040 || r.P999Us != 140_400 {
		t.Errorf("placement latencies: %+v", r)
	}
	if r.TransactionsPerOrder != 1.2 || r.PMXPerOrderUs != 800 || r.PGPerOrderUs != 400 || r.CPUPerOrderUs != 1200 {
		t.Errorf("per order: %.3f xact, %.1fµs pmx, %.1fµs postgres, %.1fµs CPU", r.TransactionsPerOrder, r.PMXPerOrderUs, r.PGPerOrderUs, r.CPUPerOrderUs)
	}
	if r.CoresBusy != 2 || r.OtherCores != 0.2 {
		t.Errorf("cores busy %v, others %v; want 2 and 0.2", r.CoresBusy, r.OtherCores)
	}
	if r.WALBytesPerOrder != 3000 || r.WALFPIPerOrder != 0.1 || r.Checkpoints != 1 {
		t.Errorf("wal: %.1f bytes and %.2f full-page images per order, %d checkpoints; want 3000, 0.10, 1", r.WALBytesPerOrder, r.WALFPIPerOrder, r.Checkpoints)
	}
	if r.WALFilesCreated != -1 {
		t.Errorf("WAL files created during a run with a checkpoint: %d; want -1, not known", r.WALFilesCreated)
	}
	noCheckpoint := newRunResult(0, &loadgen.Report{Mode: "closed", Seconds: 1, Orders: 10}, pgCounters{walBytes: 50_000_000, walFiles: 3}, cpuSample{})
	if noCheckpoint.WALFilesCreated != 3 {
		t.Errorf("WAL files created during a run without a checkpoint: %d; want 3", noCheckpoint.WALFilesCreated)
	}
	if z := sampleResult().Runs[2]; z.TransactionsPerOrder != 0 || z.CPUPerOrderUs != 0 {
		t.Errorf("a run without orders has per-order figures: %+v", z)
	}
}

func TestWriteText(t *testing.T) {
	var b bytes.Buffer
	if err := sampleResult().WriteText(&b); err != nil {
		t.Fatal(err)
	}
	want := `pmxtools bench: pmx dev on a private PostgreSQL 15.18, fresh for each run (fsync on, synchronous_commit on, full_page_writes on; max_wal_size 16GB; shared_buffers 4GB), driven by pmxtools loadgen
machine  2 cores (Example CPU), linux/amd64, go1.26.8
command  pmxtools bench --sweep 20000,500
pmx      /bin/pmx
load     64 bots on 8 markets, 20s per run, seed 1, market-maker mix; rate limits lifted (PMX_READ_RATE=0 PMX_WRITE_RATE=0)

load             orders/s      p50      p99    p99.9  xact/order  rowlocks  CPU/order      pmx postgres  cores other  failed
closed loop       1,500.0   38.1ms   95.0ms    140ms        1.20      1.60     1.20ms    800µs    400µs   2.00  0.20       0
open 20,000/s     1,561.7    8.10s   17.99s   18.50s        0.96      0.00     1.22ms    800µs    416µs   2.00  0.00      12
open 500/s            0.0        -        -        -           -         -          -        -        -   0.00  0.00       0
wal, run 1: 3,000 bytes and 0.10 full-page images per order, 1 checkpoints; WAL files: 40 ready at the start, - created
locks, run 1: 1.60 backends waiting on row locks per sample (at most 7), 1.70 on any lock (at most 8); 200 samples, one every 100ms
locks, run 2: 0.00 backends waiting on row locks per sample (at most 0), 0.00 on any lock (at most 0); 200 samples, one every 100ms
backends, run 1: Postgres's client backends not idle, per sample: 3.60 running, 1.50 Lock:transactionid, 0.30 IO:WALSync, 0.30 idle in transaction, 0.10 Lock:tuple, 2 more under 0.01
backends, run 2: Postgres's client backends not idle, per sample: none
shards, run 1: 1,000 batches of 29.3 commands; 99.0% of the commands pipelined, 0.4% held; 4 batches read what they reserve from, 0 ran again, 0 failed; 20 acquires of cash (2.0% of the batches, 1.20ms each), 12 aside for accounts met while a batch committed, 1.20ms each; Postgres busy 90% of each shard's time, 3.60ms a batch
shards, run 2: 10 batches of 2.0 commands; 25.0% of the commands pipelined, - held; - batches read what they reserve from, 2 ran again, 1 failed; - acquires of cash (- of the batches); Postgres busy - of each shard's time
server, run 1: p99 of the shards' 1,000 batches at most 6.40ms, of their 1,001 commits at most 1.60ms; of the 30,000 POST /order pmx answered over 3.28s
`
	got := b.String()
	if !strings.HasPrefix(got, want) {
		t.Fatalf("WriteText:\n%s\nwant it to start with:\n%s", got, want)
	}
	for _, s := range []string{"xact/order  Postgres transactions", "rowlocks    Postgres backends waiting on row locks, mean per sample",
		"read every\n            " + LockSampleInterval.String() + " during the load", "wait_event transactionid", "or tuple", "CPU/order   CPU time", "the load generator's own CPU is not in it",
		"each placement of a batch counted", "latency of single placements (POST /order)",
		"backends    what Postgres's client backends", "idle in transaction (its transaction waiting for its client",
		"server      the 99th percentiles of the latency histograms pmx keeps"} {
		if !strings.Contains(got, s) {
			t.Errorf("the legend lacks %q", s)
		}
	}
}

func TestWriteJSON(t *testing.T) {
	var b bytes.Buffer
	if err := sampleResult().WriteJSON(&b); err != nil {
		t.Fatal(err)
	}
	var back struct {
		Mix     string
		Machine struct {
			Cores    int
			Postgres struct{ Fsync string }
		}
		Runs []map[string]any
	}
	if err := json.Unmarshal(b.Bytes(), &back); err != nil {
		t.Fatal(err)
	}
	if back.Mix != "market-maker" || back.Machine.Cores != 2 || back.Machine.Postgres.Fsync != "on" || len(back.Runs) != 3 {
		t.Fatalf("JSON: %s", b.String())
	}
	for _, k := range []string{"ordersPerSec", "p50Us", "p99Us", "p999Us", "pgTransactionsPerOrder", "cpuPerOrderUs", "cpuSeconds", "otherCores", "lockWaits", "loadgen"} {
		if _, ok := back.Runs[0][k]; !ok {
			t.Errorf("run JSON lacks %q", k)
		}
	}
	want := map[string]any{"samples": 200.0, "intervalMs": 100.0, "rowLocksMean": 1.6, "rowLocksMax": 7.0, "locksMean": 1.7, "locksMax": 8.0,
		"backendsMean": map[string]any{"running": 3.6, "Lock:transactionid": 1.5, "IO:WALSync": 0.3, "Lock:tuple": 0.1,
			"idle in transaction": 0.3, "Lock:advisory": 0.004, "LWLock:WALWrite": 0.0049}}
	if got, _ := back.Runs[0]["lockWaits"].(map[string]any); !reflect.DeepEqual(got, want) {
		t.Errorf("run JSON's lockWaits: %v, want %v", got, want)
	}
	wantServer := map[string]any{"batches": 1000.0, "commits": 1001.0, "orders": 30_000.0, "batchP99Seconds": map[string]any{"over": 0.0032, "atMost": 0.0064},
		"commitP99Seconds": map[string]any{"over": 0.0008, "atMost": 0.0016}, "orderP99Seconds": map[string]any{"over": 3.2768}}
	if got, _ := back.Runs[0]["server"].(map[string]any); !reflect.DeepEqual(got, wantServer) {
		t.Errorf("run JSON's server: %v, want %v", got, wantServer)
	}
	if _, ok := back.Runs[1]["server"]; ok {
		t.Error("a run without the server's histograms has them in its JSON")
	}
	for _, k := range []string{"devShards", "devPool", "dbLatencyUs", "warmWalMiB"} { // given only when asked for
		if bytes.Contains(b.Bytes(), []byte(`"`+k+`"`)) {
			t.Errorf("the JSON has %q unasked", k)
		}
	}
}

// TestWriteTextDatabaseLatency: a bench of pmx dev with its shards given, through the latency
// proxy, with its WAL warmed, says all three in its header and its JSON.
func TestWriteTextDatabaseLatency(t *testing.T) {
	r := sampleResult()
	r.DevShards, r.DevPool, r.DBLatencyUs, r.WarmWALMiB = 8, 24, 1000, 512
	var b bytes.Buffer
	if err := r.WriteText(&b); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"pmxtools bench: pmx dev with 8 shards (its pool 24 connections, one more for each shard) on a private PostgreSQL 15.18",
		"\npmx      /bin/pmx\nwal      warmed before each run: 512 MiB written, then a checkpoint, so that the run writes into recycled files\ndatabase through the bench's proxy, adding 1.00ms to every round trip (half each way), as a Postgres on another node; the bench's own connection direct\nload     64 bots"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("WriteText lacks %q:\n%s", want, b.String())
		}
	}
	r.DevShards, r.DevPool = 1, 17
	b.Reset()
	if err := r.WriteText(&b); err != nil || !strings.Contains(b.String(), "pmx dev with 1 shard (its pool 17 connections") {
		t.Errorf("one shard: %v\n%s", err, b.String())
	}
	r.DevShards, r.DevPool = 8, 24
	b.Reset()
	if err := r.WriteJSON(&b); err != nil {
		t.Fatal(err)
	}
	var back struct{ DevShards, DevPool, DBLatencyUs, WarmWALMiB int }
	if err := json.Unmarshal(b.Bytes(), &back); err != nil || back.DevShards != 8 || back.DevPool != 24 || back.DBLatencyUs != 1000 || back.WarmWALMiB != 512 {
		t.Errorf("JSON: %+v, %v", back, err)
	}
}

// TestWriteTextByProcess: a distributed run tells its pmx CPU per order apart by what each process
// runs, the costliest first; pmx dev's runs, one process, have no such line.
func TestWriteTextByProcess(t *testing.T) {
	dev := newRunResult(0, &loadgen.Report{Mode: "closed", Seconds: 20, Orders: 30_000, OrdersPerSec: 1500},
		pgCounters{transactions: 36_000}, cpuSample{pmx: 24 * time.Second, pmxBy: map[string]time.Duration{"pmx dev": 24 * time.Second}})
	if dev.CPU.PMXByProcess != nil {
		t.Errorf("pmx dev's run has its CPU by process: %v", dev.CPU.PMXByProcess)
	}
	r := sampleResult()
	r.Distributed = &Topology{Shards: 2, Fronts: 2}
	r.Runs[0] = *newRunResult(0, &loadgen.Report{Mode: "closed", Seconds: 20, Orders: 30_000, OrdersPerSec: 1500},
		pgCounters{transactions: 36_000}, cpuSample{pmx: 24 * time.Second, postgres: 12 * time.Second, loadgen: 4 * time.Second,
			machine: 46 * time.Second, pmxBy: map[string]time.Duration{"pmx shard": 9 * time.Second, "pmx api": 12 * time.Second,
				"pmx operator": 3 * time.Second}})
	var b bytes.Buffer
	if err := r.WriteText(&b); err != nil {
		t.Fatal(err)
	}
	want := "\ncpu, run 1: pmx's CPU per order by process, pmx api 400µs, pmx shard 300µs, pmx operator 100µs; " +
		"the rest of the machine (the control plane in it) 0.30 cores\n"
	if !strings.Contains(b.String(), want) || strings.Count(b.String(), "\ncpu, run") != 1 {
		t.Errorf("WriteText lacks %q, or has more than it:\n%s", want, b.String())
	}
	b.Reset()
	if err := r.WriteJSON(&b); err != nil {
		t.Fatal(err)
	}
	var back struct {
		Runs []struct {
			CPUSeconds CPUSeconds `json:"cpuSeconds"`
		} `json:"runs"`
	}
	if err := json.Unmarshal(b.Bytes(), &back); err != nil || back.Runs[0].CPUSeconds.PMXByProcess["pmx api"] != 12 {
		t.Errorf("JSON: %+v, %v", back, err)
	}
}

func TestWithPool(t *testing.T) {
	for _, c := range []struct{ url, want string }{
		{"postgres://postgres@/pmx?host=/tmp/run&port=5432&sslmode=disable", "postgres://postgres@/pmx?host=/tmp/run&port=5432&sslmode=disable&pool_max_conns=24"},
		{"postgres://postgres@127.0.0.1:5432/pmx", "postgres://postgres@127.0.0.1:5432/pmx?pool_max_conns=24"},
	} {
		if got := withPool(c.url, 24); got != c.want {
			t.Errorf("withPool(%q) = %q, want %q", c.url, got, c.want)
		}
	}
	if got, want := maxConnections(1, 200), 214; got != want {
		t.Errorf("maxConnections(1, 200) = %d, want %d", got, want)
	}
	if got := maxConnections(1, 0); got < 100 {
		t.Errorf("maxConnections(1, 0) = %d, under Postgres's default", got)
	}
}

func TestFormatting(t *testing.T) {
	for _, tt := range []struct{ got, want string }{
		{formatUs(0), "0µs"}, {formatUs(999), "999µs"}, {formatUs(1234), "1.23ms"}, {formatUs(12_345), "12.3ms"},
		{formatUs(123_456), "123ms"}, {formatUs(1_234_567), "1.23s"},
		{formatCount(0), "0"}, {formatCount(999), "999"}, {formatCount(1000), "1,000"}, {formatCount(1_234_567.4), "1,234,567"},
		{formatCount(-1500), "-1,500"},
		{formatRate(0), "0.0"}, {formatRate(1523.44), "1,523.4"}, {formatRate(999.96), "1,000.0"},
	} {
		if tt.got != tt.want {
			t.Errorf("got %q, want %q", tt.got, tt.want)
		}
	}
}

func TestParseRates(t *testing.T) {
	got, err := ParseRates(" 500, 1_000,2500.5,")
	if err != nil || len(got) != 3 || got[0] != 500 || got[1] != 1000 || got[2] != 2500.5 {
		t.Fatalf("ParseRates = %v, %v", got, err)
	}
	for _, bad := range []string{"", ",", "0", "-5", "1000,abc", "inf", "NaN"} {
		if r, err := ParseRates(bad); err == nil {
			t.Errorf("ParseRates(%q) = %v, want an error", bad, r)
		}
	}
}

func TestCommandLine(t *testing.T) {
	got := CommandLine([]string{"/bin/pmxtools", "bench", "--sweep", "1000,2000", "--dev-arg=--log-level=warn", "it's", "", "a b"})
	want := `/bin/pmxtools bench --sweep 1000,2000 --dev-arg=--log-level=warn 'it'\''s' '' 'a b'`
	if got != want {
		t.Fatalf("CommandLine:\n got %s\nwant %s", got, want)
	}
}

// TestWriteTextFloors: with the floors measured, each run's table row gains its orders/s as a share
// of the HTTP floor and its p50 as a multiple of the commit floor, and the header says both floors.
func TestWriteTextFloors(t *testing.T) {
	r := sampleResult()
	r.Floors = &Floors{HTTPRequestsPerSec: 20_000, CommitP50Us: 2_000, RoundTripP50Us: 150}
	var b bytes.Buffer
	if err := r.WriteText(&b); err != nil {
		t.Fatal(err)
	}
	got := b.String()
	for _, want := range []string{
		"floors: HTTP alone 20,000.0 requests/s (64 bots, a server that does nothing); one durable commit 2.00ms back to back (a round trip 150µs)\n",
		"failed  of HTTP p50/commit\n",
		"       0     7.5%      19.1×\n", // 1,500/s of 20,000/s; 38.1 ms over 2 ms
		"      12     7.8%    4050.0×\n",
		"       0        -          -\n", // a run without orders
		"p50/commit  the p50 as a multiple of one durable commit",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("WriteText lacks %q:\n%s", want, got)
		}
	}
	var plain bytes.Buffer
	if err := sampleResult().WriteText(&plain); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(plain.String(), "of HTTP") || strings.Contains(plain.String(), "floors:") {
		t.Error("a bench without floors prints their columns")
	}
}

func TestStatementKind(t *testing.T) {
	for _, c := range []struct{ query, want string }{
		{"with cash as (\n\t\tupdate accounts a set x = 1 returning a.id),\n\tnew_account_events as (\n\t\tinsert into account_events select * from cash)\nselect 1",
			"cash+new_account_events"},
		{"WITH a AS (select 1), b As  (select 2) select * from a, b", "a+b"},
		{"with d as materialized (select 1), e as not materialized (select 2) select * from d, e", "d+e"},
		// unnest(...) as d(id) is an alias, not a part
		{"with new_orders as (insert into orders select * from unnest($1::uuid[]) as d(id)) select $1", "new_orders"},
		{"select  id,\n available from accounts where id = any($1)", "select id, available from accounts where id = any($1)"},
		{"select " + strings.Repeat("x", 80), "select " + strings.Repeat("x", 53) + "…"},
		{"with", "with"},
	} {
		if got := statementKind(c.query); got != c.want {
			t.Errorf("statementKind(%q) = %q, want %q", c.query, got, c.want)
		}
	}
}

func TestParseSettings(t *testing.T) {
	for _, c := range []struct {
		args []string
		want map[string]string
		err  string
	}{
		{args: nil, want: nil},
		{args: []string{"max_wal_size=16GB", "pg_stat_statements.max=500"}, want: map[string]string{"max_wal_size": "16GB", "pg_stat_statements.max": "500"}},
		{args: []string{"search_path=a=b"}, want: map[string]string{"search_path": "a=b"}},
		{args: []string{"max_wal_size"}, err: `"max_wal_size": want NAME=VALUE`},
		{args: []string{"max_wal_size="}, err: `"max_wal_size=": want NAME=VALUE`},
		{args: []string{"=1"}, err: `"=1": want NAME=VALUE`},
		{args: []string{"bad name=1"}, err: `"bad name=1": want NAME=VALUE`},
		{args: []string{"fsync=on", "fsync=off"}, err: "fsync is given twice"},
	} {
		got, err := ParseSettings(c.args)
		switch {
		case c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err)):
			t.Errorf("ParseSettings(%q): err %v, want %q", c.args, err, c.err)
		case c.err == "" && (err != nil || !maps.Equal(got, c.want)):
			t.Errorf("ParseSettings(%q) = %v, %v; want %v", c.args, got, err, c.want)
		}
	}
}
