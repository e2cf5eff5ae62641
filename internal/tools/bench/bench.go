// Package bench measures the whole exchange end to end, as `pmxtools bench` runs it: `pmx dev` as a
// child process on a private, durable PostgreSQL cluster (fsync on, PostgreSQL's defaults) that the
// bench starts itself, fresh for each run, driven in-process by package loadgen. Around each run
// it reads the Postgres transaction counter (pg_stat_database) and the CPU time of pmx dev and of
// every Postgres process (/proc), during it the backends waiting on row locks (pg_stat_activity),
// and reports per acknowledged order: throughput, placement latency, transactions and CPU. A
// sweep repeats the run in open loop at several offered rates and charts latency against load.
package bench

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/pmx-dev/pmx/engine"
	"github.com/pmx-dev/pmx/internal/kit/auth"
	"github.com/pmx-dev/pmx/internal/tools/loadgen"
)

// Defaults for Options fields left at their zero value.
const (
	DefaultBots     = 64
	DefaultDuration = 20 * time.Second
	DefaultMarkets  = 8
	DefaultSeed     = 1
	// DefaultFloorDuration is how long the HTTP floor is measured before the runs.
	DefaultFloorDuration = 10 * time.Second
)

// Options describes a bench.
type Options struct {
	// PMX is the pmx binary started as `pmx dev` (required).
	PMX string
	// DataDir holds each run's Postgres cluster and pmx dev log (DataDir/run-N/); empty means a
	// fresh temporary directory, removed at the end. Given again, the runs reuse their clusters.
	DataDir string
	// Bots is the number of concurrent loadgen bots; Markets the number of markets they trade,
	// created fresh for each run; Duration the length of each run.
	Bots     int
	Markets  int
	Duration time.Duration
	// Warmup, when above 0, runs the load that long before each measured run (loadgen's Warmup):
	// every figure of the run, Postgres's, the CPU's and the shards' too, is taken over the
	// Duration after it, and the warm-up's own placements and latency are reported apart
	// (RunResult.Loadgen.Warmup). An exchange just started is slower in its first second.
	Warmup time.Duration
	// Rates has one entry per run: 0 for closed loop, else the offered placements per second of
	// an open-loop run. Empty means one closed-loop run.
	Rates []float64
	// Seed seeds the bots (the same seed gives the same stream of decisions).
	Seed uint64
	// Mix is the bots' choice of requests (loadgen.Mixes); empty means loadgen.MixBasic, the mix
	// of every figure measured before the other mixes existed.
	Mix loadgen.Mix
	// FeedSubscribers, when above 0, connects that many WebSocket clients to the live feed during
	// each run, each subscribed to the book of every market, and reports what they received.
	FeedSubscribers int
	// Statements loads pg_stat_statements into each run's Postgres and reports the statements
	// that took most of its execution time, per order (RunResult.Statements). The module itself
	// costs Postgres a little time on every statement.
	Statements bool
	// PGSettings are extra server settings for each run's Postgres (postgres -c name=value), e.g.
	// max_wal_size; the report gives their values as the server took them.
	PGSettings map[string]string
	// WarmWALMiB, when above 0, writes that many MiB of WAL into each run's Postgres and
	// checkpoints before the exchange starts, so that the run writes its WAL into files the
	// checkpoint recycled, as on a server that has been running a while, rather than creating and
	// zero-filling each (see pgStats.warmWAL). At most max_wal_size of them are kept.
	WarmWALMiB int
	// DevArgs are extra arguments for pmx dev, e.g. --pprof-addr=127.0.0.1:6060.
	DevArgs []string
	// DevShards, when above 0, is pmx dev's --shards: the matching shards in its one process
	// (0: pmx dev's default, one per two cores). Not with Distributed, whose Shards are processes.
	// Each shard keeps a connection of pmx dev's pool, so the bench gives the pool one more for
	// each (devPool).
	DevShards int
	// DBLatency, when above 0, puts a proxy of the bench's own between the exchange and Postgres
	// that adds DBLatency to every round trip, half each way, as a Postgres on another node has
	// (pmx connects over TCP to the proxy, the proxy to Postgres's socket); the bench's own
	// connection, which reads the counters, goes direct. The proxy's CPU is the bench's.
	DBLatency time.Duration
	// Fees, when set, gives every market the bench creates this fee schedule (docs/fees.md): in
	// pmx dev through the admin API, in the distributed exchange as the Market's spec.fees. Nil:
	// no fees, as before.
	Fees *engine.Fees
	// Distributed runs the distributed exchange instead of pmx dev: a kube-apiserver and etcd
	// (from KubeAssets; see kubeAssets), pmx operator, Shards pmx shard processes (with ShardArgs)
	// and Fronts pmx api processes (with FrontArgs), the bots spread over the fronts.
	Distributed bool
	Shards      int
	Fronts      int
	ShardArgs   []string
	FrontArgs   []string
	KubeAssets  string
	// FloorServer, when set, measures this machine's floors before the runs, so that the report
	// can say how close each run came to them: the HTTP floor (Floor, with the same bots, served by
	// this binary: pmxtools) for FloorDuration, and the commit floor (CommitFloor, back to back).
	FloorServer   string
	FloorDuration time.Duration
	// Command is the command line, recorded in the result.
	Command string
	// Progress receives what the bench is doing and loadgen's progress lines; nil: nothing.
	Progress io.Writer
	// Logger receives the Postgres cluster's logs; nil: none.
	Logger *slog.Logger
}

