package auth

import (
	"context"
	"net/http"
	"net/url"
	"strings"

	"github.com/hangar-dev/hangar/platform/apierr"
	"github.com/hangar-dev/hangar/platform/httpapi"
)

// Who is calling is decided here, once, for every RPC and every plain HTTP route: each route
// declares what it does with its caller's authority (a Use) and which credentials it accepts
// (Credentials), and Identify picks the request's credential by one precedence, applies the
// use's rule for it (Allow) and verifies it. Routes never read a credential themselves.

// Credentials is a set of the credentials a route accepts; a Principal's Via is the one that
// signed it in.
type Credentials uint8

const (
	// HeaderKey is an API key in httpapi.APIKeyHeader.
	HeaderKey Credentials = 1 << iota
	// QueryKey is an API key in KeyParam, for clients that cannot set headers (EventSource, a
	// browser's WebSocket, a download link).
	QueryKey
	// SignInCookie is the dashboard's session cookie (Authenticator.SessionCookie), taken only
	// from Hangar's own pages as the route's Use says (Allow).
	SignInCookie
	// AppToken is an app token, used once, at an app's own origin (Route.App verifies it).
	AppToken
	// AppCookie is an app origin's own cookie (Route.App verifies it), taken only from that
	// app's own pages.
	AppCookie
	// BrokerToken is a session's broker token, which travels in the request's message: a
	// method accepting it authenticates its caller itself (OAuthCredentialService's broker
	// methods, called from inside a sandbox), so Identify answers a Principal of KindBrokered
	// that names nobody.
	BrokerToken
)

// KindBrokered is the Principal.Kind Identify answers for a route that accepts only
// BrokerToken: nobody is signed in yet, the method checks the token in its request.
const KindBrokered = "brokered"

// APICredentials are what the API's own routes accept: an API key in the header or the
// api_key parameter, or the dashboard's cookie.
const APICredentials = HeaderKey | QueryKey | SignInCookie

// Route is what a route declares about its callers.
type Route struct {
	Use     Use
	Accepts Credentials
	// App verifies AppToken and AppCookie, which the service serving apps mints.
	App AppCredentials
}

// AppCredentials verifies the credentials of an app's own origin, sealed by the service that
// serves apps (functions/sessions), which platform/auth does not hold. Each answers found
// false when the request carries none of its credential.
type AppCredentials interface {
	// Token is the principal of the request's app token, spent by this call.
	Token(r *http.Request) (p Principal, found bool, err error)
	// Cookie is the principal of the request's live app cookie.
	Cookie(r *http.Request) (p Principal, found bool, err error)
	// Origin is the app's own origin, the only one whose pages its cookie may come from.
	Origin() string
}

