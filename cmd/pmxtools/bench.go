package main

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/pmx-dev/pmx/engine"
	"github.com/pmx-dev/pmx/internal/tools/bench"
	"github.com/pmx-dev/pmx/internal/tools/loadgen"
)

func newBenchCommand() *cobra.Command {
	var (
		o        bench.Options
		fees     string
		rate     float64
		sweep    string
		chart    string
		asJSON   bool
		jsonFile string
		verbose  bool
		quiet    bool
		floors   bool
		settings []string
		shards   int
	)
	cmd := &cobra.Command{
		Use:   "bench",
		Short: "Benchmark the whole exchange: pmx dev on a durable private Postgres, driven by pmxtools loadgen",
		Long: `bench measures the exchange end to end on this machine. For each run it starts a fresh
private PostgreSQL cluster with the durable settings pmx dev uses (fsync and synchronous commit
on) in a temporary directory (or under --data-dir, kept), starts pmx dev (--pmx, default the
pmx beside this binary, else on $PATH) on it on a free loopback port, creates --markets markets
through the admin API, and drives them in-process with the load generator of pmxtools loadgen:
--bots bots for --duration,
closed loop (each bot sends as soon as it is answered) unless --rate or --sweep sets an
offered load (open loop, latency from each request's scheduled send time). A young database
gets slower as dead row versions pile up and faster as their space is reused, so every run
starts from an empty one: runs compare, whatever ran before them.

--mix picks the bots' requests: basic (the default, the mix of every earlier figure: single
placements, cancels, reads) or market-maker (batches of placements, amends, cancels of
several orders at once; see pmxtools loadgen --help).

It prints one row per run: acknowledged orders/s, placement latency p50, p99 and p99.9,
Postgres transactions per order (pg_stat_database, read before and after) and CPU per order:
the user + system time of pmx dev and of every Postgres process (the postmaster, its live
children and the children it reaped, from /proc), divided by the acknowledged orders.

--distributed runs the distributed exchange instead of pmx dev, as processes on this machine:
a kube-apiserver and etcd with pmx's CRDs (the binaries ` + "`make k8s-bins`" + ` builds into bin/k8s/,
or --kube-assets), pmx operator on it (with the chart's defaults, the rebalancer off), --shards
pmx shard and --fronts pmx api processes; the markets are Market resources the operator places
on the shards, and the bots are spread over the fronts. CPU per order then counts every pmx
process, and a line gives it by process (pmx api, pmx shard, pmx operator); the control plane
counts as other.

--shards N without --distributed runs pmx dev with N matching shards in its one process (pmx dev
--shards; by default one per two cores). Each shard keeps a connection of pmx dev's pool as its
own, so the bench gives the pool one more for each (pool_max_conns in pmx dev's database URL):
with as many shards as its default pool has connections (16 on 2 cores), the shards would hold
them all and the API would wait for one for ever.

Every run samples Postgres's backends (pg_stat_activity, every 100ms, on the bench's own
connection) and reports how many were waiting on row locks, per sample: a backend waiting for a
row another transaction holds shows wait_event_type Lock with wait_event transactionid, or tuple
when it queues behind such a waiter. The backends line gives what every backend not idle was doing,
per sample: running, idle in transaction (waiting for pmx), or the wait it was in, such as
IO:WALSync (a commit's flush) or LWLock:WALWrite (queued for one).

--db-latency D puts a TCP proxy of the bench's own between the exchange (pmx dev, or every
process of the distributed one) and Postgres that holds each direction's bytes for D/2, so every
round trip takes D longer, as it does to a Postgres on another node; the bench's own connection
goes direct, and the proxy's CPU counts as the load generator's. Whether more shards scale once
each batch's round trips are that long is issue 53's check: compare
  pmxtools bench --db-latency 1ms --shards 1
  pmxtools bench --db-latency 1ms --shards 8
on a quiet machine (their orders/s, and the rowlocks column).

Each run's Postgres is a fresh cluster, which has no WAL file made ahead: it creates and
zero-fills each one as its WAL reaches it, while the commits waiting for the WAL's flush wait for
that too (the wal line counts the files created; the backends line shows IO:WALInitWrite and
IO:WALInitSync). A server that has run a while writes into files its checkpoints recycled.
--warm-wal MIB writes that much WAL and checkpoints before the exchange starts, so that each run
writes into recycled files (up to max_wal_size of them), as such a server does.

--sweep R1,R2,... runs open loop at each offered rate in turn; --chart FILE draws their
placement latency against the offered load (PNG, SVG or PDF, from the extension).

Ctrl-C stops the bench early, stops pmx dev and Postgres cleanly and prints what was measured.`,
		Example: `  pmxtools bench                              # 64 bots, 8 markets, 20s, closed loop
  pmxtools bench --mix market-maker -v        # batches and amends; -v: every request kind's latency
  pmxtools bench --bots 16 --duration 60s --json
  pmxtools bench --floors                     # also the HTTP and commit floors, and each run's ratio to them
  pmxtools bench --statements                 # also where Postgres's statement time went, per order
  pmxtools bench --sweep 500,1000,1500,2000,3000 --chart docs/latency.png
  pmxtools bench --pmx /tmp/pmx-before/bin/pmx  # measure another build
  pmxtools bench --pg-setting max_wal_size=16GB --pg-setting shared_buffers=4GB  # a tuned Postgres
  pmxtools bench --dev-arg=--pprof-addr=127.0.0.1:6060   # then: go tool pprof http://127.0.0.1:6060/debug/pprof/profile
  pmxtools bench --dev-arg=--metrics-addr=127.0.0.1:9090 # then: curl 127.0.0.1:9090/metrics (by default a free port)
  pmxtools bench --distributed --shards 4 --fronts 2 # operator, 4 pmx shard and 2 pmx api processes
  pmxtools bench --shards 8                   # pmx dev with 8 matching shards
  pmxtools bench --db-latency 1ms --shards 8  # Postgres 1ms of round trip away, as on another node
  pmxtools bench --warm-wal 1024 --rate 2000  # WAL files made ahead, as on a server that has run a while`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkJSONFile(jsonFile); err != nil {
				return err
			}
			switch {
			case sweep != "" && rate != 0:
				return errors.New("--rate and --sweep exclude each other")
			case sweep != "":
				rates, err := bench.ParseRates(sweep)
				if err != nil {
					return fmt.Errorf("--sweep: %w", err)
				}
				o.Rates = rates
			case rate < 0:
				return errors.New("--rate must not be negative")
			default:
				o.Rates = []float64{rate}
			}
			pgSettings, err := bench.ParseSettings(settings)
			if err != nil {
				return fmt.Errorf("--pg-setting: %w", err)
			}
			o.PGSettings = pgSettings
			switch f := cmd.Flags(); {
			case o.Distributed:
				o.Shards = cmp.Or(shards, 2)
			case f.Changed("shards") && slices.ContainsFunc(o.DevArgs, func(a string) bool { return a == "--shards" || strings.HasPrefix(a, "--shards=") }):
				return errors.New("pmx dev's shards are given twice, by --shards and by --dev-arg: give one")
			case f.Changed("shards"):
				if shards < 1 {
					return fmt.Errorf("--shards %d: pmx dev needs at least one shard", shards)
				}
				o.DevShards = shards
			}
			if o.DBLatency < 0 {
				return errors.New("--db-latency must not be negative")
			}
			if o.WarmWALMiB < 0 {
				return errors.New("--warm-wal must not be negative (MiB of WAL; 0: none)")
			}
			if fees != "" {
				f, err := parseFees(fees)
				if err != nil {
					return err
				}
				o.Fees = &f
			}
			if chart != "" && len(o.Rates) < 2 {
				return errors.New("--chart needs a --sweep of at least two rates")
			}
			if o.PMX == "" {
				self, _ := os.Executable() // unknown: $PATH alone
				pmx, err := findPMX(self)
				if err != nil {
					return err
				}
				o.PMX = pmx
			}
			if floors {
				exe, err := os.Executable()
				if err != nil {
					return fmt.Errorf("--floors: cannot find this binary to serve the HTTP floor from: %w", err)
				}
				o.FloorServer = exe
			}
			o.Command = bench.CommandLine(os.Args)
			if !quiet {
				o.Progress = cmd.ErrOrStderr()
			}
			o.Logger = slog.New(slog.NewTextHandler(cmd.ErrOrStderr(), &slog.HandlerOptions{Level: slog.LevelWarn}))

			ctx, stop := signalContext(cmd) // pmx dev and Postgres get parent-death signals
			defer stop()
			res, runErr := bench.Run(ctx, o)
			if res == nil {
				return runErr
			}
			if verbose {
				for _, r := range res.Runs {
					fmt.Fprintln(cmd.ErrOrStderr())
					_ = r.Loadgen.WriteText(cmd.ErrOrStderr())
				}
			}
			if asJSON {
				err = res.WriteJSON(cmd.OutOrStdout())
			} else {
				fmt.Fprintln(cmd.OutOrStdout())
				err = res.WriteText(cmd.OutOrStdout())
			}
			if jsonFile != "" {
				err = errors.Join(err, writeJSONFile(jsonFile, res.WriteJSON))
			}
			if chart != "" && runErr == nil && err == nil {
				if err = res.WriteChart(chart); err == nil && !quiet {
					fmt.Fprintf(cmd.ErrOrStderr(), "chart written to %s\n", chart)
				}
			}
			return errors.Join(runErr, err)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.PMX, "pmx", "", "pmx binary to run the exchange from (default: the pmx beside this binary, else on $PATH)")
	f.IntVar(&o.Bots, "bots", bench.DefaultBots, "concurrent bots, each its own account")
	f.IntVar(&o.Markets, "markets", bench.DefaultMarkets, "markets to create and trade, fresh for each run")
	f.DurationVar(&o.Duration, "duration", bench.DefaultDuration, "length of each run")
	f.DurationVar(&o.Warmup, "warmup", 0, "run the load this long before each run's --duration, apart from every figure (an exchange just started is slower at first: the report gives the warm-up's own p99)")
	f.Float64Var(&rate, "rate", 0, "open loop: offered order placements per second over all bots (0 = closed loop)")
	f.StringVar(&sweep, "sweep", "", "open-loop runs at each of these offered rates, comma-separated (e.g. 500,1000,2000)")
	f.StringVar(&chart, "chart", "", "with --sweep: draw placement latency against offered load into this file (.png, .svg, .pdf)")
	f.Uint64Var(&o.Seed, "seed", bench.DefaultSeed, "seed of the bots' random choices")
	f.StringVar((*string)(&o.Mix), "mix", string(loadgen.MixBasic), "the bots' choice of requests: "+loadgen.MixNames())
	f.IntVar(&o.FeedSubscribers, "feed-subscribers", 0, "WebSocket clients following the book of every market during each run (0: none); the feed's figures are reported")
	f.StringVar(&o.DataDir, "data-dir", "", "folder for each run's Postgres cluster and pmx dev log (run-N/), kept and reused (default: a temporary folder, removed)")
	f.StringArrayVar(&settings, "pg-setting", nil, "a server setting NAME=VALUE for each run's Postgres, repeatable (e.g. --pg-setting max_wal_size=16GB); the report gives the value the server took")
	f.StringArrayVar(&o.DevArgs, "dev-arg", nil, "extra argument for pmx dev, repeatable (e.g. --dev-arg=--pprof-addr=127.0.0.1:6060)")
	f.BoolVar(&o.Distributed, "distributed", false, "run the distributed exchange (operator, pmx shard and pmx api processes) instead of pmx dev")
	f.IntVar(&shards, "shards", 0, "with --distributed: pmx shard processes (default 2); without it, pmx dev's matching shards (pmx dev --shards; default pmx dev's, one per two cores)")
	f.StringVar(&fees, "fees", "", "give every market this fee schedule, TAKER,MAKER in basis points of P × (1 − P) per share (e.g. 700,-175; docs/fees.md); default none")
	f.IntVar(&o.WarmWALMiB, "warm-wal", 0, "before each run, write this many MiB of WAL into its Postgres and checkpoint, so that the run writes into recycled WAL files as a server that has run a while does (at most max_wal_size of them; 0: none, every WAL file created as it is reached)")
	f.DurationVar(&o.DBLatency, "db-latency", 0, "add this to every round trip between the exchange and Postgres, through a TCP proxy in the bench (e.g. 1ms, as to a Postgres on another node; 0: none)")
	f.IntVar(&o.Fronts, "fronts", 1, "with --distributed: pmx api processes")
	f.StringArrayVar(&o.ShardArgs, "shard-arg", nil, "with --distributed: extra argument for every pmx shard, repeatable (e.g. --shard-arg=--shards=1)")
	f.StringArrayVar(&o.FrontArgs, "front-arg", nil, "with --distributed: extra argument for every pmx api, repeatable (e.g. --front-arg=--pprof-addr=127.0.0.1:6070 with --fronts 1)")
	f.StringVar(&o.KubeAssets, "kube-assets", "", "with --distributed: folder of kube-apiserver and etcd (default $KUBEBUILDER_ASSETS, else ./bin/k8s/<version>)")
	f.BoolVar(&o.Statements, "statements", false, "load pg_stat_statements into each run's Postgres and report the statements that took most of its execution time, per order (the module costs Postgres a little on every statement)")
	f.BoolVar(&floors, "floors", false, "first measure this machine's HTTP floor (the same bots against a server that does nothing) and commit floor (one durable commit, back to back), and give each run's ratio to them")
	f.DurationVar(&o.FloorDuration, "floor-duration", bench.DefaultFloorDuration, "with --floors: length of the HTTP floor's run")
	f.BoolVar(&asJSON, "json", false, "print the result as JSON, with each run's full loadgen report")
	f.StringVar(&jsonFile, "json-file", "", "also write the result as JSON, as --json prints it, into this file")
	f.BoolVarP(&verbose, "verbose", "v", false, "also print each run's full loadgen report (per request kind) on stderr")
	f.BoolVarP(&quiet, "quiet", "q", false, "no progress on stderr")
	cmd.AddCommand(newBenchHTTPCommand(), newBenchCommitCommand())
	return cmd
}

