package e2e

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"math/big"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/hangar-dev/hangar/composition"
	"github.com/hangar-dev/hangar/functions/oauthcreds"
	appv1 "github.com/hangar-dev/hangar/gen/svc/app/v1"
	"github.com/hangar-dev/hangar/gen/svc/app/v1/appv1connect"
	"github.com/hangar-dev/hangar/internal/oauthtest"
	"github.com/hangar-dev/hangar/internal/testenv"
	"github.com/hangar-dev/hangar/platform/auth"
	"github.com/hangar-dev/hangar/platform/clock"
	"github.com/hangar-dev/hangar/platform/egress"
	"github.com/hangar-dev/hangar/records/credentials"
	"github.com/hangar-dev/hangar/records/secrets"
	"github.com/hangar-dev/hangar/records/sessiondb"
	"github.com/hangar-dev/hangar/sandboxhosts/egressproxy"
)

// newFakeAPINamed is a fakeAPI over TLS whose self-signed certificate names names (httptest's
// names only example.com's).
func newFakeAPINamed(t *testing.T, names ...string) *fakeAPI {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: names[0]}, DNSNames: names,
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true, IsCA: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	f := &fakeAPI{}
	f.Server = httptest.NewUnstartedServer(http.HandlerFunc(f.serve))
	f.TLS = &tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: key}}}
	f.StartTLS()
	t.Cleanup(f.Close)
	return f
}

// oauthProxyStack is a sandbox stack whose "anthropic" OAuth provider (the one claude-code
// takes) is the loopback provider, its tokens used at api.anthropic.com: a loopback TLS server
// under that name. console.anthropic.com, a host claude-code may reach but the token may not
// go to, is another. The hosts read the credential for every request (no cache), so a refresh
// shows on the next one. The stack's admin has signed in to the provider.
type oauthProxyStack struct {
	*sandboxStack
	provider           *oauthtest.Provider
	anthropic, console *fakeAPI
	creds              appv1connect.OAuthCredentialServiceClient
	store              *credentials.Store
	me                 credentials.Subject
	// refresher is another instance's OAuthCredentialService over the same database, whose
	// sweep refreshes credentials (the stack runs no automation worker to tick).
	refresher *oauthcreds.Service
}

func newOAuthProxyStack(t *testing.T) *oauthProxyStack {
	testenv.RequirePlugins(t)
	o := &oauthProxyStack{provider: oauthtest.New(t), anthropic: newFakeAPINamed(t, "api.anthropic.com"), console: newFakeAPINamed(t, "console.anthropic.com")}
	roots := x509.NewCertPool()
	roots.AddCert(o.anthropic.Certificate())
	roots.AddCert(o.console.Certificate())
	var registry []map[string]any
	if err := json.Unmarshal([]byte(o.provider.RegistryJSON("anthropic", "ACME_CLIENT_ID", "ACME_CLIENT_SECRET")), &registry); err != nil {
		t.Fatal(err)
	}
	registry[0]["api_hosts"] = []string{"api.anthropic.com"}
	providers, _ := json.Marshal(registry)
	reg, err := oauthcreds.NewRegistry(string(providers))
	if err != nil {
		t.Fatal(err)
	}
	o.sandboxStack = newSandboxStackWith(t, 1, func(sb *testenv.Sandboxes) {
		sb.Config.OAuthProviders = string(providers)
		sb.Config.Egress = egress.MustParse("127.0.0.1")
		sb.EgressResolve = map[string]string{
			"api.anthropic.com:443":     o.anthropic.Listener.Addr().String(),
			"console.anthropic.com:443": o.console.Listener.Addr().String(),
		}
		sb.EgressRootCAs = roots
		sb.CredentialCacheTTL = -1
	}, func(d *composition.Deps) { d.LoopbackProviders = true })
	// Shared with every user: the refresh sweep acts as the credential's user.
	orgSecrets := appv1connect.NewOrgSecretServiceClient(httpClient, o.rpcURL(), auth.WithKey(o.admin))
	for name, value := range map[string]string{"ACME_CLIENT_ID": o.provider.ClientID, "ACME_CLIENT_SECRET": o.provider.ClientSecret} {
		if _, err := orgSecrets.PutOrgSecret(context.Background(), connect.NewRequest(&appv1.PutOrgSecretRequest{
			Name: name, Value: value, Access: &appv1.OrgSecretAccess{Visibility: appv1.OrgSecretVisibility_ORG_SECRET_VISIBILITY_ALL_USERS},
		})); err != nil {
			t.Fatal(err)
		}
	}
	o.creds = appv1connect.NewOAuthCredentialServiceClient(httpClient, o.rpcURL(), auth.WithKey(o.admin))
	o.store = credentials.New(o.sb.DB, o.sb.Sealer, time.Now, 1<<16)
	o.refresher = oauthcreds.New(oauthcreds.Deps{
		Store: o.store, Flows: credentials.NewFlows(o.sb.DB, time.Now), Sealer: o.sb.Sealer, Providers: reg,
		Secrets:  secrets.New(o.sb.DB, o.sb.Sealer, time.Now, secrets.Limits{MaxValueBytes: 4096, MaxSecrets: 100}),
		Sessions: sessiondb.NewStore(o.sb.DB, time.Now), Egress: egress.MustParse("127.0.0.1"), LoopbackHTTP: true, Clock: clock.Real{},
	})
	o.signIn(t)
	return o
}

