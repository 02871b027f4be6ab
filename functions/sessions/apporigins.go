package sessions

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"connectrpc.com/connect"

	"github.com/hangar-dev/hangar/platform/apierr"
	"github.com/hangar-dev/hangar/platform/auth"
	"github.com/hangar-dev/hangar/platform/config"
	"github.com/hangar-dev/hangar/platform/httpapi"
	"github.com/hangar-dev/hangar/platform/ids"
	"github.com/hangar-dev/hangar/platform/seal"
	"github.com/hangar-dev/hangar/records/sessiondb"
)

// How apps get origins of their own. Behind one shared origin, one app's page could script the
// dashboard or another app (their cookies, storage, same-origin requests); under the API's
// origin they are sandboxed instead (appSandboxPolicy), which costs them storage of their own,
// so a browser IDE cannot work there. With config.Apps.Domain set, app web of session
// sess_<ulid> is served at web-<ulid>.<domain>, an origin of its own, the way hosted IDEs serve
// forwarded ports on a wildcard domain:
//
//   - A browser opens the app's url_path on the API's origin, signed in by the dashboard's
//     cookie. That route answers 303 to the app's origin with a short-lived app token
//     (AppTokenParam) instead of proxying: the dashboard's cookie never goes to an app origin
//     (it is host-only) and is never accepted there.
//   - The app origin trades the token (sealed, bound to its host, AppTokenTTL) for a cookie of
//     its own (host-only, HttpOnly, __Host- under https, config.Apps.CookieTTL) and redirects to
//     the same URL without the token; a WebSocket or a non-GET request may use the token as it
//     is. Either way a token is used once, on whichever instance (apptokens.go): one leaked
//     from a URL after its trade opens nothing. Non-browser clients may send their API key in
//     x-api-key instead.
//   - Tokens and cookies name the credential they derive from, the dashboard session or the API
//     key, and are taken only while it is live (auth.Authenticator.Recheck): signing out of the
//     dashboard, or revoking the key, ends the app cookies minted under it.
//   - A request the app's cookie signs in must come from the app's own pages: another origin
//     (a sibling app, which is same-site) is refused by Origin and Sec-Fetch-Site, so apps cannot
//     make requests (WebSockets included) into each other with the user's cookies.
//   - The app sees none of it: the token parameter, x-api-key and every cookie whose name
//     starts with hangar are taken off the request.

// AppTokenParam is the query parameter that carries an app token to the app's origin.
const AppTokenParam = "hangar_app_token"

// AppTokenTTL is how long an app token may wait to be traded for the app's cookie.
const AppTokenTTL = time.Minute

// Grant kinds: a token travels in a URL, a cookie stays in the browser; neither serves as the
// other, so a stolen cookie cannot mint fresh ones.
const (
	grantToken  = "token"
	grantCookie = "cookie"
)

// appGrant is what an app token or cookie says: who may reach which app, until when. It is
// sealed (Tink AEAD) with the app's host as associated data, so it opens at that host only.
type appGrant struct {
	Session string `json:"s"` // the record id
	App     string `json:"a"`
	User    string `json:"u"`
	Admin   bool   `json:"ad,omitempty"`
	Kind    string `json:"k"`
	Expires int64  `json:"e"` // unix seconds
	// ID names a token, which is used once (apptokens.go); a cookie has none.
	ID string `json:"i,omitempty"`
	// WebSession or KeyID is the credential the grant derives from (auth.Principal's): the
	// grant is taken only while that is live.
	WebSession string `json:"w,omitempty"`
	KeyID      string `json:"kid,omitempty"`
}

// source is the principal of the credential g derives from, as auth.Authenticator.Recheck
// finds it again.
func (g appGrant) source() auth.Principal {
	return auth.Principal{UserID: g.User, Admin: g.Admin, WebSession: g.WebSession, KeyID: g.KeyID}
}

