package e2e

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/coder/websocket"

	"github.com/hangar-dev/hangar/composition"
	"github.com/hangar-dev/hangar/functions/sessions"
	appv1 "github.com/hangar-dev/hangar/gen/svc/app/v1"
	"github.com/hangar-dev/hangar/internal/appstest"
	"github.com/hangar-dev/hangar/internal/testenv"
	"github.com/hangar-dev/hangar/internal/testkit"
	"github.com/hangar-dev/hangar/platform/auth"
	"github.com/hangar-dev/hangar/platform/httpapi"
	"github.com/hangar-dev/hangar/sandboxhosts/images/imagestest"
)

// appsDomain is where the tests' apps get their origins: *.localhost, as under `hangar dev`.
const appsDomain = "apps.localhost"

// originStack is a sandbox stack whose API serves apps at origins of their own under
// appsDomain, signs the dashboard in (the dev sign-in) at its own address, and a browser of it:
// dashboardCookie is that browser's dashboard session cookie.
type originStack struct {
	*sandboxStack
	dashboardCookie string
	// browser reaches every *.apps.localhost host at the API's address, as a browser resolves
	// *.localhost to loopback; it follows no redirect.
	browser *http.Client
}

func newOriginStack(t *testing.T) *originStack {
	t.Helper()
	db, _ := testenv.Firestore(t)
	sb := testenv.NewSandboxes(t, db)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	base := "http://" + ln.Addr().String()
	sb.Config.SignIn.PublicURL, sb.Config.SignIn.DevSignIn, sb.Config.SignIn.DevAdminEmail = base, true, "admin@hangar.local"
	sb.Config.Apps.Domain = appsDomain
	s := &sandboxStack{sb: sb}
	s.hosts = append(s.hosts, sb.StartHost(t, "host-a"))
	s.stack = serveOn(t, ln, composition.New(composition.Deps{DB: sb.DB, Config: sb.Config, Bucket: sb.Bucket, Sealer: sb.Sealer, DefaultImage: sb.Image}))
	s.svc = s.sessions(s.admin)

	o := &originStack{sandboxStack: s, browser: browserAt(ln.Addr().String())}
	o.dashboardCookie = o.signInToDashboard(t)
	return o
}

// browserAt is a browser that reaches every *.localhost host at addr, as a browser resolves
// *.localhost to loopback; it follows no redirect.
func browserAt(addr string) *http.Client {
	dial := (&net.Dialer{}).DialContext
	c := testkit.NoRedirects(nil)
	c.Timeout = 30 * time.Second
	c.Transport = &http.Transport{DialContext: func(ctx context.Context, network, a string) (net.Conn, error) {
		if host, _, _ := net.SplitHostPort(a); strings.HasSuffix(host, ".localhost") {
			a = addr
		}
		return dial(ctx, network, a)
	}}
	return c
}

// signInToDashboard signs a new dashboard session in (the dev sign-in) and returns its cookie.
func (o *originStack) signInToDashboard(t *testing.T) string {
	t.Helper()
	c := devSignIn(t, o.browser, o.url)
	// Host-only: a browser never sends it to another host, an app's included.
	if c.Domain != "" || !c.HttpOnly {
		t.Fatalf("the dashboard's cookie is %+v, want host-only and HttpOnly", c)
	}
	return c.Value
}

// page is one answer as a browser gets it.
type page struct {
	status int
	header http.Header
	body   string
}

// get requests rawURL as the browser, with headers, and reads the answer.
func (o *originStack) get(t *testing.T, method, rawURL string, headers map[string]string) page {
	t.Helper()
	return browse(t, o.browser, method, rawURL, headers)
}

// browse requests rawURL as browser, with headers, and reads the answer.
func browse(t *testing.T, browser *http.Client, method, rawURL string, headers map[string]string) page {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, rawURL, nil)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	resp, err := browser.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return page{resp.StatusCode, resp.Header, string(b)}
}