var userSubject = &appv1.OAuthSubject{Kind: appv1.OauthSubjectKind_OAUTH_SUBJECT_KIND_USER}

// signIn connects the admin's anthropic credential by a redirect flow, as the browser would.
func (o *oauthProxyStack) signIn(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	const redirect = "http://127.0.0.1:1/callback"
	begun, err := o.creds.BeginRedirectFlow(ctx, connect.NewRequest(&appv1.BeginRedirectFlowRequest{Subject: userSubject, Provider: "anthropic", RedirectUri: redirect}))
	if err != nil {
		t.Fatal(err)
	}
	code, _ := o.provider.Authorize(begun.Msg.GetAuthorizeUrl())
	done, err := o.creds.CompleteRedirectFlow(ctx, connect.NewRequest(&appv1.CompleteRedirectFlowRequest{
		Subject: userSubject, Provider: "anthropic", FlowId: begun.Msg.GetFlow().GetId(), Code: code, RedirectUri: redirect,
	}))
	if err != nil {
		t.Fatal(err)
	}
	o.me = credentials.Subject{Kind: credentials.KindUser, ID: done.Msg.GetCredential().GetSubjectId()}
}

// accessToken is the credential's real access token now.
func (o *oauthProxyStack) accessToken(t *testing.T) string {
	t.Helper()
	bundle, _, err := o.store.Bundle(context.Background(), o.me, "anthropic")
	if err != nil {
		t.Fatal(err)
	}
	token := credentials.AccessToken(credentials.BundleClaudeCode, bundle)
	if !strings.HasPrefix(token, "accesstoken-") {
		t.Fatalf("the credential's access token is %q", token)
	}
	return token
}

// session creates a claude-code session with the admin's anthropic credential and answers its
// id and what the sandbox reads through the broker.
func (o *oauthProxyStack) session(t *testing.T) (id string, bundle *appv1.FetchSessionCredentialResponse, brokerToken string) {
	t.Helper()
	id = o.create(t, &appv1.CreateSessionRequest{Harness: ptr("claude-code"), OauthCredential: &appv1.OAuthCredentialBinding{Subject: userSubject, Provider: "anthropic"}})
	brokerToken = strings.TrimSpace(o.sh(t, id, `echo "$HANGAR_OAUTH_BROKER_TOKEN"`))
	// The broker needs no API key: the sandbox's token is its credential.
	broker := appv1connect.NewOAuthCredentialServiceClient(httpClient, o.rpcURL())
	got, err := broker.FetchSessionCredential(context.Background(), connect.NewRequest(&appv1.FetchSessionCredentialRequest{SessionId: id, BrokerToken: brokerToken}))
	if err != nil {
		t.Fatal(err)
	}
	return id, got.Msg, brokerToken
}

