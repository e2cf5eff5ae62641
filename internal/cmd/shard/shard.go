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

// handOffOnStop hands a stopping shard's markets to the other live shards (shardclient.Router.HandOffAll),
// then keeps serving for a moment: a front that still routes to this shard from its cache of owners
// (a second) is refused with nothing done and follows the market, rather than finding the port
// closed under a request it sent.
func handOffOnStop(st *store.Store, o shardOptions, sh *pmxshard.Set, log *slog.Logger) {
	ctx, cancel := context.WithTimeout(context.Background(), handOffOnStopTimeout)
	defer cancel()
	// First no market may be moved onto this shard (the operator's spread would answer its
	// emptying with moves onto it, just before it stops).
	if err := st.Drain(ctx, o.name); err != nil {
		log.Warn("could not mark the shard as draining; handing its markets over all the same", "err", err)
	}
	router := &shardclient.Router{Store: st, Token: o.internalToken, Logger: log}
	n, err := router.HandOffAll(ctx, o.name, sh, handOffOnStopTTL)
	if err != nil {
		log.Warn("could not hand the markets over on stopping; unregistering releases them", "err", err)
	}
	if n == 0 {
		return
	}
	log.Info("handed the markets over to the other live shards", "markets", n)
	t := time.NewTimer(time.Second) // the fronts' cache of owners (shardclient.Router.OwnerTTL)
	defer t.Stop()
	<-t.C
}

// shardShutdownDelay is how long a stopping shard's server serves on once it is done with its
// markets, closing each front's connection after its answer (httpkit.Limits.ShutdownDelay),
// before it closes the connections left idle: a front sending a write on a kept-alive connection
// just as the server closed it could not know whether the write was carried out (503
// outcome_unknown), while one that finds the port closed knows it was not, and re-routes.
const shardShutdownDelay = time.Second

// handOffOnStopTimeout bounds the handoffs of a stopping shard, well within Kubernetes' default
// grace of 30 s; handOffOnStopTTL is how recent a shard's heartbeat must be for it to be given
// markets (three heartbeats).
const (
	handOffOnStopTimeout = 15 * time.Second
	handOffOnStopTTL     = 3 * time.Second
)