func newBenchHTTPCommand() *cobra.Command {
	var (
		o        bench.FloorOptions
		serve    string
		asJSON   bool
		jsonFile string
	)
	cmd := &cobra.Command{
		Use:   "http",
		Short: "Measure this machine's HTTP floor: the load generator's client against a server that does nothing",
		Long: `bench http measures what HTTP alone costs on this machine, as a bound on what the exchange can
reach here. It starts a server process (this binary; pmx's framework, gin, with one route that reads a
placement's body and answers a fixed ~300-byte placed order, no database) on a free loopback port
and drives it closed loop with the load generator's HTTP client for --duration: --bots
connections with keep-alive. It prints requests/s, the CPU time per request of the client (this
process) and of the server (from /proc), and the cores both used together.`,
		Example: `  pmxtools bench http             # 64 bots, 10s`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, stop := signalContext(cmd)
			defer stop()
			if serve != "" {
				return bench.FloorServe(ctx, serve, cmd.OutOrStdout())
			}
			if o.Bots < 1 || o.Duration <= 0 {
				return errors.New("--bots and --duration must be positive")
			}
			if err := checkJSONFile(jsonFile); err != nil {
				return err
			}
			exe, err := os.Executable()
			if err != nil {
				return fmt.Errorf("cannot find this binary to start the server from: %w", err)
			}
			o.Server = exe
			res, err := bench.Floor(ctx, o)
			if err != nil {
				return err
			}
			return printResult(cmd, asJSON, jsonFile, res)
		},
	}
	f := cmd.Flags()
	f.IntVar(&o.Bots, "bots", bench.DefaultBots, "concurrent connections, each sending as soon as it is answered")
	f.DurationVar(&o.Duration, "duration", 10*time.Second, "length of the run")
	f.BoolVar(&asJSON, "json", false, "print the result as JSON")
	f.StringVar(&jsonFile, "json-file", "", "also write the result as JSON, as --json prints it, into this file")
	f.StringVar(&serve, "serve", "", "run the floor server on this address instead (what bench http starts)")
	_ = f.MarkHidden("serve")
	return cmd
}