// The sandbox reads a bundle whose access token is a placeholder and which has no refresh
// token; the proxy sends the credential's real token to api.anthropic.com in its place, and
// after Hangar refreshes the credential mid-session, the new one. The placeholder sent to a
// host the token may not go to is refused and reported. The sandbox cannot save a bundle.
func TestOAuthAccessTokenReachesItsProviderOnlyThroughTheProxy(t *testing.T) {
	o := newOAuthProxyStack(t)
	ctx := context.Background()
	first := o.accessToken(t)
	id, fetched, brokerToken := o.session(t)

	var f struct {
		ClaudeAiOauth struct {
			AccessToken  string `json:"accessToken"`
			RefreshToken string `json:"refreshToken"`
			ExpiresAt    int64  `json:"expiresAt"`
		} `json:"claudeAiOauth"`
	}
	if err := json.Unmarshal(fetched.GetOpaqueBundle(), &f); err != nil {
		t.Fatalf("the sandbox's bundle %q: %v", fetched.GetOpaqueBundle(), err)
	}
	placeholder := f.ClaudeAiOauth.AccessToken
	if !strings.HasPrefix(placeholder, "hangar-placeholder-") || f.ClaudeAiOauth.RefreshToken != "" || f.ClaudeAiOauth.ExpiresAt < time.Now().Add(24*time.Hour).UnixMilli() {
		t.Fatalf("the sandbox's bundle is %+v: want a placeholder, no refresh token, an expiry far ahead", f.ClaudeAiOauth)
	}

	call := func(host string) string {
		return o.sh(t, id, `wget -q -O- --header "Authorization: Bearer `+placeholder+`" https://`+host+`/v1/messages 2>&1; echo "exit=$?"`)
	}
	if got := call("api.anthropic.com"); !strings.Contains(got, "reached api.anthropic.com") {
		for _, e := range o.listEvents(t, id, "net.connection") {
			t.Log(e.GetPayloadJson())
		}
		t.Fatalf("the provider's API through the proxy: %q", got)
	}

	// Hangar refreshes the credential mid-session: tokens now live 2 seconds, so the sweep
	// comes due at once.
	o.provider.SetExpiresIn(2)
	o.signIn(t) // a token of the short life, whose refresh is due within a second
	signedIn := o.accessToken(t)
	deadline := time.Now().Add(time.Minute)
	for o.accessToken(t) == signedIn {
		if time.Now().After(deadline) {
			t.Fatal("the sweep never refreshed the credential")
		}
		if err := o.refresher.Sweep(ctx); err != nil {
			t.Fatal(err)
		}
		time.Sleep(200 * time.Millisecond)
	}
	o.provider.SetExpiresIn(3600)
	refreshed := o.accessToken(t)
	if got := call("api.anthropic.com"); !strings.Contains(got, "reached api.anthropic.com") {
		t.Fatalf("the provider's API after the refresh: %q", got)
	}
	auths := o.anthropic.got()
	if len(auths) != 2 || auths[0] != "Bearer "+first || auths[1] == auths[0] || !strings.HasPrefix(auths[1], "Bearer accesstoken-") {
		t.Fatalf("the API got %q; want %q, then a refreshed token", auths, "Bearer "+first)
	}
	if now := o.accessToken(t); auths[1] != "Bearer "+refreshed && auths[1] != "Bearer "+now {
		t.Fatalf("the API got %q after the refresh, the credential holds %q", auths[1], refreshed)
	}

	// console.anthropic.com may be reached, but not with the token.
	if got := call("console.anthropic.com"); !strings.Contains(got, "403") {
		t.Fatalf("the placeholder sent to another host: %q, want a 403", got)
	}
	if len(o.console.got()) != 0 {
		t.Fatalf("a request carrying the placeholder reached the other host: %q", o.console.got())
	}
	// The event log batches its writes: wait for the three events, then check there are no more.
	var injected, refused int
	o.eventsUntil(t, id, func(events []*appv1.SessionEvent) bool {
		injected, refused = 0, 0
		for _, e := range events {
			var c egressproxy.Connection
			if err := json.Unmarshal([]byte(e.GetPayloadJson()), &c); err != nil {
				t.Fatal(err)
			}
			if c.Host == "api.anthropic.com" && len(c.Injected) == 1 && c.Injected[0] == "oauth/anthropic" {
				injected++
			}
			if c.Host == "console.anthropic.com" && c.Refused == "oauth/anthropic" && c.Decision == egressproxy.Denied {
				refused++
			}
		}
		return injected >= 2 && refused >= 1
	}, "net.connection")
	if injected != 2 || refused != 1 {
		t.Fatalf("net.connection events: %d injections, %d refusals; want 2 and 1", injected, refused)
	}

	broker := appv1connect.NewOAuthCredentialServiceClient(httpClient, o.rpcURL())
	_, err := broker.UpdateSessionCredential(ctx, connect.NewRequest(&appv1.UpdateSessionCredentialRequest{
		SessionId: id, BrokerToken: brokerToken, ExpectedVersion: fetched.GetVersion(), OpaqueBundle: fetched.GetOpaqueBundle(),
	}))
	testenv.WantCode(t, err, connect.CodeFailedPrecondition)
	again, err := broker.FetchSessionCredential(ctx, connect.NewRequest(&appv1.FetchSessionCredentialRequest{SessionId: id, BrokerToken: brokerToken}))
	if err != nil || string(again.Msg.GetOpaqueBundle()) != string(fetched.GetOpaqueBundle()) || again.Msg.GetVersion() <= fetched.GetVersion() {
		t.Fatalf("after the refresh the broker answers %v, %v: want the same placeholder bundle at a newer version", again, err)
	}
}

