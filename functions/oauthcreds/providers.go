package oauthcreds

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"net/url"
	"slices"
	"strings"

	appv1 "github.com/hangar-dev/hangar/gen/svc/app/v1"
	"github.com/hangar-dev/hangar/records/credentials"
)

// Provider is one OAuth provider Hangar signs subjects in to: its endpoints, scopes, client
// (a public client id, or references into the org secret store), and what Hangar makes of the
// token: the bundle format sessions receive and where account metadata comes from.
type Provider struct {
	// ID is the provider's name, as credentials and harness descriptors (auth.user_oauth) say it.
	ID string `json:"id"`
	// DeviceAuthorizationURL is the RFC 8628 device authorization endpoint ("": no device flow).
	DeviceAuthorizationURL string `json:"device_authorization_url,omitempty"`
	// AuthorizeURL is the authorization endpoint of redirect flows ("": no redirect flow).
	AuthorizeURL string   `json:"authorize_url,omitempty"`
	TokenURL     string   `json:"token_url"`
	Scopes       []string `json:"scopes,omitempty"`
	// ScopeDelimiter joins Scopes (default a space, RFC 6749 3.3); ScopesParam is the
	// authorize parameter they go in (default "scope").
	ScopeDelimiter string `json:"scope_delimiter,omitempty"`
	ScopesParam    string `json:"scopes_param,omitempty"`
	// ExtraAuthorizeParams are added to the authorize URL.
	ExtraAuthorizeParams map[string]string `json:"extra_authorize_params,omitempty"`
	// ClientID is a public client's id, written in the open (a CLI's); ClientIDRef names the
	// org secret that holds it instead. ClientSecretRef names the org secret holding a
	// confidential client's secret ("": a public client). Both references obey the secret's
	// access policy for the subject signing in.
	ClientID        string `json:"client_id,omitempty"`
	ClientIDRef     string `json:"client_id_ref,omitempty"`
	ClientSecretRef string `json:"client_secret_ref,omitempty"`
	// PKCE sends an RFC 7636 S256 challenge with redirect flows.
	PKCE bool `json:"pkce,omitempty"`
	// AuthInHeader sends the client's credentials by HTTP Basic auth rather than in the form.
	AuthInHeader bool `json:"auth_in_header,omitempty"`
	// Bundle is how the token is kept for sessions: token_json (default), access_token,
	// claude_code or codex_auth_json (see bundle.go).
	Bundle string `json:"bundle,omitempty"`
	// Metadata reads account details from the token response and a probe request.
	Metadata *Metadata `json:"metadata,omitempty"`
	// APIHosts are the hosts (entries as a profile's allow_hosts: a name with an optional
	// ":port") where the provider's access tokens are used. A session's sandbox holds a
	// placeholder of the token, which the egress proxy swaps for the real one only in requests
	// to these hosts and the token endpoint's; a provider without any gives sandboxes the
	// real bundle through the session broker.
	APIHosts []string `json:"api_hosts,omitempty"`
}

// Metadata says where account details come from: FromTokenResponse maps an account field
// (display_name, plan_type, workspace_id, workspace_name) to a token response field; Probe is a
// request made with the new access token whose JSON answer Probe.Map reads (dotted paths).
type Metadata struct {
	FromTokenResponse map[string]string `json:"from_token_response,omitempty"`
	Probe             *Probe            `json:"probe,omitempty"`
}

// Probe is an account metadata request: METHOD https://Host/Path with Body.
type Probe struct {
	Method string            `json:"method,omitempty"`
	Host   string            `json:"host"`
	Path   string            `json:"path"`
	Body   string            `json:"body,omitempty"`
	Map    map[string]string `json:"map"`
}