// appOrigins knows the apps' origins. The zero value (no domain) serves none.
type appOrigins struct {
	// domain is host[:port] as configured; host is its host, lowercase.
	domain, host string
	scheme       string
	cookieTTL    time.Duration
	sealer       *seal.Sealer
	now          func() time.Time
}

func newAppOrigins(c config.Apps, publicURL string, sealer *seal.Sealer, now func() time.Time) appOrigins {
	if c.Domain == "" {
		return appOrigins{}
	}
	scheme := "https"
	if u, err := url.Parse(publicURL); err == nil && u.Scheme == "http" {
		scheme = "http"
	}
	host := c.Domain
	if h, _, err := net.SplitHostPort(c.Domain); err == nil {
		host = h
	}
	return appOrigins{domain: strings.ToLower(c.Domain), host: strings.ToLower(host), scheme: scheme,
		cookieTTL: c.CookieTTL, sealer: sealer, now: now}
}

// enabled reports whether apps have origins of their own.
func (o appOrigins) enabled() bool { return o.domain != "" }

// label is the DNS label of session recordID's app: the app's name, '-', the record id's 26
// characters. A record id not of the minted shape (a session older than scoped requested ids)
// has none.
func (o appOrigins) label(recordID, app string) (string, bool) {
	suffix, ok := strings.CutPrefix(recordID, "sess_")
	if !o.enabled() || !ok || !ids.Valid("sess", recordID) {
		return "", false
	}
	return app + "-" + suffix, true
}

// origin is the origin of session recordID's app, "" when it has none.
func (o appOrigins) origin(recordID, app string) string {
	l, ok := o.label(recordID, app)
	if !ok {
		return ""
	}
	return o.scheme + "://" + l + "." + o.domain
}

// parseHost reads the session record id and the app a request's Host names; false when the
// host is not an app's.
func (o appOrigins) parseHost(hostport string) (recordID, app string, ok bool) {
	if !o.enabled() {
		return "", "", false
	}
	host := strings.ToLower(hostport)
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	l, found := strings.CutSuffix(host, "."+o.host)
	const idLen = 26
	if !found || strings.Contains(l, ".") || len(l) < idLen+2 || l[len(l)-idLen-1] != '-' {
		return "", "", false
	}
	recordID, app = "sess_"+l[len(l)-idLen:], l[:len(l)-idLen-1]
	if !ids.Valid("sess", recordID) || !appName.MatchString(app) {
		return "", "", false
	}
	return recordID, app, true
}

// seal makes a token or cookie of kind for p at session recordID's app, valid for ttl.
func (o appOrigins) seal(p auth.Principal, recordID, app, kind string, ttl time.Duration) (string, error) {
	l, ok := o.label(recordID, app)
	if !ok {
		return "", errors.New("the app has no origin of its own")
	}
	g := appGrant{Session: recordID, App: app, User: p.UserID, Admin: p.Admin, Kind: kind, Expires: o.now().Add(ttl).Unix(),
		WebSession: p.WebSession, KeyID: p.KeyID}
	if kind == grantToken {
		g.ID = rand.Text()
	}
	js, err := json.Marshal(g)
	if err != nil {
		return "", err
	}
	ct, err := o.sealer.Seal(js, grantOwner(l))
	if err != nil {
		return "", err
	}
	return base64.RawURLEncoding.EncodeToString(ct), nil
}

// open checks a token or cookie of kind presented at session recordID's app and returns its
// grant; unauthenticated when it is not one, is another app's, or expired. Whether the
// credential it derives from is still live, and a token still unused, is the caller's to ask.
func (o appOrigins) open(value, recordID, app, kind string) (appGrant, error) {
	l, _ := o.label(recordID, app)
	ct, err := base64.RawURLEncoding.DecodeString(value)
	if err != nil {
		return appGrant{}, apierr.Unauthenticated()
	}
	js, err := o.sealer.Open(ct, grantOwner(l))
	if err != nil {
		return appGrant{}, apierr.Unauthenticated()
	}
	var g appGrant
	if json.Unmarshal(js, &g) != nil || g.Kind != kind || g.Session != recordID || g.App != app || !o.now().Before(time.Unix(g.Expires, 0)) {
		return appGrant{}, apierr.Unauthenticated()
	}
	return g, nil
}