// Result is the outcome of a bench: the setting and one entry per run.
type Result struct {
	Command         string      `json:"command"`
	PMX             string      `json:"pmx"`
	Machine         Machine     `json:"machine"`
	Distributed     *Topology   `json:"distributed,omitempty"`
	Bots            int         `json:"bots"`
	Markets         int         `json:"markets"`
	DurationSeconds float64     `json:"durationSeconds"`         // asked for, per run
	WarmupSeconds   float64     `json:"warmupSeconds,omitempty"` // Options.Warmup, before each run
	Seed            uint64      `json:"seed"`
	Mix             loadgen.Mix `json:"mix"`
	DevShards       int         `json:"devShards,omitempty"`   // pmx dev's --shards, when given
	DevPool         int         `json:"devPool,omitempty"`     // then its pool's connections (devPool)
	DBLatencyUs     int64       `json:"dbLatencyUs,omitempty"` // Options.DBLatency, added to every round trip
	Fees            *FeesOption `json:"fees,omitempty"`        // Options.Fees, every market's schedule
	WarmWALMiB      int         `json:"warmWalMiB,omitempty"`  // Options.WarmWALMiB
	Floors          *Floors     `json:"floors,omitempty"`      // with Options.FloorServer
	Runs            []RunResult `json:"runs"`
}

// Floors are this machine's limits, measured in the same bench as its runs: what HTTP alone
// allows (requests per second of a server that does nothing, with the same client and bots) and
// what one durable commit costs back to back. A run's orders/s over the HTTP floor and its p50
// over the commit are the fractions of the machine the exchange is using, and the multiple of the
// least a durable answer can take.
type Floors struct {
	HTTPRequestsPerSec float64 `json:"httpRequestsPerSec"`
	CommitP50Us        int64   `json:"commitP50Us"`
	RoundTripP50Us     int64   `json:"roundTripP50Us"`
}

// Topology is the distributed exchange a bench ran: its shard and front processes.
type Topology struct {
	Shards int `json:"shards"`
	Fronts int `json:"fronts"`
}

// Machine describes where the bench ran.
type Machine struct {
	Cores     int          `json:"cores"`
	CPU       string       `json:"cpu,omitempty"`
	OS        string       `json:"os"`
	Arch      string       `json:"arch"`
	GoVersion string       `json:"goVersion"` // the bench binary's
	Postgres  PostgresInfo `json:"postgres"`
}

