package main

import (
	"context"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"

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

// oauthServer is a real API server whose provider registry has "acme", the loopback provider,
// and whose client commands run as alice.
type oauthServer struct {
	url      string
	provider *oauthtest.Provider
	sessions *auth.WebSessions
	users    *auth.Users
}

func serveOAuth(t *testing.T) *oauthServer {
	t.Helper()
	db, _ := testenv.Firestore(t)
	_, sealer := testenv.Keyset(t)
	p := oauthtest.New(t)
	store := secrets.New(db, sealer, time.Now, secrets.Limits{MaxValueBytes: 4096, MaxSecrets: 10})
	for name, value := range map[string]string{"ACME_CLIENT_ID": p.ClientID, "ACME_CLIENT_SECRET": p.ClientSecret} {
		put := secrets.Put{Name: name, Value: value, Access: &secrets.Access{Visibility: secrets.AllUsers}, By: "user_root"}
		if _, _, err := store.Put(context.Background(), put); err != nil {
			t.Fatal(err)
		}
	}
	cfg := config.Default()
	cfg.OAuthProviders = p.RegistryJSON("acme", "ACME_CLIENT_ID", "ACME_CLIENT_SECRET")
	cfg.Egress = egress.MustParse("127.0.0.1")
	serveCLI(t, composition.Deps{DB: db, Config: cfg, Sealer: sealer, LoopbackProviders: true}, "alice@example.com")
	return &oauthServer{url: envOr("HANGAR_URL", ""), provider: p, sessions: auth.NewWebSessions(db, nil), users: auth.NewUsers(db)}
}

// startHangar runs a command in the background; its output grows in out and its end is sent on
// the channel.
func startHangar(args ...string) (*testkit.SyncBuffer, <-chan error) {
	return startHangarContext(context.Background(), args...)
}

// startHangarContext is startHangar with the command's context ctx (cancelled: as by Ctrl-C).
func startHangarContext(ctx context.Context, args ...string) (*testkit.SyncBuffer, <-chan error) {
	out := &testkit.SyncBuffer{}
	done := make(chan error, 1)
	root := newRootCmd()
	root.SetOut(out)
	root.SetErr(out)
	root.SetArgs(args)
	go func() { done <- root.ExecuteContext(ctx) }()
	return out, done
}

func waitOutput(t *testing.T, out *testkit.SyncBuffer, re *regexp.Regexp) []string {
	t.Helper()
	var m []string
	testkit.Eventually(t, 30*time.Second, "output matching "+re.String(), func() (bool, string) {
		m = re.FindStringSubmatch(out.String())
		return m != nil, out.String()
	})
	return m
}

func waitDone(t *testing.T, out *testkit.SyncBuffer, done <-chan error) {
	t.Helper()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("hangar: %v\n%s", err, out.String())
		}
	case <-time.After(60 * time.Second):
		t.Fatalf("hangar did not end:\n%s", out.String())
	}
}

// `hangar credentials connect` runs a device flow to its end through a real server: it shows
// the provider's code, waits while the provider answers authorization_pending, and names the
// connected account; list shows it and disconnect drops it.
func TestCredentialsConnectByDeviceFlowThenListAndDisconnect(t *testing.T) {
	s := serveOAuth(t)
	out, done := startHangar("credentials", "connect", "acme", "--no-browser", "--poll-interval", "100ms")
	waitOutput(t, out, regexp.MustCompile(`Open http://\S+/activate and enter the code\n\n +WDJB-MJHT\n`))
	s.provider.Script("authorization_pending", "token")
	waitDone(t, out, done)
	if !strings.Contains(out.String(), "Connected acme as alice@example.com") {
		t.Fatalf("connect output:\n%s", out.String())
	}
	if polls, _ := s.provider.Counts(); polls < 2 {
		t.Fatalf("the provider answered %d polls, want the pending one and the token", polls)
	}
	if r := runHangar(t, "", "credentials", "list"); r.err != nil || !regexp.MustCompile(`acme +connected +alice@example.com`).MatchString(r.out) {
		t.Fatalf("list: %v\n%s%s", r.err, r.out, r.errOut)
	}
	if r := runHangar(t, "", "credentials", "disconnect", "acme"); r.err != nil || r.out != "disconnected acme\n" {
		t.Fatalf("disconnect: %v\n%s%s", r.err, r.out, r.errOut)
	}
	if r := runHangar(t, "", "credentials", "list"); r.err != nil || strings.Contains(r.out, " connected ") {
		t.Fatalf("list after disconnect: %v\n%s", r.err, r.out)
	}
	for _, leak := range []string{"SECRET", s.provider.ClientSecret} {
		if strings.Contains(out.String(), leak) {
			t.Fatalf("the CLI showed %q:\n%s", leak, out.String())
		}
	}
}

// A device flow the user denies ends the command with the flow's error code.
func TestCredentialsConnectFailsWhenTheProviderDenies(t *testing.T) {
	s := serveOAuth(t)
	out, done := startHangar("credentials", "connect", "acme", "--no-browser", "--poll-interval", "100ms")
	waitOutput(t, out, regexp.MustCompile(`WDJB-MJHT`))
	s.provider.Script("access_denied")
	select {
	case err := <-done:
		if err == nil || exitCode(err) != 1 || !strings.Contains(err.Error(), "denied: access_denied") {
			t.Fatalf("connect of a denied flow: %v\n%s", err, out.String())
		}
	case <-time.After(60 * time.Second):
		t.Fatalf("connect did not end:\n%s", out.String())
	}
}