// kindAppGrant is the Principal.Kind of a caller an app token or cookie signs in.
const kindAppGrant = "app_grant"

func grantOwner(label string) string { return "app access " + label }

// cookieName is the app's cookie: __Host- under https, so that no other host (a sibling app
// setting a cookie for the parent domain) can set one of that name.
func (o appOrigins) cookieName() string {
	if o.scheme == "https" {
		return "__Host-hangar_app"
	}
	return "hangar_app"
}

// setCookie gives the browser the app's cookie for p.
func (o appOrigins) setCookie(w http.ResponseWriter, p auth.Principal, recordID, app string) error {
	v, err := o.seal(p, recordID, app, grantCookie, o.cookieTTL)
	if err != nil {
		return err
	}
	http.SetCookie(w, &http.Cookie{Name: o.cookieName(), Value: v, Path: "/", HttpOnly: true, Secure: o.scheme == "https",
		SameSite: http.SameSiteLaxMode, MaxAge: int(o.cookieTTL / time.Second)})
	return nil
}

// sendToOrigin answers a browser that opened an app under the API's path route: 303 to the
// same path at the app's origin with a fresh app token. Only a navigation (GET, HEAD) is sent;
// anything else a page of the API's origin would make with the dashboard's cookie is refused.
func (s *Service) sendToOrigin(w http.ResponseWriter, r *http.Request, caller auth.Principal, recordID, app, rest string) error {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		return apierr.PermissionDenied("open app %s at its own origin %s: the dashboard's cookie is not taken for %s here", app, s.apps.origin(recordID, app), r.Method)
	}
	token, err := s.apps.seal(caller, recordID, app, grantToken, AppTokenTTL)
	if err != nil {
		return err
	}
	q := r.URL.Query()
	q.Del(auth.KeyParam)
	q.Set(AppTokenParam, token)
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("Referrer-Policy", "no-referrer")
	to, err := url.Parse(s.apps.origin(recordID, app))
	if err != nil {
		return err
	}
	to.Path, to.RawQuery = rest, q.Encode()
	http.Redirect(w, r, to.String(), http.StatusSeeOther)
	return nil
}

// IsAppHost reports whether a request's Host is an app's own origin, which AppOrigin serves.
func (s *Service) IsAppHost(host string) bool {
	_, _, ok := s.apps.parseHost(host)
	return ok
}

// AppOrigin serves every request to an app's own origin (IsAppHost): it signs the caller in by
// the app token, the app's cookie or an API key (never the dashboard's cookie), finds the
// session they may see and its app, and proxies the request to it with its path as it is.
func (s *Service) AppOrigin(authn *auth.Authenticator) http.Handler {
	proxy := s.newAppProxy()
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		recordID, app, ok := s.apps.parseHost(r.Host)
		if !ok {
			writeErr(w, r, apierr.NotFound("app", r.Host))
			return
		}
		caller, done, err := s.appCaller(w, r, authn, recordID, app)
		if err != nil {
			s.refuseAtApp(w, r, recordID, app, err)
			return
		}
		if done {
			return
		}
		ctx := auth.WithPrincipal(r.Context(), caller)
		rec, err := s.store.Get(ctx, recordID)
		if errors.Is(err, sessiondb.ErrNotFound) || err == nil && (rec.Status == sessiondb.Deleted || !visible(caller, rec)) {
			err = apierr.NotFound("session", recordID)
		}
		if err == nil && !rec.Status.Live() {
			// Its apps end with the sandbox: a cookie minted before takes nothing of a session
			// stopped or lost, and nothing wakes it from here.
			err = apierr.FailedPrecondition("session %s is %s: its apps are served while it runs; resume it and open the app again", recordID, rec.Status)
		}
		if err != nil {
			writeErr(w, r, err)
			return
		}
		port := appPort(rec, app)
		if port == 0 {
			writeErr(w, r, apierr.NotFound("app", app))
			return
		}
		t := &appTarget{rec: rec, port: port, path: r.URL.Path}
		_ = http.NewResponseController(w).SetReadDeadline(time.Time{})
		proxy.ServeHTTP(w, r.WithContext(context.WithValue(ctx, appTargetKey{}, t)))
	})
}

