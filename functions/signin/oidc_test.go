package signin

import (
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"golang.org/x/oauth2"

	"github.com/hangar-dev/hangar/internal/oidctest"
	"github.com/hangar-dev/hangar/platform/auth"
	"github.com/hangar-dev/hangar/platform/config"
	"github.com/hangar-dev/hangar/platform/httpapi"
)

var ada = oidctest.Person{Email: adminEmail, EmailVerified: true, Name: "Ada Lovelace"}

// RFC 7636 Appendix B: the verifier, and the S256 challenge both the provider and
// golang.org/x/oauth2 (whose S256ChallengeOption sign-in sends) compute from it.
func TestPKCEMatchesRFC7636AppendixB(t *testing.T) {
	const verifier, challenge = "dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk", "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM"
	if got := oidctest.S256(verifier); got != challenge {
		t.Errorf("the test provider's S256 = %s", got)
	}
	if got := oauth2.S256ChallengeFromVerifier(verifier); got != challenge {
		t.Errorf("oauth2's S256 = %s", got)
	}
}

func TestSignInThroughTheProviderSetsASessionCookieThatAuthenticatesRPCs(t *testing.T) {
	e := newEnv(t)
	b := e.browser(t)
	resp := e.signIn(t, b, ada)
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/sessions" {
		t.Fatalf("the callback answered %s to %q", resp.Status, resp.Header.Get("Location"))
	}
	var set *http.Cookie
	for _, c := range resp.Cookies() {
		if c.Name == auth.SessionCookie {
			set = c
		}
	}
	if set == nil {
		t.Fatal("no session cookie set")
	}
	if !set.HttpOnly || set.SameSite != http.SameSiteLaxMode || set.Path != "/" || set.Secure {
		t.Errorf("cookie on loopback: HttpOnly=%v SameSite=%v Path=%q Secure=%v; want HttpOnly, Lax, /, not Secure", set.HttpOnly, set.SameSite, set.Path, set.Secure)
	}
	if code := e.rpc(t, e.sameOrigin(set.Value)); code != connect.CodeUnimplemented {
		t.Errorf("an admin's cookie call was answered %v, want it past authentication", code)
	}
	u, err := e.d.Users.EnsureHuman(t.Context(), adminEmail, "", e.clock.Now())
	if err != nil || u.Name != "Ada Lovelace" {
		t.Errorf("the user record: %+v, %v", u, err)
	}

	// Signing in again with a new name updates the record; a person who is not the admin and
	// holds no admin key gets a session that admin-only services refuse.
	bob := e.browser(t)
	e.signIn(t, bob, oidctest.Person{Email: "bob@EXAMPLE.com", EmailVerified: true, Name: "Bob"})
	if code := e.rpc(t, e.sameOrigin(e.sessionCookie(bob))); code != connect.CodePermissionDenied {
		t.Errorf("a non-admin's cookie call to an admin service: %v", code)
	}
	e.signIn(t, bob, oidctest.Person{Email: "bob@example.com", EmailVerified: true, Name: "Robert"})
	got, _ := e.d.Users.Get(t.Context(), mustUserID(t, e, "bob@example.com"))
	if got.Name != "Robert" {
		t.Errorf("the name was not updated: %+v", got)
	}
}

func mustUserID(t *testing.T, e *env, email string) string {
	t.Helper()
	u, err := e.d.Users.EnsureHuman(t.Context(), email, "", e.clock.Now())
	if err != nil {
		t.Fatal(err)
	}
	return u.ID
}

// The cookie is Secure but on loopback http, and named with the __Host- prefix under https,
// where the browser then refuses one of that name that any other host set.
func TestSessionCookieIsSecureExceptOnLoopbackHTTP(t *testing.T) {
	for _, tc := range []struct {
		publicURL string
		secure    bool
		name      string
	}{
		{"https://hangar.example.com", true, auth.SecureSessionCookie},
		{"http://hangar.example.com", true, auth.SessionCookie},
		{"https://127.0.0.1:8443", true, auth.SecureSessionCookie},
		{"http://127.0.0.1:8080", false, auth.SessionCookie},
		{"http://localhost:8080", false, auth.SessionCookie},
		{"http://[::1]:8080", false, auth.SessionCookie},
	} {
		t.Run(tc.publicURL, func(t *testing.T) {
			e := newEnv(t, func(c *config.SignIn) { c.PublicURL = tc.publicURL })
			w := httptest.NewRecorder()
			if err := e.svc.startSession(w, httptest.NewRequest(http.MethodGet, "/", nil), "user_x", false); err != nil {
				t.Fatal(err)
			}
			c := w.Result().Cookies()[0]
			if c.Secure != tc.secure || !c.HttpOnly || c.SameSite != http.SameSiteLaxMode {
				t.Errorf("Secure=%v HttpOnly=%v SameSite=%v", c.Secure, c.HttpOnly, c.SameSite)
			}
			if c.Name != tc.name || c.Path != "/" || c.Domain != "" {
				t.Errorf("cookie %q Path=%q Domain=%q, want %q on / without a Domain", c.Name, c.Path, c.Domain, tc.name)
			}
			// The authenticator reads the cookie by the name it was set under, and no other.
			if got := e.d.Authn.SessionToken(http.Header{"Cookie": {c.Name + "=" + c.Value}}); got != c.Value {
				t.Errorf("the authenticator reads %q from its own cookie", got)
			}
			if other := map[string]string{auth.SessionCookie: auth.SecureSessionCookie, auth.SecureSessionCookie: auth.SessionCookie}[c.Name]; e.d.Authn.SessionToken(http.Header{"Cookie": {other + "=" + c.Value}}) != "" {
				t.Errorf("the authenticator takes the cookie under the name %q too", other)
			}
		})
	}
}

