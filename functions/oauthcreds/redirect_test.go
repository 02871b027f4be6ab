package oauthcreds

import (
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"connectrpc.com/connect"
	"golang.org/x/oauth2"

	appv1 "github.com/hangar-dev/hangar/gen/svc/app/v1"
	"github.com/hangar-dev/hangar/internal/oauthtest"
	"github.com/hangar-dev/hangar/internal/testenv"
	"github.com/hangar-dev/hangar/platform/auth"
	"github.com/hangar-dev/hangar/platform/httpapi"
	"github.com/hangar-dev/hangar/records/credentials"
)

const redirectURI = "https://hangar.example.com/api/auth/oauth/callback"

// RFC 7636 appendix B: the S256 challenge of its verifier, as golang.org/x/oauth2 computes it
// and as the authorize URL carries it.
func TestPKCEMatchesTheRFC7636TestVector(t *testing.T) {
	t.Parallel()
	if got := oauth2.S256ChallengeFromVerifier("dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk"); got != "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM" {
		t.Fatalf("challenge %s", got)
	}
	if got := oauthtest.S256("dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk"); got != "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM" {
		t.Fatalf("the fake provider's challenge %s", got)
	}
}

func beginRedirect(t *testing.T, h *harness, spec *appv1.RedirectOauthSpec) (id, authorizeURL string) {
	t.Helper()
	r, err := h.svc.BeginRedirectFlow(h.alice, connect.NewRequest(&appv1.BeginRedirectFlowRequest{
		Subject: userSubject, Provider: "acme", RedirectUri: redirectURI, Spec: spec,
	}))
	if err != nil {
		t.Fatal(err)
	}
	return r.Msg.GetFlow().GetId(), r.Msg.GetAuthorizeUrl()
}

func complete(h *harness, id, code, redirect string) (*connect.Response[appv1.CompleteRedirectFlowResponse], error) {
	return h.svc.CompleteRedirectFlow(h.alice, connect.NewRequest(&appv1.CompleteRedirectFlowRequest{
		Subject: userSubject, Provider: "acme", FlowId: id, Code: code, RedirectUri: redirect,
	}))
}

// The authorize URL says what the spec says: scopes joined by scope_delimiter into
// scopes_param, the extra parameters, state (the flow id), redirect_uri and an S256 challenge.
func TestBeginRedirectFlowBuildsTheAuthorizeURLFromTheSpec(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	spec := h.svc.d.Providers["acme"].spec()
	spec.Scopes, spec.ScopeDelimiter, spec.ScopesParam = []string{"a", "b"}, ",", "user_scope"
	spec.ExtraAuthorizeParams = map[string]string{"prompt": "consent"}
	id, raw := beginRedirect(t, h, spec)
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	for k, want := range map[string]string{
		"user_scope": "a,b", "prompt": "consent", "state": id, "redirect_uri": redirectURI,
		"client_id": h.provider.ClientID, "response_type": "code", "code_challenge_method": "S256",
	} {
		if q.Get(k) != want {
			t.Errorf("%s = %q, want %q", k, q.Get(k), want)
		}
	}
	if len(q.Get("code_challenge")) != 43 || q.Has("scope") {
		t.Errorf("challenge %q, scope %q", q.Get("code_challenge"), q.Get("scope"))
	}
	spec.ExtraAuthorizeParams = map[string]string{"state": "mine"}
	_, err = h.svc.BeginRedirectFlow(h.alice, connect.NewRequest(&appv1.BeginRedirectFlowRequest{Subject: userSubject, Provider: "acme", RedirectUri: redirectURI, Spec: spec}))
	testenv.WantCode(t, err, connect.CodeInvalidArgument)
}