// PostgresInfo is the server's version and durability settings, as it reports them.
type PostgresInfo struct {
	Version           string `json:"version"`
	Fsync             string `json:"fsync"`
	SynchronousCommit string `json:"synchronousCommit"`
	FullPageWrites    string `json:"fullPageWrites"`
	// Settings are the values of Options.PGSettings, as the server reports them.
	Settings map[string]string `json:"settings,omitempty"`
}

// RunResult is one run's measurements. Latencies are those of single placements (POST /order),
// in microseconds, whatever the mix: the loadgen report has every kind's; "per order" means per
// placement acknowledged, alone or in a batch. The counting window of transactions and CPU opens
// before loadgen creates the bots' accounts (one admin request per bot) and closes at the end of
// the load for CPU, at pmx dev's exit for transactions.
type RunResult struct {
	Mode         string  `json:"mode"`                  // "closed" or "open" loop
	OfferedRate  float64 `json:"offeredRate,omitempty"` // open loop: placements/s asked for
	Seconds      float64 `json:"seconds"`
	Orders       int64   `json:"orders"`
	OrdersPerSec float64 `json:"ordersPerSec"`
	Fills        int64   `json:"fills"`
	Rejected     int64   `json:"rejected"` // 4xx: business rejections, every kind of request
	Failed       int64   `json:"failed"`   // 5xx and transport errors, every kind of request
	P50Us        int64   `json:"p50Us"`
	P99Us        int64   `json:"p99Us"`
	P999Us       int64   `json:"p999Us"`

	Transactions         int64   `json:"pgTransactions"` // pg_stat_database xact_commit + xact_rollback
	TransactionsPerOrder float64 `json:"pgTransactionsPerOrder"`
	// WAL written during the run (from before the bots' accounts, or from the end of the warm-up,
	// to pmx dev's exit): bytes and full-page images (pg_stat_wal) per order, and the checkpoints
	// completed, which copy pages whole into the WAL again the next time each changes.
	WALBytesPerOrder float64 `json:"walBytesPerOrder"`
	WALFPIPerOrder   float64 `json:"walFpiPerOrder"`
	Checkpoints      int64   `json:"checkpoints"`
	// WALFilesReady are the WAL files past the one being written when the run began, made ahead;
	// WALFilesCreated those created during it, each zero-filled as the WAL reached it (-1: not
	// known, a checkpoint ran, which recycles and removes files).
	WALFilesReady   int64 `json:"walFilesReady"`
	WALFilesCreated int64 `json:"walFilesCreated"`

	CPU           CPUSeconds `json:"cpuSeconds"`
	CPUPerOrderUs float64    `json:"cpuPerOrderUs"` // pmx dev + Postgres
	PMXPerOrderUs float64    `json:"pmxCpuPerOrderUs"`
	PGPerOrderUs  float64    `json:"postgresCpuPerOrderUs"`
	CoresBusy     float64    `json:"coresBusy"` // pmx dev + Postgres + loadgen CPU seconds per second
	// OtherCores is the CPU seconds per second that the rest of the machine used during the run:
	// well above zero, the figures were disturbed.
	OtherCores float64 `json:"otherCores"`

	// LockWaits are Postgres's backends waiting on row locks (and on any lock) per sample during
	// the load, from pg_stat_activity (see LockWaits).
	LockWaits *LockWaits `json:"lockWaits,omitempty"`

	Shards     *ShardCounters `json:"shards,omitempty"`     // from the exchange's /metrics
	Server     *ServerTimes   `json:"server,omitempty"`     // from the exchange's /metrics too
	Feed       *FeedResult    `json:"feed,omitempty"`       // with Options.FeedSubscribers
	Statements *Statements    `json:"statements,omitempty"` // with Options.Statements
	// FeesTaken, with Options.Fees, is what the run's fills paid the exchange less its rebates,
	// in cents, and the trades that paid a fee: proof that the schedule was charged.
	FeesTaken *FeesTaken `json:"feesTaken,omitempty"`

	Loadgen *loadgen.Report `json:"loadgen"`
}

