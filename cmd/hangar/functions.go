package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/hangar-dev/hangar/composition"
)

func newFunctionsCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "functions",
		Short: "List the Cloud Run functions `make deploy` deploys",
		Long: `functions prints one line per Cloud Run function: its name, its entry point, and
"public" (it authenticates callers itself) or "internal" (only Google-signed OIDC tokens reach
it). It is the list functions.go registers; make deploy reads it.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			for _, fn := range composition.Functions() {
				access := "internal"
				if fn.Public {
					access = "public"
				}
				if _, err := fmt.Fprintln(cmd.OutOrStdout(), fn.Name(), fn.EntryPoint, access); err != nil {
					return err
				}
			}
			return nil
		},
	}
}
