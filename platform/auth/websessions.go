package auth

import (
	"context"
	"crypto/rand"
	"fmt"
	"net/http"
	"strings"
	"time"

	"cloud.google.com/go/firestore"

	"github.com/hangar-dev/hangar/platform/apierr"
	"github.com/hangar-dev/hangar/platform/store"
)

// A browser signed in to the dashboard holds a session cookie instead of an API key. The cookie's
// value is a random token; its record is kept under the token's SHA-256, so the database never
// holds a value that signs anyone in.
const (
	// SessionCookie is the dashboard session cookie's name on a plain http origin (`hangar
	// dev`); SecureSessionCookie is its name when Hangar's origins are https.
	SessionCookie = "hangar_session"
	// SecureSessionCookie carries the __Host- prefix, which a browser takes only from a Secure
	// cookie of Path=/ without Domain, set by the host itself: no sibling host (an app's origin,
	// another subdomain) can set or shadow a cookie of that name for Hangar's host.
	SecureSessionCookie = "__Host-" + SessionCookie
	// KindWebSession is the Principal.Kind of a caller signed in by the session cookie.
	KindWebSession = "web_session"
	// CSRFHeader is the header a cookie-authenticated RPC must carry besides a matching Origin,
	// unless it carries Connect-Protocol-Version (Connect clients send it on every call). An
	// HTML form can send neither, and a cross-site script cannot send either without a CORS
	// preflight, which the API never grants.
	CSRFHeader = "X-Hangar-Csrf"

	sessionPrefix      = "hgs_"
	webSessionsCollect = "webSessions"
)

// webSessionsExpire is when a session record may go (revoked or not).
var webSessionsExpire = store.Expires(webSessionsCollect, "expires_at")

// WebSession is a dashboard session's record.
type WebSession struct {
	UserID    string    `firestore:"user_id"`
	Admin     bool      `firestore:"admin"`
	CreatedAt time.Time `firestore:"created_at"`
	ExpiresAt time.Time `firestore:"expires_at"`
	RevokedAt time.Time `firestore:"revoked_at"`
}

// WebSessions creates, verifies and revokes dashboard sessions.
type WebSessions struct {
	db    *firestore.Client
	authn *Authenticator
}

// NewWebSessions returns the session store in db; revocations are also forgotten by authn's
// cache at once.
func NewWebSessions(db *firestore.Client, authn *Authenticator) *WebSessions {
	return &WebSessions{db: db, authn: authn}
}

// Create starts a session for userID lasting ttl and returns the cookie value, which exists only
// in this return value (and the browser) from now on.
func (s *WebSessions) Create(ctx context.Context, userID string, admin bool, now time.Time, ttl time.Duration) (string, error) {
	token := sessionPrefix + rand.Text() + rand.Text()
	rec := WebSession{UserID: userID, Admin: admin, CreatedAt: now, ExpiresAt: now.Add(ttl)}
	if _, err := s.db.Collection(webSessionsCollect).Doc(hashKey(token)).Create(ctx, rec); err != nil {
		return "", fmt.Errorf("create web session for %s: %w", userID, err)
	}
	return token, nil
}

// Revoke ends the session of token; an unknown or already revoked token is no error.
func (s *WebSessions) Revoke(ctx context.Context, token string, now time.Time) error {
	if !strings.HasPrefix(token, sessionPrefix) {
		return nil
	}
	h := hashKey(token)
	_, err := s.db.Collection(webSessionsCollect).Doc(h).Update(ctx, []firestore.Update{{Path: "revoked_at", Value: now}})
	if err != nil && !store.IsNotFound(err) {
		return fmt.Errorf("revoke web session: %w", err)
	}
	if s.authn != nil {
		s.authn.forget(h)
	}
	return nil
}

// lookup returns the principal of an unexpired, unrevoked session token.
func (s *WebSessions) lookup(ctx context.Context, token string, now time.Time) (Principal, time.Time, bool, error) {
	if !strings.HasPrefix(token, sessionPrefix) || len(token) > 100 {
		return Principal{}, time.Time{}, false, nil
	}
	return s.lookupByID(ctx, hashKey(token), now)
}

