package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/hangar-dev/hangar/composition"
)

func newFunctionsCmd() *cobra.Command {
	var terraform bool
	cmd := &cobra.Command{
		Use:   "functions",
		Short: "List the Cloud Run functions `make deploy` deploys",
		Long: `functions prints one line per Cloud Run function: its name, its entry point, and
"public" (it authenticates callers itself) or "internal" (only Google-signed OIDC tokens reach
it). It is the list functions.go registers.

With --terraform it prints instead what the deployment's Terraform takes from the code (the
functions, the load balancer's path rules, Pub/Sub's topics and subscriptions, the Firestore
TTL fields) as Terraform JSON, the content of deploy/hangar.gen.tf.json.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if terraform {
				out, err := composition.TerraformJSON()
				if err != nil {
					return err
				}
				_, err = cmd.OutOrStdout().Write(out)
				return err
			}
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
	cmd.Flags().BoolVar(&terraform, "terraform", false, "print deploy/hangar.gen.tf.json")
	return cmd
}
