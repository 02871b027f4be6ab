package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"time"

	"connectrpc.com/connect"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"google.golang.org/protobuf/proto"

	"github.com/hangar-dev/hangar/gen/svc/app/v1/appv1connect"
	"github.com/hangar-dev/hangar/platform/auth"
)

// defaultURL is where `hangar dev` serves by default.
const defaultURL = "http://127.0.0.1:8080"

// addClientCommands adds the API client commands (tasks, profiles, keys, sessions).
func addClientCommands(root *cobra.Command) {
	root.AddCommand(newTasksCmd(), newProfilesCmd(), newKeysCmd(), newSessionsCmd(), newHarnessesCmd(), newAutomationsCmd(), newSecretsCmd(), newWebhooksCmd(), newRegistriesCmd(), newImagesCmd(), newReviewsCmd(), newEnrollmentsCmd(), newCredentialsCmd(), newFleetCmd())
}

// clientFlags are the persistent flags every client command group has.
type clientFlags struct {
	url     string
	apiKey  string
	json    bool
	quiet   bool
	timeout time.Duration
}

// newClientGroup makes a command group (tasks, profiles, keys) with the client flags, and adds
// the subcommands that newSubs build around those flags. It makes every usage error of the group
// exit 2: bad flags, bad arguments, missing required flags and conflicting flags.
func newClientGroup(use, short string, newSubs ...func(*clientFlags) *cobra.Command) *cobra.Command {
	f := &clientFlags{}
	g := &cobra.Command{
		Use:   use,
		Short: short,
		Args:  usageArgs(cobra.NoArgs), // an unknown subcommand
		RunE:  func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
	}
	pf := g.PersistentFlags()
	pf.StringVar(&f.url, "url", envOr("HANGAR_URL", defaultURL), "Hangar server URL (env HANGAR_URL)")
	pf.StringVar(&f.apiKey, "api-key", "", "API key (default: env HANGAR_API_KEY)")
	pf.BoolVar(&f.json, "json", false, "print the response as JSON (protojson, snake_case field names)")
	pf.BoolVarP(&f.quiet, "quiet", "q", false, "print only the id of the record the response carries, for scripts: ID=$(hangar … -q)")
	pf.DurationVar(&f.timeout, "timeout", 30*time.Second, "how long to wait for the server")
	g.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageError("%v", err) })
	for _, newSub := range newSubs {
		sub := newSub(f)
		sub.Args = usageArgs(sub.Args)
		// Cobra checks required and grouped flags after PreRunE, and would exit 1: check first.
		sub.PreRunE = func(cmd *cobra.Command, _ []string) error {
			if err := errors.Join(cmd.ValidateRequiredFlags(), cmd.ValidateFlagGroups()); err != nil {
				return usageError("%v", err)
			}
			return nil
		}
		g.AddCommand(sub)
	}
	return g
}

// usageArgs makes a failure of the argument check exit 2.
func usageArgs(check cobra.PositionalArgs) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if check == nil {
			return nil
		}
		if err := check(cmd, args); err != nil {
			return usageError("%v", err)
		}
		return nil
	}
}

// apiClient is what one run of a client command needs: the service clients, a context bounded
// by --timeout, and where and how to print.
type apiClient struct {
	ctx context.Context
	// unbounded is ctx without the --timeout deadline, for calls that last as long as their
	// work does (see withoutDeadline).
	unbounded      context.Context
	tasks          appv1connect.TaskServiceClient
	profiles       appv1connect.ProfileServiceClient
	keys           appv1connect.ApiKeyServiceClient
	sessions       appv1connect.SessionServiceClient
	harnesses      appv1connect.HarnessCatalogServiceClient
	automations    appv1connect.AutomationServiceClient
	automationRuns appv1connect.AutomationRunServiceClient
	secrets        appv1connect.OrgSecretServiceClient
	webhooks       appv1connect.WebhookRegistrationServiceClient
	images         appv1connect.ImageServiceClient
	fleet          appv1connect.FleetServiceClient
	reviews        appv1connect.ReviewServiceClient
	oauth          appv1connect.OAuthCredentialServiceClient
	server         string // the server's URL, for pages of it the user opens
	out            io.Writer
	json           bool
	quiet          bool // show prints only the record's id
	// url and key reach the plain HTTP routes (the shell's WebSocket) the RPC clients do not.
	url string
	key string
}

// withoutDeadline is c for streaming commands (exec, cp, events --follow): the --timeout
// deadline is for unary calls, and would cut a long command or download short.
func (c *apiClient) withoutDeadline() *apiClient {
	u := *c
	u.ctx = c.unbounded
	return &u
}

