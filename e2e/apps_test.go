package e2e

import (
	"bytes"
	"context"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/coder/websocket"

	"github.com/hangar-dev/hangar/functions/sessions"
	appv1 "github.com/hangar-dev/hangar/gen/svc/app/v1"
	"github.com/hangar-dev/hangar/gen/svc/app/v1/appv1connect"
	"github.com/hangar-dev/hangar/internal/appstest"
	"github.com/hangar-dev/hangar/internal/testenv"
	"github.com/hangar-dev/hangar/internal/testkit"
	"github.com/hangar-dev/hangar/platform/auth"
	"github.com/hangar-dev/hangar/platform/httpapi"
	"github.com/hangar-dev/hangar/sandboxhosts/images/imagestest"
)

// appsSession is a session of the apps test image (fakeapp as an app, code-server and
// chromium) declaring the apps web (8080, started) and down (8099, never started).
func appsSession(t *testing.T, s *sandboxStack) string {
	t.Helper()
	image := imagestest.Push(t, s.sb.Registry, "test/apps", appstest.Image(t))
	id := s.create(t, &appv1.CreateSessionRequest{ImageUri: image, Apps: []*appv1.AppEndpoint{
		{Hostname: "web", Port: 8080}, {Hostname: "down", Port: 8099},
	}})
	s.sh(t, id, "fakeapp --listen 127.0.0.1:8080 >/dev/null 2>&1 &")
	return id
}

func (s *stack) appURL(session, app, rest string) string {
	return s.url + httpapi.AppURLPath(session, app) + rest
}

