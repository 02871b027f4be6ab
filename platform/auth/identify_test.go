package auth_test

import (
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/hangar-dev/hangar/internal/testenv"
	"github.com/hangar-dev/hangar/platform/apierr"
	"github.com/hangar-dev/hangar/platform/auth"
	"github.com/hangar-dev/hangar/platform/clock"
	"github.com/hangar-dev/hangar/platform/httpapi"
)

// fakeApp is an app origin's credentials: its token and cookie are the strings "token" and
// "cookie", anything else in their place unauthenticated.
type fakeApp struct{ spent *int }

const appOrigin = "https://web-x.apps.example.com"

func (f fakeApp) Token(r *http.Request) (auth.Principal, bool, error) {
	switch r.URL.Query().Get("app_token") {
	case "":
		return auth.Principal{}, false, nil
	case "token":
		*f.spent++
		return auth.Principal{UserID: "user_app"}, true, nil
	}
	return auth.Principal{}, true, apierr.Unauthenticated()
}

func (f fakeApp) Cookie(r *http.Request) (auth.Principal, bool, error) {
	c, err := r.Cookie("app")
	switch {
	case err != nil:
		return auth.Principal{}, false, nil
	case c.Value == "cookie":
		return auth.Principal{UserID: "user_app"}, true, nil
	}
	return auth.Principal{}, true, apierr.Unauthenticated()
}

func (fakeApp) Origin() string { return appOrigin }

