package sessions

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"regexp"
	"strings"
	"sync"
	"time"

	"connectrpc.com/connect"

	hostv1 "github.com/hangar-dev/hangar/gen/host/v1"
	appv1 "github.com/hangar-dev/hangar/gen/svc/app/v1"
	"github.com/hangar-dev/hangar/platform/apierr"
	"github.com/hangar-dev/hangar/platform/auth"
	"github.com/hangar-dev/hangar/platform/httpapi"
	"github.com/hangar-dev/hangar/records/sessiondb"
)

// The apps every session has when its image can run them (EnsureIde, EnsureBrowser start them):
// an IDE server and a headless Chromium's DevTools. Their names are reserved.
const (
	IDEApp      = "ide"
	IDEPort     = 13337
	BrowserApp  = "browser"
	BrowserPort = 9222
)

var (
	appName = regexp.MustCompile(`^[a-z][a-z0-9-]{0,30}$`)
	// maxApps bounds a session's apps, as a profile's lists are bounded.
	maxApps = 100
)

// sessionApps validates CreateSession's apps: each names itself in hostname.
func sessionApps(in []*appv1.AppEndpoint, v *apierr.Violations) []sessiondb.App {
	if len(in) > maxApps {
		v.Addf("apps", "at most %d", maxApps)
		return nil
	}
	seenName, seenPort := map[string]bool{}, map[uint32]bool{}
	var out []sessiondb.App
	for i, a := range in {
		field := fmt.Sprintf("apps[%d]", i)
		switch {
		case !appName.MatchString(a.GetHostname()):
			v.Add(field+".hostname", "names the app: a lowercase letter, then up to 30 lowercase letters, digits or '-'")
		case a.GetHostname() == IDEApp || a.GetHostname() == BrowserApp:
			v.Addf(field+".hostname", "%q is reserved for the built-in app EnsureIde / EnsureBrowser start", a.GetHostname())
		case seenName[a.GetHostname()]:
			v.Addf(field+".hostname", "%q is named twice", a.GetHostname())
		}
		switch {
		case a.GetPort() < 1 || a.GetPort() > 65535:
			v.Add(field+".port", "must be a TCP port, 1 to 65535")
		case seenPort[a.GetPort()]:
			v.Addf(field+".port", "%d is used twice", a.GetPort())
		}
		seenName[a.GetHostname()], seenPort[a.GetPort()] = true, true
		out = append(out, sessiondb.App{Name: a.GetHostname(), Port: a.GetPort()})
	}
	return out
}

// appPort is the port of the session's app name, or 0 when it has none by that name.
func appPort(rec *sessiondb.Record, name string) uint32 {
	switch name {
	case IDEApp:
		return IDEPort
	case BrowserApp:
		return BrowserPort
	}
	for _, a := range rec.Apps {
		if a.Name == name {
			return a.Port
		}
	}
	return 0
}

// newAppProxy is the reverse proxy into apps, for both the API's path route and the apps' own
// origins: the request goes to its appTarget through the session's host and supervisor, without
// Hangar's credentials (the x-api-key header, the api_key and app token parameters, Hangar's
// cookies): the app runs code the session's agent controls.
func (s *Service) newAppProxy() *httputil.ReverseProxy {
	return &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			t := pr.In.Context().Value(appTargetKey{}).(*appTarget)
			pr.SetXForwarded()
			if t.prefix != "" {
				pr.Out.Header.Set("X-Forwarded-Prefix", strings.TrimSuffix(t.prefix, "/"))
			}
			pr.Out.URL.Scheme, pr.Out.URL.Host = "http", fmt.Sprintf("127.0.0.1:%d", t.port)
			pr.Out.URL.Path, pr.Out.URL.RawPath = t.path, ""
			q := pr.In.URL.Query()
			q.Del(auth.KeyParam)
			q.Del(AppTokenParam)
			pr.Out.URL.RawQuery = q.Encode()
			// The app sees the host the client asked for, so that its own origin checks (an
			// IDE's WebSocket) hold behind the proxy.
			pr.Out.Host = pr.In.Host
			stripHangarCredentials(pr.Out.Header)
		},
		Transport: &http.Transport{
			DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
				t := ctx.Value(appTargetKey{}).(*appTarget)
				return s.dialApp(ctx, t)
			},
			// One host stream per connection, not pooled: a connection belongs to a session.
			DisableKeepAlives:     true,
			ResponseHeaderTimeout: 5 * time.Minute,
		},
		// An app's pages served under the API's origin must not act as it: sandboxed, they run
		// in an opaque origin, so the user's session cookie (SameSite=Lax) does not go with
		// their requests to the API, and the CSRF check refuses them anyway. On an origin of its
		// own an app needs no sandbox.
		ModifyResponse: func(resp *http.Response) error {
			if resp.Request.Context().Value(appTargetKey{}).(*appTarget).sandboxed {
				resp.Header.Add("Content-Security-Policy", appSandboxPolicy)
			}
			return nil
		},
		FlushInterval: -1, // stream as the app writes: server-sent events, long polls
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			if _, ok := errors.AsType[*connect.Error](err); !ok {
				err = connect.NewError(connect.CodeUnavailable, fmt.Errorf("the app did not answer: %v", err))
			}
			writeErr(w, r, err)
		},
	}
}