func TestAppsThroughTheReverseProxy(t *testing.T) {
	s := newSandboxStack(t, 1, nil)
	id := appsSession(t, s)
	var page string
	testkit.Eventually(t, 30*time.Second, "the app answering through the proxy", func() (bool, string) {
		resp, body := fileRequest(t, http.MethodGet, s.appURL(id, "web", "hello?x=1"), s.admin, nil, nil)
		page = string(body)
		return resp.StatusCode == http.StatusOK, page
	})

	t.Run("the request reaches the app's port with its path and query, without Hangar's credentials", func(t *testing.T) {
		resp, body := fileRequest(t, http.MethodGet, s.appURL(id, "web", "deep/path?x=1&api_key="+url.QueryEscape(s.admin)), "", nil,
			map[string]string{"Cookie": "hangar_session=secret-cookie; theme=dark", httpapi.APIKeyHeader: s.admin})
		got := string(body)
		if resp.StatusCode != http.StatusOK || !strings.Contains(got, "fakeapp saw GET /deep/path?x=1 ") {
			t.Fatalf("%d %q", resp.StatusCode, got)
		}
		if strings.Contains(got, s.admin) || strings.Contains(got, "secret-cookie") || !strings.Contains(got, `cookie="theme=dark"`) {
			t.Errorf("the app saw Hangar's credentials: %q", got)
		}
		if !strings.Contains(got, `prefix="`+strings.TrimSuffix(httpapi.AppURLPath(id, "web"), "/")+`"`) {
			t.Errorf("no X-Forwarded-Prefix: %q", got)
		}
		// The app's page may not act as the API's origin in a browser.
		if csp := resp.Header.Get("Content-Security-Policy"); !strings.HasPrefix(csp, "sandbox ") || strings.Contains(csp, "allow-same-origin") {
			t.Errorf("Content-Security-Policy %q, want a sandbox without allow-same-origin", csp)
		}
	})
	t.Run("a POST body goes through", func(t *testing.T) {
		resp, body := fileRequest(t, http.MethodPost, s.appURL(id, "web", "form"), s.admin, []byte("a=1"), nil)
		if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), "saw POST /form") {
			t.Errorf("%d %q", resp.StatusCode, body)
		}
	})
	t.Run("an app that answers before reading a large body is still heard", func(t *testing.T) {
		resp, body := fileRequest(t, http.MethodPost, s.appURL(id, "web", "upload"), s.admin, bytes.Repeat([]byte("a"), 8<<20), nil)
		if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), "saw POST /upload") {
			t.Errorf("%d %q", resp.StatusCode, body)
		}
	})
	t.Run("a WebSocket upgrade goes through both ways", func(t *testing.T) {
		ws, _, err := websocket.Dial(t.Context(), s.appURL(id, "web", "ws"), &websocket.DialOptions{HTTPHeader: http.Header{httpapi.APIKeyHeader: {s.admin}}})
		if err != nil {
			t.Fatal(err)
		}
		defer ws.CloseNow()
		for _, msg := range []string{"ping", "pong"} {
			if err := ws.Write(t.Context(), websocket.MessageText, []byte(msg)); err != nil {
				t.Fatal(err)
			}
			_, got, err := ws.Read(t.Context())
			if err != nil || string(got) != "echo: "+msg {
				t.Fatalf("read %q %v, want echo: %s", got, err, msg)
			}
		}
		_ = ws.Close(websocket.StatusNormalClosure, "")
	})
	t.Run("an app nothing listens on is failed_precondition, an unknown app not_found", func(t *testing.T) {
		resp, body := fileRequest(t, http.MethodGet, s.appURL(id, "down", ""), s.admin, nil, nil)
		if !strings.Contains(string(body), "failed_precondition") || !strings.Contains(string(body), "8099") {
			t.Errorf("%d %s", resp.StatusCode, body)
		}
		resp, _ = fileRequest(t, http.MethodGet, s.appURL(id, "nope", ""), s.admin, nil, nil)
		if resp.StatusCode != http.StatusNotFound {
			t.Errorf("unknown app: %d, want 404", resp.StatusCode)
		}
	})
	t.Run("GetSession reports the apps as endpoints", func(t *testing.T) {
		got, err := s.svc.GetSession(t.Context(), connect.NewRequest(&appv1.GetSessionRequest{SessionId: id}))
		if err != nil {
			t.Fatal(err)
		}
		apps := got.Msg.GetSession().GetApps()
		if len(apps) != 2 || apps[0].GetHostname() != "web" || apps[0].GetPort() != 8080 || apps[0].GetUrlPath() != httpapi.AppURLPath(id, "web") {
			t.Errorf("apps = %v", apps)
		}
	})
	t.Run("EnsureIde and EnsureBrowser start the image's servers and serve them", func(t *testing.T) {
		ide, err := s.svc.EnsureIde(t.Context(), connect.NewRequest(&appv1.EnsureIdeRequest{SessionId: id}))
		if err != nil {
			t.Fatal(err)
		}
		if ide.Msg.GetPort() != sessions.IDEPort || ide.Msg.GetEndpoint().GetUrlPath() != httpapi.AppURLPath(id, sessions.IDEApp) {
			t.Errorf("EnsureIde = %v", ide.Msg)
		}
		resp, body := fileRequest(t, http.MethodGet, s.url+ide.Msg.GetEndpoint().GetUrlPath(), s.admin, nil, nil)
		if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), "code-server saw GET /") {
			t.Errorf("the IDE through the proxy: %d %q", resp.StatusCode, body)
		}
		again, err := s.svc.EnsureIde(t.Context(), connect.NewRequest(&appv1.EnsureIdeRequest{SessionId: id}))
		if err != nil || again.Msg.GetPort() != sessions.IDEPort {
			t.Errorf("EnsureIde again: %v %v", again, err)
		}
		if n := strings.TrimSpace(s.sh(t, id, "ps -o args | grep -c '^/usr/local/bin/code-server' || true")); n != "1" {
			t.Errorf("%s IDE servers run after two EnsureIde, want 1", n)
		}
		br, err := s.svc.EnsureBrowser(t.Context(), connect.NewRequest(&appv1.EnsureBrowserRequest{SessionId: id}))
		if err != nil {
			t.Fatal(err)
		}
		resp, body = fileRequest(t, http.MethodGet, s.url+br.Msg.GetEndpoint().GetUrlPath()+"json/version", s.admin, nil, nil)
		if br.Msg.GetPort() != sessions.BrowserPort || resp.StatusCode != http.StatusOK || !strings.Contains(string(body), "FakeChromium") {
			t.Errorf("the browser's DevTools through the proxy: %v %d %q", br.Msg, resp.StatusCode, body)
		}
	})
}

func TestEnsureIdeAndBrowserNameWhatTheImageLacks(t *testing.T) {
	s := newSandboxStack(t, 1, nil)
	id := s.create(t, nil) // the busybox test image: no IDE server, no Chromium
	_, err := s.svc.EnsureIde(t.Context(), connect.NewRequest(&appv1.EnsureIdeRequest{SessionId: id}))
	testenv.WantCode(t, err, connect.CodeFailedPrecondition)
	if err == nil || !strings.Contains(err.Error(), "openvscode-server, code-server") {
		t.Errorf("EnsureIde: %v, want it to name the IDE servers looked for", err)
	}
	_, err = s.svc.EnsureBrowser(t.Context(), connect.NewRequest(&appv1.EnsureBrowserRequest{SessionId: id}))
	testenv.WantCode(t, err, connect.CodeFailedPrecondition)
	if err == nil || !strings.Contains(err.Error(), "chromium") {
		t.Errorf("EnsureBrowser: %v, want it to name the browsers looked for", err)
	}
}

