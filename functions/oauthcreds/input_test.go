package oauthcreds

import (
	"slices"
	"strings"
	"testing"

	"connectrpc.com/connect"

	appv1 "github.com/hangar-dev/hangar/gen/svc/app/v1"
	"github.com/hangar-dev/hangar/internal/testenv"
	"github.com/hangar-dev/hangar/records/credentials"
)

// HANGAR_OAUTH_PROVIDERS is refused whole, saying which entry and why, when an entry is not one
// Hangar can use; a good list overlays the built-ins by id.
func TestRegistryRefusesBadProviders(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ name, json, want string }{
		{"an unknown key", `[{"id": "x", "token_url": "https://x/t", "authorize_url": "https://x/a", "client_secrett": "s"}]`, "unknown field"},
		{"a bad id", `[{"id": "X Y", "token_url": "https://x/t", "authorize_url": "https://x/a"}]`, `id "X Y"`},
		{"no token_url", `[{"id": "x", "authorize_url": "https://x/a"}]`, "token_url is required"},
		{"no flow", `[{"id": "x", "token_url": "https://x/t"}]`, "needs device_authorization_url or authorize_url"},
		{"a bad bundle", `[{"id": "x", "token_url": "https://x/t", "authorize_url": "https://x/a", "bundle": "pem"}]`, `bundle "pem"`},
		{"not a list", `{"id": "x"}`, "HANGAR_OAUTH_PROVIDERS"},
		{"an api host with a scheme", `[{"id": "x", "token_url": "https://x/t", "authorize_url": "https://x/a", "api_hosts": ["https://api.x"]}]`, `api_hosts entry "https://api.x"`},
		{"an api host with a path", `[{"id": "x", "token_url": "https://x/t", "authorize_url": "https://x/a", "api_hosts": ["api.x/v1"]}]`, `api_hosts entry "api.x/v1"`},
		{"an empty api host", `[{"id": "x", "token_url": "https://x/t", "authorize_url": "https://x/a", "api_hosts": [""]}]`, `api_hosts entry ""`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := NewRegistry(tc.json); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err %v, want it to say %q", err, tc.want)
			}
		})
	}
	r, err := NewRegistry(`[{"id": "github", "token_url": "https://ghe.example.com/login/oauth/access_token", "device_authorization_url": "https://ghe.example.com/login/device/code", "client_id": "Iv1.abc"}]`)
	if err != nil || r["github"].ClientID != "Iv1.abc" || r["anthropic"].TokenURL == "" {
		t.Fatalf("overlay: %v, %v", r["github"], err)
	}
}

// A provider's sandbox hosts are its API hosts and its token endpoint's host; one without API
// hosts (a configured one, or a built-in replaced by one naming none) has none, and its
// sessions get the real bundle.
func TestSandboxHostsAreTheAPIHostsAndTheTokenEndpoint(t *testing.T) {
	t.Parallel()
	r, err := NewRegistry(`[{"id": "acme", "token_url": "https://login.acme.test:8443/token", "authorize_url": "https://login.acme.test/a", "api_hosts": ["api.acme.test", "files.acme.test:444"], "bundle": "access_token"},
		{"id": "bare", "token_url": "https://bare.test/t", "authorize_url": "https://bare.test/a"}]`)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		provider, format string
		hosts            []string
		ok               bool
	}{
		{"acme", credentials.BundleAccessToken, []string{"api.acme.test", "files.acme.test:444", "login.acme.test:8443"}, true},
		{"anthropic", credentials.BundleClaudeCode, []string{"api.anthropic.com", "platform.claude.com"}, true},
		{"openai", credentials.BundleCodexAuthJSON, []string{"chatgpt.com", "api.openai.com", "auth.openai.com"}, true},
		{"bare", "", nil, false},
		{"unknown", "", nil, false},
	} {
		format, hosts, ok := r.SandboxHosts(tc.provider)
		if format != tc.format || !slices.Equal(hosts, tc.hosts) || ok != tc.ok {
			t.Errorf("%s: %q %v %v, want %q %v %v", tc.provider, format, hosts, ok, tc.format, tc.hosts, tc.ok)
		}
	}
}