// Apps serves httpapi.AppsPath: it authenticates like every route, finds the caller's session
// (another user's is not_found) and the app, and proxies the request to it, sandboxed. When apps
// have origins of their own, a browser signed in by the dashboard's cookie, or following a link
// with an API key (keyLinkNavigation), is sent to the app's origin with an app token instead
// (apporigins.go); API clients are still served here.
func (s *Service) Apps(authn *auth.Authenticator) http.Handler {
	proxy := s.newAppProxy()
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx, rec, ok := s.routeSession(authn, w, r, appUse(r))
		if !ok {
			return
		}
		name := r.PathValue("name")
		port := appPort(rec, name)
		if port == 0 {
			writeErr(w, r, apierr.NotFound("app", name))
			return
		}
		rest := "/" + r.PathValue("rest")
		if caller, _ := auth.Caller(ctx); s.apps.origin(rec.ID, name) != "" && (caller.Via == auth.SignInCookie || keyLinkNavigation(r, caller)) {
			if err := s.sendToOrigin(w, r, caller, rec.ID, name, rest); err != nil {
				writeErr(w, r, err)
			}
			return
		}
		t := &appTarget{rec: rec, port: port, path: rest, prefix: httpapi.AppURLPath(r.PathValue("id"), name), sandboxed: true}
		// The server's unary body deadline is for small bodies; an app's may stream for long.
		_ = http.NewResponseController(w).SetReadDeadline(time.Time{})
		proxy.ServeHTTP(w, r.WithContext(context.WithValue(ctx, appTargetKey{}, t)))
	})
}

// appUse is what a request through the path route does with its caller's authority: a
// WebSocket upgrade opens a socket into the app, a GET or HEAD without one is a navigation
// that reads (the app's page, or the redirect to its origin: what an app does on a GET is its
// own to make safe, as on any site), and any other method acts in the app.
func appUse(r *http.Request) auth.Use {
	switch {
	case r.Header.Get("Upgrade") != "":
		return auth.WebSocket
	case r.Method == http.MethodGet || r.Method == http.MethodHead:
		return auth.Read
	}
	return auth.Act
}

// keyLinkNavigation reports whether r is a browser following a link that carries an API key:
// the caller signed in by auth.QueryKey (a browser cannot set x-api-key on a navigation). Like
// the dashboard's cookie, such a browser is sent to the app's origin, with a token bound to
// that key.
func keyLinkNavigation(r *http.Request, caller auth.Principal) bool {
	return caller.Via == auth.QueryKey &&
		(r.Method == http.MethodGet || r.Method == http.MethodHead) && r.Header.Get("Sec-Fetch-Mode") == "navigate"
}

// appSandboxPolicy is the Content-Security-Policy every app response under the API's origin
// gets (besides its own): a sandbox without allow-same-origin.
const appSandboxPolicy = "sandbox allow-scripts allow-forms allow-popups allow-modals allow-downloads"

// appTarget is the app a proxied request goes to.
type appTarget struct {
	rec  *sessiondb.Record
	port uint32
	// path is the path the app gets; prefix, when served under the API's path route, is where
	// the app is mounted there (X-Forwarded-Prefix).
	path, prefix string
	// sandboxed marks responses served under the API's origin, which must not act as it.
	sandboxed bool
}

type appTargetKey struct{}

// hangarCookie names the cookies Hangar sets (auth.SessionCookie among them); none of them may
// reach an app.
var hangarCookie = regexp.MustCompile(`^(__Host-|__Secure-)?hangar`)

func stripHangarCredentials(h http.Header) {
	h.Del(httpapi.APIKeyHeader)
	cookies := h.Values("Cookie")
	h.Del("Cookie")
	var kept []string
	for _, line := range cookies {
		for _, c := range strings.Split(line, ";") {
			name, _, _ := strings.Cut(strings.TrimSpace(c), "=")
			if name != "" && !hangarCookie.MatchString(name) {
				kept = append(kept, strings.TrimSpace(c))
			}
		}
	}
	if len(kept) > 0 {
		h.Set("Cookie", strings.Join(kept, "; "))
	}
}

