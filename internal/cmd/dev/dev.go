// Package dev is pmx dev: the whole exchange in one process, on a private Postgres it starts itself.
package dev

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"time"

	"github.com/google/uuid"
	"github.com/spf13/cobra"

	"github.com/pmx-dev/pmx/api/v1alpha1"
	"github.com/pmx-dev/pmx/apiserver"
	"github.com/pmx-dev/pmx/config"
	"github.com/pmx-dev/pmx/internal/cmd/process"
	"github.com/pmx-dev/pmx/internal/cmd/serve"
	"github.com/pmx-dev/pmx/internal/domain"
	"github.com/pmx-dev/pmx/internal/eventrec"
	"github.com/pmx-dev/pmx/internal/feed"
	"github.com/pmx-dev/pmx/internal/kit/auth"
	"github.com/pmx-dev/pmx/internal/kit/httpkit"
	"github.com/pmx-dev/pmx/internal/kit/pgcluster"
	"github.com/pmx-dev/pmx/internal/market"
	"github.com/pmx-dev/pmx/internal/market/marketspec"
	"github.com/pmx-dev/pmx/internal/placement"
	"github.com/pmx-dev/pmx/internal/series/standalone"
	"github.com/pmx-dev/pmx/internal/shard"
	"github.com/pmx-dev/pmx/internal/store"
)

// builtinMarkets is the --markets value that loads the sample markets and event built into pmx.
const builtinMarkets = "builtin"

// How long pmx dev waits, at start, for another pmx dev on its database to let it go (one that
// was just killed does within milliseconds), and then for the batches a killed one left running
// in Postgres to end (store.ClaimStandalone, Claim.Fence); and, should its claim's session end
// while it runs, how long it waits to claim the database again (a process that took it meanwhile
// keeps it) and how often it tries while Postgres cannot be reached (Claim.Keep).
const (
	claimWait   = 5 * time.Second
	claimDrain  = time.Minute
	claimRetake = time.Second
	claimRetry  = time.Second
)

// devOptions are the flags of pmx dev.
type devOptions struct {
	addr           string
	dataDir        string
	databaseURL    string
	markets        string
	adminToken     string
	grant          int64
	maxQuantity    int64
	maxOrderGroups int
	maxOpenOrders  int
	eventRetention time.Duration
	keepEvents     bool
	noEventLog     bool
	shards         int
	process        process.Options
	serve          serve.Options
}

