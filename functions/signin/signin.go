// Package signin serves /api/auth: dashboard sign-in through an OpenID Connect provider (or, in
// `hangar dev`, without one), the session cookie it sets and sign-out, and the RFC 8628 device
// authorization grant by which `hangar login` gets a personal API key. Sessions and keys
// themselves live in platform/auth, which verifies them on every call.
package signin

import (
	"context"
	"encoding/json"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"cloud.google.com/go/firestore"
	"connectrpc.com/connect"

	"github.com/hangar-dev/hangar/platform/apierr"
	"github.com/hangar-dev/hangar/platform/auth"
	"github.com/hangar-dev/hangar/platform/clock"
	"github.com/hangar-dev/hangar/platform/config"
	"github.com/hangar-dev/hangar/platform/egress"
	"github.com/hangar-dev/hangar/platform/httpapi"
)

// SecretLookup reads an org secret for the operator's own use (records/secrets.Store.Lookup).
type SecretLookup interface {
	Lookup(ctx context.Context, name string) (string, bool, error)
}

// Deps are what the service runs on.
type Deps struct {
	DB       *firestore.Client
	Authn    *auth.Authenticator
	Sessions *auth.WebSessions
	Users    *auth.Users
	Keys     *auth.Keys
	// Secrets holds the OIDC client secret; nil (no seal keyset) means no OIDC sign-in.
	Secrets SecretLookup
	Config  config.SignIn
	Clock   clock.Clock
	Log     *slog.Logger
	// Egress is what the OIDC provider's discovery, token and key endpoints may resolve to
	// beyond public addresses; they are reached through its guarded dialer, https only.
	Egress egress.Policy
	// LoopbackHTTP lets the issuer be plain http on a loopback address: only tests' loopback
	// providers set it.
	LoopbackHTTP bool
}

// Service serves /api/auth.
type Service struct {
	d       Deps
	secure  bool // cookies are Secure unless PublicURL is http on loopback
	oidc    oidcClient
	client  *http.Client // every request to the OIDC provider
	lookups limiter      // failed user-code lookups, per user and per client address
	starts  limiter      // sign-ins and device codes started, per client address (each writes a record)
	// beforeIssue, when set (by tests), runs in the transaction that issues a device grant's key,
	// after the key's write: an error fails the issue as a failed commit would.
	beforeIssue func() error
}

// New returns the service over d.
func New(d Deps) *Service {
	if d.Clock == nil {
		d.Clock = clock.Real{}
	}
	if d.Log == nil {
		d.Log = slog.Default()
	}
	s := &Service{d: d, secure: !loopbackHTTP(d.Config.PublicURL), client: d.Egress.EndpointClient(d.LoopbackHTTP)}
	s.client.Timeout = providerTimeout
	s.lookups = newLimiter(d.DB, "signin.lookup", userCodeFailureBurst, userCodeFailureInterval, d.Clock.Now, d.Log)
	s.starts = newLimiter(d.DB, "signin.start", startBurst, startInterval, d.Clock.Now, d.Log)
	return s
}

// Routes are the service's HTTP routes by ServeMux pattern.
func (s *Service) Routes() map[string]http.Handler {
	return map[string]http.Handler{
		"GET " + httpapi.LoginPath:           http.HandlerFunc(s.login),
		"GET " + httpapi.CallbackPath:        http.HandlerFunc(s.callback),
		"POST " + httpapi.LogoutPath:         http.HandlerFunc(s.logout),
		"GET " + httpapi.WhoamiPath:          http.HandlerFunc(s.whoami),
		"GET " + httpapi.DevSignInPath:       http.HandlerFunc(s.devPage),
		"POST " + httpapi.DevSignInPath:      http.HandlerFunc(s.devSignIn),
		"GET " + httpapi.DevicePath:          http.HandlerFunc(s.devicePage),
		"POST " + httpapi.DevicePath:         http.HandlerFunc(s.deviceDecide),
		"POST " + httpapi.DeviceCodePath:     http.HandlerFunc(s.deviceCode),
		"POST " + httpapi.DeviceTokenPath:    http.HandlerFunc(s.deviceToken),
		"POST " + httpapi.RevokeSessionsPath: http.HandlerFunc(s.revokeSessions),
	}
}

// PublicOrigins are the origins cookie-authenticated calls may come from: PublicURL's.
func PublicOrigins(c config.SignIn) []string {
	u, err := url.Parse(c.PublicURL)
	if err != nil || u.Host == "" {
		return nil
	}
	return []string{u.Scheme + "://" + u.Host}
}

// startSession signs userID in: a new session and its cookie.
func (s *Service) startSession(w http.ResponseWriter, r *http.Request, userID string, admin bool) error {
	now := s.d.Clock.Now()
	token, err := s.d.Sessions.Create(r.Context(), userID, admin, now, s.d.Config.SessionTTL)
	if err != nil {
		return err
	}
	http.SetCookie(w, &http.Cookie{
		Name: s.d.Authn.SessionCookie(), Value: token, Path: "/", HttpOnly: true, Secure: s.secure,
		SameSite: http.SameSiteLaxMode, MaxAge: int(s.d.Config.SessionTTL / time.Second),
	})
	return nil
}

