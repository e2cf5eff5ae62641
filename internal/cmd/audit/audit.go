// Package audit is pmx audit: it replays what a database keeps through the matching engine and
// reports every difference between what the replay derives and what Postgres holds (package
// internal/audit; docs/operations.md, "Auditing the record").
//
// It belongs to pmx, not pmxtools: an operator runs it where the exchange runs, from the image
// (a Kubernetes Job beside the database, or kubectl exec), against the production database or a
// standby, and it links nothing the server does not link already (the engine, pgx).
package audit

import (
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/spf13/cobra"

	"github.com/pmx-dev/pmx/internal/audit"
	"github.com/pmx-dev/pmx/internal/cmd/process"
)

// ErrDifferences is what the command returns when the audit found differences (exit status 1).
var ErrDifferences = errors.New("the audit found differences (listed above)")

func NewCommand() *cobra.Command {
	var (
		url, since, until, logLevel string
		o                           audit.Options
	)
	cmd := &cobra.Command{
		Use:   "audit",
		Short: "Replay the record through the matching engine and report every difference with what Postgres holds",
		Long: `pmx audit reads a database in one read-only, repeatable-read transaction (safe against a live
primary or a hot standby), replays each market's orders, amends and cancels through the matching
engine in sequence order, and compares every fill with the trades, every order's status and
filled quantity, every book, position, settlement and conversion, and every account's cash with
what Postgres holds. It prints a summary and every difference, with where to look, and exits 1 if
there is any. docs/operations.md ("Auditing the record") says what it cannot check.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if url == "" {
				return fmt.Errorf("--database-url is required (or set $PMX_DATABASE_URL): the database to audit, a standby's will do")
			}
			var err error
			if o.Since, err = parseTime("--since", since); err != nil {
				return err
			}
			if o.Until, err = parseTime("--until", until); err != nil {
				return err
			}
			log, err := process.Start(process.Options{LogLevel: logLevel})
			if err != nil {
				return err
			}
			o.Progress = log
			cfg, err := pgx.ParseConfig(url)
			if err != nil {
				return fmt.Errorf("--database-url: %w", err)
			}
			if _, ok := cfg.RuntimeParams["application_name"]; !ok {
				cfg.RuntimeParams["application_name"] = "pmx audit"
			}
			conn, err := pgx.ConnectConfig(cmd.Context(), cfg)
			if err != nil {
				return fmt.Errorf("could not connect to the database to audit: %w", err)
			}
			defer conn.Close(cmd.Context())
			r, err := audit.Run(cmd.Context(), conn, o)
			if err != nil {
				return err
			}
			r.Write(cmd.OutOrStdout())
			if len(r.Differences) > 0 {
				return ErrDifferences
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&url, "database-url", process.EnvOr("PMX_DATABASE_URL", ""), "the database to audit (postgres://...); a read-only standby will do")
	f.StringSliceVar(&o.Markets, "market", nil, "audit only these markets (ids or names; repeat or separate with commas)")
	f.StringVar(&o.Event, "event", "", "audit only this event's markets (id or name)")
	f.StringVar(&since, "since", "", "audit only the markets changed at or after this time (RFC 3339); each is replayed whole")
	f.StringVar(&until, "until", "", "audit only the markets created before this time (RFC 3339)")
	f.StringVar(&logLevel, "log-level", "info", "log level of the progress lines on stderr (debug, info, warn, error)")
	f.DurationVar(&o.ProgressEvery, "progress", 2*time.Second, "how often to log the audit's progress")
	return cmd
}

func parseTime(flag, s string) (time.Time, error) {
	if s == "" {
		return time.Time{}, nil
	}
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		return time.Time{}, fmt.Errorf("%s %q: give a time such as 2026-12-01T00:00:00Z (RFC 3339)", flag, s)
	}
	return t, nil
}
