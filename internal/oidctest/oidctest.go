// Package oidctest is a loopback OpenID Connect provider for tests: discovery, a JWKS of a real
// RSA key, an authorization endpoint that signs the configured person in at once, and a token
// endpoint that checks the client secret, the one-time code, the redirect URI and the PKCE S256
// verifier (RFC 7636) before it answers a signed RS256 ID token carrying the request's nonce.
package oidctest

import (
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sync"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"
)

// Person is who the provider signs in.
type Person struct {
	Email         string
	EmailVerified bool
	Name          string
}

// Provider is a running loopback provider.
type Provider struct {
	// Issuer is the provider's URL (http://127.0.0.1:port).
	Issuer       string
	ClientID     string
	ClientSecret string

	key    *rsa.PrivateKey
	signer jose.Signer

	mu     sync.Mutex
	person Person
	nonce  *string // replaces the request's nonce in the ID token when set
	codes  map[string]authorization
	// Verifiers are the code_verifiers token requests carried, for tests that look for them
	// where they must not be.
	verifiers []string
	tokens    []string
}

// authorization is a code waiting for its token request.
type authorization struct {
	challenge, method, nonce, redirectURI string
	person                                Person
}

// New starts a provider for clientID and clientSecret on loopback, stopped when t ends.
func New(t testing.TB, clientID, clientSecret string) *Provider {
	t.Helper()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.RS256, Key: key},
		(&jose.SignerOptions{}).WithType("JWT").WithHeader("kid", "k1"))
	if err != nil {
		t.Fatal(err)
	}
	p := &Provider{ClientID: clientID, ClientSecret: clientSecret, key: key, signer: signer, codes: map[string]authorization{}}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /.well-known/openid-configuration", p.discovery)
	mux.HandleFunc("GET /jwks", p.jwks)
	mux.HandleFunc("GET /authorize", p.authorize)
	mux.HandleFunc("POST /token", p.token)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	p.Issuer = srv.URL
	return p
}

// SignIn sets who the next authorizations sign in.
func (p *Provider) SignIn(who Person) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.person = who
}

// ForgeNonce makes later ID tokens carry nonce instead of the authorization request's.
func (p *Provider) ForgeNonce(nonce string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.nonce = &nonce
}

// Secrets are every code verifier and token the provider saw or issued.
func (p *Provider) Secrets() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append(append([]string{p.ClientSecret}, p.verifiers...), p.tokens...)
}

// S256 is RFC 7636's S256 code challenge of verifier.
func S256(verifier string) string {
	sum := sha256.Sum256([]byte(verifier))
	return base64.RawURLEncoding.EncodeToString(sum[:])
}

func (p *Provider) discovery(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, map[string]any{
		"issuer":                                p.Issuer,
		"authorization_endpoint":                p.Issuer + "/authorize",
		"token_endpoint":                        p.Issuer + "/token",
		"jwks_uri":                              p.Issuer + "/jwks",
		"response_types_supported":              []string{"code"},
		"subject_types_supported":               []string{"public"},
		"id_token_signing_alg_values_supported": []string{"RS256"},
		"code_challenge_methods_supported":      []string{"S256"},
		"token_endpoint_auth_methods_supported": []string{"client_secret_basic", "client_secret_post"},
	})
}

func (p *Provider) jwks(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, jose.JSONWebKeySet{Keys: []jose.JSONWebKey{
		{Key: &p.key.PublicKey, KeyID: "k1", Algorithm: "RS256", Use: "sig"},
	}})
}

// authorize signs the configured person in at once and redirects back with a code.
func (p *Provider) authorize(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	if q.Get("response_type") != "code" || q.Get("client_id") != p.ClientID || q.Get("redirect_uri") == "" {
		http.Error(w, "bad authorization request", http.StatusBadRequest)
		return
	}
	if q.Get("code_challenge_method") != "S256" || q.Get("code_challenge") == "" {
		http.Error(w, "PKCE S256 is required", http.StatusBadRequest)
		return
	}
	code := rand.Text()
	p.mu.Lock()
	p.codes[code] = authorization{
		challenge: q.Get("code_challenge"), method: q.Get("code_challenge_method"), nonce: q.Get("nonce"),
		redirectURI: q.Get("redirect_uri"), person: p.person,
	}
	p.mu.Unlock()
	back, err := url.Parse(q.Get("redirect_uri"))
	if err != nil {
		http.Error(w, "bad redirect_uri", http.StatusBadRequest)
		return
	}
	v := back.Query()
	v.Set("code", code)
	v.Set("state", q.Get("state"))
	back.RawQuery = v.Encode()
	http.Redirect(w, r, back.String(), http.StatusFound)
}

// token exchanges a code once, checking the client, the redirect URI and the PKCE verifier.
func (p *Provider) token(w http.ResponseWriter, r *http.Request) {
	if err := r.ParseForm(); err != nil {
		tokenError(w, "invalid_request")
		return
	}
	id, secret, ok := r.BasicAuth()
	if !ok {
		id, secret = r.PostForm.Get("client_id"), r.PostForm.Get("client_secret")
	}
	if id != p.ClientID || secret != p.ClientSecret {
		tokenError(w, "invalid_client")
		return
	}
	verifier := r.PostForm.Get("code_verifier")
	p.mu.Lock()
	a, found := p.codes[r.PostForm.Get("code")]
	delete(p.codes, r.PostForm.Get("code"))
	p.verifiers = append(p.verifiers, verifier)
	forged := p.nonce
	p.mu.Unlock()
	switch {
	case r.PostForm.Get("grant_type") != "authorization_code" || !found:
		tokenError(w, "invalid_grant")
		return
	case r.PostForm.Get("redirect_uri") != a.redirectURI:
		tokenError(w, "invalid_grant")
		return
	case verifier == "" || S256(verifier) != a.challenge:
		tokenError(w, "invalid_grant")
		return
	}
	nonce := a.nonce
	if forged != nil {
		nonce = *forged
	}
	now := time.Now()
	claims, _ := json.Marshal(map[string]any{
		"iss": p.Issuer, "sub": "sub-" + a.person.Email, "aud": p.ClientID,
		"iat": now.Unix(), "exp": now.Add(time.Hour).Unix(), "nonce": nonce,
		"email": a.person.Email, "email_verified": a.person.EmailVerified, "name": a.person.Name,
	})
	jws, err := p.signer.Sign(claims)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	idToken, err := jws.CompactSerialize()
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	access := rand.Text()
	p.mu.Lock()
	p.tokens = append(p.tokens, access, idToken)
	p.mu.Unlock()
	writeJSON(w, http.StatusOK, map[string]any{"access_token": access, "token_type": "Bearer", "expires_in": 3600, "id_token": idToken})
}

func tokenError(w http.ResponseWriter, code string) {
	writeJSON(w, http.StatusBadRequest, map[string]string{"error": code})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}
