package e2e

import (
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/coder/websocket"

	"github.com/hangar-dev/hangar/composition"
	"github.com/hangar-dev/hangar/functions/sessions"
	appv1 "github.com/hangar-dev/hangar/gen/svc/app/v1"
	"github.com/hangar-dev/hangar/internal/appstest"
	"github.com/hangar-dev/hangar/internal/testkit"
	"github.com/hangar-dev/hangar/platform/auth"
	"github.com/hangar-dev/hangar/platform/httpapi"
	"github.com/hangar-dev/hangar/sandboxhosts/images/imagestest"
)

// anotherInstance serves a second API instance over the same emulator and hosts, as Cloud Run
// runs many, and returns a browser that reaches its app origins.
func (o *originStack) anotherInstance(t *testing.T) *http.Client {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	serveOn(t, ln, composition.New(composition.Deps{DB: o.sb.DB, Config: o.sb.Config, Bucket: o.sb.Bucket, Sealer: o.sb.Sealer, DefaultImage: o.sb.Image}))
	return browserAt(ln.Addr().String())
}

// signOutOfDashboard ends the dashboard session of cookie as the dashboard's Sign out does.
func (o *originStack) signOutOfDashboard(t *testing.T, cookie string) {
	t.Helper()
	p := o.get(t, http.MethodPost, o.url+"/api/auth/logout", map[string]string{
		"Cookie": auth.SessionCookie + "=" + cookie, "Origin": o.url, auth.CSRFHeader: "1"})
	if p.status != http.StatusOK {
		t.Fatalf("sign out: %d %q", p.status, p.body)
	}
}

// dialApp opens a WebSocket to ep's /ws through browser with headers and answers the status of
// its handshake; an open socket must echo.
func dialApp(t *testing.T, browser *http.Client, ep *appv1.AppEndpoint, query string, headers http.Header) int {
	t.Helper()
	ws, resp, err := websocket.Dial(t.Context(), strings.Replace(ep.GetOrigin(), "http://", "ws://", 1)+"/ws"+query,
		&websocket.DialOptions{HTTPClient: browser, HTTPHeader: headers})
	if err != nil {
		if resp == nil {
			t.Fatalf("dial: %v", err)
		}
		return resp.StatusCode
	}
	defer ws.CloseNow()
	if err := ws.Write(t.Context(), websocket.MessageText, []byte("ping")); err != nil {
		t.Fatal(err)
	}
	if _, got, err := ws.Read(t.Context()); err != nil || string(got) != "echo: ping" {
		t.Fatalf("read %q %v", got, err)
	}
	_ = ws.Close(websocket.StatusNormalClosure, "")
	return http.StatusSwitchingProtocols
}

