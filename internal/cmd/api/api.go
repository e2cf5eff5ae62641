// Package api is pmx api: a front API replica, routing each market's orders to its shard.
package api

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/pmx-dev/pmx/apiserver"
	"github.com/pmx-dev/pmx/internal/cmd/process"
	"github.com/pmx-dev/pmx/internal/cmd/serve"
	"github.com/pmx-dev/pmx/internal/kit/auth"
	"github.com/pmx-dev/pmx/internal/kit/httpkit"
	"github.com/pmx-dev/pmx/internal/shardclient"
)

type apiOptions struct {
	databaseURL    string
	addr           string
	adminToken     string
	internalToken  string
	grant          int64
	maxQuantity    int64
	maxOrderGroups int
	handoffWait    time.Duration
	process        process.Options
	serve          serve.Options
}

func NewCommand() *cobra.Command {
	o := apiOptions{}
	cmd := &cobra.Command{
		Use:   "api",
		Short: "Run a front API replica: the public and admin APIs, routed to the shards",
		Long: `pmx api is the stateless front of the distributed exchange: it authenticates API keys, validates
requests, answers the reads Postgres answers well, and sends each market's orders and book reads to
the shard that owns the market. Run as many replicas as you like; they answer alike.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, stop := process.SignalContext(cmd)
			defer stop()
			return runAPI(ctx, o)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.databaseURL, "database-url", process.EnvOr("PMX_DATABASE_URL", ""), "the exchange's Postgres (default $PMX_DATABASE_URL)")
	f.StringVar(&o.addr, "addr", ":8080", "address to serve HTTP on")
	f.StringVar(&o.adminToken, "admin-token", process.EnvOr("PMX_ADMIN_TOKEN", ""), "admin API token (default $PMX_ADMIN_TOKEN; empty disables the admin API)")
	f.StringVar(&o.internalToken, "internal-token", process.EnvOr("PMX_INTERNAL_TOKEN", ""), "secret shared with the shards (default $PMX_INTERNAL_TOKEN)")
	f.Int64Var(&o.grant, "grant", 1_000_000, "play money, in cents, that a new account starts with")
	f.Int64Var(&o.maxQuantity, "max-quantity", 1_000_000, "largest order quantity accepted")
	f.IntVar(&o.maxOrderGroups, "max-order-groups", apiserver.DefaultMaxOrderGroups, "most order groups one account may keep")
	f.DurationVar(&o.handoffWait, "handoff-wait", shardclient.DefaultHandoffWait,
		"how long a request follows its market while the operator hands it from shard to shard, before it is answered 503")
	process.AddFlags(cmd, &o.process, true)
	process.AddMetricsFlag(cmd, &o.process, ":9090")
	serve.AddFlags(cmd, &o.serve)
	return cmd
}

func runAPI(ctx context.Context, o apiOptions) error {
	if err := o.serve.Check(); err != nil {
		return err
	}
	if o.databaseURL == "" || o.internalToken == "" {
		return fmt.Errorf("--database-url and --internal-token are required (or $PMX_DATABASE_URL, $PMX_INTERNAL_TOKEN)")
	}
	if err := auth.CheckAdminToken(o.adminToken, "from --admin-token (or $PMX_ADMIN_TOKEN)"); err != nil {
		return err
	}
	log, err := process.Start(o.process)
	if err != nil {
		return err
	}
	st, err := process.OpenStore(ctx, o.databaseURL, log, 0)
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
	api := apiserver.New(apiserver.Config{Store: st, Exchange: &shardclient.Router{Store: st, Token: o.internalToken, Logger: log, Metrics: reg,
		HandoffWait: o.handoffWait},
		Logger: log, AdminToken: o.adminToken, Grant: o.grant, MaxQuantity: o.maxQuantity, MaxOrderGroups: o.maxOrderGroups, Metrics: reg,
		ReadLimit: o.serve.Read, WriteLimit: o.serve.Write,
		TrustedProxies: o.serve.Proxies})
	defer api.Close()
	followCtx, stopFollowing := context.WithCancel(context.Background())
	followDone := make(chan struct{})
	go func() {
		defer close(followDone)
		(&shardclient.Follower{Store: st, Token: o.internalToken, Hub: api.Feed(), Logger: log}).Run(followCtx)
	}()
	defer func() { stopFollowing(); <-followDone }()
	fmt.Printf("pmx api is running.\n  API:       http://%s/api/v1\n%s", ln.Addr(), process.MetricsLine(metricsAddr))
	return serve.Serve(ctx, ln, api.Handler(), o.serve.HTTPLimits(), log)
}