// signInToApp opens the app the way the dashboard does: its url_path on the API's origin with
// the dashboard's cookie, then the redirect to its origin, whose token is traded for the app's
// cookie. It returns that cookie and where the browser lands.
func (o *originStack) signInToApp(t *testing.T, ep *appv1.AppEndpoint, rest string) (cookie *http.Cookie, landing string) {
	t.Helper()
	return o.tradeToken(t, o.browser, o.tokenURL(t, o.dashboardCookie, ep, rest), ep)
}

// tokenURL is where the path route sends a browser signed in to the dashboard by
// dashboardCookie that opens ep (with rest): the app's origin with a fresh token.
func (o *originStack) tokenURL(t *testing.T, dashboardCookie string, ep *appv1.AppEndpoint, rest string) string {
	t.Helper()
	first := o.get(t, http.MethodGet, o.url+ep.GetUrlPath()+rest, map[string]string{"Cookie": auth.SessionCookie + "=" + dashboardCookie})
	to := first.header.Get("Location")
	if first.status != http.StatusSeeOther || !strings.HasPrefix(to, ep.GetOrigin()+"/") || !strings.Contains(to, sessions.AppTokenParam+"=") {
		t.Fatalf("the path route answered %d to %q, want 303 to %s with a token", first.status, to, ep.GetOrigin())
	}
	return to
}

// tradeToken has browser follow tokenURL to ep's origin, which trades its token for the app's
// cookie; it returns that cookie and where the browser lands.
func (o *originStack) tradeToken(t *testing.T, browser *http.Client, tokenURL string, ep *appv1.AppEndpoint) (cookie *http.Cookie, landing string) {
	t.Helper()
	second := browse(t, browser, http.MethodGet, tokenURL, nil)
	for _, c := range (&http.Response{Header: second.header}).Cookies() {
		if c.Name == "hangar_app" {
			cookie = c
		}
	}
	landing = second.header.Get("Location")
	if second.status != http.StatusSeeOther || cookie == nil || !cookie.HttpOnly || cookie.Domain != "" || strings.Contains(landing, sessions.AppTokenParam) {
		t.Fatalf("the token's trade answered %d, cookie %+v, to %q; want 303 with a host-only HttpOnly cookie, the token gone", second.status, cookie, landing)
	}
	return cookie, ep.GetOrigin() + landing
}