// appCaller signs in a request at an app's origin by auth.Authenticator.Identify, which takes
// an app token, an API key in x-api-key or the app's cookie there (never the dashboard's
// cookie, nor a key in the URL). An app token is used once: in a navigation it is traded for
// the app's cookie and the browser sent back to the URL without it (done: the answer is
// written). A request with neither token, key nor live cookie is unauthenticated, except a
// browser's navigation, which is sent to the app's path route on the API's origin, where the
// dashboard's cookie sends it back with a token.
func (s *Service) appCaller(w http.ResponseWriter, r *http.Request, authn *auth.Authenticator, recordID, app string) (p auth.Principal, done bool, err error) {
	navigation := (r.Method == http.MethodGet || r.Method == http.MethodHead) && r.Header.Get("Upgrade") == ""
	p, err = authn.Identify(r, auth.Route{Use: appUse(r), Accepts: auth.AppToken | auth.HeaderKey | auth.AppCookie,
		App: appCredentials{s: s, authn: authn, recordID: recordID, app: app}})
	switch {
	case err == nil && p.Via == auth.AppToken && navigation:
		if err := s.apps.setCookie(w, p, recordID, app); err != nil {
			return p, false, err
		}
		q := r.URL.Query()
		q.Del(AppTokenParam)
		u := url.URL{Path: r.URL.Path, RawPath: r.URL.RawPath, RawQuery: q.Encode()}
		w.Header().Set("Cache-Control", "no-store")
		w.Header().Set("Referrer-Policy", "no-referrer")
		http.Redirect(w, r, u.String(), http.StatusSeeOther)
		return p, true, nil
	case connect.CodeOf(err) == connect.CodeUnauthenticated && (p.Via == 0 || p.Via == auth.AppCookie) &&
		navigation && r.Header.Get("Sec-Fetch-Mode") == "navigate" && s.d.PublicURL != "":
		// No token or key, and no live cookie (a cookie whose dashboard session or key has
		// ended signs nobody in): a navigation goes to sign in again as if it had none.
		http.Redirect(w, r, s.dashboardAppURL(recordID, app)+strings.TrimPrefix(r.URL.RequestURI(), "/"), http.StatusSeeOther)
		return p, true, nil
	}
	return p, false, err
}

// appCredentials verifies the app token and cookie of session recordID's app for
// auth.Authenticator.Identify.
type appCredentials struct {
	s             *Service
	authn         *auth.Authenticator
	recordID, app string
}

// Token signs in the caller of the request's app token (AppTokenParam), using it up.
func (c appCredentials) Token(r *http.Request) (auth.Principal, bool, error) {
	token := r.URL.Query().Get(AppTokenParam)
	if token == "" {
		return auth.Principal{}, false, nil
	}
	p, err := c.s.tradeToken(r.Context(), c.authn, token, c.recordID, c.app)
	return p, true, err
}

// Cookie signs in the caller of the first of the request's app cookies that opens here and
// whose sign-in is live; found with unauthenticated when those that open have all ended.
func (c appCredentials) Cookie(r *http.Request) (p auth.Principal, found bool, err error) {
	for _, ck := range r.CookiesNamed(c.s.apps.cookieName()) {
		g, oerr := c.s.apps.open(ck.Value, c.recordID, c.app, grantCookie)
		if oerr != nil {
			continue
		}
		found = true
		if p, err = c.s.recheck(r.Context(), c.authn, g, c.recordID, c.app); err == nil || connect.CodeOf(err) != connect.CodeUnauthenticated {
			return p, true, err
		}
	}
	return auth.Principal{}, found, err
}