// Identify picks one credential a route accepts, by one precedence, applies its use's rule and
// verifies it; a credential the route does not accept signs nobody in.
func TestIdentifyTakesOnlyTheCredentialsARouteAccepts(t *testing.T) {
	db, _ := testenv.Firestore(t)
	clk := clock.NewFake(time.Date(2026, 12, 2, 0, 0, 0, 0, time.UTC))
	const own = "https://hangar.example.com"
	a := auth.NewAuthenticator(db, clk, time.Minute, nil)
	sessions := auth.NewWebSessions(db, a)
	a.AcceptSessions(sessions, []string{own})
	keys := auth.NewKeys(db, a)
	_, key, err := keys.Create(t.Context(), auth.NewKeyInput{Name: "k", Kind: auth.KindPersonal, UserID: "user_key", CreatedBy: "test"}, clk.Now())
	if err != nil {
		t.Fatal(err)
	}
	cookie, err := sessions.Create(t.Context(), "user_cookie", false, clk.Now(), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	signIn := auth.SecureSessionCookie + "=" + cookie
	spent := 0
	app := fakeApp{spent: &spent}
	appRoute := auth.Route{Use: auth.Read, Accepts: auth.AppToken | auth.HeaderKey | auth.AppCookie, App: app}
	api := func(use auth.Use) auth.Route { return auth.Route{Use: use, Accepts: auth.APICredentials} }
	for _, tc := range []struct {
		name     string
		route    auth.Route
		method   string
		target   string
		header   map[string]string
		wantUser string
		wantVia  auth.Credentials
		wantCode connect.Code
	}{
		{"a key in the header", api(auth.Act), "POST", "/", map[string]string{httpapi.APIKeyHeader: key}, "user_key", auth.HeaderKey, 0},
		{"a key in api_key", api(auth.Read), "GET", "/?api_key=" + key, nil, "user_key", auth.QueryKey, 0},
		{"the header's key wins over api_key", api(auth.Read), "GET", "/?api_key=hgr_bad", map[string]string{httpapi.APIKeyHeader: key}, "user_key", auth.HeaderKey, 0},
		{"a key wins over the cookie", api(auth.Act), "POST", "/", map[string]string{httpapi.APIKeyHeader: key, "Cookie": signIn}, "user_key", auth.HeaderKey, 0},
		{"a bad key is refused, not the cookie tried", api(auth.Act), "POST", "/", map[string]string{httpapi.APIKeyHeader: "hgr_bad", "Cookie": signIn, "Origin": own, auth.CSRFHeader: "1"}, "", auth.HeaderKey, connect.CodeUnauthenticated},
		{"the cookie from Hangar's page", api(auth.Act), "POST", "/", map[string]string{"Cookie": signIn, "Origin": own, auth.CSRFHeader: "1"}, "user_cookie", auth.SignInCookie, 0},
		{"the cookie from another site", api(auth.Act), "POST", "/", map[string]string{"Cookie": signIn, "Origin": "https://evil.example", auth.CSRFHeader: "1"}, "", auth.SignInCookie, connect.CodePermissionDenied},
		{"the cookie under its plain http name", api(auth.Act), "POST", "/", map[string]string{"Cookie": auth.SessionCookie + "=" + cookie, "Origin": own, auth.CSRFHeader: "1"}, "", 0, connect.CodeUnauthenticated},
		{"nothing", api(auth.Read), "GET", "/", nil, "", 0, connect.CodeUnauthenticated},
		{"a WebSocket route sent no upgrade", api(auth.WebSocket), "GET", "/", map[string]string{httpapi.APIKeyHeader: key}, "", auth.HeaderKey, connect.CodeFailedPrecondition},
		{"api_key where only the header is taken", auth.Route{Use: auth.Read, Accepts: auth.HeaderKey | auth.SignInCookie}, "GET", "/?api_key=" + key, nil, "", 0, connect.CodeUnauthenticated},
		{"the cookie where it is not taken", auth.Route{Use: auth.Act, Accepts: auth.HeaderKey}, "POST", "/", map[string]string{"Cookie": signIn, "Origin": own, auth.CSRFHeader: "1"}, "", 0, connect.CodeUnauthenticated},
		{"an app token", appRoute, "GET", "/?app_token=token", nil, "user_app", auth.AppToken, 0},
		{"an app token wins over a key", appRoute, "GET", "/?app_token=token", map[string]string{httpapi.APIKeyHeader: key}, "user_app", auth.AppToken, 0},
		{"a bad app token", appRoute, "GET", "/?app_token=x", nil, "", auth.AppToken, connect.CodeUnauthenticated},
		{"a key at the app", appRoute, "GET", "/", map[string]string{httpapi.APIKeyHeader: key}, "user_key", auth.HeaderKey, 0},
		{"api_key at the app", appRoute, "GET", "/?api_key=" + key, nil, "", 0, connect.CodeUnauthenticated},
		{"the dashboard's cookie at the app", appRoute, "GET", "/", map[string]string{"Cookie": signIn}, "", 0, connect.CodeUnauthenticated},
		{"the app's cookie from its pages", appRoute, "POST", "/", map[string]string{"Cookie": "app=cookie", "Origin": appOrigin}, "user_app", auth.AppCookie, 0},
		{"the app's cookie from a sibling app", appRoute, "POST", "/", map[string]string{"Cookie": "app=cookie", "Origin": "https://web-y.apps.example.com"}, "", auth.AppCookie, connect.CodePermissionDenied},
		{"the app's cookie in a same-site fetch", appRoute, "GET", "/", map[string]string{"Cookie": "app=cookie", "Sec-Fetch-Site": "same-site", "Sec-Fetch-Mode": "cors"}, "", auth.AppCookie, connect.CodePermissionDenied},
		{"the app's cookie in a navigation from elsewhere", appRoute, "GET", "/", map[string]string{"Cookie": "app=cookie", "Sec-Fetch-Site": "cross-site", "Sec-Fetch-Mode": "navigate"}, "user_app", auth.AppCookie, 0},
		{"a stale app cookie", appRoute, "GET", "/", map[string]string{"Cookie": "app=old"}, "", auth.AppCookie, connect.CodeUnauthenticated},
		{"a broker method names nobody", auth.Route{Use: auth.Act, Accepts: auth.BrokerToken}, "POST", "/", nil, "", auth.BrokerToken, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := httptest.NewRequestWithContext(t.Context(), tc.method, tc.target, nil)
			for k, v := range tc.header {
				r.Header.Set(k, v)
			}
			p, err := a.Identify(r, tc.route)
			if connect.CodeOf(err) != tc.wantCode && !(err == nil && tc.wantCode == 0) {
				t.Fatalf("Identify = %+v, %v; want code %v", p, err, tc.wantCode)
			}
			if p.UserID != tc.wantUser || p.Via != tc.wantVia {
				t.Errorf("Identify = user %q via %v, want %q via %v", p.UserID, p.Via, tc.wantUser, tc.wantVia)
			}
		})
	}
	if spent != 2 {
		t.Errorf("app tokens spent %d times, want 2 (once per request that presented a good one)", spent)
	}
}