// TestSecurityAppGrantsAreUsedOnceAndEndWithTheirSignIn replays a leaked app token and a kept
// app cookie the ways an attacker would, against two API instances over one emulator: a token
// opens the app once, and a cookie ends with the dashboard session or API key it came from,
// and with its session.
func TestSecurityAppGrantsAreUsedOnceAndEndWithTheirSignIn(t *testing.T) {
	o := newOriginStack(t)
	instanceB := o.anotherInstance(t)
	secondBrowser := browserAt(strings.TrimPrefix(o.url, "http://"))
	image := imagestest.Push(t, o.sb.Registry, "test/apps", appstest.Image(t))
	id := o.create(t, &appv1.CreateSessionRequest{ImageUri: image, Apps: []*appv1.AppEndpoint{{Hostname: "web", Port: 8080}}})
	o.sh(t, id, "fakeapp --listen 127.0.0.1:8080 >/dev/null 2>&1 &")
	got, err := o.svc.GetSession(t.Context(), connect.NewRequest(&appv1.GetSessionRequest{SessionId: id}))
	if err != nil {
		t.Fatal(err)
	}
	web := got.Msg.GetSession().GetApps()[0]
	testkit.Eventually(t, 30*time.Second, "the app answering at its origin", func() (bool, string) {
		p := o.get(t, http.MethodGet, web.GetOrigin()+"/", map[string]string{httpapi.APIKeyHeader: o.admin})
		return p.status == http.StatusOK, p.body
	})
	withCookie := func(c *http.Cookie) map[string]string { return map[string]string{"Cookie": "hangar_app=" + c.Value} }
	// opens asserts the app answers browser with cookie, as it must before each attack.
	opens := func(t *testing.T, browser *http.Client, c *http.Cookie) {
		t.Helper()
		if p := browse(t, browser, http.MethodGet, web.GetOrigin()+"/", withCookie(c)); p.status != http.StatusOK || !strings.Contains(p.body, "fakeapp saw GET") {
			t.Fatalf("the app's cookie before the attack: %d %q", p.status, p.body)
		}
	}

	t.Run("the legitimate flow: path route, token, cookie, page and WebSocket", func(t *testing.T) {
		cookie, landing := o.signInToApp(t, web, "a?b=1")
		if p := o.get(t, http.MethodGet, landing, withCookie(cookie)); p.status != http.StatusOK || !strings.Contains(p.body, "fakeapp saw GET /a?b=1") {
			t.Fatalf("the app's page: %d %q", p.status, p.body)
		}
		if got := dialApp(t, o.browser, web, "", http.Header{"Cookie": {"hangar_app=" + cookie.Value}, "Origin": {web.GetOrigin()}}); got != http.StatusSwitchingProtocols {
			t.Errorf("a WebSocket with the app's cookie: %d", got)
		}
		// A WebSocket may carry a fresh token itself, once.
		token := o.token(t, web)
		if got := dialApp(t, instanceB, web, "?"+sessions.AppTokenParam+"="+token, nil); got != http.StatusSwitchingProtocols {
			t.Errorf("a WebSocket with a fresh token: %d", got)
		}
	})

	for _, tc := range []struct {
		name string
		// attack replays the attack after setting it up, and answers the attacker's answer.
		attack func(t *testing.T) page
		want   int
		says   string
	}{
		{"a token replayed by a second browser after the first traded it", func(t *testing.T) page {
			to := o.tokenURL(t, o.dashboardCookie, web, "")
			o.tradeToken(t, o.browser, to, web)
			return browse(t, secondBrowser, http.MethodGet, to, nil)
		}, http.StatusUnauthorized, "already used"},
		{"a token replayed in a browser's navigation: a page linking to the path route", func(t *testing.T) page {
			to := o.tokenURL(t, o.dashboardCookie, web, "")
			o.tradeToken(t, o.browser, to, web)
			p := browse(t, secondBrowser, http.MethodGet, to, map[string]string{"Sec-Fetch-Mode": "navigate", "Sec-Fetch-Site": "none"})
			if ct := p.header.Get("Content-Type"); !strings.HasPrefix(ct, "text/html") || !strings.Contains(p.body, `href="`+o.url+web.GetUrlPath()+`"`) {
				t.Errorf("the refusal is %q: %q, want a page linking to the path route", ct, p.body)
			}
			return p
		}, http.StatusUnauthorized, "Open the app again from the dashboard"},
		{"a token replayed on another instance", func(t *testing.T) page {
			to := o.tokenURL(t, o.dashboardCookie, web, "")
			o.tradeToken(t, o.browser, to, web)
			return browse(t, instanceB, http.MethodGet, to, nil)
		}, http.StatusUnauthorized, "already used"},
		{"a token a WebSocket used, replayed in a navigation", func(t *testing.T) page {
			token := o.token(t, web)
			if got := dialApp(t, o.browser, web, "?"+sessions.AppTokenParam+"="+token, nil); got != http.StatusSwitchingProtocols {
				t.Fatalf("the first use, a WebSocket: %d", got)
			}
			return browse(t, secondBrowser, http.MethodGet, web.GetOrigin()+"/?"+sessions.AppTokenParam+"="+token, nil)
		}, http.StatusUnauthorized, "already used"},
		{"a token a navigation traded, replayed by a WebSocket on another instance", func(t *testing.T) page {
			token := o.token(t, web)
			o.tradeToken(t, o.browser, web.GetOrigin()+"/?"+sessions.AppTokenParam+"="+token, web)
			return page{status: dialApp(t, instanceB, web, "?"+sessions.AppTokenParam+"="+token, nil)}
		}, http.StatusUnauthorized, ""},
		{"a token minted before the dashboard sign-out, traded after", func(t *testing.T) page {
			dashboard := o.signInToDashboard(t)
			to := o.tokenURL(t, dashboard, web, "")
			o.signOutOfDashboard(t, dashboard)
			return browse(t, secondBrowser, http.MethodGet, to, nil)
		}, http.StatusUnauthorized, "has ended"},
		{"an app cookie after the dashboard sign-out", func(t *testing.T) page {
			dashboard := o.signInToDashboard(t)
			cookie, _ := o.tradeToken(t, o.browser, o.tokenURL(t, dashboard, web, ""), web)
			opens(t, o.browser, cookie)
			o.signOutOfDashboard(t, dashboard)
			return o.get(t, http.MethodGet, web.GetOrigin()+"/", withCookie(cookie))
		}, http.StatusUnauthorized, "has ended"},
		{"an app cookie after the dashboard sign-out, on another instance", func(t *testing.T) page {
			dashboard := o.signInToDashboard(t)
			cookie, _ := o.tradeToken(t, o.browser, o.tokenURL(t, dashboard, web, ""), web)
			opens(t, instanceB, cookie) // instance B now holds the sign-in in its cache
			o.signOutOfDashboard(t, dashboard)
			var p page
			// Instance B learns within its credential cache's TTL (HANGAR_AUTH_CACHE_TTL).
			testkit.Eventually(t, time.Minute, "instance B refusing the cookie", func() (bool, string) {
				p = browse(t, instanceB, http.MethodGet, web.GetOrigin()+"/", withCookie(cookie))
				return p.status != http.StatusOK, p.body
			})
			return p
		}, http.StatusUnauthorized, "has ended"},
		{"an app cookie after its API key is revoked", func(t *testing.T) page {
			key := o.mintKey(t, "keyholder@example.com", true)
			link := o.get(t, http.MethodGet, o.url+web.GetUrlPath()+"?"+"api_key="+key, map[string]string{"Sec-Fetch-Mode": "navigate", "Sec-Fetch-Site": "none"})
			to := link.header.Get("Location")
			if link.status != http.StatusSeeOther || !strings.HasPrefix(to, web.GetOrigin()+"/") || strings.Contains(to, key) {
				t.Fatalf("a link with the key answered %d to %q, want 303 to the origin with a token, without the key", link.status, to)
			}
			cookie, _ := o.tradeToken(t, o.browser, to, web)
			opens(t, o.browser, cookie)
			if p := o.get(t, http.MethodPost, o.url+"/api/auth/logout", map[string]string{httpapi.APIKeyHeader: key}); p.status != http.StatusOK {
				t.Fatalf("revoke the key: %d %q", p.status, p.body)
			}
			return o.get(t, http.MethodGet, web.GetOrigin()+"/", withCookie(cookie))
		}, http.StatusUnauthorized, "has ended"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := tc.attack(t)
			if p.status != tc.want || strings.Contains(p.body, "fakeapp") || !strings.Contains(p.body, tc.says) {
				t.Fatalf("%d %q, want %d saying %q", p.status, p.body, tc.want, tc.says)
			}
		})
	}

	t.Run("a navigation with a cookie whose sign-in ended is sent to sign in again", func(t *testing.T) {
		dashboard := o.signInToDashboard(t)
		cookie, _ := o.tradeToken(t, o.browser, o.tokenURL(t, dashboard, web, ""), web)
		o.signOutOfDashboard(t, dashboard)
		h := withCookie(cookie)
		h["Sec-Fetch-Mode"], h["Sec-Fetch-Site"] = "navigate", "none"
		p := o.get(t, http.MethodGet, web.GetOrigin()+"/x", h)
		if want := o.url + httpapi.AppURLPath(id, "web") + "x"; p.status != http.StatusSeeOther || p.header.Get("Location") != want {
			t.Fatalf("%d to %q, want 303 to %s", p.status, p.header.Get("Location"), want)
		}
	})
	t.Run("an app cookie of an evicted, then deleted, session", func(t *testing.T) {
		cookie, _ := o.signInToApp(t, web, "")
		opens(t, o.browser, cookie)
		if _, err := o.svc.Snapshot(t.Context(), connect.NewRequest(&appv1.SnapshotRequest{SessionId: id})); err != nil {
			t.Fatal(err)
		}
		if _, err := o.svc.EvictLocal(t.Context(), connect.NewRequest(&appv1.EvictLocalRequest{SessionId: id})); err != nil {
			t.Fatal(err)
		}
		for name, browser := range map[string]*http.Client{"here": o.browser, "on another instance": instanceB} {
			if p := browse(t, browser, http.MethodGet, web.GetOrigin()+"/", withCookie(cookie)); p.status != http.StatusBadRequest || !strings.Contains(p.body, "failed_precondition") || !strings.Contains(p.body, "evicted") {
				t.Errorf("evicted, %s: %d %q, want failed_precondition (400) naming its state", name, p.status, p.body)
			}
		}
		if _, err := o.svc.DeleteSession(t.Context(), connect.NewRequest(&appv1.DeleteSessionRequest{SessionId: id})); err != nil {
			t.Fatal(err)
		}
		for name, browser := range map[string]*http.Client{"here": o.browser, "on another instance": instanceB} {
			if p := browse(t, browser, http.MethodGet, web.GetOrigin()+"/", withCookie(cookie)); p.status != http.StatusNotFound || strings.Contains(p.body, "fakeapp") {
				t.Errorf("deleted, %s: %d %q, want 404", name, p.status, p.body)
			}
		}
	})
}