func TestCreateSessionRefusesBadApps(t *testing.T) {
	s := newSessionsStack(t)
	svc := appv1connect.NewSessionServiceClient(httpClient, s.rpcURL(), auth.WithKey(s.admin))
	for _, tc := range []struct {
		name  string
		apps  []*appv1.AppEndpoint
		field string
	}{
		{"not a DNS label", []*appv1.AppEndpoint{{Hostname: "Web", Port: 80}}, "apps[0].hostname"},
		{"a reserved name", []*appv1.AppEndpoint{{Hostname: sessions.IDEApp, Port: 80}}, "apps[0].hostname"},
		{"no port", []*appv1.AppEndpoint{{Hostname: "web"}}, "apps[0].port"},
		{"a name twice", []*appv1.AppEndpoint{{Hostname: "web", Port: 1}, {Hostname: "web", Port: 2}}, "apps[1].hostname"},
		{"a port twice", []*appv1.AppEndpoint{{Hostname: "a", Port: 1}, {Hostname: "b", Port: 1}}, "apps[1].port"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := svc.CreateSession(t.Context(), connect.NewRequest(&appv1.CreateSessionRequest{ImageUri: "example.com/x:1", Apps: tc.apps}))
			if fields := testenv.ViolatedFields(t, err); !slices.Contains(fields, tc.field) {
				t.Errorf("violations name %v, want %s", fields, tc.field)
			}
		})
	}
}

func TestSecurityAppsRefuseStrangers(t *testing.T) {
	s := newSandboxStack(t, 1, nil)
	id := appsSession(t, s)
	bob := s.mintKey(t, "bob@example.com", false)
	for _, tc := range []struct {
		name string
		key  string
		want int
	}{
		{"no key", "", http.StatusUnauthorized},
		{"another user's key", bob, http.StatusNotFound},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp, body := fileRequest(t, http.MethodGet, s.appURL(id, "web", ""), tc.key, nil, nil)
			if resp.StatusCode != tc.want || strings.Contains(string(body), "fakeapp") {
				t.Errorf("%d %q, want %d", resp.StatusCode, body, tc.want)
			}
			_, _, err := websocket.Dial(t.Context(), s.appURL(id, "web", "ws"), &websocket.DialOptions{HTTPHeader: http.Header{httpapi.APIKeyHeader: {tc.key}}})
			if err == nil {
				t.Error("the WebSocket upgrade went through")
			}
		})
	}
	_, err := s.sessions(bob).EnsureIde(context.Background(), connect.NewRequest(&appv1.EnsureIdeRequest{SessionId: id}))
	testenv.WantCode(t, err, connect.CodeNotFound)
}

func TestTaskSessionServesItsProfilesApps(t *testing.T) {
	testenv.RequirePlugins(t)
	s := newSandboxStack(t, 1, nil)
	image := imagestest.Push(t, s.sb.Registry, "test/apps", appstest.Image(t))
	profiles := appv1connect.NewProfileServiceClient(httpClient, s.rpcURL(), auth.WithKey(s.admin))
	p, err := profiles.CreateProfile(t.Context(), connect.NewRequest(&appv1.CreateProfileRequest{
		Name: "with an app", ImageId: image, Harness: ptr("bash"), Apps: []*appv1.SessionApp{{Name: "web", Port: 8080}},
	}))
	if err != nil {
		t.Fatal(err)
	}
	tasks := appv1connect.NewTaskServiceClient(httpClient, s.rpcURL(), auth.WithKey(s.admin))
	created, err := tasks.CreateTask(t.Context(), connect.NewRequest(&appv1.CreateTaskRequest{
		ProfileId: p.Msg.GetProfile().GetId(), Prompt: ptr("fakeapp --listen 127.0.0.1:8080 >/dev/null 2>&1 &"),
	}))
	if err != nil {
		t.Fatal(err)
	}
	sid := created.Msg.GetTask().GetSessions()[0].GetSessionId()
	testkit.Eventually(t, 30*time.Second, "the profile's app answering through the proxy", func() (bool, string) {
		resp, body := fileRequest(t, http.MethodGet, s.appURL(sid, "web", "from-task"), s.admin, nil, nil)
		return resp.StatusCode == http.StatusOK && strings.Contains(string(body), "saw GET /from-task"), string(body)
	})
}