// callbackURL starts a sign-in with browser b and answers the provider's redirect back to the
// callback, not yet followed.
func callbackURL(t *testing.T, e *env, b *http.Client) *url.URL {
	t.Helper()
	stop := *b
	stop.CheckRedirect = func(req *http.Request, _ []*http.Request) error {
		if req.URL.Path == httpapi.CallbackPath {
			return http.ErrUseLastResponse
		}
		return nil
	}
	resp, err := stop.Get(e.url + httpapi.LoginPath)
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	u, err := url.Parse(resp.Header.Get("Location"))
	if err != nil || u.Path != httpapi.CallbackPath {
		t.Fatalf("the provider redirected to %q", resp.Header.Get("Location"))
	}
	return u
}

func TestSignInRefusesAForgedOrReplayedCallback(t *testing.T) {
	for _, tc := range []struct {
		name   string
		attack func(t *testing.T, e *env, b *http.Client, cb *url.URL) (*http.Client, string)
		want   string
	}{
		{"a state that is not the browser's", func(t *testing.T, e *env, b *http.Client, cb *url.URL) (*http.Client, string) {
			q := cb.Query()
			q.Set("state", "forged")
			cb.RawQuery = q.Encode()
			return b, cb.String()
		}, "state does not match"},
		{"another browser's callback (login CSRF)", func(t *testing.T, e *env, b *http.Client, cb *url.URL) (*http.Client, string) {
			return e.browser(t), cb.String()
		}, "state does not match"},
		{"a callback used twice", func(t *testing.T, e *env, b *http.Client, cb *url.URL) (*http.Client, string) {
			state := cb.Query().Get("state")
			e.get(t, b, cb.RequestURI())
			u, _ := url.Parse(e.url + httpapi.CallbackPath)
			b.Jar.SetCookies(u, []*http.Cookie{{Name: flowCookie, Value: state, Path: httpapi.CallbackPath}})
			return b, cb.String()
		}, "expired or was already used"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			b := e.browser(t)
			e.idp.SignIn(ada)
			cb := callbackURL(t, e, b)
			client, target := tc.attack(t, e, b, cb)
			resp, body := e.get(t, client, strings.TrimPrefix(target, e.url))
			if resp.StatusCode != http.StatusBadRequest || !strings.Contains(body, tc.want) {
				t.Errorf("%s: %s", resp.Status, body)
			}
			if c := e.sessionCookie(client); c != "" && tc.name != "a callback used twice" {
				t.Errorf("a session cookie was set")
			}
		})
	}
}

func TestSignInRefusesWhatTheProviderMustNotSignIn(t *testing.T) {
	for _, tc := range []struct {
		name   string
		person oidctest.Person
		forge  string
		status int
		want   string
	}{
		{"an ID token with another sign-in's nonce", ada, "a-nonce-from-elsewhere", http.StatusBadRequest, "nonce mismatch"},
		{"an email domain not allowed", oidctest.Person{Email: "eve@evil.example", EmailVerified: true}, "", http.StatusForbidden, "not of a domain allowed"},
		{"a look-alike domain", oidctest.Person{Email: "eve@example.com.evil.example", EmailVerified: true}, "", http.StatusForbidden, "not of a domain allowed"},
		{"an email the provider has not verified", oidctest.Person{Email: "eve@example.com"}, "", http.StatusForbidden, "has not verified"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			if tc.forge != "" {
				e.idp.ForgeNonce(tc.forge)
			}
			b := e.browser(t)
			e.idp.SignIn(tc.person)
			resp, body := e.get(t, b, httpapi.LoginPath)
			if resp.StatusCode != tc.status || !strings.Contains(body, tc.want) {
				t.Errorf("%s: %s", resp.Status, body)
			}
			if e.sessionCookie(b) != "" {
				t.Error("a session cookie was set")
			}
		})
	}
}