// lookupByID is lookup of the session whose record id (its token's hash) is id.
func (s *WebSessions) lookupByID(ctx context.Context, id string, now time.Time) (Principal, time.Time, bool, error) {
	snap, err := s.db.Collection(webSessionsCollect).Doc(id).Get(ctx)
	if store.IsNotFound(err) {
		return Principal{}, time.Time{}, false, nil
	}
	if err != nil {
		return Principal{}, time.Time{}, false, fmt.Errorf("read web session: %w", err)
	}
	var rec WebSession
	if err := snap.DataTo(&rec); err != nil {
		return Principal{}, time.Time{}, false, fmt.Errorf("decode web session: %w", err)
	}
	if !rec.RevokedAt.IsZero() || !now.Before(rec.ExpiresAt) {
		return Principal{}, time.Time{}, false, nil
	}
	return Principal{UserID: rec.UserID, Kind: KindWebSession, Admin: rec.Admin, WebSession: id}, rec.ExpiresAt, true, nil
}

// AcceptSessions makes the authenticator take dashboard session cookies on calls without an API
// key, from pages served at one of origins (scheme://host[:port]) only. The cookie is
// SecureSessionCookie when every origin is https, else SessionCookie (SessionCookieName).
func (a *Authenticator) AcceptSessions(s *WebSessions, origins []string) {
	a.sessions = s
	a.origins = make(map[string]bool, len(origins))
	a.cookie = SessionCookieName(origins)
	for _, o := range origins {
		a.origins[strings.TrimRight(o, "/")] = true
	}
}

// SessionCookieName is the session cookie's name for Hangar's origins: SecureSessionCookie
// when there are some and all are https, SessionCookie otherwise (plain http in `hangar dev`,
// where a browser refuses a __Host- cookie).
func SessionCookieName(origins []string) string {
	if len(origins) == 0 {
		return SessionCookie
	}
	for _, o := range origins {
		if !strings.HasPrefix(o, "https://") {
			return SessionCookie
		}
	}
	return SecureSessionCookie
}

// SessionCookie is the name of the session cookie the authenticator takes, which sign-in sets.
func (a *Authenticator) SessionCookie() string {
	if a.cookie == "" {
		return SessionCookie
	}
	return a.cookie
}

// AuthenticateSession returns the principal of a session cookie value presented from client, or
// unauthenticated. Failures count against the client as bad keys do.
func (a *Authenticator) AuthenticateSession(ctx context.Context, token, client string) (Principal, error) {
	if a.sessions == nil {
		return Principal{}, apierr.Unauthenticated()
	}
	h := hashKey(token)
	now := a.clock.Now()
	if p, ok := a.recalled(h, now); ok {
		return p, nil
	}
	if a.failures.known(h, now) {
		return Principal{}, apierr.Unauthenticated()
	}
	// The failure limit's "key id" scope is the token's own hash: one shared scope for every
	// session would let anyone's bad cookies lock every browser out.
	scope := "session " + h[:16]
	if err := a.failures.exhausted(client, scope); err != nil {
		return Principal{}, err
	}
	p, expires, ok, err := a.sessions.lookup(ctx, token, now)
	if err != nil {
		return Principal{}, err
	}
	if !ok {
		a.failures.failed(ctx, h, client, scope, now)
		return Principal{}, apierr.Unauthenticated()
	}
	until := now.Add(a.ttl)
	if expires.Before(until) {
		until = expires
	}
	a.remember(h, p, until)
	return p, nil
}

// SessionToken is the session cookie's value in h, "" when there is none.
func (a *Authenticator) SessionToken(h http.Header) string {
	r := http.Request{Header: h}
	c, err := r.Cookie(a.SessionCookie())
	if err != nil {
		return ""
	}
	return c.Value
}

// recalled is the principal remembered under key, while it is fresh.
func (a *Authenticator) recalled(key string, now time.Time) (Principal, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	c, hit := a.cache[key]
	return c.p, hit && now.Before(c.expires)
}

// remember caches a verified principal until a time.
func (a *Authenticator) remember(h string, p Principal, until time.Time) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if len(a.cache) >= maxCached {
		a.cache = make(map[string]cached)
	}
	a.cache[h] = cached{p: p, expires: until}
}
