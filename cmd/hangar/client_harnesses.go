package main

import (
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/spf13/cobra"
	"google.golang.org/protobuf/types/known/emptypb"

	appv1 "github.com/hangar-dev/hangar/gen/svc/app/v1"
	"github.com/hangar-dev/hangar/harnesses/oci"
)

func newHarnessesCmd() *cobra.Command {
	g := newClientGroup("harnesses", "List, show, register and delete harnesses; publish harness plugins",
		newHarnessesListCmd, newHarnessesGetCmd, newHarnessesRegisterCmd, newHarnessesDeleteCmd)
	g.AddCommand(newHarnessesPushCmd())
	return g
}

func newHarnessesListCmd(f *clientFlags) *cobra.Command {
	return clientCmd(f, "list", "List the harnesses: built-in ones, then registered ones", cobra.NoArgs, func(c *apiClient, _ *cobra.Command, _ []string) error {
		return send(c, c.harnesses.ListHarnesses, &emptypb.Empty{}, func(w io.Writer, resp *appv1.ListHarnessesResponse) {
			table(w, []string{"NAME", "LABEL", "BUILT-IN", "MODELS", "MODES"}, resp.GetHarnesses(), func(h *appv1.HarnessSummary) []string {
				d := h.GetDescriptor_()
				return []string{h.GetName(), d.GetLabel(), yesNo(h.GetBuiltIn()), optionIDs(d.GetModels()), modeIDs(d.GetModes())}
			})
		})
	})
}

func optionIDs(opts []*appv1.HarnessOption) string {
	ids := make([]string, len(opts))
	for i, o := range opts {
		ids[i] = o.GetId()
	}
	return dashIfEmpty(strings.Join(ids, ","))
}

func modeIDs(modes []*appv1.HarnessMode) string {
	ids := make([]string, len(modes))
	for i, m := range modes {
		ids[i] = m.GetId()
	}
	return dashIfEmpty(strings.Join(ids, ","))
}

func dashIfEmpty(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func newHarnessesGetCmd(f *clientFlags) *cobra.Command {
	return idCmd(f, "get NAME", "Show a harness and what its plugin describes", func(c *apiClient, _ *cobra.Command, name string) error {
		return send(c, c.harnesses.GetHarness, &appv1.GetHarnessRequest{Name: name}, nil)
	})
}

func newHarnessesRegisterCmd(f *clientFlags) *cobra.Command {
	var owner string
	cmd := clientCmd(f, "register NAME OCI_REF [--owner OWNER]", "Register the harness plugin published at OCI_REF under NAME",
		cobra.ExactArgs(2), func(c *apiClient, _ *cobra.Command, args []string) error {
			return send(c, c.harnesses.RegisterHarness, &appv1.RegisterHarnessRequest{Name: args[0], OciRef: args[1], Owner: owner}, nil)
		})
	cmd.Flags().StringVar(&owner, "owner", "", "who owns the harness (default: you)")
	return cmd
}

func newHarnessesDeleteCmd(f *clientFlags) *cobra.Command {
	return idCmd(f, "delete NAME", "Delete a registered harness", func(c *apiClient, _ *cobra.Command, name string) error {
		return send(c, c.harnesses.DeleteHarness, &appv1.DeleteHarnessRequest{Name: name}, func(w io.Writer, resp *appv1.DeleteHarnessResponse) {
			if resp.GetDeleted() {
				fmt.Fprintf(w, "deleted harness %s\n", name)
			} else {
				fmt.Fprintf(w, "no harness %s\n", name)
			}
		})
	})
}

// newHarnessesPushCmd publishes a plugin to a registry; it talks to the registry, not to Hangar.
func newHarnessesPushCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "push FILE.wasm OCI_REF",
		Short: "Publish a harness plugin module to an OCI registry (docker config auth)",
		Long: `push uploads FILE.wasm to OCI_REF as a wasm artifact (config media type
application/vnd.wasm.config.v0+json, one application/wasm layer) with the credentials of your
docker config, and prints the manifest digest. Then: hangar harnesses register NAME OCI_REF.`,
		Args: usageArgs(cobra.ExactArgs(2)),
		RunE: func(cmd *cobra.Command, args []string) error {
			ref, err := name.ParseReference(args[1])
			if err != nil {
				return usageError("OCI_REF: %v", err)
			}
			wasm, err := os.ReadFile(args[0])
			if err != nil {
				return err
			}
			digest, err := oci.Publish(cmd.Context(), wasm, ref.String())
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "pushed %s@%s\n", ref.Context().Name(), digest)
			return nil
		},
	}
}