// No access or refresh token the credential ever held is in the sandbox: not in its
// environment or any process's, not in any file, not in what the harness is started with, not
// in the broker's answer, not in the session's events.
func TestSecurityOAuthTokensNeverReachTheSandbox(t *testing.T) {
	o := newOAuthProxyStack(t)
	bundle, _, err := o.store.Bundle(context.Background(), o.me, "anthropic")
	if err != nil {
		t.Fatal(err)
	}
	tok := credentials.DecodeBundle(credentials.BundleClaudeCode, bundle)
	if tok.AccessToken == "" || tok.RefreshToken == "" {
		t.Fatalf("the signed-in bundle holds no tokens: %q", bundle)
	}
	id, fetched, _ := o.session(t)
	exe := uint32(0o755)
	o.write(t, id, "/bin/claude", []byte(fakeClaude), &exe)
	if _, err := o.svc.SendPrompt(context.Background(), connect.NewRequest(&appv1.SendPromptRequest{SessionId: id, Text: "who am I", PromptId: "p1"})); err != nil {
		t.Fatal(err)
	}
	events := o.waitEvent(t, id, "assistant.message", "p1")
	harnessSaw := events[len(events)-1].Text
	if !strings.Contains(harnessSaw, "token=hangar-placeholder-") {
		t.Fatalf("the harness was started with %q, want the placeholder", harnessSaw)
	}
	for _, secret := range []string{tok.AccessToken, tok.RefreshToken} {
		if strings.Contains(string(fetched.GetOpaqueBundle()), secret) || strings.Contains(harnessSaw, secret) {
			t.Fatal("the broker's answer or the harness's start holds a token")
		}
		o.noEventHolds(t, id, secret)
	}
	// Every file the sandbox can read, and every process's environment, looked through for any
	// token the provider ever issued (the pattern, unlike a token, does not match itself).
	const issued = `(access|refresh)token-[0-9]+-SECRET`
	files := o.sh(t, id, `grep -rlE '`+issued+`' / --exclude-dir=proc --exclude-dir=sys 2>/dev/null; for e in /proc/[0-9]*/environ; do tr '\0' '\n' < "$e"; done 2>/dev/null | grep -cE '`+issued+`' || true`)
	if strings.TrimSpace(files) != "0" {
		t.Fatalf("the sandbox holds a token: %q", files)
	}
}

// A profile with include_user_tokens gives its tasks' sessions the creator's own credential of
// the provider the harness takes, as the placeholder the proxy swaps; without it, none.
func TestProfileIncludeUserTokensGivesTasksTheCreatorsCredentialAsAPlaceholder(t *testing.T) {
	o := newOAuthProxyStack(t)
	ctx := context.Background()
	profiles := appv1connect.NewProfileServiceClient(httpClient, o.rpcURL(), auth.WithKey(o.admin))
	tasks := appv1connect.NewTaskServiceClient(httpClient, o.rpcURL(), auth.WithKey(o.admin))
	broker := appv1connect.NewOAuthCredentialServiceClient(httpClient, o.rpcURL())
	for _, tc := range []struct {
		name    string
		include bool
	}{{"included", true}, {"not included", false}} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := profiles.CreateProfile(ctx, connect.NewRequest(&appv1.CreateProfileRequest{
				Name: tc.name, ImageId: o.sb.Image, Harness: ptr("claude-code"), IncludeUserTokens: tc.include,
			}))
			if err != nil {
				t.Fatal(err)
			}
			created, err := tasks.CreateTask(ctx, connect.NewRequest(&appv1.CreateTaskRequest{
				ProfileId: p.Msg.GetProfile().GetId(), Prompt: ptr("hello"), DeferInitialPrompt: true,
			}))
			if err != nil {
				t.Fatal(err)
			}
			id := created.Msg.GetTask().GetSessions()[0].GetSessionId()
			token := strings.TrimSpace(o.sh(t, id, `echo "$HANGAR_OAUTH_BROKER_TOKEN"`))
			if !tc.include {
				if token != "" {
					t.Fatalf("a profile without include_user_tokens gave the session a broker token")
				}
				return
			}
			got, err := broker.FetchSessionCredential(ctx, connect.NewRequest(&appv1.FetchSessionCredentialRequest{SessionId: id, BrokerToken: token}))
			if err != nil {
				t.Fatal(err)
			}
			var f struct {
				ClaudeAiOauth struct {
					AccessToken string `json:"accessToken"`
				} `json:"claudeAiOauth"`
			}
			if err := json.Unmarshal(got.Msg.GetOpaqueBundle(), &f); err != nil || !strings.HasPrefix(f.ClaudeAiOauth.AccessToken, "hangar-placeholder-") {
				t.Fatalf("the task's session holds %q (%v), want a placeholder", got.Msg.GetOpaqueBundle(), err)
			}
			out := o.sh(t, id, `wget -q -O- --header "Authorization: Bearer `+f.ClaudeAiOauth.AccessToken+`" https://api.anthropic.com/v1/messages 2>&1; echo "exit=$?"`)
			if !strings.Contains(out, "reached api.anthropic.com") {
				t.Fatalf("the provider's API: %q", out)
			}
			if auths := o.anthropic.got(); len(auths) == 0 || auths[len(auths)-1] != "Bearer "+o.accessToken(t) {
				t.Fatalf("the API got %q, want the creator's real token", auths)
			}
		})
	}
}
