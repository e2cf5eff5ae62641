package main

import (
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/pmx-dev/pmx/internal/kit/auth"
	"github.com/pmx-dev/pmx/internal/tools/loadgen"
)

func newLoadgenCommand() *cobra.Command {
	var (
		cfg        loadgen.Config
		adminToken string
		dataDir    string
		asJSON     bool
		quiet      bool
	)
	cmd := &cobra.Command{
		Use:   "loadgen",
		Short: "Drive a running pmx server with trading bots and report throughput and latency",
		Long: `loadgen creates one account per bot through the admin API, then lets the bots trade the
OPEN markets over the public REST API until --duration has passed or --orders placements
have been sent, and prints a report: per request kind the count, rate, p50, p99, p99.9 and
max latency, the acknowledged orders per second, the fills seen, and the errors by status
and code (4xx business rejections apart from failures: 5xx and transport errors).

With --mix basic (the default) each bot step is a placement (~70%: BUY YES, BUY NO, or SELL
of shares it holds, priced around a slowly drifting per-market mid, a third of them crossing
the spread), a cancel of one of its recent open orders (~20%) or a read (~10%: order book,
trades or positions); every few hundred steps a cancel-everything.

With --mix market-maker the bots keep quotes: ~35% of the steps amend one of their open
orders (POST /order/amend: a third lower its quantity at the same price, keeping its place
in the queue, the others move it to a fresh price near the mid), ~25% place 2 to 5 orders in
one market in one POST /orders/batch, ~15% cancel 2 to 5 of their oldest orders in one
POST /orders/cancel, ~15% place one order, ~10% read; every few hundred steps they cancel
their orders in one market (POST /orders/cancel with a marketId). A bot keeps at most 16
orders open, far below the exchange's limit per account and market. A batch counts each of
its placements in the orders, and each placement or cancel refused inside a batch is counted
as a rejection, by code, like a refused request.

Closed loop (default): each bot sends its next request as soon as the previous one is
answered; latency runs from send to the last byte of the answer. Open loop (--rate R):
requests are due on a fixed schedule, R placements per second over all bots, and latency
runs from the time each request was due, not when it could be sent, so a server that
stalls is charged for the requests queued behind the stall (no coordinated omission).

The admin token comes from --admin-token, else $PMX_ADMIN_TOKEN, else <data-dir>/admin-token.
Ctrl-C stops the run early and still prints the report.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			token, _, err := auth.FindAdminToken(adminToken, os.Getenv, dataDir)
			if err != nil {
				return err
			}
			cfg.AdminToken = token
			if cfg.Orders > 0 && !cmd.Flags().Changed("duration") {
				cfg.Duration = 0 // --orders alone: run until that many placements
			}
			ctx, stop := signalContext(cmd)
			defer stop()
			progress := cmd.ErrOrStderr()
			if quiet {
				progress = nil
			}
			report, err := loadgen.Run(ctx, cfg, progress)
			if err != nil {
				return err
			}
			if asJSON {
				return report.WriteJSON(cmd.OutOrStdout())
			}
			return report.WriteText(cmd.OutOrStdout())
		},
	}
	f := cmd.Flags()
	f.StringVar(&cfg.URL, "url", loadgen.DefaultURL, "base address of the pmx server")
	f.StringVar(&adminToken, "admin-token", "", "admin API token (default $PMX_ADMIN_TOKEN, else <data-dir>/admin-token)")
	f.StringVar(&dataDir, "data-dir", ".pmx", "data directory holding the admin-token file")
	f.IntVar(&cfg.Bots, "bots", loadgen.DefaultBots, "concurrent bots, each its own account and API key")
	f.Float64Var(&cfg.Rate, "rate", 0, "open loop: total order placements per second over all bots, latency measured from each request's intended send time; 0 = closed loop")
	f.DurationVar(&cfg.Duration, "duration", 30*time.Second, "how long to run (with --orders alone: until the orders are sent)")
	f.Int64Var(&cfg.Orders, "orders", 0, "stop after this many order placements (0 = unlimited)")
	f.DurationVar(&cfg.Warmup, "warmup", 0, "run the load this long before the measured --duration, apart from its figures (an exchange just started is slower at first: the report gives the warm-up's own p99)")
	f.IntVar(&cfg.Markets, "markets", 0, "trade at most this many of the OPEN markets, newest first (0 = all)")
	f.Uint64Var(&cfg.Seed, "seed", 0, "seed of the bots' random choices (0 = from the clock; the report shows it)")
	f.StringVar((*string)(&cfg.Mix), "mix", string(loadgen.MixBasic), "the bots' choice of requests: "+loadgen.MixNames())
	f.DurationVar(&cfg.RequestTimeout, "request-timeout", loadgen.DefaultRequestTimeout, "timeout of each request")
	f.BoolVar(&asJSON, "json", false, "print the report as JSON")
	f.BoolVarP(&quiet, "quiet", "q", false, "no progress line on stderr")
	return cmd
}