func TestAppsGetOriginsOfTheirOwn(t *testing.T) {
	o := newOriginStack(t)
	image := imagestest.Push(t, o.sb.Registry, "test/apps", appstest.Image(t))
	id := o.create(t, &appv1.CreateSessionRequest{ImageUri: image, Apps: []*appv1.AppEndpoint{{Hostname: "web", Port: 8080}, {Hostname: "other", Port: 8081}}})
	o.sh(t, id, "fakeapp --listen 127.0.0.1:8080 >/dev/null 2>&1 & fakeapp --listen 127.0.0.1:8081 >/dev/null 2>&1 &")
	got, err := o.svc.GetSession(t.Context(), connect.NewRequest(&appv1.GetSessionRequest{SessionId: id}))
	if err != nil {
		t.Fatal(err)
	}
	web, other := got.Msg.GetSession().GetApps()[0], got.Msg.GetSession().GetApps()[1]
	testkit.Eventually(t, 30*time.Second, "the app answering at its origin", func() (bool, string) {
		p := o.get(t, http.MethodGet, web.GetOrigin()+"/", map[string]string{httpapi.APIKeyHeader: o.admin})
		return p.status == http.StatusOK, p.body
	})

	t.Run("two apps get different origins, neither the dashboard's", func(t *testing.T) {
		suffix := strings.TrimPrefix(id, "sess_") + "." + appsDomain
		if web.GetOrigin() != "http://web-"+suffix || other.GetOrigin() != "http://other-"+suffix {
			t.Fatalf("origins %q and %q, want http://web-%s and http://other-%s", web.GetOrigin(), other.GetOrigin(), suffix, suffix)
		}
	})

	cookie, landing := o.signInToApp(t, web, "deep/path?x=1")
	withCookie := func(extra map[string]string) map[string]string {
		h := map[string]string{"Cookie": "hangar_app=" + cookie.Value + "; " + auth.SessionCookie + "=" + o.dashboardCookie + "; theme=dark"}
		for k, v := range extra {
			h[k] = v
		}
		return h
	}
	t.Run("the app's cookie reaches the app, which sees neither it nor the dashboard's", func(t *testing.T) {
		if landing != web.GetOrigin()+"/deep/path?x=1" {
			t.Fatalf("landed at %q", landing)
		}
		p := o.get(t, http.MethodGet, landing, withCookie(nil))
		if p.status != http.StatusOK || !strings.Contains(p.body, "fakeapp saw GET /deep/path?x=1 host=web-") || !strings.Contains(p.body, `cookie="theme=dark"`) {
			t.Fatalf("%d %q", p.status, p.body)
		}
		if strings.Contains(p.body, cookie.Value) || strings.Contains(p.body, o.dashboardCookie) {
			t.Errorf("the app saw Hangar's cookies: %q", p.body)
		}
		if csp := p.header.Get("Content-Security-Policy"); strings.Contains(csp, "sandbox") {
			t.Errorf("an app on its own origin is sandboxed (%q): it would lose its own storage", csp)
		}
	})
	t.Run("requests without the app's token or cookie are refused", func(t *testing.T) {
		webToken := o.token(t, web)
		for _, tc := range []struct {
			name    string
			url     string
			headers map[string]string
		}{
			{"nothing", web.GetOrigin() + "/", nil},
			{"the dashboard's cookie", web.GetOrigin() + "/", map[string]string{"Cookie": auth.SessionCookie + "=" + o.dashboardCookie}},
			{"a forged token", web.GetOrigin() + "/?" + sessions.AppTokenParam + "=bm90LWEtdG9rZW4", nil},
			{"another app's token", other.GetOrigin() + "/?" + sessions.AppTokenParam + "=" + webToken, nil},
			{"another app's cookie", other.GetOrigin() + "/", map[string]string{"Cookie": "hangar_app=" + cookie.Value}},
			{"a token presented as the cookie", web.GetOrigin() + "/", map[string]string{"Cookie": "hangar_app=" + webToken}},
			{"the cookie presented as a token", web.GetOrigin() + "/?" + sessions.AppTokenParam + "=" + cookie.Value, nil},
		} {
			t.Run(tc.name, func(t *testing.T) {
				if p := o.get(t, http.MethodGet, tc.url, tc.headers); p.status != http.StatusUnauthorized || strings.Contains(p.body, "fakeapp") {
					t.Errorf("%d %q, want 401", p.status, p.body)
				}
			})
		}
		// A browser's navigation is sent to sign in through the dashboard instead.
		p := o.get(t, http.MethodGet, web.GetOrigin()+"/a?b=1", map[string]string{"Sec-Fetch-Mode": "navigate", "Sec-Fetch-Site": "none"})
		if want := o.url + strings.TrimSuffix(httpapi.AppURLPath(id, "web"), "/") + "/a?b=1"; p.status != http.StatusSeeOther || p.header.Get("Location") != want {
			t.Errorf("a navigation without the cookie: %d to %q, want 303 to %s", p.status, p.header.Get("Location"), want)
		}
		bob := o.mintKey(t, "bob@example.com", false)
		if p := o.get(t, http.MethodGet, web.GetOrigin()+"/", map[string]string{httpapi.APIKeyHeader: bob}); p.status != http.StatusNotFound {
			t.Errorf("another user's key: %d, want 404", p.status)
		}
		if p := o.get(t, http.MethodGet, o.url+web.GetUrlPath(), map[string]string{httpapi.APIKeyHeader: bob}); p.status != http.StatusNotFound {
			t.Errorf("another user's key on the path route: %d, want 404", p.status)
		}
	})
	t.Run("another app's pages cannot use the app's cookie", func(t *testing.T) {
		for _, tc := range []struct {
			name    string
			headers map[string]string
			want    int
		}{
			{"a fetch from a sibling app", map[string]string{"Origin": other.GetOrigin(), "Sec-Fetch-Site": "same-site", "Sec-Fetch-Mode": "cors"}, http.StatusForbidden},
			{"a no-cors load from a sibling app", map[string]string{"Sec-Fetch-Site": "same-site", "Sec-Fetch-Mode": "no-cors"}, http.StatusForbidden},
			{"a link followed from a sibling app", map[string]string{"Sec-Fetch-Site": "same-site", "Sec-Fetch-Mode": "navigate"}, http.StatusOK},
			{"the app's own fetch", map[string]string{"Origin": web.GetOrigin(), "Sec-Fetch-Site": "same-origin", "Sec-Fetch-Mode": "cors"}, http.StatusOK},
		} {
			t.Run(tc.name, func(t *testing.T) {
				if p := o.get(t, http.MethodGet, web.GetOrigin()+"/x", withCookie(tc.headers)); p.status != tc.want {
					t.Errorf("%d %q, want %d", p.status, p.body, tc.want)
				}
			})
		}
	})
	t.Run("a WebSocket through the app's origin, refused from another origin", func(t *testing.T) {
		wsURL := strings.Replace(web.GetOrigin(), "http://", "ws://", 1) + "/ws"
		dial := func(origin string) (*websocket.Conn, error) {
			c, _, err := websocket.Dial(t.Context(), wsURL, &websocket.DialOptions{HTTPClient: o.browser,
				HTTPHeader: http.Header{"Cookie": {"hangar_app=" + cookie.Value}, "Origin": {origin}}})
			return c, err
		}
		ws, err := dial(web.GetOrigin())
		if err != nil {
			t.Fatal(err)
		}
		defer ws.CloseNow()
		if err := ws.Write(t.Context(), websocket.MessageText, []byte("ping")); err != nil {
			t.Fatal(err)
		}
		if _, got, err := ws.Read(t.Context()); err != nil || string(got) != "echo: ping" {
			t.Fatalf("read %q %v", got, err)
		}
		_ = ws.Close(websocket.StatusNormalClosure, "")
		if c, err := dial(other.GetOrigin()); err == nil {
			c.CloseNow()
			t.Error("a sibling app's page opened a WebSocket with the app's cookie")
		}
	})
	t.Run("the dashboard's cookie cannot post to an app under the API's origin", func(t *testing.T) {
		p := o.get(t, http.MethodPost, o.url+web.GetUrlPath()+"form", map[string]string{"Cookie": auth.SessionCookie + "=" + o.dashboardCookie})
		if p.status != http.StatusForbidden || strings.Contains(p.body, "fakeapp") {
			t.Errorf("%d %q, want 403", p.status, p.body)
		}
	})
	t.Run("EnsureIde's endpoint has its own origin", func(t *testing.T) {
		ide, err := o.svc.EnsureIde(t.Context(), connect.NewRequest(&appv1.EnsureIdeRequest{SessionId: id}))
		if err != nil {
			t.Fatal(err)
		}
		ep := ide.Msg.GetEndpoint()
		if ep.GetOrigin() != "http://ide-"+strings.TrimPrefix(id, "sess_")+"."+appsDomain {
			t.Fatalf("EnsureIde's origin %q", ep.GetOrigin())
		}
		ideCookie, landing := o.signInToApp(t, ep, "")
		if p := o.get(t, http.MethodGet, landing, map[string]string{"Cookie": "hangar_app=" + ideCookie.Value}); p.status != http.StatusOK || !strings.Contains(p.body, "code-server saw GET /") {
			t.Errorf("the IDE at its origin: %d %q", p.status, p.body)
		}
	})
}

// token is a fresh app token for ep, as the path route's redirect carries it.
func (o *originStack) token(t *testing.T, ep *appv1.AppEndpoint) string {
	t.Helper()
	p := o.get(t, http.MethodGet, o.url+ep.GetUrlPath(), map[string]string{"Cookie": auth.SessionCookie + "=" + o.dashboardCookie})
	u, err := url.Parse(p.header.Get("Location"))
	if err != nil || u.Query().Get(sessions.AppTokenParam) == "" {
		t.Fatalf("no token in %q", p.header.Get("Location"))
	}
	return u.Query().Get(sessions.AppTokenParam)
}