// Identify is the one decision of who r's caller is, for a route declaring route: the
// principal (Via naming its credential), or a coded error (with a Principal naming nobody
// whose Via is the credential refused, 0 for none): unauthenticated without a
// credential the route accepts or with a bad one, permission_denied when the credential may not
// be used as the route's Use says, failed_precondition for a WebSocket route that is not sent a
// WebSocket upgrade, resource_exhausted past the failure limits.
//
// The precedence: an app token, an API key in the header, then in api_key, the dashboard's
// cookie, an app cookie; a key presented wins over any cookie, and a bad one is refused rather
// than another credential tried. Allow's rule for the chosen credential runs before it is
// looked up, so a cross-site request costs no read.
func (a *Authenticator) Identify(r *http.Request, route Route) (Principal, error) {
	if route.Accepts == BrokerToken {
		return Principal{Kind: KindBrokered, Via: BrokerToken}, nil
	}
	ctx := r.Context()
	client := a.ClientAddress(r.RemoteAddr, r.Header)
	accepts := func(c Credentials) bool { return route.Accepts&c != 0 }
	if accepts(AppToken) && route.App != nil {
		if err := a.Allow(route.Use, KeyCredential, r.Method, r.Header); err != nil {
			return Principal{}, err
		}
		if p, found, err := route.App.Token(r); found || err != nil {
			return refused(p, err, AppToken)
		}
	}
	key, via := "", Credentials(0)
	if accepts(HeaderKey) {
		key, via = strings.TrimSpace(r.Header.Get(httpapi.APIKeyHeader)), HeaderKey
	}
	if key == "" && accepts(QueryKey) {
		key, via = r.URL.Query().Get(KeyParam), QueryKey
	}
	if key != "" {
		return a.verified(ctx, KeyCredential, route.Use, r, via, func(ctx context.Context) (Principal, error) {
			return a.Authenticate(ctx, key, client)
		})
	}
	if accepts(SignInCookie) && a.sessions != nil {
		if token := a.SessionToken(r.Header); token != "" {
			return a.verified(ctx, CookieCredential, route.Use, r, SignInCookie, func(ctx context.Context) (Principal, error) {
				return a.AuthenticateSession(ctx, token, client)
			})
		}
	}
	if accepts(AppCookie) && route.App != nil {
		if err := a.Allow(route.Use, KeyCredential, r.Method, r.Header); err != nil {
			return Principal{}, err
		}
		p, found, err := route.App.Cookie(r)
		if found && err == nil {
			// Checked once the cookie is open, as a stale cookie signs nobody in wherever
			// it comes from (its route then sends a browser to sign in again).
			err = fromOwnPages(r, route.App.Origin())
		}
		if found || err != nil {
			return refused(p, err, AppCookie)
		}
	}
	return Principal{}, a.Allow(route.Use, NoCredential, r.Method, r.Header)
}

// verified is the principal check gives, once Allow has taken the request for use by cred.
func (a *Authenticator) verified(ctx context.Context, cred Credential, use Use, r *http.Request, via Credentials, check func(context.Context) (Principal, error)) (Principal, error) {
	if err := a.Allow(use, cred, r.Method, r.Header); err != nil {
		return Principal{Via: via}, err
	}
	p, err := check(ctx)
	return refused(p, err, via)
}

// refused is p signed in via, or, with err, the Principal of a refusal: nobody, via.
func refused(p Principal, err error, via Credentials) (Principal, error) {
	if err != nil {
		return Principal{Via: via}, err
	}
	p.Via = via
	return p, nil
}

// fromOwnPages refuses a request an app's cookie signs in that another origin's page made: a
// sibling app is same-site, so the browser sends the cookie with its requests, WebSocket
// handshakes included. Navigations from elsewhere (a link, the dashboard's redirect) may come.
func fromOwnPages(r *http.Request, own string) error {
	if origin := r.Header.Get("Origin"); origin != "" && origin != own {
		return apierr.PermissionDenied("a request signed in by the app's cookie must come from the app's own origin %s, not %q", own, origin)
	}
	switch r.Header.Get("Sec-Fetch-Site") {
	case "", "same-origin", "none":
		return nil
	}
	if r.Header.Get("Sec-Fetch-Mode") == "navigate" && (r.Method == http.MethodGet || r.Method == http.MethodHead) {
		return nil
	}
	return apierr.PermissionDenied("a request signed in by the app's cookie must come from the app's own pages")
}

// AuthenticateHTTP is Identify for a route of the API's own origin that accepts
// APICredentials.
func (a *Authenticator) AuthenticateHTTP(r *http.Request, use Use) (Principal, error) {
	return a.Identify(r, Route{Use: use, Accepts: APICredentials})
}

// rpcRequest is an RPC's headers and peer as the request Identify takes. Connect answers every
// RPC by POST; the RPCs' Use (Act) does not look at the method.
func rpcRequest(ctx context.Context, peer string, h http.Header) *http.Request {
	return (&http.Request{Method: http.MethodPost, Header: h, RemoteAddr: peer, URL: &url.URL{}}).WithContext(ctx)
}
