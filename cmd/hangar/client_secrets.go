package main

import (
	"bytes"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	appv1 "github.com/hangar-dev/hangar/gen/svc/app/v1"
)

func newSecretsCmd() *cobra.Command {
	return newClientGroup("secrets", "Put, list and delete the organisation's secrets and set who may use them (admin only)",
		newSecretsPutCmd, newSecretsListCmd, newSecretsDeleteCmd, newSecretsAccessCmd)
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
				table(w, []string{"NAME", "VERSION", "UPDATED", "ACCESS", "DESCRIPTION"}, resp.GetSecrets(), func(s *appv1.OrgSecret) []string {
					return []string{s.GetName(), strconv.FormatInt(s.GetVersion(), 10), s.GetUpdatedAt(), visibilityName(s.GetAccess().GetVisibility()), s.GetDescription()}
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

// visibilityName is a visibility as the CLI spells it: admins_only (unset too: it reads so),
// all_users, selected.
func visibilityName(v appv1.OrgSecretVisibility) string {
	if v == appv1.OrgSecretVisibility_ORG_SECRET_VISIBILITY_UNSPECIFIED {
		v = appv1.OrgSecretVisibility_ORG_SECRET_VISIBILITY_ADMINS_ONLY
	}
	return strings.ToLower(strings.TrimPrefix(v.String(), "ORG_SECRET_VISIBILITY_"))
}

func newSecretsAccessCmd(f *clientFlags) *cobra.Command {
	var visibility string
	access := &appv1.OrgSecretAccess{}
	cmd := idCmd(f, "access NAME --visibility admins_only|all_users|selected [--user ID]... [--service-key ID]... [--profile ID]...",
		"Set who besides admins may use a secret", func(c *apiClient, _ *cobra.Command, name string) error {
			v, ok := appv1.OrgSecretVisibility_value["ORG_SECRET_VISIBILITY_"+strings.ToUpper(visibility)]
			if !ok {
				return fmt.Errorf("--visibility: want admins_only, all_users or selected, not %q", visibility)
			}
			access.Visibility = appv1.OrgSecretVisibility(v)
			return send(c, c.secrets.SetOrgSecretAccess, &appv1.SetOrgSecretAccessRequest{Name: name, Access: access},
				func(w io.Writer, resp *appv1.SetOrgSecretAccessResponse) { record(w, resp.GetSecret()) })
		})
	fl := cmd.Flags()
	fl.StringVar(&visibility, "visibility", "admins_only", "`admins_only`, all_users or selected")
	fl.StringArrayVar(&access.UserIds, "user", nil, "a user `ID` who may use it (with selected)")
	fl.StringArrayVar(&access.ServiceKeyIds, "service-key", nil, "an API key `ID` that may use it (with selected)")
	fl.StringArrayVar(&access.ProfileIds, "profile", nil, "a profile `ID` whose tasks may use it (with selected)")
	return cmd
}