// Builtins are the providers Hangar knows without configuration: those of the built-in harnesses'
// auth.user_oauth (anthropic for claude-code, openai for codex, with the public client ids
// their CLIs sign in with) and the common SCMs, whose OAuth apps an operator registers and
// references (GITHUB_OAUTH_CLIENT_ID, GITLAB_OAUTH_CLIENT_ID, …) in the org secret store.
// HANGAR_OAUTH_PROVIDERS adds providers and replaces these by id.
func Builtins() []Provider {
	return []Provider{
		{
			// Claude Code's own sign-in (see docs/oauth-credentials.md, "Built-in providers, checked against"): its
			// authorize page wants code=true, which has Anthropic's hosted callback show the
			// code to paste.
			ID:                   "anthropic",
			AuthorizeURL:         "https://claude.ai/oauth/authorize",
			TokenURL:             "https://platform.claude.com/v1/oauth/token",
			Scopes:               []string{"org:create_api_key", "user:profile", "user:inference", "user:sessions:claude_code", "user:mcp_servers", "user:file_upload"},
			ExtraAuthorizeParams: map[string]string{"code": "true"},
			ClientID:             "9d1c250a-e61b-44d9-88ed-5944d1962f5e",
			PKCE:                 true,
			Bundle:               credentials.BundleClaudeCode,
			Metadata: &Metadata{FromTokenResponse: map[string]string{
				"display_name": "account.email_address", "workspace_id": "organization.uuid", "workspace_name": "organization.name",
			}},
			APIHosts: []string{"api.anthropic.com"},
		},
		{
			// Codex's ChatGPT sign-in (codex-rs/login): the authorize parameters it sends.
			ID:           "openai",
			AuthorizeURL: "https://auth.openai.com/oauth/authorize",
			TokenURL:     "https://auth.openai.com/oauth/token",
			Scopes:       []string{"openid", "profile", "email", "offline_access"},
			ExtraAuthorizeParams: map[string]string{
				"id_token_add_organizations": "true", "codex_cli_simplified_flow": "true", "originator": "codex_cli_rs",
			},
			ClientID: "app_EMoamEEZ73f0CkXaXp7hrann",
			PKCE:     true,
			Bundle:   credentials.BundleCodexAuthJSON,
			APIHosts: []string{"chatgpt.com", "api.openai.com"},
		},
		{
			ID:                     "github",
			DeviceAuthorizationURL: "https://github.com/login/device/code",
			AuthorizeURL:           "https://github.com/login/oauth/authorize",
			TokenURL:               "https://github.com/login/oauth/access_token",
			Scopes:                 []string{"repo", "read:org"},
			ClientIDRef:            "GITHUB_OAUTH_CLIENT_ID",
			ClientSecretRef:        "GITHUB_OAUTH_CLIENT_SECRET",
			PKCE:                   true,
			Metadata: &Metadata{Probe: &Probe{
				Host: "api.github.com", Path: "/user", Map: map[string]string{"display_name": "login"},
			}},
			APIHosts: []string{"api.github.com", "github.com"},
		},
		{
			ID:                     "gitlab",
			DeviceAuthorizationURL: "https://gitlab.com/oauth/authorize_device",
			AuthorizeURL:           "https://gitlab.com/oauth/authorize",
			TokenURL:               "https://gitlab.com/oauth/token",
			Scopes:                 []string{"api", "read_user"},
			ClientIDRef:            "GITLAB_OAUTH_CLIENT_ID",
			ClientSecretRef:        "GITLAB_OAUTH_CLIENT_SECRET",
			PKCE:                   true,
			Metadata: &Metadata{Probe: &Probe{
				Host: "gitlab.com", Path: "/api/v4/user", Map: map[string]string{"display_name": "username"},
			}},
			APIHosts: []string{"gitlab.com"},
		},
	}
}

// Registry is the providers a deployment signs in to, by id.
type Registry map[string]Provider