// Origin is the app's own origin.
func (c appCredentials) Origin() string { return c.s.apps.origin(c.recordID, c.app) }

// tradeToken signs in the caller of an app token, using it up: a token opens once, whoever
// presents it again (the first browser, or whoever read it from a URL) is refused.
func (s *Service) tradeToken(ctx context.Context, authn *auth.Authenticator, token, recordID, app string) (auth.Principal, error) {
	g, err := s.apps.open(token, recordID, app, grantToken)
	if err != nil {
		return auth.Principal{}, connect.NewError(connect.CodeUnauthenticated, fmt.Errorf(
			"this app link is not valid here or has expired (an app token lasts %s): open the app again from the dashboard, %s", AppTokenTTL, s.dashboardAppURL(recordID, app)))
	}
	p, err := s.recheck(ctx, authn, g, recordID, app)
	if err != nil {
		return auth.Principal{}, err
	}
	if err := s.spendAppToken(ctx, g); err != nil {
		return auth.Principal{}, err
	}
	return p, nil
}

// recheck is who grant g of session recordID's app signs in while the dashboard session or API
// key it derives from is live (auth.Authenticator.Recheck, cached for the authenticator's TTL);
// once that has ended, unauthenticated, saying how to open the app again.
func (s *Service) recheck(ctx context.Context, authn *auth.Authenticator, g appGrant, recordID, app string) (auth.Principal, error) {
	live, err := authn.Recheck(ctx, g.source())
	if connect.CodeOf(err) == connect.CodeUnauthenticated {
		return auth.Principal{}, connect.NewError(connect.CodeUnauthenticated, fmt.Errorf(
			"the sign-in this app was opened under has ended (signed out, or its API key revoked): sign in and open the app again from the dashboard, %s", s.dashboardAppURL(recordID, app)))
	}
	if err != nil {
		return auth.Principal{}, connect.NewError(connect.CodeUnavailable, fmt.Errorf("check the sign-in of app %s: %w", app, err))
	}
	return auth.Principal{UserID: live.UserID, Admin: live.Admin, Kind: kindAppGrant, WebSession: live.WebSession, KeyID: live.KeyID}, nil
}

// dashboardAppURL is the app's path route on the API's origin, where a signed-in browser gets
// a fresh token.
func (s *Service) dashboardAppURL(recordID, app string) string {
	return strings.TrimRight(s.d.PublicURL, "/") + httpapi.AppURLPath(recordID, app)
}

// refusalPage is what a browser's navigation refused at an app's origin shows: why, and a link
// to where the app opens again. html/template escapes both.
var refusalPage = template.Must(template.New("refusal").Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Open the app again · Hangar</title>
<meta name="viewport" content="width=device-width, initial-scale=1"></head>
<body style="font-family: system-ui, sans-serif; max-width: 36rem; margin: 4rem auto">
<h1>Open the app again</h1><p>{{.Why}}</p><p><a href="{{.Link}}">Open the app again from the dashboard</a></p></body></html>
`))

// refuseAtApp answers a request refused at session recordID's app's origin: a browser's
// navigation (a replayed link, say) gets refusalPage with the same status; anything else the
// routes' JSON error.
func (s *Service) refuseAtApp(w http.ResponseWriter, r *http.Request, recordID, app string, err error) {
	status := map[connect.Code]int{connect.CodeUnauthenticated: http.StatusUnauthorized, connect.CodePermissionDenied: http.StatusForbidden}[connect.CodeOf(err)]
	ce, ok := errors.AsType[*connect.Error](err)
	if !ok || status == 0 || r.Header.Get("Sec-Fetch-Mode") != "navigate" {
		writeErr(w, r, err)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("Referrer-Policy", "no-referrer")
	w.WriteHeader(status)
	_ = refusalPage.Execute(w, struct{ Why, Link string }{ce.Message(), s.dashboardAppURL(recordID, app)})
}