func newBenchCommitCommand() *cobra.Command {
	var (
		o        bench.CommitFloorOptions
		gaps     []time.Duration
		asJSON   bool
		jsonFile string
	)
	cmd := &cobra.Command{
		Use:   "commit",
		Short: "Measure this machine's commit floor: what one durable Postgres transaction costs, back to back and after idle gaps",
		Long: `bench commit measures what a durable commit alone costs on this machine, as a bound on how fast
the exchange can answer a placement here. It starts a fresh private PostgreSQL cluster with the
durable settings bench uses (fsync, synchronous_commit and full_page_writes on) and, on one
connection, times --count transactions in the shape of a shard's smallest batch (begin, an insert
of one row and commit, in one round trip) and as many bare round trips (select 1), each after an
idle gap, at each of --gaps. On a virtual machine both can cost several times more after a pause
than back to back, and at a low rate every placement comes after one.`,
		Example: `  pmxtools bench commit                     # 300 of each at gaps 0, 1ms and 10ms
  pmxtools bench commit --gaps 0,100us,1ms,5ms --count 1000 --json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkJSONFile(jsonFile); err != nil {
				return err
			}
			ctx, stop := signalContext(cmd)
			defer stop()
			o.Gaps = gaps
			o.Logger = slog.New(slog.NewTextHandler(cmd.ErrOrStderr(), &slog.HandlerOptions{Level: slog.LevelWarn}))
			res, err := bench.CommitFloor(ctx, o)
			if err != nil {
				return err
			}
			return printResult(cmd, asJSON, jsonFile, res)
		},
	}
	f := cmd.Flags()
	f.IntVar(&o.Count, "count", 300, "round trips and transactions timed at each gap")
	f.DurationSliceVar(&gaps, "gaps", bench.DefaultCommitGaps, "idle gaps to time them after, comma-separated")
	f.StringVar(&o.Dir, "data-dir", "", "keep the cluster in this folder (default: a temporary one, removed)")
	f.BoolVar(&asJSON, "json", false, "print the result as JSON (durations in nanoseconds)")
	f.StringVar(&jsonFile, "json-file", "", "also write the result as JSON, as --json prints it, into this file")
	return cmd
}

// findPMX finds the pmx to start the exchange from when --pmx is not given: the one beside self
// (this binary; "" when unknown), as make build and the devbench pack place them, else the first
// on $PATH.
func findPMX(self string) (string, error) {
	if self != "" {
		beside := filepath.Join(filepath.Dir(self), "pmx")
		if fi, err := os.Stat(beside); err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
			return beside, nil
		}
	}
	if path, err := exec.LookPath("pmx"); err == nil {
		return path, nil
	}
	return "", errors.New("no pmx binary to start the exchange from, beside this one or on $PATH: build it (make build puts pmx and pmxtools in bin/) or name it with --pmx")
}

// printResult writes a floor's result to the command's output, as indented JSON or as its table,
// and also as JSON into jsonFile unless that is "".
func printResult(cmd *cobra.Command, asJSON bool, jsonFile string, res interface{ WriteText(io.Writer) error }) error {
	writeJSON := func(w io.Writer) error {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(res)
	}
	var err error
	if asJSON {
		err = writeJSON(cmd.OutOrStdout())
	} else {
		err = res.WriteText(cmd.OutOrStdout())
	}
	if jsonFile != "" {
		err = errors.Join(err, writeJSONFile(jsonFile, writeJSON))
	}
	return err
}

// checkJSONFile refuses, before anything runs, a --json-file that could not be written at the end
// ("" is none): its folder must exist.
func checkJSONFile(path string) error {
	if path == "" {
		return nil
	}
	dir := filepath.Dir(path)
	if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
		return fmt.Errorf("--json-file: no folder %s to write %s into: create it, or give a path in one that exists", dir, filepath.Base(path))
	}
	return nil
}

// writeJSONFile creates (or truncates) path and writes a result into it with write.
func writeJSONFile(path string, write func(io.Writer) error) error {
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("--json-file: %w", err)
	}
	if err := write(f); err != nil {
		f.Close()
		return fmt.Errorf("--json-file: while writing %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("--json-file: while writing %s: %w", path, err)
	}
	return nil
}

// parseFees reads --fees: TAKER,MAKER in basis points, a schedule engine.Fees.Validate accepts.
func parseFees(s string) (engine.Fees, error) {
	taker, maker, ok := strings.Cut(s, ",")
	t, err1 := strconv.Atoi(strings.TrimSpace(taker))
	m, err2 := strconv.Atoi(strings.TrimSpace(maker))
	f := engine.Fees{Taker: t, Maker: m}
	if !ok || err1 != nil || err2 != nil {
		return f, fmt.Errorf("--fees %q: give the taker's and the maker's rate in basis points, TAKER,MAKER (e.g. 700,-175)", s)
	}
	if err := f.Validate(); err != nil {
		return f, fmt.Errorf("--fees %q: the taker's rate must be 0 to 10000 and the maker's from minus the taker's to the taker's", s)
	}
	return f, nil
}