// NewRegistry is the built-ins overlaid with configured (HANGAR_OAUTH_PROVIDERS, a JSON list;
// "" for none). Unknown fields, bad ids and bad bundle formats are errors; URLs are checked when
// used, against the egress policy of that moment.
func NewRegistry(configured string) (Registry, error) {
	r := Registry{}
	for _, p := range Builtins() {
		r[p.ID] = p
	}
	if len(bytes.TrimSpace([]byte(configured))) == 0 {
		return r, nil
	}
	dec := json.NewDecoder(bytes.NewReader([]byte(configured)))
	dec.DisallowUnknownFields()
	var ps []Provider
	if err := dec.Decode(&ps); err != nil {
		return nil, fmt.Errorf("HANGAR_OAUTH_PROVIDERS: %w", err)
	}
	for i, p := range ps {
		switch {
		case !credentials.ValidProvider(p.ID):
			return nil, fmt.Errorf("HANGAR_OAUTH_PROVIDERS[%d].id %q: want 1 to 64 of a-z0-9_.-", i, p.ID)
		case p.TokenURL == "":
			return nil, fmt.Errorf("HANGAR_OAUTH_PROVIDERS[%d] (%s): token_url is required", i, p.ID)
		case p.DeviceAuthorizationURL == "" && p.AuthorizeURL == "":
			return nil, fmt.Errorf("HANGAR_OAUTH_PROVIDERS[%d] (%s): needs device_authorization_url or authorize_url", i, p.ID)
		case !slices.Contains(credentials.BundleFormats, p.Bundle):
			return nil, fmt.Errorf("HANGAR_OAUTH_PROVIDERS[%d] (%s): bundle %q: want one of %v", i, p.ID, p.Bundle, credentials.BundleFormats[1:])
		}
		for _, h := range p.APIHosts {
			if !validHost(h) {
				return nil, fmt.Errorf("HANGAR_OAUTH_PROVIDERS[%d] (%s): api_hosts entry %q: want a host name with an optional :port", i, p.ID, h)
			}
		}
		r[p.ID] = p
	}
	return r, nil
}

// validHost reports whether h is a host name or IP with an optional ":port", as an allow_hosts
// entry is: no scheme, path, user info or space.
func validHost(h string) bool {
	u, err := url.Parse("https://" + h)
	return err == nil && h != "" && u.Host == h && u.User == nil && u.Hostname() != "" && !strings.ContainsAny(h, " \t/")
}

// SandboxHosts says how a session's sandbox holds provider's tokens: the bundle format, and
// the hosts its access token may go to (its API hosts and its token endpoint's host). ok is
// false for a provider the registry does not know or that names no API hosts: such a
// session's sandbox gets the real bundle.
func (r Registry) SandboxHosts(provider string) (format string, hosts []string, ok bool) {
	p, known := r[provider]
	if !known || len(p.APIHosts) == 0 {
		return "", nil, false
	}
	hosts = slices.Clone(p.APIHosts)
	if u, err := url.Parse(p.TokenURL); err == nil && u.Host != "" && !slices.Contains(hosts, u.Host) {
		hosts = append(hosts, u.Host)
	}
	return p.Bundle, hosts, true
}

// spec is the provider's redirect flow as the API's RedirectOauthSpec.
func (p Provider) spec() *appv1.RedirectOauthSpec {
	s := &appv1.RedirectOauthSpec{
		AuthorizeUrl: p.AuthorizeURL, TokenUrl: p.TokenURL, Scopes: p.Scopes, ScopeDelimiter: p.ScopeDelimiter,
		ExtraAuthorizeParams: maps.Clone(p.ExtraAuthorizeParams), ClientIdRef: p.ClientIDRef,
		ClientSecretRef: p.ClientSecretRef, Pkce: p.PKCE, ScopesParam: p.ScopesParam,
	}
	if m := p.Metadata; m != nil {
		s.Metadata = &appv1.RedirectMetadataSpec{FromTokenResponse: maps.Clone(m.FromTokenResponse)}
		if pr := m.Probe; pr != nil {
			s.Metadata.Probe = &appv1.RedirectMetadataProbe{Method: pr.Method, Host: pr.Host, Path: pr.Path, Body: pr.Body, Map: maps.Clone(pr.Map)}
		}
	}
	return s
}
