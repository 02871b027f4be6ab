package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"connectrpc.com/connect"
	"github.com/spf13/cobra"

	appv1 "github.com/hangar-dev/hangar/gen/svc/app/v1"
	"github.com/hangar-dev/hangar/platform/httpapi"
)

// `hangar credentials` connects the caller's own OAuth credentials (OAuthCredentialService): a
// device flow shows a code to enter at the provider, a redirect flow a page to open, and both
// wait while the server finishes the flow (its durable poller, or its callback page).

// ownSubject is the caller's own credentials: a USER subject with no id.
var ownSubject = &appv1.OAuthSubject{Kind: appv1.OauthSubjectKind_OAUTH_SUBJECT_KIND_USER}

// flowPollInterval is how often connect asks for the flow's status: RFC 8628's default
// interval (3.2); the server polls the provider at the provider's own interval.
const flowPollInterval = 5 * time.Second

func newCredentialsCmd() *cobra.Command {
	return newClientGroup("credentials", "Connect, list and disconnect your OAuth credentials for providers (GitHub, Claude, …)",
		newCredentialsListCmd, newCredentialsConnectCmd, newCredentialsDisconnectCmd)
}

func newCredentialsListCmd(f *clientFlags) *cobra.Command {
	return clientCmd(f, "list", "List your credentials by provider: status, account, expiry (never a token)", cobra.NoArgs,
		func(c *apiClient, _ *cobra.Command, _ []string) error {
			return send(c, c.oauth.ListCredentials, &appv1.ListCredentialsRequest{Subject: ownSubject}, func(w io.Writer, resp *appv1.ListCredentialsResponse) {
				table(w, []string{"PROVIDER", "STATUS", "ACCOUNT", "EXPIRES", "VERSION"}, resp.GetCredentials(), func(m *appv1.OAuthCredentialMeta) []string {
					return []string{m.GetProvider(), m.GetStatus(), m.GetAccount().GetDisplayName(), m.GetExpiresAt(), fmt.Sprint(m.GetVersion())}
				})
			})
		})
}

func newCredentialsConnectCmd(f *clientFlags) *cobra.Command {
	var redirect, noBrowser bool
	var every time.Duration
	cmd := clientCmd(f, "connect PROVIDER [--redirect]",
		"Connect PROVIDER: enter a code at the provider (device flow), or with --redirect approve in the browser and come back to Hangar's callback page",
		cobra.ExactArgs(1), func(c *apiClient, _ *cobra.Command, args []string) error {
			if every <= 0 {
				return usageError("--poll-interval must be positive")
			}
			flow, err := beginConnect(c, args[0], redirect, !noBrowser)
			if err != nil {
				return err
			}
			// Ctrl-C cancels the flow, so the server stops polling the provider for it.
			ctx, stop := signal.NotifyContext(c.unbounded, os.Interrupt, syscall.SIGTERM)
			defer stop()
			w := c.withoutDeadline()
			w.ctx = ctx
			err = waitFlow(w, flow, every)
			if ctx.Err() != nil {
				cancelFlow(c, flow)
			}
			return err
		})
	fl := cmd.Flags()
	fl.BoolVar(&redirect, "redirect", false, "sign in through the browser and Hangar's callback page (the browser must be signed in to Hangar) instead of a code")
	fl.BoolVar(&noBrowser, "no-browser", false, "only print the page to open, never open a browser")
	fl.DurationVar(&every, "poll-interval", flowPollInterval, "how often to ask Hangar whether the flow ended")
	return cmd
}

// beginConnect starts the flow and tells the user where to go.
func beginConnect(c *apiClient, provider string, redirect, browser bool) (*appv1.OAuthFlow, error) {
	var flow *appv1.OAuthFlow
	var open string
	if redirect {
		resp, err := call(c, c.oauth.BeginRedirectFlow, &appv1.BeginRedirectFlowRequest{
			Subject: ownSubject, Provider: provider, RedirectUri: c.server + httpapi.OAuthCallbackPath,
		})
		if err != nil {
			return nil, err
		}
		flow, open = resp.GetFlow(), resp.GetAuthorizeUrl()
		fmt.Fprintf(c.out, "Open this page in a browser signed in to Hangar and approve:\n\n    %s\n\nWaiting until %s…\n", open, flow.GetExpiresAt())
	} else {
		resp, err := call(c, c.oauth.BeginFlow, &appv1.BeginFlowRequest{Subject: ownSubject, Provider: provider})
		if err != nil {
			return nil, err
		}
		flow, open = resp.GetFlow(), resp.GetVerificationUrl()
		fmt.Fprintf(c.out, "Open %s and enter the code\n\n    %s\n\nWaiting until %s…\n", open, resp.GetUserCode(), flow.GetExpiresAt())
	}
	if browser {
		openBrowser(open)
	}
	return flow, nil
}

// waitFlow asks for the flow's status every interval until it ends, and says how it ended: a
// flow that did not complete fails the command with its error code.
func waitFlow(c *apiClient, flow *appv1.OAuthFlow, every time.Duration) error {
	t := time.NewTicker(every)
	defer t.Stop()
	for flow.GetStatus() == "pending" {
		select {
		case <-c.ctx.Done():
			return c.ctx.Err()
		case <-t.C:
		}
		resp, err := call(c, c.oauth.GetFlow, &appv1.GetFlowRequest{Subject: ownSubject, FlowId: flow.GetId()})
		if err != nil {
			return err
		}
		flow = resp.GetFlow()
	}
	if flow.GetStatus() != "completed" {
		return &exitStatus{code: 1, err: fmt.Errorf("connecting %s %s: %s", flow.GetProvider(), flow.GetStatus(), flow.GetErrorCode())}
	}
	list, err := call(c, c.oauth.ListCredentials, &appv1.ListCredentialsRequest{Subject: ownSubject})
	if err != nil {
		return err
	}
	for _, m := range list.GetCredentials() {
		if m.GetProvider() == flow.GetProvider() {
			return c.show(m, func(w io.Writer) {
				who := ""
				if n := m.GetAccount().GetDisplayName(); n != "" {
					who = " as " + n
				}
				fmt.Fprintf(w, "Connected %s%s (version %d).\n", m.GetProvider(), who, m.GetVersion())
			})
		}
	}
	return errors.New("the flow completed but the credential is not listed: run hangar credentials list")
}

// cancelFlow ends a flow the user gave up waiting for.
func cancelFlow(c *apiClient, flow *appv1.OAuthFlow) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(c.unbounded), 10*time.Second)
	defer cancel()
	if _, err := c.oauth.CancelFlow(ctx, connect.NewRequest(&appv1.CancelFlowRequest{Subject: ownSubject, FlowId: flow.GetId()})); err == nil {
		fmt.Fprintf(c.out, "Cancelled the flow %s.\n", flow.GetId())
	}
}

func newCredentialsDisconnectCmd(f *clientFlags) *cobra.Command {
	var expected int64
	cmd := idCmd(f, "disconnect PROVIDER", "Disconnect PROVIDER: drop its stored tokens",
		func(c *apiClient, _ *cobra.Command, provider string) error {
			return send(c, c.oauth.Disconnect, &appv1.DisconnectRequest{Subject: ownSubject, Provider: provider, ExpectedVersion: expected},
				func(w io.Writer, resp *appv1.DisconnectResponse) {
					fmt.Fprintf(w, "disconnected %s\n", resp.GetCredential().GetProvider())
				})
		})
	cmd.Flags().Int64Var(&expected, "expected-version", 0, "disconnect only if the credential is still at this `VERSION` (0: any)")
	return cmd
}