// A code is exchanged once, with the flow's redirect_uri and PKCE verifier; the credential gets
// account metadata from the token response and the probe. A replayed code, a wrong redirect_uri,
// another user's flow and a code the provider refuses all fail, and none stores a credential.
func TestSecurityARedirectCodeIsExchangedOnceForItsOwnSubjectAndRedirect(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	id, authorizeURL := beginRedirect(t, h, nil)
	code, state := h.provider.Authorize(authorizeURL)
	if state != id {
		t.Fatalf("state %s is not the flow %s", state, id)
	}
	_, err := complete(h, id, code, "https://evil.example.com/cb")
	testenv.WantCode(t, err, connect.CodeInvalidArgument)
	_, err = h.svc.CompleteRedirectFlow(h.bob, connect.NewRequest(&appv1.CompleteRedirectFlowRequest{
		Subject: userSubject, Provider: "acme", FlowId: id, Code: code, RedirectUri: redirectURI,
	}))
	testenv.WantCode(t, err, connect.CodeNotFound)
	done, err := complete(h, id, code, redirectURI)
	if err != nil {
		t.Fatal(err)
	}
	c := done.Msg.GetCredential()
	if c.GetStatus() != credentials.StatusConnected || c.GetAccount().GetDisplayName() != "alice@example.com" ||
		c.GetAccount().GetWorkspaceName() != "Acme <b>" || c.GetAccount().GetPlanType() != "pro" || c.GetExpiresAt() == "" {
		t.Fatalf("credential %v", c)
	}
	// Replayed to Hangar: refused before the provider hears of it.
	_, err = complete(h, id, code, redirectURI)
	testenv.WantCode(t, err, connect.CodeFailedPrecondition)
	if _, n := h.provider.Counts(); n != 1 {
		t.Fatalf("the provider saw %d exchanges, want 1", n)
	}
	// Replayed in another flow: the provider refuses it, and the flow fails with its code.
	other, _ := beginRedirect(t, h, nil)
	_, err = complete(h, other, code, redirectURI)
	testenv.WantCode(t, err, connect.CodeFailedPrecondition)
	f, err := h.svc.d.Flows.Get(t.Context(), other)
	if err != nil || f.Status != credentials.FlowFailed || f.ErrorCode != "invalid_grant" {
		t.Fatalf("flow after a replayed code: %+v, %v", f, err)
	}
	looked, err := h.svc.LookupRedirectFlow(h.alice, connect.NewRequest(&appv1.LookupRedirectFlowRequest{FlowId: id}))
	if err != nil || looked.Msg.GetStatus() != credentials.FlowCompleted || looked.Msg.GetProvider() != "acme" || looked.Msg.GetSubject().GetId() != alice.UserID {
		t.Fatalf("lookup %v, %v", looked, err)
	}
	_, err = h.svc.LookupRedirectFlow(h.bob, connect.NewRequest(&appv1.LookupRedirectFlowRequest{FlowId: id}))
	testenv.WantCode(t, err, connect.CodeNotFound)
}

// The callback page completes the flow its state names for the signed-in caller, and says what
// happened, escaped: a state that matches no flow of the caller's (another's, or made up), a
// provider's error, and a request nobody signed in to are each a page, never a completion.
func TestSecurityCallbackPageCompletesOnlyTheCallersFlowAndEscapes(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	as := func(p *auth.Principal) Authenticate {
		return func(*http.Request) (auth.Principal, error) {
			if p == nil {
				return auth.Principal{}, connect.NewError(connect.CodeUnauthenticated, nil)
			}
			return *p, nil
		}
	}
	get := func(who *auth.Principal, query string) (int, string) {
		rec := httptest.NewRecorder()
		h.svc.Callback(as(who)).ServeHTTP(rec, httptest.NewRequest(http.MethodGet, httpapi.OAuthCallbackPath+"?"+query, nil))
		body, _ := io.ReadAll(rec.Body)
		return rec.Code, string(body)
	}
	id, authorizeURL := beginRedirect(t, h, nil)
	code, state := h.provider.Authorize(authorizeURL)
	q := url.Values{"state": {state}, "code": {code}}.Encode()
	if status, body := get(nil, q); status != http.StatusUnauthorized || !strings.Contains(body, "Sign in to Hangar") {
		t.Fatalf("unsigned: %d %s", status, body)
	}
	if status, _ := get(&bob, q); status != http.StatusNotFound {
		t.Fatalf("bob's callback: %d", status)
	}
	if status, _ := get(&alice, url.Values{"state": {"oaf_01jd3zzzzzzzzzzzzzzzzzzzzz"}, "code": {code}}.Encode()); status != http.StatusNotFound {
		t.Fatalf("state mismatch: %d", status)
	}
	status, body := get(&alice, q)
	if status != http.StatusOK || !strings.Contains(body, "connected to acme as alice@example.com") {
		t.Fatalf("callback: %d %s", status, body)
	}
	if status, body := get(&alice, q); status != http.StatusBadRequest || !strings.Contains(body, "exchanged once") {
		t.Fatalf("replayed callback: %d %s", status, body)
	}
	if f, _ := h.svc.d.Flows.Get(t.Context(), id); f.Status != credentials.FlowCompleted {
		t.Fatalf("flow %s", f.Status)
	}
	denied, _ := beginRedirect(t, h, nil)
	status, body = get(&alice, url.Values{"state": {denied}, "error": {"access_denied"}}.Encode())
	if status != http.StatusOK || !strings.Contains(body, "access_denied") {
		t.Fatalf("denied: %d %s", status, body)
	}
	if f, _ := h.svc.d.Flows.Get(t.Context(), denied); f.Status != credentials.FlowDenied {
		t.Fatalf("denied flow %s", f.Status)
	}
	odd, _ := beginRedirect(t, h, nil)
	if _, body = get(&alice, url.Values{"state": {odd}, "error": {"<script>alert(1)</script>"}}.Encode()); strings.Contains(body, "<script>") {
		t.Fatalf("the page echoes markup: %s", body)
	}
}