// whoami answers who the caller (by API key or session cookie) is, and through which key.
func (s *Service) whoami(w http.ResponseWriter, r *http.Request) {
	p, err := s.caller(r, auth.Read)
	if err != nil {
		s.writeAPIError(w, r, err)
		return
	}
	out := httpapi.Whoami{UserID: p.UserID, Kind: p.Kind, Admin: p.Admin, KeyID: p.KeyID}
	users, err := s.d.Users.GetMany(r.Context(), []string{p.UserID})
	if err != nil {
		s.writeAPIError(w, r, err)
		return
	}
	out.Email, out.Name = users[p.UserID].Email, users[p.UserID].Name
	if p.KeyID != "" {
		k, err := s.d.Keys.Get(r.Context(), p.KeyID)
		if err != nil {
			s.writeAPIError(w, r, err)
			return
		}
		out.KeyName = k.Name
	}
	writeJSON(w, http.StatusOK, out)
}

// logout revokes what signed the request in: the session cookie (and clears it), or the API key
// presented, which is how `hangar logout` revokes its own key without an admin.
func (s *Service) logout(w http.ResponseWriter, r *http.Request) {
	p, err := s.caller(r, auth.Act)
	if err != nil {
		s.writeAPIError(w, r, err)
		return
	}
	now := s.d.Clock.Now()
	if p.Kind == auth.KindWebSession {
		err = s.d.Sessions.Revoke(r.Context(), s.d.Authn.SessionToken(r.Header), now)
		s.clearSessionCookie(w)
	} else {
		_, err = s.d.Keys.Revoke(r.Context(), p.KeyID, now)
	}
	if err != nil {
		s.d.Log.Error("sign out", "user", p.UserID, "err", err)
		writeJSON(w, http.StatusServiceUnavailable, map[string]string{"error": "sign-out failed; retry"})
		return
	}
	s.d.Log.Info("signed out", "user", p.UserID, "kind", p.Kind, "key", p.KeyID)
	writeJSON(w, http.StatusOK, map[string]any{"signed_out": true, "key_id": p.KeyID})
}

// caller is who a request to /api/auth's API routes is (auth.Authenticator.Identify): an API
// key in x-api-key (`hangar whoami`, `hangar logout`) or the dashboard's cookie, never a key in
// the URL, where these routes have no need of one.
func (s *Service) caller(r *http.Request, use auth.Use) (auth.Principal, error) {
	return s.d.Authn.Identify(r, auth.Route{Use: use, Accepts: auth.HeaderKey | auth.SignInCookie})
}

// clearSessionCookie has the browser drop its session cookie.
func (s *Service) clearSessionCookie(w http.ResponseWriter) {
	http.SetCookie(w, &http.Cookie{Name: s.d.Authn.SessionCookie(), Value: "", Path: "/", HttpOnly: true, Secure: s.secure, SameSite: http.SameSiteLaxMode, MaxAge: -1})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// loopbackHTTP reports whether u is plain http on a loopback host, where browsers do not send
// Secure cookies (so Hangar sets none).
func loopbackHTTP(u string) bool {
	p, err := url.Parse(u)
	if err != nil || p.Scheme != "http" {
		return false
	}
	return isLoopbackHost(p.Hostname())
}

func isLoopbackHost(h string) bool {
	if h == "localhost" {
		return true
	}
	ip := net.ParseIP(h)
	return ip != nil && ip.IsLoopback()
}

// safeReturn is where to send the browser after signing in: a path on this server, never an
// absolute or scheme-relative URL another site could put there. It judges the path as a browser
// reads a Location: tabs, CR and LF removed, backslashes taken as slashes (so "/\t/evil" and
// "/\\evil" are "//evil", another host). What passes is returned in that form: a single "/"
// followed by anything but another slash, free of control characters; anything else is "/".
func safeReturn(to string) string {
	seen := strings.Map(func(r rune) rune {
		switch r {
		case '\t', '\r', '\n':
			return -1
		case '\\':
			return '/'
		}
		return r
	}, to)
	if !strings.HasPrefix(seen, "/") || strings.HasPrefix(seen, "//") || strings.ContainsFunc(seen, isControl) {
		return "/"
	}
	if _, err := url.Parse(seen); err != nil {
		return "/" // a bad escape: not a path Hangar links to
	}
	return seen
}

// isControl reports whether r is a C0 control or DEL, which no path Hangar links to carries.
func isControl(r rune) bool { return r < 0x20 || r == 0x7f }

// writeAPIError answers err as the RPCs would: a Connect error (JSON body, matching HTTP
// status), normalized by apierr so that no internal detail leaves.
func (s *Service) writeAPIError(w http.ResponseWriter, r *http.Request, err error) {
	w.Header().Set("Cache-Control", "no-store")
	_ = connect.NewErrorWriter().Write(w, r, apierr.Normalize(r.Context(), s.d.Log, r.URL.Path, err))
}
