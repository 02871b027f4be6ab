package e2e

import (
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"gocloud.dev/blob/memblob"

	"github.com/hangar-dev/hangar/composition"
	appv1 "github.com/hangar-dev/hangar/gen/svc/app/v1"
	"github.com/hangar-dev/hangar/gen/svc/app/v1/appv1connect"
	"github.com/hangar-dev/hangar/internal/oauthtest"
	"github.com/hangar-dev/hangar/internal/testenv"
	"github.com/hangar-dev/hangar/internal/testkit"
	"github.com/hangar-dev/hangar/platform/auth"
	"github.com/hangar-dev/hangar/platform/config"
	"github.com/hangar-dev/hangar/platform/egress"
	"github.com/hangar-dev/hangar/platform/httpapi"
	"github.com/hangar-dev/hangar/records/secrets"
)

// The dashboard connects a provider by a redirect flow, signed in by its session cookie only: it
// begins the flow by a Connect call with the cookie, the provider sends the browser to Hangar's
// callback page, and the page completes the flow for that browser. Another person's browser
// opening the same callback URL first is told the sign-in is not theirs and leaves the flow
// waiting; no browser at all is asked to sign in.
func TestDashboardCompletesARedirectFlowThroughTheCallbackPageByItsCookie(t *testing.T) {
	db, _ := testenv.Firestore(t)
	_, sealer := testenv.Keyset(t)
	p := oauthtest.New(t)
	store := secrets.New(db, sealer, time.Now, secrets.Limits{MaxValueBytes: 4096, MaxSecrets: 10})
	for name, value := range map[string]string{"ACME_CLIENT_ID": p.ClientID, "ACME_CLIENT_SECRET": p.ClientSecret} {
		if _, _, err := store.Put(t.Context(), secrets.Put{Name: name, Value: value, Access: &secrets.Access{Visibility: secrets.AllUsers}, By: "user_root"}); err != nil {
			t.Fatal(err)
		}
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	url := "http://" + ln.Addr().String()
	cfg := config.Default()
	cfg.SignIn.PublicURL, cfg.SignIn.DevSignIn, cfg.SignIn.DevAdminEmail = url, true, "admin@hangar.local"
	cfg.OAuthProviders = p.RegistryJSON("acme", "ACME_CLIENT_ID", "ACME_CLIENT_SECRET")
	cfg.Egress = egress.MustParse("127.0.0.1")
	a := composition.New(composition.Deps{DB: db, Config: cfg, Bucket: memblob.OpenBucket(nil), Sealer: sealer, LoopbackProviders: true})
	srv := composition.NewServer(a.Handler())
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })

	// The admin signs in by the dev route; bob has a session of his own.
	adminCookie := devSignIn(t, testkit.NoRedirects(nil), url).Value
	bob, err := a.Users().EnsureHuman(t.Context(), "bob@example.com", "", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	bobCookie, err := auth.NewWebSessions(db, nil).Create(t.Context(), bob.ID, false, time.Now(), time.Hour)
	if err != nil {
		t.Fatal(err)
	}

	oauth := appv1connect.NewOAuthCredentialServiceClient(http.DefaultClient, url+httpapi.RPCPrefix, withCookie(adminCookie, url))
	own := &appv1.OAuthSubject{Kind: appv1.OauthSubjectKind_OAUTH_SUBJECT_KIND_USER}
	begun, err := oauth.BeginRedirectFlow(t.Context(), connect.NewRequest(&appv1.BeginRedirectFlowRequest{
		Subject: own, Provider: "acme", RedirectUri: url + httpapi.OAuthCallbackPath,
	}))
	if err != nil {
		t.Fatalf("begin the redirect flow with the cookie: %v", err)
	}
	code, state := p.Authorize(begun.Msg.GetAuthorizeUrl())
	callback := url + httpapi.OAuthCallbackPath + "?code=" + code + "&state=" + state
	visit := func(cookie string) (int, string) {
		return testkit.GetWithCookie(t, callback, auth.SessionCookie, cookie)
	}
	for _, step := range []struct {
		name, cookie, want string
		status             int
	}{
		{"no cookie", "", "Sign in to Hangar first", http.StatusUnauthorized},
		{"bob's cookie", bobCookie, "Sign-in not found", http.StatusNotFound},
		{"the admin's cookie", adminCookie, "Hangar is connected to acme as alice@example.com", http.StatusOK},
	} {
		if status, body := visit(step.cookie); status != step.status || !strings.Contains(body, step.want) {
			t.Fatalf("%s: %d %s", step.name, status, body)
		}
	}
	list, err := oauth.ListCredentials(t.Context(), connect.NewRequest(&appv1.ListCredentialsRequest{Subject: own}))
	if err != nil || len(list.Msg.GetCredentials()) != 1 || !list.Msg.GetCredentials()[0].GetConnected() {
		t.Fatalf("the admin's credentials after the callback: %v %v", list, err)
	}
	bobs := appv1connect.NewOAuthCredentialServiceClient(http.DefaultClient, url+httpapi.RPCPrefix, withCookie(bobCookie, url))
	if l, err := bobs.ListCredentials(t.Context(), connect.NewRequest(&appv1.ListCredentialsRequest{Subject: own})); err != nil || len(l.Msg.GetCredentials()) != 0 {
		t.Fatalf("bob's credentials: %v %v", l, err)
	}
}
