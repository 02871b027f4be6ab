package signin

import (
	"bytes"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/hangar-dev/hangar/gen/svc/app/v1/appv1connect"
	"github.com/hangar-dev/hangar/internal/oidctest"
	"github.com/hangar-dev/hangar/internal/testenv"
	"github.com/hangar-dev/hangar/internal/testkit"
	"github.com/hangar-dev/hangar/platform/auth"
	"github.com/hangar-dev/hangar/platform/clock"
	"github.com/hangar-dev/hangar/platform/config"
	"github.com/hangar-dev/hangar/platform/egress"
	"github.com/hangar-dev/hangar/platform/httpapi"
	"github.com/hangar-dev/hangar/records/secrets"
)

// TestMain fails the package when a query its tests ran needs a Firestore index production lacks.
func TestMain(m *testing.M) { os.Exit(testenv.MainCheckingIndexes(m)) }

const (
	clientID     = "hangar-test"
	clientSecret = "provider-client-secret-do-not-leak"
	adminEmail   = "ada@example.com"
)

// env is /api/auth served on loopback over the emulator, with a loopback OIDC provider, an
// admin-only RPC behind the auth interceptor (ApiKeyService, whose methods answer unimplemented
// here: reaching one means the caller got past authentication), and every response and log
// line recorded.
type env struct {
	url   string
	idp   *oidctest.Provider
	svc   *Service
	d     Deps
	clock *clock.Fake
	logs  *testkit.SyncBuffer
	rec   *recorder
}

func newEnv(t *testing.T, mutate ...func(*config.SignIn)) *env {
	t.Helper()
	db, _ := testenv.Firestore(t)
	_, sealer := testenv.Keyset(t)
	c := clock.NewFake(time.Now())
	e := &env{clock: c, logs: &testkit.SyncBuffer{}, rec: &recorder{}}
	e.idp = oidctest.New(t, clientID, clientSecret)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	e.url = "http://" + ln.Addr().String()
	cfg := config.Default().SignIn
	cfg.PublicURL, cfg.OIDCIssuer, cfg.OIDCClientID = e.url, e.idp.Issuer, clientID
	cfg.AllowedDomains, cfg.AdminEmail = []string{"example.com"}, adminEmail
	for _, m := range mutate {
		m(&cfg)
	}
	log := slog.New(slog.NewTextHandler(e.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	store := secrets.New(db, sealer, c.Now, secrets.Limits{MaxValueBytes: 1024, MaxSecrets: 10})
	if _, _, err := store.Put(t.Context(), secrets.Put{Name: cfg.OIDCClientSecret, Value: clientSecret}); err != nil {
		t.Fatal(err)
	}
	authn := auth.NewAuthenticator(db, c, time.Second, log)
	sessions := auth.NewWebSessions(db, authn)
	authn.AcceptSessions(sessions, PublicOrigins(cfg))
	e.d = Deps{
		DB: db, Authn: authn, Sessions: sessions, Users: auth.NewUsers(db), Keys: auth.NewKeys(db, authn),
		Secrets: store, Config: cfg, Clock: c, Log: log, Egress: egress.MustParse("127.0.0.1"), LoopbackHTTP: true,
	}
	e.svc = New(e.d)
	mux := http.NewServeMux()
	for p, h := range e.svc.Routes() {
		mux.Handle(p, h)
	}
	path, h := appv1connect.NewApiKeyServiceHandler(appv1connect.UnimplementedApiKeyServiceHandler{},
		connect.WithInterceptors(auth.Interceptor(authn)))
	mux.Handle("/rpc"+path, http.StripPrefix("/rpc", h))
	srv := &http.Server{Handler: e.rec.wrap(mux)}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return e
}

// browser is a cookie-keeping client that follows redirects except to the dashboard ("/").
func (e *env) browser(t *testing.T) *http.Client {
	t.Helper()
	jar, err := cookiejar.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	return &http.Client{Jar: jar, CheckRedirect: func(req *http.Request, _ []*http.Request) error {
		if strings.HasPrefix(req.URL.String(), e.url) && !strings.HasPrefix(req.URL.Path, httpapi.AuthPrefix) {
			return http.ErrUseLastResponse
		}
		return nil
	}}
}

// signIn signs person in with browser b through the provider and returns the last response.
func (e *env) signIn(t *testing.T, b *http.Client, person oidctest.Person) *http.Response {
	t.Helper()
	e.idp.SignIn(person)
	resp, err := b.Get(e.url + httpapi.LoginPath + "?return_to=/sessions")
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	return resp
}

// sessionCookie is the session cookie b holds for the server, "" for none.
func (e *env) sessionCookie(b *http.Client) string {
	u, _ := url.Parse(e.url)
	for _, c := range b.Jar.Cookies(u) {
		if c.Name == auth.SessionCookie {
			return c.Value
		}
	}
	return ""
}

// rpc calls the admin-only ListApiKeys with headers, answering the Connect code (0 for none:
// it never is, the handler being unimplemented).
func (e *env) rpc(t *testing.T, h http.Header) connect.Code {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, e.url+"/rpc"+appv1connect.ApiKeyServiceListApiKeysProcedure, strings.NewReader("{}"))
	if err != nil {
		t.Fatal(err)
	}
	req.Header = h.Clone()
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var body struct {
		Code string `json:"code"`
	}
	_ = json.NewDecoder(resp.Body).Decode(&body)
	var code connect.Code
	_ = code.UnmarshalText([]byte(body.Code))
	return code
}

// form posts values to path with headers and answers the response and its body.
func (e *env) form(t *testing.T, c *http.Client, path string, values url.Values, h http.Header) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, e.url+path, strings.NewReader(values.Encode()))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range h {
		req.Header[k] = v
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

func (e *env) get(t *testing.T, c *http.Client, path string) (*http.Response, string) {
	t.Helper()
	resp, err := c.Get(e.url + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

// sameOrigin are the headers Hangar's own page sends with a fetch.
func (e *env) sameOrigin(cookie string) http.Header {
	return http.Header{"Origin": {e.url}, "Cookie": {auth.SessionCookie + "=" + cookie}, "Connect-Protocol-Version": {"1"}}
}

var csrfField = regexp.MustCompile(`name="csrf" value="([0-9a-f]+)"`)

// recorder keeps every response the server wrote: headers and body.
type recorder struct {
	mu  sync.Mutex
	all []*recorded
}

type recorded struct {
	path   string
	header http.Header
	body   bytes.Buffer
}

func (r *recorder) wrap(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		rec := &recorded{path: req.URL.Path, header: w.Header()}
		r.mu.Lock()
		r.all = append(r.all, rec)
		r.mu.Unlock()
		h.ServeHTTP(teeWriter{w, rec}, req)
	})
}

type teeWriter struct {
	http.ResponseWriter
	rec *recorded
}

func (t teeWriter) Write(b []byte) (int, error) {
	t.rec.body.Write(b)
	return t.ResponseWriter.Write(b)
}
