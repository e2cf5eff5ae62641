// Package migrate is pmx migrate: it brings a database's schema up to date with this binary.
package migrate

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/pmx-dev/pmx/internal/cmd/process"
	"github.com/pmx-dev/pmx/internal/store"
)

func NewCommand() *cobra.Command {
	var url string
	cmd := &cobra.Command{
		Use:   "migrate",
		Short: "Bring a database's schema up to date with this binary",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if url == "" {
				return fmt.Errorf("--database-url is required (or set $PMX_DATABASE_URL)")
			}
			st, err := store.Open(cmd.Context(), url)
			if err != nil {
				return err
			}
			defer st.Close()
			from, to, err := st.Migrate(cmd.Context())
			if err != nil {
				return err
			}
			if from > to {
				fmt.Fprintf(cmd.OutOrStdout(), "schema at version %d, newer than this build's %d: left as it is\n", from, to)
				return nil
			}
			fmt.Fprintf(cmd.OutOrStdout(), "schema at version %d (was %d)\n", to, from)
			return nil
		},
	}
	cmd.Flags().StringVar(&url, "database-url", process.EnvOr("PMX_DATABASE_URL", ""), "the database to migrate (postgres://...)")
	return cmd
}