// CPUSeconds is CPU time (user + system) spent during a run.
type CPUSeconds struct {
	PMX      float64 `json:"pmx"`
	Postgres float64 `json:"postgres"`
	Loadgen  float64 `json:"loadgen"` // the bench process itself, not counted per order
	Others   float64 `json:"others"`  // every other process of the machine
	// PMXByProcess is the distributed exchange's pmx time by what each process runs ("pmx api",
	// "pmx shard", "pmx operator"), every process of a kind together.
	PMXByProcess map[string]float64 `json:"pmxByProcess,omitempty"`
}

// ErrInterrupted is returned by Run when ctx was cancelled; the result holds what was measured.
var ErrInterrupted = errors.New("bench interrupted")

func (o Options) withDefaults() (Options, error) {
	if o.Bots == 0 {
		o.Bots = DefaultBots
	}
	if o.Markets == 0 {
		o.Markets = DefaultMarkets
	}
	if o.Duration == 0 {
		o.Duration = DefaultDuration
	}
	if o.Seed == 0 {
		o.Seed = DefaultSeed
	}
	if o.FloorDuration == 0 {
		o.FloorDuration = DefaultFloorDuration
	}
	if len(o.Rates) == 0 {
		o.Rates = []float64{0}
	}
	if o.Mix == "" {
		o.Mix = loadgen.MixBasic
	}
	if !slices.Contains(loadgen.Mixes, o.Mix) {
		return o, fmt.Errorf("bench: no mix %q: want one of %s", o.Mix, loadgen.MixNames())
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Distributed {
		o.Shards, o.Fronts = max(o.Shards, 1), max(o.Fronts, 1)
		if o.FeedSubscribers > 0 {
			return o, errors.New("bench: --feed-subscribers measures pmx dev's feed; it does not combine with --distributed")
		}
		if o.DevShards != 0 {
			return o, errors.New("bench: DevShards is pmx dev's --shards; the distributed exchange's are Shards")
		}
	}
	switch {
	case o.PMX == "":
		return o, errors.New("bench: no pmx binary to start")
	case o.Bots < 0 || o.Markets < 0 || o.Duration < 0:
		return o, errors.New("bench: bots, markets and duration must be positive")
	case o.Warmup < 0:
		return o, fmt.Errorf("bench: a negative warm-up (%v)", o.Warmup)
	case o.DevShards < 0:
		return o, fmt.Errorf("bench: pmx dev needs at least one shard, not %d", o.DevShards)
	case o.DBLatency < 0:
		return o, fmt.Errorf("bench: a negative database latency (%v)", o.DBLatency)
	}
	for _, r := range o.Rates {
		if r < 0 || math.IsNaN(r) || math.IsInf(r, 0) {
			return o, fmt.Errorf("bench: bad rate %g", r)
		}
	}
	if _, err := os.Stat(o.PMX); err != nil {
		return o, fmt.Errorf("bench: the pmx binary: %w", err)
	}
	return o, nil
}

// bench is the state shared by the runs of one Run.
type bench struct {
	o     Options
	dir   string
	proc  procFS
	token string
	id    string // tells this bench's markets apart from earlier ones in the same data dir
}

// Run measures one loadgen run per rate in o.Rates, each on a Postgres cluster and a pmx dev of its
// own (see bench.run), and removes the temporary data dir at the end. If ctx is cancelled it stops
// early, cleans up and returns the runs measured so far with ErrInterrupted.
func Run(ctx context.Context, o Options) (_ *Result, err error) {
	o, err = o.withDefaults()
	if err != nil {
		return nil, err
	}
	res := &Result{Command: o.Command, PMX: o.PMX, Machine: machineInfo(), Bots: o.Bots, Markets: o.Markets,
		DurationSeconds: o.Duration.Seconds(), WarmupSeconds: o.Warmup.Seconds(), Seed: o.Seed, Mix: o.Mix, DevShards: o.DevShards, DBLatencyUs: o.DBLatency.Microseconds(),
		WarmWALMiB: o.WarmWALMiB}
	if o.Fees != nil {
		res.Fees = &FeesOption{TakerBps: o.Fees.Taker, MakerBps: o.Fees.Maker}
	}
	if o.DevShards > 0 {
		res.DevPool = devPool(o.DevShards)
	}
	if o.Distributed {
		res.Distributed = &Topology{Shards: o.Shards, Fronts: o.Fronts}
	}
	b := &bench{o: o, dir: o.DataDir, proc: newProcFS(), token: auth.NewToken(), id: strconv.FormatInt(time.Now().Unix(), 36)}
	if b.dir == "" {
		if b.dir, err = os.MkdirTemp("", "pmx-bench-"); err != nil {
			return nil, err
		}
		defer os.RemoveAll(b.dir)
		// When pmx runs as root, Postgres runs as another user, which must be able to enter it.
		if err := os.Chmod(b.dir, 0o711); err != nil {
			return nil, err
		}
	}
	if b.dir, err = filepath.Abs(b.dir); err != nil {
		return nil, err
	}
	if o.FloorServer != "" {
		if res.Floors, err = b.floors(ctx); err != nil {
			return res, err
		}
	}
	for i, rate := range o.Rates {
		r, err := b.run(ctx, i, rate, &res.Machine.Postgres)
		if r != nil {
			res.Runs = append(res.Runs, *r)
		}
		if err != nil {
			return res, err
		}
	}
	return res, nil
}

// floors measures the HTTP floor with the bench's bots, then the commit floor back to back, each
// on its own (nothing else of the bench is running yet).
func (b *bench) floors(ctx context.Context) (*Floors, error) {
	b.progressf("floors: HTTP alone, %d bots for %v", b.o.Bots, b.o.FloorDuration)
	h, err := Floor(ctx, FloorOptions{Server: b.o.FloorServer, Bots: b.o.Bots, Duration: b.o.FloorDuration})
	if err != nil {
		return nil, fmt.Errorf("while measuring the HTTP floor: %w", err)
	}
	b.progressf("floors: one durable commit, back to back, on a fresh Postgres cluster")
	dir := filepath.Join(b.dir, "commit-floor")
	if err := os.MkdirAll(dir, 0o711); err != nil {
		return nil, err
	}
	c, err := CommitFloor(ctx, CommitFloorOptions{Gaps: []time.Duration{0}, Count: 300, Dir: dir, Logger: b.o.Logger})
	if err != nil {
		return nil, fmt.Errorf("while measuring the commit floor: %w", err)
	}
	row := c.Rows[0]
	return &Floors{HTTPRequestsPerSec: h.RequestsPerSec, CommitP50Us: row.CommitP50.Microseconds(), RoundTripP50Us: row.RoundTripP50.Microseconds()}, nil
}

// run measures one loadgen run. It starts a Postgres cluster of its own under DataDir/run-N (a new
// one, unless an earlier bench left one there) and a pmx dev on it, creates the markets, runs the
// load and stops both. Fresh for every run because Postgres slows down as a young database
// accumulates dead row versions, and speeds up again as the space they leave is reused: a
// cluster shared by several runs would give each a different database to work with. pmx dev
// stopping at the end closes its connections, which is when Postgres counts every transaction
// they made. The server's settings are written to pg.
func (b *bench) run(ctx context.Context, i int, rate float64, pg *PostgresInfo) (_ *RunResult, err error) {
	o := b.o
	what := "closed loop"
	if rate > 0 {
		what = "open loop at " + formatCount(rate) + " orders/s"
	}
	dir := filepath.Join(b.dir, fmt.Sprintf("run-%d", i+1))
	b.progressf("run %d/%d: %s, %s mix, %d bots, %d markets, %v: starting Postgres (durable: fsync on) in %s",
		i+1, len(o.Rates), what, o.Mix, o.Bots, o.Markets, o.Duration, dir)
	if err := os.MkdirAll(dir, 0o711); err != nil {
		return nil, err
	}
	connections := maxConnections(1, 0) // pmx dev
	if o.Distributed {
		connections = maxConnections(o.Shards+o.Fronts+1, 0)
	} else if o.DevShards > 0 {
		connections = maxConnections(1, devPool(o.DevShards))
	}
	cluster, stats, info, stopPostgres, err := startPostgres(ctx, dir, connections, o.Statements, o.PGSettings, o.Logger)
	defer func() {
		if stopErr := stopPostgres(); stopErr != nil && err == nil {
			err = stopErr
		}
	}()
	if err != nil {
		return nil, err
	}
	*pg = info
	if o.WarmWALMiB > 0 {
		t0 := time.Now()
		if err := stats.warmWAL(ctx, o.WarmWALMiB); err != nil {
			return nil, err
		}
		b.progressf("run %d/%d: warmed the WAL (%d MiB written, then a checkpoint) in %v", i+1, len(o.Rates), o.WarmWALMiB, time.Since(t0).Round(time.Millisecond))
	}
	databaseURL := cluster.URL() // the exchange's; the bench's own connection (stats) goes direct
	if o.DBLatency > 0 {
		proxy, through, err := proxyDatabase(databaseURL, o.DBLatency)
		if err != nil {
			return nil, err
		}
		defer proxy.Close() // after the exchange has stopped, before Postgres does
		databaseURL = through
	}

	var pmxProcs []pmxProcess
	var metrics func() []string // the exchange's metrics addresses
	var fronts []string
	var ids []string
	stopExchange := func() error { return nil }
	running := true
	defer func() {
		if running {
			_ = stopExchange()
		}
	}()
	if o.Distributed {
		b.progressf("run %d/%d: starting kube-apiserver, etcd, pmx operator, %d pmx shard and %d pmx api (%s)", i+1, len(o.Rates), o.Shards, o.Fronts, o.PMX)
		d, err := startDistributed(ctx, o, dir, databaseURL, b.token)
		stopExchange = d.stop
		if err != nil {
			return nil, err
		}
		if ids, err = d.createMarkets(ctx, stats, o.Markets, fmt.Sprintf("bench %s, run %d", b.id, i+1)); err != nil {
			return nil, err
		}
		fronts, pmxProcs, metrics = d.fronts, d.processes(), d.metrics
	} else {
		b.progressf("run %d/%d: starting pmx dev (%s)", i+1, len(o.Rates), o.PMX)
		devArgs, devURL := o.DevArgs, databaseURL
		if o.DevShards > 0 {
			devArgs = append([]string{"--shards=" + strconv.Itoa(o.DevShards)}, devArgs...)
			devURL = withPool(devURL, devPool(o.DevShards))
		}
		dev, err := startDev(ctx, o.PMX, devURL, dir, b.token, devArgs, filepath.Join(dir, "pmx-dev.log"))
		if err != nil {
			return nil, err
		}
		stopExchange = dev.stop
		if ids, err = createMarkets(ctx, dev.url, b.token, o.Markets, fmt.Sprintf("bench %s, run %d", b.id, i+1)); err != nil {
			return nil, err
		}
		if o.Fees != nil {
			if err := setFees(ctx, dev.url, b.token, ids, *o.Fees); err != nil {
				return nil, err
			}
		}
		fronts, pmxProcs = []string{dev.url}, []pmxProcess{{dev.name, dev.pid()}}
		metrics = func() []string {
			if u := dev.metrics(); u != "" {
				return []string{u}
			}
			return nil // a build whose banner names no metrics address
		}
	}
	var watch *feedWatch
	if o.FeedSubscribers > 0 {
		b.progressf("run %d/%d: %d feed subscribers on the book of every market", i+1, len(o.Rates), o.FeedSubscribers)
		if watch, err = watchFeed(ctx, fronts[0], b.token, ids, o.FeedSubscribers); err != nil {
			return nil, err
		}
		defer watch.stop()
	}

	// The readings every figure of the run starts from: before the load (its bots' accounts
	// included), or, with a warm-up, as the measured run begins, taken by loadgen's Measuring
	// while the bots run on.
	var (
		x0      pgCounters
		c0      cpuSample
		s0      ShardCounters
		h0      serverHistograms
		scraped time.Time
		locks   *lockSampler
	)
	begin := func() error {
		if o.Statements {
			if err := stats.startStatements(ctx); err != nil {
				return err
			}
		}
		var err error
		if x0, err = stats.counters(ctx); err != nil {
			return err
		}
		if c0, err = b.proc.sample(pmxProcs, cluster.Pid()); err != nil {
			return err
		}
		if s0, h0, err = scrapeShards(ctx, metrics()); err != nil {
			return err
		}
		scraped = time.Now()
		// The bench's connection is the lock sampler's until it stops, with the load.
		locks = startLockSampler(stats, LockSampleInterval)
		return nil
	}
	defer func() { // an interrupted or failed run
		if locks != nil {
			_, _ = locks.stop()
		}
	}()
	lc := loadgen.Config{URL: fronts[0], Fronts: fronts[1:], AdminToken: b.token, Bots: o.Bots, Rate: rate,
		Duration: o.Duration, Markets: o.Markets, Seed: o.Seed, Mix: o.Mix}
	if o.Warmup > 0 {
		lc.Warmup, lc.Measuring = o.Warmup, begin
	} else if err := begin(); err != nil {
		return nil, err
	}
	rep, err := loadgen.Run(ctx, lc, o.Progress)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ErrInterrupted
		}
		return nil, err
	}
	if locks == nil { // interrupted in the warm-up: nothing was measured
		return nil, ErrInterrupted
	}
	c1, err := b.proc.sample(pmxProcs, cluster.Pid())
	if err != nil {
		return nil, err
	}
	lockWaits, err := locks.stop()
	if err != nil {
		return nil, err
	}
	var shards *ShardCounters
	var server *ServerTimes
	if urls := metrics(); len(urls) > 0 {
		s1, h1, err := scrapeShards(ctx, urls)
		if err != nil {
			return nil, err
		}
		d := s1.sub(s0)
		d.Seconds = time.Since(scraped).Seconds()
		shards = &d
		server = h1.times(h0)
	}
	var feedResult *FeedResult
	if watch != nil {
		feedResult = watch.result()
	}
	running = false
	if err := stopExchange(); err != nil {
		return nil, err
	}
	tail := context.WithoutCancel(ctx) // an interrupted run still gets its figures
	if err := stats.waitClientsGone(tail); err != nil {
		return nil, err
	}
	x1, err := stats.counters(tail)
	if err != nil {
		return nil, err
	}
	r := newRunResult(rate, rep, x1.sub(x0), c1.sub(c0))
	r.WALFilesReady = x0.walReady
	r.Feed = feedResult
	r.Shards = shards
	r.Server = server
	r.LockWaits = &lockWaits
	if o.Fees != nil {
		if r.FeesTaken, err = stats.feesTaken(tail); err != nil {
			return nil, err
		}
	}
	if o.Statements {
		if r.Statements, err = stats.statements(tail, r.Orders); err != nil {
			return nil, err
		}
	}
	b.progressf("run %d/%d: %s orders/s, placement p50 %s p99 %s, %.2f transactions and %s CPU per order, %.2f backends waiting on row locks",
		i+1, len(o.Rates), formatRate(r.OrdersPerSec), formatUs(r.P50Us), formatUs(r.P99Us), r.TransactionsPerOrder, formatUs(int64(r.CPUPerOrderUs)),
		lockWaits.RowMean)
	if rep.Interrupted {
		return r, ErrInterrupted
	}
	return r, nil
}

