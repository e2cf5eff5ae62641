// Package shard is pmx shard: a matching shard, serving the markets the operator assigns to it.
package shard

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/pmx-dev/pmx/internal/cmd/process"
	"github.com/pmx-dev/pmx/internal/cmd/serve"
	"github.com/pmx-dev/pmx/internal/feed"
	"github.com/pmx-dev/pmx/internal/kit/httpkit"
	pmxshard "github.com/pmx-dev/pmx/internal/shard"
	"github.com/pmx-dev/pmx/internal/shardclient"
	"github.com/pmx-dev/pmx/internal/shardserver"
	"github.com/pmx-dev/pmx/internal/store"
)

type shardOptions struct {
	maxOpenOrders  int
	eventRetention time.Duration
	keepEvents     bool
	shards         int
	databaseURL    string
	name           string
	pool           string
	addr           string
	advertise      string
	internalToken  string
	process        process.Options
	// logger, when set, is the process's log in place of process.Start's (on stderr): a test's,
	// which reads what the shard says it did.
	logger *slog.Logger
}

func NewCommand() *cobra.Command {
	host, _ := os.Hostname()
	o := shardOptions{}
	cmd := &cobra.Command{
		Use:   "shard",
		Short: "Run a matching shard: serve the markets the operator assigns to it",
		Long: `pmx shard registers itself in Postgres with a heartbeat, loads the markets the operator assigns
to it, matches their orders in memory and commits them with an epoch check (a fencing token), and
serves the front API over an internal HTTP API. On SIGTERM it finishes the orders in flight and
hands its markets back. Within the process, --shards matching loops (by default one per core)
share the markets assigned to it, each with its own Postgres connection; to the operator and the
fronts the process is one shard.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, stop := process.SignalContext(cmd)
			defer stop()
			return runShard(ctx, o)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.databaseURL, "database-url", process.EnvOr("PMX_DATABASE_URL", ""), "the exchange's Postgres (default $PMX_DATABASE_URL)")
	f.StringVar(&o.name, "name", process.EnvOr("PMX_SHARD_NAME", host), "the shard's name, unique among shards (default $PMX_SHARD_NAME, else the host name)")
	f.StringVar(&o.pool, "pool", process.EnvOr("PMX_SHARD_POOL", "default"), "the ShardPool this shard runs in: the operator places on it only the markets of that pool (default $PMX_SHARD_POOL, else default; docs/operations.md)")
	f.StringVar(&o.addr, "addr", ":8090", "address to serve the internal API and health endpoints on")
	f.StringVar(&o.advertise, "advertise-address", process.EnvOr("PMX_ADVERTISE_ADDRESS", ""), "host:port the front API reaches this shard at, or a host alone with the listening port (default: the host name and the listening port)")
	f.StringVar(&o.internalToken, "internal-token", process.EnvOr("PMX_INTERNAL_TOKEN", ""), "secret shared with the front API (default $PMX_INTERNAL_TOKEN)")
	f.IntVar(&o.maxOpenOrders, "max-open-orders", pmxshard.DefaultMaxOpenOrders, "most open orders one account may have in one market")
	f.DurationVar(&o.eventRetention, "event-retention", pmxshard.DefaultEventRetention, "how long the markets' and accounts' feed events are kept (the terms of orders amends moved are kept for ever, for pmx audit)")
	f.BoolVar(&o.keepEvents, "keep-events", false, "keep the markets' and accounts' feed events for ever (--event-retention is then unused); pmx audit does not need it: the pruning keeps the amended orders' terms it replays (docs/operations.md)")
	f.IntVar(&o.shards, "shards", runtime.GOMAXPROCS(0), "matching loops to spread this process's markets over, each with its own Postgres connection (default: one per core it may use, GOMAXPROCS: the container's CPU limit)")
	process.AddFlags(cmd, &o.process, true)
	process.AddMetricsFlag(cmd, &o.process, ":9090")
	return cmd
}

func runShard(ctx context.Context, o shardOptions) error {
	if o.databaseURL == "" || o.internalToken == "" || o.name == "" {
		return fmt.Errorf("--database-url, --internal-token and --name are required (or $PMX_DATABASE_URL, $PMX_INTERNAL_TOKEN, $PMX_SHARD_NAME)")
	}
	if o.shards < 1 {
		return fmt.Errorf("--shards %d: pmx shard needs at least one matching loop", o.shards)
	}
	log, err := process.Start(o.process)
	if err != nil {
		return err
	}
	if o.logger != nil {
		log = o.logger
	}
	log = log.With("shard", o.name)
	st, err := process.OpenStore(ctx, o.databaseURL, log, o.shards)
	if err != nil {
		return err
	}
	defer st.Close()
	reg := httpkit.NewRegistry()
	reg.MustRegister(st.Collector())
	metricsAddr, stopMetrics, err := process.StartMetrics(o.process.MetricsAddr, reg, log)
	if err != nil {
		return err
	}
	defer stopMetrics()
	ln, err := process.Listen(o.addr)
	if err != nil {
		return err
	}
	host, _ := os.Hostname()
	advertise := advertised(o.advertise, o.addr, ln.Addr().String(), host)

	bus := &feed.Bus{}
	sh := pmxshard.NewSet(pmxshard.Config{Store: st, Name: o.name, Logger: log, Metrics: reg, MaxOpenOrders: o.maxOpenOrders,
		EventRetention: o.eventRetention, KeepEvents: o.keepEvents, Feed: bus}, o.shards)
	beatCtx, stopBeat := context.WithCancel(context.Background())
	beatDone := make(chan struct{})
	// A process superseded by another under its name (store.Register) stops, with an error.
	ctx, supersede := context.WithCancelCause(ctx)
	defer supersede(nil)
	go func() {
		defer close(beatDone)
		if err := sh.Run(beatCtx, pmxshard.Registration{Address: advertise, Pool: o.pool}); err != nil {
			supersede(fmt.Errorf("shard %s: %w", o.name, err))
		}
	}()
	log.Info("shard serving", "addr", ln.Addr().String(), "advertise", advertise)
	fmt.Printf("pmx shard %s is running on %s (advertised as %s)\n%s", o.name, ln.Addr(), advertise, process.MetricsLine(metricsAddr))

	// A graceful stop first hands the markets to the other live shards (the planned handoff,
	// docs/architecture.md §6) while the process still serves: what it took for them commits here,
	// and the fronts send what follows on to the new owners. Only then does the server shut down.
	serveCtx, stopServing := context.WithCancel(context.Background())
	defer stopServing()
	go func() {
		defer stopServing()
		select {
		case <-ctx.Done():
		case <-serveCtx.Done():
			return
		}
		if !errors.Is(context.Cause(ctx), store.ErrSuperseded) {
			handOffOnStop(st, o, sh, log)
		}
	}()
	// The fronts' feed streams end when the process stops, for the server's shutdown not to wait
	// on them.
	err = serve.Serve(serveCtx, ln, shardserver.Server{Shard: sh, Store: st, Token: o.internalToken, Logger: log, Metrics: reg,
		Feed: bus, Stopping: serveCtx.Done()}.Handler(),
		httpkit.Limits{MaxConnsPerClient: -1, ShutdownDelay: shardShutdownDelay}, log) // its clients are the fronts, a few addresses
	// Orders in flight are answered by now; hand the markets back, then stop.
	stopBeat()
	<-beatDone
	sh.Stop()
	if cause := context.Cause(ctx); errors.Is(cause, store.ErrSuperseded) {
		return cause
	}
	return err
}

// advertised is the address a shard registers for the fronts to reach it at: flag as it is when
// it names a port; a host alone (a pod's IP, which the chart gives: v4 or v6) with the port the
// shard listens on; with no flag, the host the shard listens on (else the machine's name) and port.
func advertised(flag, addr, listening, hostname string) string {
	_, port, _ := net.SplitHostPort(listening)
	if flag != "" {
		if _, _, err := net.SplitHostPort(flag); err == nil {
			return flag
		}
		return net.JoinHostPort(strings.Trim(flag, "[]"), port)
	}
	if h, _, _ := net.SplitHostPort(addr); h != "" {
		hostname = h
	}
	return net.JoinHostPort(hostname, port)
}

// handOffOnStop hands a stopping shard's markets to the other live shards of their pools, waiting,
// bounded, for its pool's successors when none can take them (handOver), then keeps serving for
// a moment: a front that still routes to this shard from its cache of owners (a second) is refused
// with nothing done and follows the market, rather than finding the port closed under a request
// it sent. It returns within handOffOnStopTimeout of the SIGTERM; what it could not hand over, the
// process's unregistering releases.
func handOffOnStop(st *store.Store, o shardOptions, sh *pmxshard.Set, log *slog.Logger) {
	stopped := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), handOffOnStopTimeout)
	defer cancel()
	// First no market may be moved onto this shard (the operator's spread would answer its
	// emptying with moves onto it, just before it stops).
	if err := st.Drain(ctx, o.name); err != nil {
		log.Warn("could not mark the shard as draining; handing its markets over all the same", "err", err)
	}
	router := &shardclient.Router{Store: st, Token: o.internalToken, Logger: log}
	n := handOver(ctx, stopped, func(ctx context.Context) ([]string, error) {
		return st.Successors(ctx, o.pool, o.name, handOffOnStopTTL)
	}, func(ctx context.Context) (handed, stayed int) {
		handed, stayed, err := router.HandOffAll(ctx, o.name, sh, handOffOnStopTTL)
		if err != nil {
			log.Warn("could not hand the markets over on stopping; unregistering releases them", "err", err)
		}
		return handed, stayed
	}, log)
	if n == 0 {
		return
	}
	log.Info("handed the markets over to the other live shards", "markets", n)
	t := time.NewTimer(time.Second) // the fronts' cache of owners (shardclient.Router.OwnerTTL)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}

// handOver is a stopping shard's handoffs: handOff (shardclient.Router.HandOffAll) hands every
// OPEN market it owns to a live shard of the market's pool, and returns how many markets it
// handed over and how many units stayed for want of one. While some stay and the pool expects
// shards other than this one that are not live (successors: store.Successors, the names the
// ShardPool reconciler records), handOver reads them again every successorsPoll, and hands over
// again as soon as they change — one of them is live now, which the planned handoff then finds.
// It returns how many markets were handed over in all.
//
// It waits only for shards known to be coming. When the pool expects none but this one — a
// single-replica pool's rolling update, whose replacement has this shard's name and starts only
// once this process has exited, or a pool no ShardPool runs (the chart's own StatefulSet, scaled
// down) — it gives up successorsLag after the SIGTERM (stopped), and unregistering releases the
// markets as before. The wait ends, whatever is still to come, successorsWait after the SIGTERM.
func handOver(ctx context.Context, stopped time.Time, successors func(context.Context) ([]string, error),
	handOff func(context.Context) (handed, stayed int), log *slog.Logger) int {
	// The successors are read before the first handoff, so that one that goes live between the
	// two is seen to: its name leaves the list.
	names, err := successors(ctx)
	if err != nil {
		log.Warn("could not read the pool's successors; handing the markets to the live shards alone", "err", err)
		handed, _ := handOff(ctx)
		return handed
	}
	handed, stayed := handOff(ctx)
	if stayed == 0 {
		return handed
	}
	tick := time.NewTicker(successorsPoll)
	defer tick.Stop()
	waiting := false
	for {
		if len(names) > 0 && !waiting {
			log.Info("waiting for the pool's successors", "successors", names, "units", stayed,
				"for", time.Until(stopped.Add(successorsWait)).Round(time.Millisecond))
			waiting = true
		}
		switch elapsed := time.Since(stopped); {
		case waiting && len(names) == 0:
			log.Warn("the pool expects no shard that is not live, yet some markets found no shard of their pool to take them; unregistering releases them",
				"units", stayed, "handed", handed, "waited", elapsed.Round(time.Millisecond))
			return handed
		case !waiting && elapsed >= successorsLag:
			return handed // none is coming
		case elapsed >= successorsWait:
			log.Warn("gave up waiting for the pool's successors; unregistering releases the markets left",
				"successors", names, "units", stayed, "handed", handed, "waited", elapsed.Round(time.Millisecond))
			return handed
		}
		select {
		case <-ctx.Done():
			log.Warn("stopped waiting for the pool's successors: the stop's time is up", "successors", names, "handed", handed)
			return handed
		case <-tick.C:
		}
		next, err := successors(ctx)
		if err != nil {
			log.Warn("could not read the pool's successors; unregistering releases the markets left", "err", err, "handed", handed)
			return handed
		}
		if !slices.Equal(next, names) {
			// One of them is live now (its name left the list), or the expectation changed or was
			// just written: another handoff finds whoever is live, if any. (The operator writes the
			// expectation before the pool's StatefulSet, so before any of its shards is live.)
			n, left := handOff(ctx)
			handed, stayed = handed+n, left
			if stayed == 0 {
				log.Info("handed the markets left over to the pool's successors", "markets", handed,
					"waited", time.Since(stopped).Round(time.Millisecond))
				return handed
			}
		}
		names = next
	}
}

// shardShutdownDelay is how long a stopping shard's server serves on once it is done with its
// markets, closing each front's connection after its answer (httpkit.Limits.ShutdownDelay),
// before it closes the connections left idle: a front sending a write on a kept-alive connection
// just as the server closed it could not know whether the write was carried out (503
// outcome_unknown), while one that finds the port closed knows it was not, and re-routes.
const shardShutdownDelay = time.Second

// A stopping shard's handoffs (handOffOnStop) fit in its pod's terminationGracePeriodSeconds, 30 s
// by default (the chart's and a ShardPool's), after which Kubernetes kills it:
const (
	// handOffOnStopTimeout bounds the whole of handOffOnStop from the SIGTERM: the wait for the
	// pool's successors, the handoffs after it and the pause for the fronts' cache of owners. What
	// follows it — shardShutdownDelay, the batch loops' last batches, unregistering — takes about
	// 2 s, so that 25 s leaves some slack within the 30.
	handOffOnStopTimeout = 25 * time.Second
	// successorsWait bounds the wait for the pool's successors (handOver), from the SIGTERM: the
	// pods of a ShardPool that replaces the chart's shards start and register in about 5 s, and
	// the handoffs once one has have the 10 s left of handOffOnStopTimeout.
	successorsWait = 15 * time.Second
	// successorsLag is how long after the SIGTERM a stopping shard reads its pool's successors
	// again when it finds none. When a ShardPool replaces the chart's own shards (helm upgrade),
	// the operator records the pool's shards within milliseconds of the ShardPool's creation, but
	// Kubernetes SIGTERMs the old pods at about the same time, as Helm deletes their StatefulSet:
	// a shard can stop just before the pool's expectation is written. Waiting so long for nothing
	// costs only a slower stop (the shard serves on meanwhile).
	successorsLag = 1500 * time.Millisecond
	// successorsPoll is how often the successors are read again while waiting.
	successorsPoll = 250 * time.Millisecond
	// handOffOnStopTTL is how recent a shard's heartbeat must be for it to be given markets, or
	// counted as a successor that is live (three heartbeats).
	handOffOnStopTTL = 3 * time.Second
)
