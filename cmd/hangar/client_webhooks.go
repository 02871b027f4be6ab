package main

import (
	"bytes"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"

	appv1 "github.com/hangar-dev/hangar/gen/svc/app/v1"
	"github.com/hangar-dev/hangar/platform/httpapi"
)

func newWebhooksCmd() *cobra.Command {
	return newClientGroup("webhooks", "Create, list, rotate and delete inbound webhook registrations",
		newWebhooksCreateCmd, newWebhooksListCmd, newWebhooksRotateCmd, newWebhooksDeleteCmd, newWebhooksSignCmd)
}

// newWebhooksSignCmd signs a body as a generic sender does, without calling the server: for
// curl and scripts, and to check a sender's own signing code against.
func newWebhooksSignCmd(*clientFlags) *cobra.Command {
	var secretFile string
	cmd := &cobra.Command{
		Use:   "sign --secret-file FILE BODY_FILE",
		Short: "Print the " + httpapi.SignatureHeader + " header of a generic delivery of BODY_FILE (- for standard input), signed now",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			secret, err := webhookSecret(cmd, secretFile)
			if err != nil {
				return err
			}
			body, err := readInput(cmd, args[0])
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%s: %s\n", httpapi.SignatureHeader, httpapi.Sign([]byte(*secret), time.Now(), body))
			return nil
		},
	}
	cmd.Flags().StringVar(&secretFile, "secret-file", "", "read the registration's secret from `FILE` (- for standard input) (required)")
	_ = cmd.MarkFlagRequired("secret-file")
	return cmd
}

func newWebhooksCreateCmd(f *clientFlags) *cobra.Command {
	req := &appv1.CreateWebhookRegistrationRequest{}
	var secretFile string
	cmd := clientCmd(f, "create NAME --provider github|webhook [--secret-file FILE]",
		"Register an inbound webhook and print its URL and secret, the secret only this once",
		cobra.ExactArgs(1), func(c *apiClient, cmd *cobra.Command, args []string) error {
			if err := checkOneOf(cmd, "provider", "github", "webhook"); err != nil {
				return err
			}
			secret, err := webhookSecret(cmd, secretFile)
			if err != nil {
				return err
			}
			req.Name, req.Secret = args[0], secret
			return send(c, c.webhooks.CreateWebhookRegistration, req, func(w io.Writer, resp *appv1.CreateWebhookRegistrationResponse) {
				showWebhookSecret(w, f.url, resp.GetRegistration(), resp.GetSecret())
			})
		})
	fl := cmd.Flags()
	fl.StringVar(&req.Provider, "provider", "", "github (GitHub's webhooks) or webhook (any sender signing with X-Hangar-Signature) (required)")
	fl.StringVar(&secretFile, "secret-file", "", "read the signing secret from `FILE` (- for standard input; default: generate one)")
	_ = cmd.MarkFlagRequired("provider")
	return cmd
}

func newWebhooksListCmd(f *clientFlags) *cobra.Command {
	return clientCmd(f, "list", "List webhook registrations (never their secrets): all for an admin, else your own",
		cobra.NoArgs, func(c *apiClient, _ *cobra.Command, _ []string) error {
			return send(c, c.webhooks.ListWebhookRegistrations, &appv1.ListWebhookRegistrationsRequest{}, func(w io.Writer, resp *appv1.ListWebhookRegistrationsResponse) {
				header := []string{"ID", "NAME", "PROVIDER", "URL_PATH", "CREATED", "LAST_DELIVERY"}
				table(w, header, resp.GetRegistrations(), func(r *appv1.WebhookRegistration) []string {
					return []string{r.GetId(), r.GetName(), r.GetProvider(), r.GetUrlPath(), r.GetCreatedAt(), r.GetLastDeliveryAt()}
				})
			})
		})
}

func newWebhooksRotateCmd(f *clientFlags) *cobra.Command {
	var secretFile string
	cmd := idCmd(f, "rotate ID [--secret-file FILE]",
		"Replace a registration's signing secret; deliveries signed with the old one are refused from then on",
		func(c *apiClient, cmd *cobra.Command, id string) error {
			secret, err := webhookSecret(cmd, secretFile)
			if err != nil {
				return err
			}
			req := &appv1.RotateWebhookSecretRequest{Id: id, Secret: secret}
			return send(c, c.webhooks.RotateWebhookSecret, req, func(w io.Writer, resp *appv1.RotateWebhookSecretResponse) {
				showWebhookSecret(w, f.url, resp.GetRegistration(), resp.GetSecret())
			})
		})
	cmd.Flags().StringVar(&secretFile, "secret-file", "", "read the new secret from `FILE` (- for standard input; default: generate one)")
	return cmd
}

func newWebhooksDeleteCmd(f *clientFlags) *cobra.Command {
	return idCmd(f, "delete ID", "Delete a webhook registration: its URL answers 404 from then on",
		func(c *apiClient, _ *cobra.Command, id string) error {
			return send(c, c.webhooks.DeleteWebhookRegistration, &appv1.DeleteWebhookRegistrationRequest{Id: id}, func(w io.Writer, _ *appv1.DeleteWebhookRegistrationResponse) {
				fmt.Fprintf(w, "Deleted webhook registration %s.\n", id)
			})
		})
}

// webhookSecret is the secret read from path ("": none, so the server generates one), without
// the newline that ends a typed or echoed one: a webhook secret has no whitespace in it.
func webhookSecret(cmd *cobra.Command, path string) (*string, error) {
	if path == "" {
		return nil, nil
	}
	b, err := readInput(cmd, path)
	if err != nil {
		return nil, err
	}
	s := string(bytes.TrimRight(b, "\r\n"))
	return &s, nil
}

// showWebhookSecret prints a registration, where its sender posts and the secret it signs with.
func showWebhookSecret(w io.Writer, baseURL string, r *appv1.WebhookRegistration, secret string) {
	record(w, r)
	fmt.Fprintf(w, "\nThe sender posts to:\n\n    %s%s\n\n", strings.TrimRight(baseURL, "/"), r.GetUrlPath())
	if r.GetProvider() == "github" {
		fmt.Fprintln(w, "In GitHub's webhook settings use content type application/json and this secret:")
	} else {
		fmt.Fprintln(w, "signing each delivery with HMAC-SHA256 under this secret when sending it (5 minutes' tolerance)")
		fmt.Fprintln(w, "(X-Hangar-Signature: t=<unix seconds>,v1=<hex of HMAC of \"<t>.<raw body>\">; hangar webhooks sign makes it):")
	}
	fmt.Fprintf(w, "\n    %s\n\nStore it now: it will not be shown again.\n", secret)
}
