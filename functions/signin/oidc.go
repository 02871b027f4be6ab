package signin

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"cloud.google.com/go/firestore"
	"github.com/coreos/go-oidc/v3/oidc"
	"golang.org/x/oauth2"

	"github.com/hangar-dev/hangar/platform/httpapi"
	"github.com/hangar-dev/hangar/platform/store"
)

// Dashboard sign-in is OpenID Connect's authorization code flow with PKCE (S256), state and
// nonce. The browser carries the state in a short-lived cookie scoped to the callback, so a
// callback with another browser's state (login CSRF) fails; the verifier and nonce wait in
// Firestore under the state's hash for one use, so any instance can finish the flow and a
// replayed callback finds nothing.
const (
	flowCookie      = "hangar_signin"
	flowsCollection = "signinFlows"
	flowTTL         = 10 * time.Minute
	// providerTimeout bounds one request to the OIDC provider.
	providerTimeout = 30 * time.Second
)

// flow is a sign-in waiting for its callback.
type flow struct {
	Verifier  string    `firestore:"verifier"`
	Nonce     string    `firestore:"nonce"`
	ReturnTo  string    `firestore:"return_to"`
	ExpiresAt time.Time `firestore:"expires_at"`
}

// oidcClient is the provider, discovered on first use: a provider that is down at start does
// not stop Hangar, and the next sign-in tries again.
type oidcClient struct {
	mu       sync.Mutex
	provider *oidc.Provider
}

// errNotConfigured is sign-in without an OIDC issuer.
var errNotConfigured = errors.New("OpenID Connect sign-in is not configured here: set HANGAR_OIDC_ISSUER, HANGAR_OIDC_CLIENT_ID and HANGAR_PUBLIC_URL")

// oauthConfig is the OAuth client of the provider, its ID token verifier, and the client secret
// read from the org secret store.
func (s *Service) oauthConfig(ctx context.Context) (*oauth2.Config, *oidc.IDTokenVerifier, error) {
	c := s.d.Config
	if c.OIDCIssuer == "" || c.OIDCClientID == "" || c.PublicURL == "" {
		return nil, nil, errNotConfigured
	}
	if s.d.Secrets == nil {
		return nil, nil, errors.New("OpenID Connect sign-in needs its client secret from the org secret store: set HANGAR_SEAL_KEYSET")
	}
	secret, ok, err := s.d.Secrets.Lookup(ctx, c.OIDCClientSecret)
	if err != nil {
		return nil, nil, fmt.Errorf("read the OIDC client secret: %w", err)
	}
	if !ok {
		return nil, nil, fmt.Errorf("the org secret %q (HANGAR_OIDC_CLIENT_SECRET) holding the OIDC client secret does not exist", c.OIDCClientSecret)
	}
	s.oidc.mu.Lock()
	defer s.oidc.mu.Unlock()
	if s.oidc.provider == nil {
		if _, err := s.d.Egress.CheckEndpoint(c.OIDCIssuer, s.d.LoopbackHTTP); err != nil {
			return nil, nil, fmt.Errorf("the OIDC issuer %s (HANGAR_OIDC_ISSUER): %w", c.OIDCIssuer, err)
		}
		// The provider keeps this context to fetch its signing keys later: not the request's.
		pctx := oidc.ClientContext(context.Background(), s.client)
		p, err := oidc.NewProvider(pctx, c.OIDCIssuer)
		if err != nil {
			return nil, nil, fmt.Errorf("discover the OIDC provider %s: %w", c.OIDCIssuer, err)
		}
		// The endpoints discovery names are called as the issuer is: checked the same way.
		var keys struct {
			JWKS string `json:"jwks_uri"`
		}
		if err := p.Claims(&keys); err != nil {
			return nil, nil, fmt.Errorf("read the OIDC provider's discovery document: %w", err)
		}
		for name, u := range map[string]string{"token_endpoint": p.Endpoint().TokenURL, "jwks_uri": keys.JWKS} {
			if _, err := s.d.Egress.CheckEndpoint(u, s.d.LoopbackHTTP); err != nil {
				return nil, nil, fmt.Errorf("the OIDC provider's %s %s: %w", name, u, err)
			}
		}
		s.oidc.provider = p
	}
	conf := &oauth2.Config{
		ClientID: c.OIDCClientID, ClientSecret: secret, Endpoint: s.oidc.provider.Endpoint(),
		RedirectURL: strings.TrimRight(c.PublicURL, "/") + httpapi.CallbackPath,
		Scopes:      []string{oidc.ScopeOpenID, "email", "profile"},
	}
	return conf, s.oidc.provider.Verifier(&oidc.Config{ClientID: c.OIDCClientID}), nil
}