func newRunResult(rate float64, rep *loadgen.Report, pg pgCounters, cpu cpuSample) *RunResult {
	r := &RunResult{Mode: rep.Mode, OfferedRate: rate, Seconds: rep.Seconds, Orders: rep.Orders,
		OrdersPerSec: rep.OrdersPerSec, Fills: rep.Fills, Rejected: rep.Rejected, Failed: rep.Failed,
		Transactions: pg.transactions, Checkpoints: pg.checkpoints, WALFilesCreated: pg.walFiles, Loadgen: rep,
		CPU: CPUSeconds{PMX: cpu.pmx.Seconds(), Postgres: cpu.postgres.Seconds(), Loadgen: cpu.loadgen.Seconds(),
			Others: cpu.others().Seconds()}}
	if pg.checkpoints > 0 {
		r.WALFilesCreated = -1
	}
	if len(cpu.pmxBy) > 1 {
		r.CPU.PMXByProcess = make(map[string]float64, len(cpu.pmxBy))
		for name, d := range cpu.pmxBy {
			r.CPU.PMXByProcess[name] = d.Seconds()
		}
	}
	for _, k := range rep.Requests {
		if k.Kind == "place" {
			r.P50Us, r.P99Us, r.P999Us = k.P50Us, k.P99Us, k.P999Us
		}
	}
	if r.Orders > 0 {
		n := float64(r.Orders)
		r.TransactionsPerOrder = float64(pg.transactions) / n
		r.WALBytesPerOrder = float64(pg.walBytes) / n
		r.WALFPIPerOrder = float64(pg.walFPI) / n
		r.PMXPerOrderUs = r.CPU.PMX * 1e6 / n
		r.PGPerOrderUs = r.CPU.Postgres * 1e6 / n
		r.CPUPerOrderUs = r.PMXPerOrderUs + r.PGPerOrderUs
	}
	if r.Seconds > 0 {
		r.CoresBusy = (r.CPU.PMX + r.CPU.Postgres + r.CPU.Loadgen) / r.Seconds
		r.OtherCores = r.CPU.Others / r.Seconds
	}
	return r
}