func NewCommand() *cobra.Command {
	o := devOptions{}
	cmd := &cobra.Command{
		Use:   "dev",
		Short: "Run the whole exchange in one process, on a private Postgres it starts itself",
		Long: `pmx dev runs the complete exchange in one process: the public API (/api/v1), the admin API
(/admin/v1), the matching shards (--shards, by default one per two cores: each matches its own
markets on its own goroutine and commits on its own connection) and the market lifecycle loop.

Its database is a private PostgreSQL cluster that it creates under --data-dir and starts itself
(from initdb/postgres on PATH or under /usr/lib/postgresql/*/bin); data survives restarts and
Ctrl-C stops it cleanly. --database-url uses an existing Postgres instead.

At start it loads the Market manifests in --markets, the same YAML kubectl apply takes, and the
Event manifests in its events/ folder (each an event with one market per outcome, as the operator
records it, with its paused and fees; its closed and resolution are the admin API's to change
here), and the MarketSeries manifests in its series/ folder (each series of markets or of events
lists its instances as the operator does, at each time of its schedule): by default the sample markets, event and series built into pmx
(config/samples, config/samples/events and config/samples/series in its repository), wherever it
is started from.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, stop := process.SignalContext(cmd)
			defer stop()
			return runDev(ctx, o, cmd.OutOrStdout())
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.addr, "addr", "127.0.0.1:8080", "address to serve HTTP on (port 0 picks a free one)")
	f.StringVar(&o.dataDir, "data-dir", ".pmx", "folder for the private Postgres cluster and the admin token")
	f.StringVar(&o.databaseURL, "database-url", "", "use this Postgres instead of a private cluster (postgres://...); one pmx dev serves a database, a second on it is refused")
	f.StringVar(&o.markets, "markets", builtinMarkets, `folder of Market manifests, and of Event and MarketSeries manifests in its events/ and series/, to load at start ("`+builtinMarkets+`": the sample markets, event and series built into pmx; empty: none; a folder named so: ./`+builtinMarkets+`)`)
	f.StringVar(&o.adminToken, "admin-token", "", "admin API token (default $PMX_ADMIN_TOKEN, else generated into <data-dir>/admin-token)")
	f.Int64Var(&o.grant, "grant", 1_000_000, "play money, in cents, that a new account starts with")
	f.Int64Var(&o.maxQuantity, "max-quantity", 1_000_000, "largest order quantity accepted")
	f.IntVar(&o.maxOrderGroups, "max-order-groups", apiserver.DefaultMaxOrderGroups, "most order groups one account may keep")
	f.IntVar(&o.maxOpenOrders, "max-open-orders", shard.DefaultMaxOpenOrders, "most open orders one account may have in one market")
	f.DurationVar(&o.eventRetention, "event-retention", shard.DefaultEventRetention, "how long the markets' and accounts' feed events are kept (the terms of orders amends moved are kept for ever, for pmx audit)")
	f.BoolVar(&o.keepEvents, "keep-events", false, "keep the markets' and accounts' feed events for ever (--event-retention is then unused); pmx audit does not need it: the pruning keeps the amended orders' terms it replays (docs/operations.md)")
	f.IntVar(&o.shards, "shards", defaultShards(), "matching shards to spread the markets over, each with its own batch loop and Postgres connection (default: one per two cores)")
	f.BoolVar(&o.noEventLog, "no-event-log", false, "record no feed events, of markets or accounts, to measure what they cost (the live feed, GET /market/events and GET /account/events then show nothing useful: for measuring only)")
	process.AddFlags(cmd, &o.process, true)
	process.AddMetricsFlag(cmd, &o.process, "127.0.0.1:9090")
	serve.AddFlags(cmd, &o.serve)
	return cmd
}

func runDev(ctx context.Context, o devOptions, out io.Writer) (err error) {
	if err := o.serve.Check(); err != nil {
		return err
	}
	if o.shards < 1 {
		return fmt.Errorf("--shards %d: pmx dev needs at least one shard", o.shards)
	}
	log, err := process.Start(o.process)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(o.dataDir, 0o755); err != nil {
		return fmt.Errorf("while creating the data dir: %w", err)
	}
	token, tokenSource, err := adminToken(o)
	if err != nil {
		return err
	}

	dbURL := o.databaseURL
	if dbURL == "" {
		cluster, err := pgcluster.Start(ctx, pgcluster.Options{DataDir: filepath.Join(o.dataDir, "postgres"), Logger: log})
		if err != nil {
			return fmt.Errorf("while starting the private Postgres: %w", err)
		}
		defer func() {
			stopCtx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			if err := cluster.Stop(stopCtx); err != nil {
				log.Error("could not stop Postgres cleanly", "err", err)
			}
		}()
		dbURL = cluster.URL()
	}
	st, err := store.OpenHolding(ctx, dbURL, o.shards)
	if err != nil {
		return err
	}
	defer st.Close()
	// This process alone serves the database's markets, from books it loads below: a second pmx dev
	// is refused before it changes anything (the schema included), the batches a killed one left
	// running end before any book is loaded, and from then on only this one's batches commit.
	claim, err := st.ClaimStandalone(ctx, claimWait)
	if err != nil {
		return err
	}
	defer claim.Close(context.Background())
	if err := process.MigrateStore(ctx, st, log); err != nil {
		return err
	}
	if err := claim.Fence(ctx, claimDrain); err != nil {
		return err
	}
	// Should the claim's session end (Postgres restarted), the claim is taken again; should
	// another pmx dev have taken it meanwhile, this one stops, its batches already refused.
	ctx, lose := context.WithCancelCause(ctx)
	defer lose(nil)
	defer func() { // whatever the lost claim's end cut short, the loss is what stopped it
		if lost := context.Cause(ctx); errors.Is(lost, store.ErrClaimed) {
			err = lost
		}
	}()
	keepCtx, stopKeeping := context.WithCancel(context.Background())
	kept := make(chan struct{})
	go func() {
		defer close(kept)
		if err := claim.Keep(keepCtx, log, claimRetake, claimRetry); err != nil {
			log.Error("this pmx dev lost its claim on the database to another; stopping", "err", err)
			lose(err)
		}
	}()
	defer func() { stopKeeping(); <-kept }()

	reg := httpkit.NewRegistry()
	reg.MustRegister(st.Collector())
	metricsAddr, stopMetrics, err := process.StartMetrics(o.process.MetricsAddr, reg, log)
	if err != nil {
		return err
	}
	defer stopMetrics()
	bus := &feed.Bus{}
	sh := shard.NewSet(shard.Config{Store: st, Claim: claim.Token(), Logger: log, Metrics: reg, MaxOpenOrders: o.maxOpenOrders,
		EventRetention: o.eventRetention, KeepEvents: o.keepEvents, Feed: bus, NoEventLog: o.noEventLog}, o.shards)
	defer sh.Stop()

	lister := &standalone.Lister{Store: st, Logger: log}
	if o.markets != "" {
		manifests, events, series, err := loadManifests(o.markets)
		if err != nil {
			return err
		}
		if _, err := marketspec.Sync(ctx, st, sh, manifests, time.Now(), log); err != nil {
			return err
		}
		if err := recordEvents(ctx, st, events, time.Now(), log); err != nil {
			return err
		}
		if lister, err = standalone.New(st, series, log); err != nil {
			return err
		}
		// The instances due now, before the books are loaded below.
		if _, _, err := lister.Sync(ctx, time.Now()); err != nil {
			return err
		}
	}

	// Rebuild every open book from Postgres now, not on first use (which also spreads the open
	// markets evenly over the shards).
	open, err := st.Markets(ctx, domain.MarketOpen)
	if err != nil {
		return err
	}
	for _, m := range open {
		if _, err := sh.OrderBook(ctx, m.ID); err != nil {
			return fmt.Errorf("while loading market %s: %w", m.ID, err)
		}
	}

	api := apiserver.New(apiserver.Config{Store: st, Exchange: sh, Logger: log, AdminToken: token,
		Grant: o.grant, MaxQuantity: o.maxQuantity, MaxOrderGroups: o.maxOrderGroups, Metrics: reg, ReadLimit: o.serve.Read, WriteLimit: o.serve.Write,
		TrustedProxies: o.serve.Proxies})
	defer api.Close()
	feedCtx, stopFeed := context.WithCancel(context.Background())
	feedDone := make(chan struct{})
	go func() {
		defer close(feedDone)
		feed.Follow(feedCtx, bus, api.Feed())
	}()
	defer func() { stopFeed(); <-feedDone }()
	ln, err := process.Listen(o.addr)
	if err != nil {
		return err
	}

	closerCtx, stopCloser := context.WithCancel(context.Background())
	closerDone := make(chan struct{})
	go func() {
		defer close(closerDone)
		(&market.Closer{Store: st, Target: sh, Logger: log}).Run(closerCtx)
	}()
	listerDone := make(chan struct{})
	go func() {
		defer close(listerDone)
		lister.Run(closerCtx)
	}()

	base := "http://" + ln.Addr().String()
	fmt.Fprintf(out, "pmx is running.\n  API:       %s/api/v1\n  Settings:  %s/settings\n  Markets:   %s/markets\n  Admin API: %s/admin/v1 (token %s)\n%s  Press Ctrl-C to stop.\n",
		base, base, base, base, tokenSource, process.MetricsLine(metricsAddr))

	err = serve.Serve(ctx, ln, api.Handler(), o.serve.HTTPLimits(), log)
	stopCloser()
	<-closerDone
	<-listerDone
	return err
}

// adminToken finds the admin token as pmxtools loadgen does (auth.FindAdminToken): the flag, else
// $PMX_ADMIN_TOKEN, else the token file in the data dir — created here, with a fresh token, when it
// is missing or blank. It returns where the token is.
func adminToken(o devOptions) (token, source string, err error) {
	token, source, err = auth.FindAdminToken(o.adminToken, os.Getenv, o.dataDir)
	if !errors.Is(err, auth.ErrNoAdminToken) {
		return token, source, err
	}
	path := filepath.Join(o.dataDir, auth.AdminTokenFile)
	token = auth.NewToken()
	if err := os.WriteFile(path, []byte(token+"\n"), 0o600); err != nil {
		return "", "", fmt.Errorf("while writing the admin token: %w", err)
	}
	return token, "in " + path, nil
}

// defaultShards is one shard per two cores the process may use (GOMAXPROCS: the CPUs it may run
// on, or a container's CPU limit), at least one: each order
// costs Postgres about as much CPU as it costs pmx, so a shard keeps about two cores busy, and more
// shards than that only add transactions (measured in docs/performance.md, "Several shards").
func defaultShards() int { return max(1, runtime.GOMAXPROCS(0)/2) }

// loadManifests reads the Market manifests of --markets, the Event manifests of its events/
// folder and the MarketSeries manifests of its series/ folder (none when it has none): the
// samples built into pmx for builtinMarkets.
func loadManifests(dir string) ([]v1alpha1.Market, []v1alpha1.Event, []v1alpha1.MarketSeries, error) {
	if dir == builtinMarkets {
		markets, err := v1alpha1.LoadMarketsFS(config.Samples(), "config/samples (built in)")
		if err != nil {
			return nil, nil, nil, err
		}
		events, err := v1alpha1.LoadEventsFS(config.SampleEvents(), "config/samples/events (built in)")
		if err != nil {
			return nil, nil, nil, err
		}
		series, err := v1alpha1.LoadSeriesFS(config.SampleSeries(), "config/samples/series (built in)")
		return markets, events, series, err
	}
	markets, err := v1alpha1.LoadMarkets(dir)
	if err != nil {
		return nil, nil, nil, err
	}
	var events []v1alpha1.Event
	if sub := filepath.Join(dir, "events"); exists(sub) {
		if events, err = v1alpha1.LoadEventsFS(os.DirFS(sub), sub); err != nil {
			return nil, nil, nil, err
		}
	}
	var series []v1alpha1.MarketSeries
	if sub := filepath.Join(dir, "series"); exists(sub) {
		if series, err = v1alpha1.LoadSeriesFS(os.DirFS(sub), sub); err != nil {
			return nil, nil, nil, err
		}
	}
	return markets, events, series, nil
}

// exists reports whether there is a file or folder at path.
func exists(path string) bool {
	_, err := os.Stat(path)
	return !errors.Is(err, fs.ErrNotExist)
}

// recordEvents records each Event manifest as the operator does (eventrec.Record): a new event
// with one market per outcome, or an event of that name given the manifest's text and schedule;
// then its pause and fee schedule are made what the manifest says (eventrec.Pause, SetFees, the
// operator's Event reconciler's rules), so that a manifest without spec.paused resumes an event
// paused before and one without spec.fees takes its schedule away, as a Market manifest's do (the
// admin API changes them between starts). Its lifecycle is the admin API's here: a manifest that
// sets closed or resolution is refused.
func recordEvents(ctx context.Context, st *store.Store, events []v1alpha1.Event, now time.Time, log *slog.Logger) error {
	for _, ev := range events {
		if ev.Spec.Closed || ev.Spec.Resolution != "" {
			return fmt.Errorf("event %q: pmx dev records an Event manifest's question, outcomes, schedule, pause and fees, not its closed or resolution: "+
				"leave them out, and close or resolve the event with the admin API (/admin/v1/events/{id}/close, /resolve)", ev.Name)
		}
		e, created, err := eventrec.Record(ctx, st, uuid.Nil, ev.Name, eventrec.SpecOf(&ev.Spec), now)
		if err != nil {
			return err
		}
		log.Info("event loaded", "event", e.Name, "id", e.ID, "outcomes", len(e.Outcomes), "created", created)
		placement.LogIgnored(log, "name", ev.Name, ev.Spec.ShardPool, string(ev.Spec.Placement))
		var changed bool
		if e, changed, err = eventrec.Pause(ctx, st, e, ev.Spec.Paused, now); err != nil {
			return fmt.Errorf("event %q: %w", ev.Name, err)
		} else if changed {
			log.Info("applied manifest pause", "name", ev.Name, "event", e.ID, "paused", ev.Spec.Paused)
		}
		if e, changed, err = eventrec.SetFees(ctx, st, e, ev.Spec.Fees, now); err != nil {
			return fmt.Errorf("event %q: %w", ev.Name, err)
		} else if changed {
			log.Info("applied manifest fee schedule", "name", ev.Name, "event", e.ID, "fees", marketspec.DescribeFees(marketspec.FeesOf(ev.Spec.Fees)))
		}
	}
	return nil
}
