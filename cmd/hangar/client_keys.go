package main

import (
	"fmt"
	"io"

	"github.com/spf13/cobra"

	appv1 "github.com/hangar-dev/hangar/gen/svc/app/v1"
)

func newKeysCmd() *cobra.Command {
	return newClientGroup("keys", "Mint, list and revoke API keys (admin only)",
		newKeysCreateCmd, newKeysListCmd, newKeysRevokeCmd)
}

func newKeysCreateCmd(f *clientFlags) *cobra.Command {
	req := &appv1.CreateApiKeyRequest{}
	cmd := clientCmd(f, "create --name NAME [flags]", "Mint an API key and print its secret, shown only this once",
		cobra.NoArgs, func(c *apiClient, cmd *cobra.Command, _ []string) error {
			if err := checkOneOf(cmd, "kind", "personal", "service_account"); err != nil {
				return err
			}
			req.UserName = optString(cmd, "user-name")
			return send(c, c.keys.CreateApiKey, req, func(w io.Writer, resp *appv1.CreateApiKeyResponse) {
				record(w, resp.GetApiKey())
				fmt.Fprintf(w, "\nThe API key:\n\n    %s\n\n", resp.GetSecret())
				fmt.Fprintln(w, "Store it now: it will not be shown again.")
			})
		})
	fl := cmd.Flags()
	fl.StringVar(&req.Name, "name", "", "key name (required)")
	fl.StringVar(&req.Kind, "kind", "personal", "personal or service_account")
	fl.StringVar(&req.UserEmail, "email", "", "for a personal key, the `EMAIL` of its user (created on first use; default: you)")
	fl.String("user-name", "", "the display name of a new user")
	fl.BoolVar(&req.Admin, "admin", false, "make it an admin key")
	_ = cmd.MarkFlagRequired("name")
	return cmd
}

func newKeysListCmd(f *clientFlags) *cobra.Command {
	req := &appv1.ListApiKeysRequest{}
	cmd := clientCmd(f, "list [--include-revoked]", "List API keys (never their secrets)", cobra.NoArgs,
		func(c *apiClient, _ *cobra.Command, _ []string) error {
			return send(c, c.keys.ListApiKeys, req, func(w io.Writer, resp *appv1.ListApiKeysResponse) {
				header := []string{"ID", "PREFIX", "NAME", "KIND", "ADMIN", "USER", "CREATED", "REVOKED"}
				table(w, header, resp.GetApiKeys(), func(k *appv1.ApiKey) []string {
					user := k.GetUser().GetEmail()
					if user == "" {
						user = k.GetUserId()
					}
					return []string{k.GetId(), k.GetPrefix(), k.GetName(), k.GetKind(), yesNo(k.GetAdmin()), user, k.GetCreatedAt(), k.GetRevokedAt()}
				})
			})
		})
	cmd.Flags().BoolVar(&req.IncludeRevoked, "include-revoked", false, "list revoked keys too")
	return cmd
}

func newKeysRevokeCmd(f *clientFlags) *cobra.Command {
	return idCmd(f, "revoke ID", "Revoke an API key: it stops authenticating at once", func(c *apiClient, _ *cobra.Command, id string) error {
		return send(c, c.keys.RevokeApiKey, &appv1.RevokeApiKeyRequest{Id: id}, nil)
	})
}
