package main

import (
	"bytes"
	"io"
	"strconv"

	"github.com/spf13/cobra"

	appv1 "github.com/hangar-dev/hangar/gen/svc/app/v1"
)

func newSecretsCmd() *cobra.Command {
	return newClientGroup("secrets", "Put, list and delete the organisation's secrets (admin only)",
		newSecretsPutCmd, newSecretsListCmd, newSecretsDeleteCmd)
}

func newSecretsPutCmd(f *clientFlags) *cobra.Command {
	req := &appv1.PutOrgSecretRequest{}
	var fromFile string
	cmd := clientCmd(f, "put NAME [--from-file FILE] [--description TEXT]",
		"Store a secret's value (from FILE, else standard input without its last newline); the value is never shown again",
		cobra.ExactArgs(1), func(c *apiClient, cmd *cobra.Command, args []string) error {
			value, err := readInput(cmd, fromFile)
			if err != nil {
				return err
			}
			if fromFile == "-" {
				// A value typed or echoed ends with a newline that is not part of it.
				value = bytes.TrimSuffix(bytes.TrimSuffix(value, []byte("\n")), []byte("\r"))
			}
			req.Name, req.Value = args[0], string(value)
			req.Description = optString(cmd, "description")
			req.ExpectedVersion = optInt64(cmd, "expected-version")
			return send(c, c.secrets.PutOrgSecret, req, func(w io.Writer, resp *appv1.PutOrgSecretResponse) {
				record(w, resp.GetSecret())
			})
		})
	fl := cmd.Flags()
	fl.StringVar(&fromFile, "from-file", "-", "read the value from `FILE` (- for standard input)")
	fl.String("description", "", "what the secret is for (unset: keep the current one)")
	fl.Int64("expected-version", 0, "change the secret only at this `VERSION` (0: only create it)")
	return cmd
}

func newSecretsListCmd(f *clientFlags) *cobra.Command {
	return clientCmd(f, "list", "List the secrets (never their values)", cobra.NoArgs,
		func(c *apiClient, _ *cobra.Command, _ []string) error {
			return send(c, c.secrets.ListOrgSecrets, &appv1.ListOrgSecretsRequest{}, func(w io.Writer, resp *appv1.ListOrgSecretsResponse) {
				table(w, []string{"NAME", "VERSION", "UPDATED", "DESCRIPTION"}, resp.GetSecrets(), func(s *appv1.OrgSecret) []string {
					return []string{s.GetName(), strconv.FormatInt(s.GetVersion(), 10), s.GetUpdatedAt(), s.GetDescription()}
				})
			})
		})
}

func newSecretsDeleteCmd(f *clientFlags) *cobra.Command {
	cmd := idCmd(f, "delete NAME [--expected-version N]", "Delete a secret", func(c *apiClient, cmd *cobra.Command, name string) error {
		req := &appv1.DeleteOrgSecretRequest{Name: name, ExpectedVersion: optInt64(cmd, "expected-version")}
		return send(c, c.secrets.DeleteOrgSecret, req, nil)
	})
	cmd.Flags().Int64("expected-version", 0, "delete the secret only at this `VERSION`")
	return cmd
}
