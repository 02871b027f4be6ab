// Package oauthtest is a loopback OAuth provider for tests: RFC 6749's authorization code and
// refresh grants, RFC 7636's PKCE (S256 only) and RFC 8628's device grant, with answers a test
// scripts. OAuthCredentialService's own tests and the CLI's tests through a real server sign in
// to it.
package oauthtest

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
)

// Provider is the loopback provider. Tests decide what each device code answers and play the
// user's browser by minting codes (Authorize).
type Provider struct {
	// ClientID and ClientSecret are the only client the provider knows.
	ClientID, ClientSecret string

	t   *testing.T
	srv *httptest.Server
	mu  sync.Mutex
	// device codes: the answers the token endpoint gives, in order; the last repeats.
	devices map[string][]string
	// codes issued by authorize, and whether each was exchanged.
	codes map[string]*issued
	// refresh tokens that still work, and what a refresh answers (an error code, or "" for a
	// new token).
	refreshable  map[string]bool
	refreshError string
	exchanges    int
	polls        int
	serial       int
	// expiresIn is the access tokens' lifetime in seconds.
	expiresIn int
	// redirectTokenTo, when set, has the token endpoint redirect there.
	redirectTokenTo string
}

type issued struct {
	challenge, redirectURI, clientID string
	used                             bool
}

// New starts a provider for t, closed when t ends.
func New(t *testing.T) *Provider {
	p := &Provider{t: t, devices: map[string][]string{}, codes: map[string]*issued{}, refreshable: map[string]bool{}, expiresIn: 3600}
	p.ClientID, p.ClientSecret = "client-123", "client-secret-very-private"
	mux := http.NewServeMux()
	mux.HandleFunc("POST /device", p.device)
	mux.HandleFunc("POST /token", p.token)
	mux.HandleFunc("GET /user", p.user)
	p.srv = httptest.NewServer(mux)
	t.Cleanup(p.srv.Close)
	return p
}

// URL is path on the provider.
func (p *Provider) URL(path string) string { return p.srv.URL + path }

// Addr is the provider's host:port.
func (p *Provider) Addr() string { return p.srv.Listener.Addr().String() }

// RegistryJSON is a HANGAR_OAUTH_PROVIDERS list of one provider, id, served here: device and
// redirect flows with PKCE, a confidential client whose id and secret are the org secrets
// idRef and secretRef, and account metadata from the token response and the /user probe.
func (p *Provider) RegistryJSON(id, idRef, secretRef string) string {
	return `[{"id": "` + id + `", "device_authorization_url": "` + p.URL("/device") + `",
		"authorize_url": "` + p.URL("/authorize") + `", "token_url": "` + p.URL("/token") + `",
		"scopes": ["read", "write"], "client_id_ref": "` + idRef + `", "client_secret_ref": "` + secretRef + `",
		"pkce": true, "bundle": "claude_code",
		"metadata": {"from_token_response": {"display_name": "account.email_address", "workspace_name": "organization.name"},
			"probe": {"host": "` + p.Addr() + `", "path": "/user", "map": {"plan_type": "plan.name"}}}}]`
}

// SetRedirectTokenTo has the token endpoint redirect to u.
func (p *Provider) SetRedirectTokenTo(u string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.redirectTokenTo = u
}

// ForgetRefreshTokens makes every refresh token issued so far fail with invalid_grant.
func (p *Provider) ForgetRefreshTokens() {
	p.mu.Lock()
	defer p.mu.Unlock()
	clear(p.refreshable)
}

// SetExpiresIn sets the lifetime of the access tokens issued from now on, in seconds: a short
// one has Hangar's refresh sweep come due at once.
func (p *Provider) SetExpiresIn(seconds int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.expiresIn = seconds
}

// SetRefreshError has refreshes answer the OAuth error code ("" issues tokens again).
func (p *Provider) SetRefreshError(code string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.refreshError = code
}

// next mints a distinct secret-looking value.
func (p *Provider) next(kind string) string {
	p.serial++
	return fmt.Sprintf("%s-%d-SECRET", kind, p.serial)
}

func (p *Provider) device(w http.ResponseWriter, r *http.Request) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if r.PostFormValue("client_id") != p.ClientID {
		oauthError(w, http.StatusUnauthorized, "invalid_client")
		return
	}
	dc := p.next("devicecode")
	p.devices[dc] = nil
	writeJSON(w, map[string]any{
		"device_code": dc, "user_code": "WDJB-MJHT", "verification_uri": p.URL("/activate"),
		"expires_in": 900, "interval": 5,
	})
}

// Script sets what the newest device code's polls answer.
func (p *Provider) Script(answers ...string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	dc := fmt.Sprintf("devicecode-%d-SECRET", p.serial)
	p.devices[dc] = answers
}