// Bad requests are invalid_argument naming the field, or failed_precondition saying what the
// provider lacks; never a call to a provider.
func TestFlowRequestsAreValidated(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	spec := func(edit func(*appv1.RedirectOauthSpec)) *appv1.RedirectOauthSpec {
		s := h.svc.d.Providers["acme"].spec()
		edit(s)
		return s
	}
	for _, tc := range []struct {
		name  string
		call  func() error
		code  connect.Code
		field string
	}{
		{"an unknown provider", func() error {
			_, err := h.svc.BeginFlow(h.alice, connect.NewRequest(&appv1.BeginFlowRequest{Subject: userSubject, Provider: "nope"}))
			return err
		}, connect.CodeInvalidArgument, "provider"},
		{"a provider without a device flow", func() error {
			_, err := h.svc.BeginFlow(h.alice, connect.NewRequest(&appv1.BeginFlowRequest{Subject: userSubject, Provider: "anthropic"}))
			return err
		}, connect.CodeFailedPrecondition, ""},
		{"no subject kind", func() error {
			_, err := h.svc.BeginFlow(h.alice, connect.NewRequest(&appv1.BeginFlowRequest{Provider: "acme"}))
			return err
		}, connect.CodeInvalidArgument, "subject.kind"},
		{"a redirect without spec for an unknown provider", func() error {
			_, err := h.svc.BeginRedirectFlow(h.alice, connect.NewRequest(&appv1.BeginRedirectFlowRequest{Subject: userSubject, Provider: "nope", RedirectUri: redirectURI}))
			return err
		}, connect.CodeInvalidArgument, "spec"},
		{"a redirect_uri that is not https", func() error {
			_, err := h.svc.BeginRedirectFlow(h.alice, connect.NewRequest(&appv1.BeginRedirectFlowRequest{Subject: userSubject, Provider: "acme", RedirectUri: "http://hangar.example.com/cb"}))
			return err
		}, connect.CodeInvalidArgument, "redirect_uri"},
		{"a redirect_uri with a fragment", func() error {
			_, err := h.svc.BeginRedirectFlow(h.alice, connect.NewRequest(&appv1.BeginRedirectFlowRequest{Subject: userSubject, Provider: "acme", RedirectUri: redirectURI + "#x"}))
			return err
		}, connect.CodeInvalidArgument, "redirect_uri"},
		{"a bad authorize_url", func() error {
			_, err := h.svc.BeginRedirectFlow(h.alice, connect.NewRequest(&appv1.BeginRedirectFlowRequest{Subject: userSubject, Provider: "acme", RedirectUri: redirectURI,
				Spec: spec(func(s *appv1.RedirectOauthSpec) { s.AuthorizeUrl = "ftp://x/a" })}))
			return err
		}, connect.CodeInvalidArgument, "spec.authorize_url"},
		{"a bad grant_path", func() error {
			_, err := h.svc.BeginRedirectFlow(h.alice, connect.NewRequest(&appv1.BeginRedirectFlowRequest{Subject: userSubject, Provider: "acme", RedirectUri: redirectURI,
				Spec: spec(func(s *appv1.RedirectOauthSpec) { s.GrantPath = "a..b" })}))
			return err
		}, connect.CodeInvalidArgument, "spec.grant_path"},
		{"a spec without a client", func() error {
			_, err := h.svc.BeginRedirectFlow(h.alice, connect.NewRequest(&appv1.BeginRedirectFlowRequest{Subject: userSubject, Provider: "acme", RedirectUri: redirectURI,
				Spec: spec(func(s *appv1.RedirectOauthSpec) { s.ClientIdRef = "" })}))
			return err
		}, connect.CodeInvalidArgument, "spec.client_id_ref"},
		{"no flow id", func() error {
			_, err := h.svc.GetFlow(h.alice, connect.NewRequest(&appv1.GetFlowRequest{Subject: userSubject}))
			return err
		}, connect.CodeInvalidArgument, "flow_id"},
		{"an unknown flow", func() error {
			_, err := h.svc.GetFlow(h.alice, connect.NewRequest(&appv1.GetFlowRequest{Subject: userSubject, FlowId: "oaf_x"}))
			return err
		}, connect.CodeNotFound, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.call()
			testenv.WantCode(t, err, tc.code)
			if tc.field != "" {
				if got := testenv.ViolatedFields(t, err); len(got) != 1 || got[0] != tc.field {
					t.Fatalf("violated %v, want %s", got, tc.field)
				}
			}
		})
	}
	if polls, exchanges := h.provider.Counts(); polls+exchanges != 0 {
		t.Fatal("a bad request reached the provider")
	}
}