// Provider URLs are https (http only on loopback, and only with LoopbackHTTP), never a
// metadata server or a private address, and a token endpoint's redirect is checked again.
func TestSecuritySpecURLsCannotReachMetadataPrivateOrPlainHTTP(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	for name, u := range map[string]string{
		"plain http":           "http://oauth.example.com/token",
		"metadata by address":  "https://169.254.169.254/token",
		"metadata by name":     "https://metadata.google.internal/token",
		"a private address":    "https://10.0.0.8/token",
		"user info":            "https://me:pw@oauth.example.com/token",
		"not a URL":            "token",
		"IPv6 link-local":      "https://[fe80::1]/token",
		"IPv4-mapped metadata": "https://[::ffff:169.254.169.254]/token",
		"unspecified address":  "https://0.0.0.0/token",
		"javascript scheme":    "javascript:alert(1)",
	} {
		t.Run(name, func(t *testing.T) {
			spec := h.svc.d.Providers["acme"].spec()
			spec.TokenUrl = u
			_, err := h.svc.BeginRedirectFlow(h.alice, connect.NewRequest(&appv1.BeginRedirectFlowRequest{Subject: userSubject, Provider: "acme", RedirectUri: redirectURI, Spec: spec}))
			testenv.WantCode(t, err, connect.CodeInvalidArgument)
		})
	}
	h.svc.d.LoopbackHTTP = false
	_, err := h.svc.BeginRedirectFlow(h.alice, connect.NewRequest(&appv1.BeginRedirectFlowRequest{Subject: userSubject, Provider: "acme", RedirectUri: redirectURI}))
	testenv.WantCode(t, err, connect.CodeInvalidArgument)
	h.svc.d.LoopbackHTTP = true

	// The token endpoint redirects to the metadata server: the exchange fails, naming no token.
	id, authorizeURL := beginRedirect(t, h, nil)
	code, _ := h.provider.Authorize(authorizeURL)
	h.provider.SetRedirectTokenTo("http://169.254.169.254/computeMetadata/v1/")
	_, err = complete(h, id, code, redirectURI)
	testenv.WantCode(t, err, connect.CodeFailedPrecondition)
	if f, _ := h.svc.d.Flows.Get(t.Context(), id); f.ErrorCode != "endpoint_refused" {
		t.Fatalf("flow error_code %q", f.ErrorCode)
	}
}

// A client secret reference obeys the secret's access policy: a spec naming an admins-only
// secret is refused for a user, so no user can send an org secret to a token_url of theirs.
func TestSecuritySpecSecretRefsObeyTheAccessPolicy(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	if _, _, err := h.svc.d.Secrets.Put(t.Context(), secretPut("DEPLOY_KEY", "do-not-leak")); err != nil {
		t.Fatal(err)
	}
	spec := h.svc.d.Providers["acme"].spec()
	spec.ClientSecretRef = "DEPLOY_KEY"
	_, err := h.svc.BeginRedirectFlow(h.alice, connect.NewRequest(&appv1.BeginRedirectFlowRequest{Subject: userSubject, Provider: "acme", RedirectUri: redirectURI, Spec: spec}))
	testenv.WantCode(t, err, connect.CodePermissionDenied)
}