// Authorize plays the user approving at authorizeURL: it checks the request and mints a code
// bound to its challenge and redirect_uri, answering the code and the state.
func (p *Provider) Authorize(authorizeURL string) (code, state string) {
	p.t.Helper()
	req, err := http.NewRequest(http.MethodGet, authorizeURL, nil)
	if err != nil {
		p.t.Fatal(err)
	}
	q := req.URL.Query()
	if q.Get("response_type") != "code" || q.Get("client_id") != p.ClientID || q.Get("code_challenge_method") != "S256" {
		p.t.Fatalf("authorize URL %s lacks response_type, client_id or S256", authorizeURL)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	code = p.next("authcode")
	p.codes[code] = &issued{challenge: q.Get("code_challenge"), redirectURI: q.Get("redirect_uri"), clientID: q.Get("client_id")}
	return code, q.Get("state")
}

func (p *Provider) token(w http.ResponseWriter, r *http.Request) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.redirectTokenTo != "" {
		http.Redirect(w, r, p.redirectTokenTo, http.StatusTemporaryRedirect)
		return
	}
	if r.PostFormValue("client_id") != p.ClientID || r.PostFormValue("client_secret") != p.ClientSecret {
		oauthError(w, http.StatusUnauthorized, "invalid_client")
		return
	}
	switch r.PostFormValue("grant_type") {
	case "urn:ietf:params:oauth:grant-type:device_code":
		p.polls++
		answers, ok := p.devices[r.PostFormValue("device_code")]
		if !ok {
			oauthError(w, http.StatusBadRequest, "invalid_grant")
			return
		}
		answer := "token"
		if len(answers) > 0 {
			answer = answers[0]
			if len(answers) > 1 {
				p.devices[r.PostFormValue("device_code")] = answers[1:]
			}
		}
		if answer != "token" {
			oauthError(w, http.StatusBadRequest, answer)
			return
		}
		delete(p.devices, r.PostFormValue("device_code"))
		p.issueToken(w)
	case "authorization_code":
		p.exchanges++
		c, ok := p.codes[r.PostFormValue("code")]
		switch {
		case !ok || c.used:
			oauthError(w, http.StatusBadRequest, "invalid_grant")
		case c.redirectURI != r.PostFormValue("redirect_uri"):
			oauthError(w, http.StatusBadRequest, "invalid_grant")
		case S256(r.PostFormValue("code_verifier")) != c.challenge:
			oauthError(w, http.StatusBadRequest, "invalid_grant")
		default:
			c.used = true
			p.issueToken(w)
		}
	case "refresh_token":
		rt := r.PostFormValue("refresh_token")
		if !p.refreshable[rt] {
			oauthError(w, http.StatusBadRequest, "invalid_grant")
			return
		}
		if p.refreshError != "" {
			oauthError(w, http.StatusBadRequest, p.refreshError)
			return
		}
		delete(p.refreshable, rt) // rotated, as OAuth 2.1 has public clients do
		p.issueToken(w)
	default:
		oauthError(w, http.StatusBadRequest, "unsupported_grant_type")
	}
}

// issueToken answers a new access and refresh token, with account details as Anthropic's
// token endpoint gives them.
func (p *Provider) issueToken(w http.ResponseWriter) {
	rt := p.next("refreshtoken")
	p.refreshable[rt] = true
	writeJSON(w, map[string]any{
		"access_token": p.next("accesstoken"), "token_type": "Bearer", "expires_in": p.expiresIn, "refresh_token": rt,
		"account": map[string]any{"email_address": "alice@example.com"}, "organization": map[string]any{"uuid": "org-1", "name": "Acme <b>"},
	})
}

func (p *Provider) user(w http.ResponseWriter, r *http.Request) {
	if !strings.HasPrefix(r.Header.Get("Authorization"), "Bearer accesstoken-") {
		http.Error(w, "no token", http.StatusUnauthorized)
		return
	}
	writeJSON(w, map[string]any{"login": "alice-gh", "plan": map[string]any{"name": "pro"}})
}

// S256 is RFC 7636's S256 challenge of verifier, as the provider computes it.
func S256(verifier string) string {
	sum := sha256.Sum256([]byte(verifier))
	return base64.RawURLEncoding.EncodeToString(sum[:])
}

func oauthError(w http.ResponseWriter, status int, code string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]string{"error": code, "error_description": "the fake provider says " + code + " (descriptions-are-not-echoed-SECRET)"})
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}

// Counts are how many device polls and code exchanges the provider answered.
func (p *Provider) Counts() (polls, exchanges int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.polls, p.exchanges
}