func TestCookieSignedInRPCsRefuseCrossSiteRequests(t *testing.T) {
	e := newEnv(t)
	b := e.browser(t)
	e.signIn(t, b, ada)
	cookie := e.sessionCookie(b)
	for _, tc := range []struct {
		name   string
		change func(h http.Header)
		want   connect.Code
	}{
		{"Hangar's own page", func(http.Header) {}, connect.CodeUnimplemented},
		{"Hangar's own page with the custom header", func(h http.Header) { h.Del("Connect-Protocol-Version"); h.Set(auth.CSRFHeader, "1") }, connect.CodeUnimplemented},
		{"another origin", func(h http.Header) { h.Set("Origin", "https://evil.example") }, connect.CodePermissionDenied},
		{"an origin on another port", func(h http.Header) { h.Set("Origin", strings.Replace(e.url, "127.0.0.1:", "127.0.0.1:1", 1)) }, connect.CodePermissionDenied},
		{"no Origin", func(h http.Header) { h.Del("Origin") }, connect.CodePermissionDenied},
		{"a null Origin (sandboxed frame)", func(h http.Header) { h.Set("Origin", "null") }, connect.CodePermissionDenied},
		{"no header a form cannot send (an HTML form)", func(h http.Header) { h.Del("Connect-Protocol-Version") }, connect.CodePermissionDenied},
		{"a browser saying cross-site", func(h http.Header) { h.Set("Sec-Fetch-Site", "cross-site") }, connect.CodePermissionDenied},
		{"no cookie", func(h http.Header) { h.Del("Cookie") }, connect.CodeUnauthenticated},
		{"a made-up cookie", func(h http.Header) { h.Set("Cookie", auth.SessionCookie+"=hgs_forged") }, connect.CodeUnauthenticated},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := e.sameOrigin(cookie)
			tc.change(h)
			if got := e.rpc(t, h); got != tc.want {
				t.Errorf("answered %v, want %v", got, tc.want)
			}
		})
	}
}

func TestSignOutRevokesTheSession(t *testing.T) {
	e := newEnv(t)
	b := e.browser(t)
	e.signIn(t, b, ada)
	cookie := e.sessionCookie(b)
	if resp, _ := e.form(t, http.DefaultClient, httpapi.LogoutPath, nil, http.Header{"Origin": {"https://evil.example"}, "Cookie": {auth.SessionCookie + "=" + cookie}, auth.CSRFHeader: {"1"}}); resp.StatusCode != http.StatusForbidden {
		t.Fatalf("a cross-site sign-out answered %s", resp.Status)
	}
	resp, body := e.form(t, b, httpapi.LogoutPath, nil, http.Header{"Origin": {e.url}, auth.CSRFHeader: {"1"}})
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("sign-out: %s %s", resp.Status, body)
	}
	if e.sessionCookie(b) != "" {
		t.Error("the browser still holds the cookie")
	}
	if code := e.rpc(t, e.sameOrigin(cookie)); code != connect.CodeUnauthenticated {
		t.Errorf("the revoked cookie's call answered %v", code)
	}
}

func TestDevSignInIsForLoopbackAndDevOnly(t *testing.T) {
	dev := func(c *config.SignIn) { c.OIDCIssuer, c.DevSignIn, c.DevAdminEmail = "", true, "admin@hangar.local" }
	e := newEnv(t, dev)
	b := e.browser(t)
	if resp, body := e.get(t, b, httpapi.LoginPath+"?return_to=/x"); resp.StatusCode != http.StatusOK || !strings.Contains(body, "Sign in as the local admin") {
		t.Fatalf("login without a provider in dev: %s %s", resp.Status, body)
	}
	if resp, _ := e.form(t, b, httpapi.DevSignInPath, url.Values{"return_to": {"/x"}}, http.Header{"Origin": {"https://evil.example"}}); resp.StatusCode != http.StatusForbidden {
		t.Errorf("a cross-site dev sign-in answered %s", resp.Status)
	}
	resp, _ := e.form(t, b, httpapi.DevSignInPath, url.Values{"return_to": {"/x"}}, http.Header{"Origin": {e.url}})
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/x" {
		t.Fatalf("dev sign-in: %s to %q", resp.Status, resp.Header.Get("Location"))
	}
	if code := e.rpc(t, e.sameOrigin(e.sessionCookie(b))); code != connect.CodeUnimplemented {
		t.Errorf("the local admin's call answered %v", code)
	}

	for _, tc := range []struct {
		name   string
		mutate func(*config.SignIn)
		remote string
	}{
		{"outside dev", func(c *config.SignIn) {}, ""},
		{"from another address", dev, "192.0.2.7:5555"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, tc.mutate)
			r := httptest.NewRequest(http.MethodPost, httpapi.DevSignInPath, nil)
			r.Header.Set("Origin", e.url)
			if tc.remote != "" {
				r.RemoteAddr = tc.remote
			}
			w := httptest.NewRecorder()
			e.svc.devSignIn(w, r)
			if w.Code != http.StatusNotFound {
				t.Errorf("answered %d", w.Code)
			}
		})
	}
}

func TestSessionEndsAfterItsTTL(t *testing.T) {
	e := newEnv(t)
	b := e.browser(t)
	e.signIn(t, b, ada)
	cookie := e.sessionCookie(b)
	e.clock.Advance(e.d.Config.SessionTTL - time.Second)
	if code := e.rpc(t, e.sameOrigin(cookie)); code != connect.CodeUnimplemented {
		t.Fatalf("a second before its end the session answered %v", code)
	}
	e.clock.Advance(time.Second)
	if code := e.rpc(t, e.sameOrigin(cookie)); code != connect.CodeUnauthenticated {
		t.Errorf("at its end the session answered %v", code)
	}
}