// login starts a sign-in: GET /api/auth/login?return_to=/path.
func (s *Service) login(w http.ResponseWriter, r *http.Request) {
	returnTo := safeReturn(r.URL.Query().Get("return_to"))
	if s.d.Config.OIDCIssuer == "" && s.d.Config.DevSignIn {
		http.Redirect(w, r, httpapi.DevSignInPath+"?return_to="+url.QueryEscape(returnTo), http.StatusSeeOther)
		return
	}
	conf, _, err := s.oauthConfig(r.Context())
	if err != nil {
		s.d.Log.Error("sign-in", "err", err)
		s.page(w, http.StatusServiceUnavailable, "Sign-in is unavailable", err.Error())
		return
	}
	if !s.starts.take(r.Context(), "sign-in:"+s.d.Authn.ClientAddress(r.RemoteAddr, r.Header)) {
		s.page(w, http.StatusTooManyRequests, "Too many sign-ins", "Too many sign-ins were started from this address; wait a minute.")
		return
	}
	state, nonce, verifier := rand.Text(), rand.Text(), oauth2.GenerateVerifier()
	f := flow{Verifier: verifier, Nonce: nonce, ReturnTo: returnTo, ExpiresAt: s.d.Clock.Now().Add(flowTTL)}
	if _, err := s.d.DB.Collection(flowsCollection).Doc(hashOf(state)).Create(r.Context(), f); err != nil {
		s.d.Log.Error("sign-in: save flow", "err", err)
		s.page(w, http.StatusServiceUnavailable, "Sign-in is unavailable", "Hangar could not start the sign-in; try again.")
		return
	}
	http.SetCookie(w, &http.Cookie{
		Name: flowCookie, Value: state, Path: httpapi.CallbackPath, HttpOnly: true, Secure: s.secure,
		SameSite: http.SameSiteLaxMode, MaxAge: int(flowTTL / time.Second),
	})
	http.Redirect(w, r, conf.AuthCodeURL(state, oidc.Nonce(nonce), oauth2.S256ChallengeOption(verifier)), http.StatusFound)
}

// idClaims are the ID token's claims sign-in reads.
type idClaims struct {
	Email         string `json:"email"`
	EmailVerified *bool  `json:"email_verified"`
	Name          string `json:"name"`
}

// callback finishes a sign-in: GET /api/auth/callback?code=…&state=….
func (s *Service) callback(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	q := r.URL.Query()
	http.SetCookie(w, &http.Cookie{Name: flowCookie, Value: "", Path: httpapi.CallbackPath, HttpOnly: true, Secure: s.secure, SameSite: http.SameSiteLaxMode, MaxAge: -1})
	if e := q.Get("error"); e != "" {
		s.page(w, http.StatusForbidden, "Sign-in refused", "The identity provider answered "+e+".")
		return
	}
	state := q.Get("state")
	c, err := r.Cookie(flowCookie)
	if state == "" || err != nil || subtle.ConstantTimeCompare([]byte(c.Value), []byte(state)) != 1 {
		s.page(w, http.StatusBadRequest, "Sign-in failed", "The sign-in's state does not match this browser's: start again from the sign-in page.")
		return
	}
	f, err := s.takeFlow(ctx, state)
	if err != nil {
		s.page(w, http.StatusBadRequest, "Sign-in failed", "This sign-in expired or was already used: start again.")
		return
	}
	conf, verifier, err := s.oauthConfig(ctx)
	if err != nil {
		s.d.Log.Error("sign-in callback", "err", err)
		s.page(w, http.StatusServiceUnavailable, "Sign-in is unavailable", err.Error())
		return
	}
	tok, err := conf.Exchange(oidc.ClientContext(ctx, s.client), q.Get("code"), oauth2.VerifierOption(f.Verifier))
	if err != nil {
		s.d.Log.Warn("sign-in: code exchange failed", "err", redactOAuthError(err))
		s.page(w, http.StatusBadRequest, "Sign-in failed", "The identity provider did not accept the sign-in's code: start again.")
		return
	}
	raw, _ := tok.Extra("id_token").(string)
	idt, err := verifier.Verify(ctx, raw)
	if err != nil {
		s.d.Log.Warn("sign-in: bad ID token", "err", err)
		s.page(w, http.StatusBadRequest, "Sign-in failed", "The identity provider's ID token did not verify.")
		return
	}
	if subtle.ConstantTimeCompare([]byte(idt.Nonce), []byte(f.Nonce)) != 1 {
		s.d.Log.Warn("sign-in: ID token nonce mismatch", "subject", idt.Subject)
		s.page(w, http.StatusBadRequest, "Sign-in failed", "The ID token was not issued for this sign-in (nonce mismatch).")
		return
	}
	var cl idClaims
	if err := idt.Claims(&cl); err != nil || cl.Email == "" {
		s.page(w, http.StatusForbidden, "Sign-in refused", "The identity provider gave no email address.")
		return
	}
	if cl.EmailVerified == nil || !*cl.EmailVerified {
		s.page(w, http.StatusForbidden, "Sign-in refused", "The identity provider has not verified "+cl.Email+".")
		return
	}
	if !s.domainAllowed(cl.Email) {
		s.d.Log.Warn("sign-in refused: email domain not allowed", "email", cl.Email)
		s.page(w, http.StatusForbidden, "Sign-in refused", cl.Email+" is not of a domain allowed to sign in to this Hangar.")
		return
	}
	if err := s.signInPerson(w, r, cl.Email, cl.Name, false); err != nil {
		s.d.Log.Error("sign-in", "email", cl.Email, "err", err)
		s.page(w, http.StatusServiceUnavailable, "Sign-in failed", "Hangar could not record the sign-in; try again.")
		return
	}
	http.Redirect(w, r, f.ReturnTo, http.StatusSeeOther)
}