func (b *bench) progressf(format string, args ...any) {
	if b.o.Progress != nil {
		fmt.Fprintf(b.o.Progress, format+"\n", args...)
	}
}

// machineInfo describes this machine; the Postgres part is filled in once the cluster runs.
func machineInfo() Machine {
	m := Machine{Cores: runtime.NumCPU(), OS: runtime.GOOS, Arch: runtime.GOARCH, GoVersion: runtime.Version()}
	if f, err := os.Open("/proc/cpuinfo"); err == nil {
		defer f.Close()
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			if k, v, ok := strings.Cut(sc.Text(), ":"); ok && strings.TrimSpace(k) == "model name" {
				m.CPU = strings.Join(strings.Fields(v), " ")
				break
			}
		}
	}
	return m
}

// ParseRates parses a comma-separated list of offered rates (placements per second), e.g.
// "1000,2000,5000"; underscores may group digits.
func ParseRates(s string) ([]float64, error) {
	var rates []float64
	for f := range strings.SplitSeq(s, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		r, err := strconv.ParseFloat(strings.ReplaceAll(f, "_", ""), 64)
		if err != nil || !(r > 0) || math.IsInf(r, 0) {
			return nil, fmt.Errorf("bad rate %q: want a positive number of orders per second", f)
		}
		rates = append(rates, r)
	}
	if len(rates) == 0 {
		return nil, fmt.Errorf("no rate in %q", s)
	}
	return rates, nil
}

// CommandLine renders args as a command a POSIX shell would split back into args, for the report.
func CommandLine(args []string) string {
	quoted := make([]string, len(args))
	for i, a := range args {
		if a != "" && strings.Trim(a, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_./=:,@+%") == "" {
			quoted[i] = a
		} else {
			quoted[i] = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
		}
	}
	return strings.Join(quoted, " ")
}
