package main

import (
	"bytes"
	"fmt"
	"io"

	"github.com/spf13/cobra"
	"google.golang.org/protobuf/types/known/emptypb"

	appv1 "github.com/hangar-dev/hangar/gen/svc/app/v1"
)

func newRegistriesCmd() *cobra.Command {
	return newClientGroup("registries", "Add, list and delete the credentials image pulls sign in to registries with (writes: admin only)",
		newRegistriesAddCmd, newRegistriesListCmd, newRegistriesDeleteCmd)
}

func newRegistriesAddCmd(f *clientFlags) *cobra.Command {
	var username, impersonateSA, assumeRole string
	var passwordStdin, anonymous, workloadIdentity, ecr bool
	cmd := clientCmd(f, "add HOST (--username U --password-stdin | --anonymous | --workload-identity [--impersonate-sa SA] | --ecr [--assume-role-arn ARN])",
		"Say how pulls from HOST sign in: a username and password (read from standard input, never shown again), none, "+
			"a Google service account (Artifact Registry) or an AWS role (ECR)",
		cobra.ExactArgs(1), func(c *apiClient, cmd *cobra.Command, args []string) error {
			req := &appv1.AddRegistryRequest{Host: args[0]}
			kinds := 0
			if username != "" || passwordStdin {
				if username == "" || !passwordStdin {
					return usageError("--username and --password-stdin go together")
				}
				pw, err := io.ReadAll(cmd.InOrStdin())
				if err != nil {
					return err
				}
				// A password typed or echoed ends with a newline that is not part of it.
				pw = bytes.TrimSuffix(bytes.TrimSuffix(pw, []byte("\n")), []byte("\r"))
				req.Auth = &appv1.AddRegistryRequest_Static{Static: &appv1.StaticRegistryAuth{Username: username, Password: string(pw)}}
				kinds++
			}
			if anonymous {
				req.Auth = &appv1.AddRegistryRequest_Anonymous{Anonymous: &appv1.AnonymousRegistryAuth{}}
				kinds++
			}
			if workloadIdentity || impersonateSA != "" {
				req.Auth = &appv1.AddRegistryRequest_WorkloadIdentity{WorkloadIdentity: &appv1.WorkloadIdentityRegistryAuth{ImpersonateSa: optString(cmd, "impersonate-sa")}}
				kinds++
			}
			if ecr || assumeRole != "" {
				req.Auth = &appv1.AddRegistryRequest_CloudRegistry{CloudRegistry: &appv1.CloudRegistryAuth{AssumeRoleArn: optString(cmd, "assume-role-arn")}}
				kinds++
			}
			if kinds != 1 {
				return usageError("say how to sign in, once: --username with --password-stdin, --anonymous, --workload-identity or --ecr")
			}
			return send(c, c.images.AddRegistry, req, nil)
		})
	fl := cmd.Flags()
	fl.StringVar(&username, "username", "", "the registry `USER` (static credentials)")
	fl.BoolVar(&passwordStdin, "password-stdin", false, "read the password or token from standard input (without its last newline)")
	fl.BoolVar(&anonymous, "anonymous", false, "pull without credentials")
	fl.BoolVar(&workloadIdentity, "workload-identity", false, "sign in with a Google access token (Artifact Registry, gcr.io)")
	fl.StringVar(&impersonateSA, "impersonate-sa", "", "the service account `EMAIL` whose token to mint (implies --workload-identity; unset: the host's own)")
	fl.BoolVar(&ecr, "ecr", false, "sign in with an Amazon ECR authorization token")
	fl.StringVar(&assumeRole, "assume-role-arn", "", "the IAM role `ARN` to assume first (implies --ecr; unset: the host's own credentials)")
	return cmd
}

func newRegistriesListCmd(f *clientFlags) *cobra.Command {
	return clientCmd(f, "list", "List the registries and how pulls sign in to each (never a password)", cobra.NoArgs,
		func(c *apiClient, _ *cobra.Command, _ []string) error {
			return send(c, c.images.ListRegistries, &appv1.ListRegistriesRequest{}, func(w io.Writer, resp *appv1.ListRegistriesResponse) {
				table(w, []string{"HOST", "KIND", "PRINCIPAL", "CREATED"}, resp.GetRegistries(), func(r *appv1.RegistryCredentialSummary) []string {
					return []string{r.GetRegistryHost(), r.GetAuthKind(), r.GetAuthPrincipal(), r.GetCreatedAt()}
				})
			})
		})
}

func newRegistriesDeleteCmd(f *clientFlags) *cobra.Command {
	return idCmd(f, "delete HOST", "Delete a registry's credentials; later pulls from it go without", func(c *apiClient, _ *cobra.Command, host string) error {
		return send(c, c.images.DeleteRegistry, &appv1.DeleteRegistryRequest{Host: host}, func(w io.Writer, _ *emptypb.Empty) {
			fmt.Fprintf(w, "deleted registry %s\n", host)
		})
	})
}