// run makes a command's RunE: it connects as the flags say, runs fn, and turns fn's error into
// the message and exit code the user sees (see cliError).
func (f *clientFlags) run(fn func(c *apiClient, cmd *cobra.Command, args []string) error) func(*cobra.Command, []string) error {
	return func(cmd *cobra.Command, args []string) error {
		server, key, _, err := credentials(cmd, f.url, f.apiKey)
		if err != nil {
			return err
		}
		if key == "" {
			return &exitStatus{code: exitUnauthenticated, err: errors.New(
				"no API key: run hangar login, set HANGAR_API_KEY or pass --api-key " +
					"(`hangar dev` writes an admin key to .data/admin.key: export HANGAR_API_KEY=$(cat .data/admin.key))")}
		}
		ctx, cancel := context.WithTimeout(cmd.Context(), f.timeout)
		defer cancel()
		base := server + "/rpc"
		opts := auth.WithKey(key)
		c := &apiClient{
			ctx:            ctx,
			unbounded:      cmd.Context(),
			tasks:          appv1connect.NewTaskServiceClient(http.DefaultClient, base, opts),
			profiles:       appv1connect.NewProfileServiceClient(http.DefaultClient, base, opts),
			keys:           appv1connect.NewApiKeyServiceClient(http.DefaultClient, base, opts),
			sessions:       appv1connect.NewSessionServiceClient(http.DefaultClient, base, opts),
			harnesses:      appv1connect.NewHarnessCatalogServiceClient(http.DefaultClient, base, opts),
			automations:    appv1connect.NewAutomationServiceClient(http.DefaultClient, base, opts),
			automationRuns: appv1connect.NewAutomationRunServiceClient(http.DefaultClient, base, opts),
			secrets:        appv1connect.NewOrgSecretServiceClient(http.DefaultClient, base, opts),
			webhooks:       appv1connect.NewWebhookRegistrationServiceClient(http.DefaultClient, base, opts),
			images:         appv1connect.NewImageServiceClient(http.DefaultClient, base, opts),
			fleet:          appv1connect.NewFleetServiceClient(http.DefaultClient, base, opts),
			reviews:        appv1connect.NewReviewServiceClient(http.DefaultClient, base, opts),
			oauth:          appv1connect.NewOAuthCredentialServiceClient(http.DefaultClient, base, opts),
			server:         server,
			out:            cmd.OutOrStdout(),
			json:           f.json,
			quiet:          f.quiet,
			url:            strings.TrimRight(f.url, "/"),
			key:            key,
		}
		return cliError(fn(c, cmd, args), server)
	}
}

// call sends one request with c's context and returns the response message.
func call[Req, Res any](c *apiClient, method func(context.Context, *connect.Request[Req]) (*connect.Response[Res], error), req *Req) (*Res, error) {
	resp, err := method(c.ctx, connect.NewRequest(req))
	if err != nil {
		return nil, err
	}
	return resp.Msg, nil
}

// send makes one call with req and shows its response (see show): with human when it is not
// nil, otherwise as the "field: value" lines of the record the response carries.
func send[Req, Res any, PRes interface {
	*Res
	proto.Message
}](c *apiClient, method func(context.Context, *connect.Request[Req]) (*connect.Response[Res], error), req *Req, human func(io.Writer, PRes)) error {
	resp, err := call(c, method, req)
	if err != nil {
		return err
	}
	return c.show(PRes(resp), func(w io.Writer) {
		if human == nil {
			record(w, sole(PRes(resp)))
			return
		}
		human(w, resp)
	})
}

// clientCmd is a client command that runs run as clientFlags.run says.
func clientCmd(f *clientFlags, use, short string, args cobra.PositionalArgs, run func(c *apiClient, cmd *cobra.Command, args []string) error) *cobra.Command {
	return &cobra.Command{Use: use, Short: short, Args: args, RunE: f.run(run)}
}

// idCmd is a client command whose one argument is a record ID.
func idCmd(f *clientFlags, use, short string, run func(c *apiClient, cmd *cobra.Command, id string) error) *cobra.Command {
	return clientCmd(f, use, short, cobra.ExactArgs(1), func(c *apiClient, cmd *cobra.Command, args []string) error {
		return run(c, cmd, args[0])
	})
}

func envOr(name, fallback string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return fallback
}

// readInput reads the file at path, or standard input when path is "-".
func readInput(cmd *cobra.Command, path string) ([]byte, error) {
	if path == "-" {
		return io.ReadAll(cmd.InOrStdin())
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, usageError("%v", err)
	}
	return b, nil
}

// optString is the value of the string flag name as an optional field: nil unless the user set
// it to something non-empty (so on an update, setting it to "" clears the field).
func optString(cmd *cobra.Command, name string) *string {
	v, _ := cmd.Flags().GetString(name)
	if !cmd.Flags().Changed(name) || v == "" {
		return nil
	}
	return &v
}

// checkOneOf fails with a usage error unless the string flag name is empty or one of allowed.
func checkOneOf(cmd *cobra.Command, name string, allowed ...string) error {
	v, _ := cmd.Flags().GetString(name)
	if v == "" {
		return nil
	}
	for _, a := range allowed {
		if v == a {
			return nil
		}
	}
	return usageError("--%s must be one of %s, not %q", name, strings.Join(allowed, ", "), v)
}

// keyValues parses the K=V values of the string-array flag name, skipping empty values (so that
// an empty value, as in --env=, sets an empty list).
func keyValues(cmd *cobra.Command, name string) ([][2]string, error) {
	vals, _ := cmd.Flags().GetStringArray(name)
	var pairs [][2]string
	for _, v := range vals {
		if v == "" {
			continue
		}
		k, val, ok := strings.Cut(v, "=")
		if !ok || k == "" {
			want, _ := pflag.UnquoteUsage(cmd.Flags().Lookup(name))
			return nil, usageError("--%s %q: want %s", name, v, want)
		}
		pairs = append(pairs, [2]string{k, val})
	}
	return pairs, nil
}

// nonEmpty is the values of the string-array flag name without empty ones.
func nonEmpty(cmd *cobra.Command, name string) []string {
	vals, _ := cmd.Flags().GetStringArray(name)
	var out []string
	for _, v := range vals {
		if v != "" {
			out = append(out, v)
		}
	}
	return out
}

// usageError is a mistake in the command line: exit code 2.
func usageError(format string, args ...any) error {
	return &exitStatus{code: exitInvalidArgument, err: fmt.Errorf(format, args...)}
}