// signInPerson creates or updates the person with email and starts their session: an admin one
// when admin says so, for the configured first admin, or for anyone holding an unrevoked admin
// key.
func (s *Service) signInPerson(w http.ResponseWriter, r *http.Request, email, name string, admin bool) error {
	ctx := r.Context()
	u, err := s.d.Users.EnsureHuman(ctx, email, name, s.d.Clock.Now())
	if err != nil {
		return err
	}
	if name != "" && name != u.Name {
		if err := s.d.Users.SetName(ctx, u.ID, name); err != nil {
			return err
		}
	}
	admin = admin || s.d.Config.AdminEmail != "" && strings.EqualFold(email, s.d.Config.AdminEmail)
	if !admin {
		acting, err := s.d.Keys.Acting(ctx, u.ID, "")
		if err != nil {
			return err
		}
		admin = acting.Admin
	}
	if err := s.startSession(w, r, u.ID, admin); err != nil {
		return err
	}
	s.d.Log.Info("signed in", "user", u.ID, "email", u.Email, "admin", admin)
	return nil
}

// takeFlow reads and deletes the flow of state in one transaction: a callback uses it once.
func (s *Service) takeFlow(ctx context.Context, state string) (flow, error) {
	ref := s.d.DB.Collection(flowsCollection).Doc(hashOf(state))
	var out flow
	err := s.d.DB.RunTransaction(ctx, func(ctx context.Context, tx *firestore.Transaction) error {
		f, err := store.Read[flow](ctx, tx, ref)
		if err != nil {
			return err
		}
		out = *f
		return tx.Delete(ref)
	})
	if err != nil {
		return flow{}, err
	}
	if !s.d.Clock.Now().Before(out.ExpiresAt) {
		return flow{}, errors.New("sign-in flow expired")
	}
	return out, nil
}

// domainAllowed reports whether email's domain is one of the allowed ones.
func (s *Service) domainAllowed(email string) bool {
	at := strings.LastIndexByte(email, '@')
	if at < 0 {
		return false
	}
	domain := strings.ToLower(email[at+1:])
	return slices.ContainsFunc(s.d.Config.AllowedDomains, func(d string) bool {
		return strings.EqualFold(strings.TrimSpace(d), domain)
	})
}

// redactOAuthError keeps an exchange failure's error code and drops the provider's body, which
// could echo what was sent.
func redactOAuthError(err error) string {
	var re *oauth2.RetrieveError
	if errors.As(err, &re) {
		return fmt.Sprintf("token endpoint answered %d %s", re.Response.StatusCode, re.ErrorCode)
	}
	return err.Error()
}

func hashOf(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}
