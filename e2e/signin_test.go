package e2e

import (
	"context"
	"net"
	"net/http"
	"net/http/cookiejar"
	"testing"

	"connectrpc.com/connect"
	"gocloud.dev/blob/memblob"

	"github.com/hangar-dev/hangar/composition"
	appv1 "github.com/hangar-dev/hangar/gen/svc/app/v1"
	"github.com/hangar-dev/hangar/gen/svc/app/v1/appv1connect"
	"github.com/hangar-dev/hangar/internal/testenv"
	"github.com/hangar-dev/hangar/internal/testkit"
	"github.com/hangar-dev/hangar/platform/auth"
	"github.com/hangar-dev/hangar/platform/config"
	"github.com/hangar-dev/hangar/platform/httpapi"
)

// withCookie makes a Connect client call as the dashboard does: the session cookie, and the
// Origin of the page (Connect itself sends Connect-Protocol-Version).
func withCookie(cookie, origin string) connect.ClientOption {
	return connect.WithInterceptors(connect.UnaryInterceptorFunc(func(next connect.UnaryFunc) connect.UnaryFunc {
		return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
			req.Header().Set("Cookie", auth.SessionCookie+"="+cookie)
			if origin != "" {
				req.Header().Set("Origin", origin)
			}
			return next(ctx, req)
		}
	}))
}

// devSignIn signs in at base by the dev route, as the dashboard's button does, with browser
// (which must not follow redirects), and returns the session cookie it was given.
func devSignIn(t *testing.T, browser *http.Client, base string) *http.Cookie {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, base+"/api/auth/dev", nil)
	req.Header.Set("Origin", base)
	resp, err := browser.Do(req)
	if err != nil || resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("dev sign-in: %v %v", resp, err)
	}
	resp.Body.Close()
	for _, c := range resp.Cookies() {
		if c.Name == auth.SessionCookie {
			return c
		}
	}
	t.Fatalf("dev sign-in set no %s cookie", auth.SessionCookie)
	return nil
}

// The dashboard's path through the whole API as `hangar dev` composes it: the local admin signs
// in by the dev route, Connect calls with the cookie work from Hangar's origin and are refused
// from any other, the session events stream takes the cookie, and sign-out ends it all.
func TestDashboardSessionCookieThroughTheAPI(t *testing.T) {
	db, _ := testenv.Firestore(t)
	_, sealer := testenv.Keyset(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	url := "http://" + ln.Addr().String()
	cfg := config.Default()
	cfg.SignIn.PublicURL, cfg.SignIn.DevSignIn, cfg.SignIn.DevAdminEmail = url, true, "admin@hangar.local"
	srv := composition.NewServer(composition.New(composition.Deps{DB: db, Config: cfg, Bucket: memblob.OpenBucket(nil), Sealer: sealer}).Handler())
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })

	jar, _ := cookiejar.New(nil)
	browser := testkit.NoRedirects(jar)
	cookie := devSignIn(t, browser, url).Value

	keys := func(origin string) error {
		c := appv1connect.NewApiKeyServiceClient(http.DefaultClient, url+httpapi.RPCPrefix, withCookie(cookie, origin))
		_, err := c.ListApiKeys(t.Context(), connect.NewRequest(&appv1.ListApiKeysRequest{}))
		return err
	}
	if err := keys(url); err != nil {
		t.Fatalf("the admin's dashboard call: %v", err)
	}
	testenv.WantCode(t, keys("https://evil.example"), connect.CodePermissionDenied)
	testenv.WantCode(t, keys(""), connect.CodePermissionDenied)

	events := func() int {
		req, _ := http.NewRequest(http.MethodGet, url+"/api/v1/sessions/nope/events", nil)
		resp, err := browser.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if got := events(); got != http.StatusNotFound {
		t.Errorf("the events stream with the cookie answered %d, want 404 (authenticated, no such session)", got)
	}

	req, _ := http.NewRequest(http.MethodPost, url+"/api/auth/logout", nil)
	req.Header.Set("Origin", url)
	req.Header.Set(auth.CSRFHeader, "1")
	if resp, err := browser.Do(req); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("sign-out: %v %v", resp, err)
	}
	testenv.WantCode(t, keys(url), connect.CodeUnauthenticated)
	if got := events(); got != http.StatusUnauthorized {
		t.Errorf("the events stream after sign-out answered %d", got)
	}
}