// `hangar credentials connect --redirect` prints the authorize URL and waits; the provider sends
// the browser to Hangar's callback page, which completes the flow only for the browser signed in
// (by its session cookie) as the person who began it: no cookie and another person's cookie are
// refused and leave the flow waiting, the right cookie connects, and a replay does nothing.
func TestCredentialsConnectByRedirectCompletesOnlyForTheSignedInOwner(t *testing.T) {
	s := serveOAuth(t)
	out, done := startHangar("credentials", "connect", "acme", "--redirect", "--no-browser", "--poll-interval", "100ms")
	m := waitOutput(t, out, regexp.MustCompile(`approve:\n\n +(\S+)\n`))
	code, state := s.provider.Authorize(m[1])
	callback := s.url + httpapi.OAuthCallbackPath + "?code=" + code + "&state=" + state

	cookie := func(email string) string {
		u, err := s.users.EnsureHuman(context.Background(), email, "", time.Now())
		if err != nil {
			t.Fatal(err)
		}
		token, err := s.sessions.Create(context.Background(), u.ID, false, time.Now(), time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		return token
	}
	visit := func(token string) (int, string) {
		return testkit.GetWithCookie(t, callback, auth.SessionCookie, token)
	}
	for _, tc := range []struct {
		name, cookie, want string
		status             int
	}{
		{name: "no cookie", status: http.StatusUnauthorized, want: "Sign in to Hangar first"},
		{name: "another person's cookie", cookie: cookie("bob@example.com"), status: http.StatusNotFound, want: "Sign-in not found"},
		{name: "the owner's cookie", cookie: cookie("alice@example.com"), status: http.StatusOK, want: "Hangar is connected to acme as alice@example.com"},
		{name: "the owner's cookie again (replay)", cookie: cookie("alice@example.com"), status: http.StatusBadRequest, want: "Sign-in failed"},
	} {
		if status, body := visit(tc.cookie); status != tc.status || !strings.Contains(body, tc.want) {
			t.Fatalf("%s: %d %s", tc.name, status, body)
		}
	}
	waitDone(t, out, done)
	if !strings.Contains(out.String(), "Connected acme as alice@example.com") {
		t.Fatalf("connect output:\n%s", out.String())
	}
	if _, exchanges := s.provider.Counts(); exchanges != 1 {
		t.Fatalf("the provider exchanged %d codes, want 1", exchanges)
	}
}

// `hangar logout --everywhere` revokes every browser session of the caller through a real
// server; --user is for admins only, and needs --everywhere.
func TestLogoutEverywhereRevokesTheCallersBrowserSessions(t *testing.T) {
	db, _ := testenv.Firestore(t)
	serveCLI(t, composition.Deps{DB: db, Config: config.Default()}, "alice@example.com")
	users, sessions := auth.NewUsers(db), auth.NewWebSessions(db, nil)
	alice, err := users.EnsureHuman(t.Context(), "alice@example.com", "", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if _, err := sessions.Create(t.Context(), alice.ID, false, time.Now(), time.Hour); err != nil {
			t.Fatal(err)
		}
	}
	if r := runHangar(t, "", "logout", "--everywhere"); r.err != nil || r.out != "Signed "+alice.ID+" out everywhere: 2 browser sessions revoked.\n" {
		t.Fatalf("logout --everywhere: %v %q %s", r.err, r.out, r.errOut)
	}
	if r := runHangar(t, "", "logout", "--everywhere", "--user", "user_someone_else"); r.code != exitPermissionDenied {
		t.Fatalf("logout --everywhere --user as a non-admin: exit %d %s", r.code, r.msg())
	}
	if r := runHangar(t, "", "logout", "--user", alice.ID); r.code != exitInvalidArgument {
		t.Fatalf("logout --user without --everywhere: exit %d %s", r.code, r.msg())
	}
}

// A connect the user interrupts cancels its flow, so the server stops polling the provider.
func TestCredentialsConnectInterruptedCancelsTheFlow(t *testing.T) {
	s := serveOAuth(t)
	ctx, interrupt := context.WithCancel(context.Background())
	out, done := startHangarContext(ctx, "credentials", "connect", "acme", "--no-browser", "--poll-interval", "100ms")
	waitOutput(t, out, regexp.MustCompile(`WDJB-MJHT`))
	s.provider.Script("authorization_pending")
	interrupt()
	select {
	case <-done:
	case <-time.After(60 * time.Second):
		t.Fatalf("connect did not end:\n%s", out.String())
	}
	m := regexp.MustCompile(`Cancelled the flow (\S+)\.`).FindStringSubmatch(out.String())
	if m == nil {
		t.Fatalf("connect did not cancel its flow:\n%s", out.String())
	}
	c := appv1connect.NewOAuthCredentialServiceClient(http.DefaultClient, s.url+"/rpc", auth.WithKey(envOr("HANGAR_API_KEY", "")))
	f, err := c.GetFlow(context.Background(), connect.NewRequest(&appv1.GetFlowRequest{Subject: ownSubject, FlowId: m[1]}))
	if err != nil || f.Msg.GetFlow().GetStatus() != "cancelled" {
		t.Fatalf("the flow after the interrupt: %v %v", f, err)
	}
}