// dialApp opens a connection to the app through the session's host. The host answers an empty
// frame once the supervisor has connected, so a closed port is an error here, not later.
func (s *Service) dialApp(ctx context.Context, t *appTarget) (net.Conn, error) {
	client, err := s.host(ctx, t.rec, false)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	stream := client.DialApp(ctx)
	if err := stream.Send(&hostv1.DialAppInput{Frame: &hostv1.DialAppInput_Dial{Dial: &hostv1.DialApp{SessionId: t.rec.ID, Port: t.port}}}); err != nil {
		_, rerr := stream.Receive()
		cancel()
		return nil, errors.Join(rerr, err)
	}
	if _, err := stream.Receive(); err != nil {
		cancel()
		return nil, err
	}
	return &streamConn{stream: stream, cancel: cancel}, nil
}

// streamConn is a DialApp stream as a net.Conn, for http.Transport. Deadlines are not
// supported (the transport uses them only for TLS handshakes and its own timers).
type streamConn struct {
	stream *connect.BidiStreamForClient[hostv1.DialAppInput, hostv1.DialAppOutput]
	cancel context.CancelFunc
	rbuf   []byte

	wmu       sync.Mutex
	closeOnce sync.Once
}

func (c *streamConn) Read(p []byte) (int, error) {
	for len(c.rbuf) == 0 {
		msg, err := c.stream.Receive()
		if err != nil {
			return 0, err
		}
		c.rbuf = msg.GetData()
	}
	n := copy(p, c.rbuf)
	c.rbuf = c.rbuf[n:]
	return n, nil
}

func (c *streamConn) Write(p []byte) (int, error) {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	for sent := 0; sent < len(p); {
		n := min(len(p)-sent, 32<<10)
		if err := c.stream.Send(&hostv1.DialAppInput{Frame: &hostv1.DialAppInput_Data{Data: p[sent : sent+n]}}); err != nil {
			if errors.Is(err, io.EOF) {
				// The host ended the stream: the app closed its connection, maybe having
				// answered without reading the whole body. As over TCP, the rest is dropped and
				// the answer is still read; how the stream ended shows in Read.
				return len(p), nil
			}
			return sent, err
		}
		sent += n
	}
	return len(p), nil
}

// CloseWrite tells the app this side is done sending.
func (c *streamConn) CloseWrite() error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	return c.stream.CloseRequest()
}

func (c *streamConn) Close() error {
	c.closeOnce.Do(func() {
		_ = c.CloseWrite()
		_ = c.stream.CloseResponse()
		c.cancel()
	})
	return nil
}

func (c *streamConn) LocalAddr() net.Addr              { return appAddr{} }
func (c *streamConn) RemoteAddr() net.Addr             { return appAddr{} }
func (c *streamConn) SetDeadline(time.Time) error      { return nil }
func (c *streamConn) SetReadDeadline(time.Time) error  { return nil }
func (c *streamConn) SetWriteDeadline(time.Time) error { return nil }

type appAddr struct{}

func (appAddr) Network() string { return "hangar-app" }
func (appAddr) String() string  { return "sandbox-app" }

// EnsureIde starts the image's IDE server (openvscode-server or code-server) in the session
// unless it runs, and returns it as the "ide" app; an image without one is failed_precondition
// naming what it lacks.
func (s *Service) EnsureIde(ctx context.Context, req *connect.Request[appv1.EnsureIdeRequest]) (*connect.Response[appv1.EnsureIdeResponse], error) {
	rec, client, err := s.liveHost(ctx, req.Msg.GetSessionId())
	if err != nil {
		return nil, err
	}
	resp, err := client.EnsureIde(ctx, toHost(req.Msg, rec))
	if err != nil {
		return nil, err
	}
	resp.Msg.Endpoint = s.endpoint(rec, shownID(ctx, rec), IDEApp, resp.Msg.GetPort())
	return resp, nil
}

// EnsureBrowser starts the image's headless Chromium in the session unless it runs, and
// returns its DevTools as the "browser" app; an image without one is failed_precondition.
func (s *Service) EnsureBrowser(ctx context.Context, req *connect.Request[appv1.EnsureBrowserRequest]) (*connect.Response[appv1.EnsureBrowserResponse], error) {
	rec, client, err := s.liveHost(ctx, req.Msg.GetSessionId())
	if err != nil {
		return nil, err
	}
	resp, err := client.EnsureBrowser(ctx, toHost(req.Msg, rec))
	if err != nil {
		return nil, err
	}
	resp.Msg.Endpoint = s.endpoint(rec, shownID(ctx, rec), BrowserApp, resp.Msg.GetPort())
	return resp, nil
}

// endpoint is an app of rec as the proxy serves it, named by the session id shown.
func (s *Service) endpoint(rec *sessiondb.Record, shown, name string, port uint32) *appv1.AppEndpoint {
	return &appv1.AppEndpoint{Hostname: name, Port: port, UrlPath: httpapi.AppURLPath(shown, name), Origin: s.apps.origin(rec.ID, name)}
}
