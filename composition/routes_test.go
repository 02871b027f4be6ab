package composition

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/hangar-dev/hangar/functions/webhooks"
	"github.com/hangar-dev/hangar/gen/svc/app/v1/appv1connect"
	"github.com/hangar-dev/hangar/internal/testenv"
	"github.com/hangar-dev/hangar/platform/config"
	"github.com/hangar-dev/hangar/platform/httpapi"
)

// A plain HTTP route is served by the one server and by its own service's function only.
func TestRoutesAreServedByTheirServicesFunction(t *testing.T) {
	db, _ := testenv.Firestore(t)
	_, sealer := testenv.Keyset(t)
	a := New(Deps{DB: db, Config: config.Default(), Sealer: sealer, PubSub: testenv.PubSub(t)})
	path := webhooks.URLPath("hook_01jd3xkq7m9v2c5n8p4r6t0w1y")
	webhookFn, _ := a.ServiceHandler(appv1connect.WebhookRegistrationServiceName)
	taskFn, _ := a.ServiceHandler(appv1connect.TaskServiceName)
	for _, tc := range []struct {
		name   string
		h      http.Handler
		served bool
	}{
		{"the one server", a.Handler(), true},
		{"WebhookRegistrationService's function", webhookFn, true},
		{"TaskService's function", taskFn, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := httptest.NewRecorder()
			tc.h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, path, strings.NewReader("{}")))
			// The route answers an unknown registration in JSON; a mux without it, in text.
			served := rec.Code == http.StatusNotFound && rec.Header().Get("Content-Type") == "application/json"
			if served != tc.served {
				t.Errorf("%d %s %q: served %v, want %v", rec.Code, rec.Header().Get("Content-Type"), rec.Body, served, tc.served)
			}
		})
	}
}

// /api/auth is served by the one server and by ApiKeyService's function, and a session cookie it
// sets authenticates real RPCs of the composed API.
func TestSignInRoutesAreServedByApiKeyServicesFunction(t *testing.T) {
	db, _ := testenv.Firestore(t)
	cfg := config.Default()
	cfg.SignIn.PublicURL, cfg.SignIn.DevSignIn, cfg.SignIn.DevAdminEmail = "http://127.0.0.1:8080", true, "admin@hangar.local"
	a := New(Deps{DB: db, Config: cfg})
	keysFn, _ := a.ServiceHandler(appv1connect.ApiKeyServiceName)
	taskFn, _ := a.ServiceHandler(appv1connect.TaskServiceName)
	for _, tc := range []struct {
		name   string
		h      http.Handler
		served bool
	}{
		{"the one server", a.Handler(), true},
		{"ApiKeyService's function", keysFn, true},
		{"TaskService's function", taskFn, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := httptest.NewRecorder()
			tc.h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/api/auth/whoami", nil))
			if served := rec.Code == http.StatusUnauthorized; served != tc.served {
				t.Errorf("%d %q: served %v, want %v", rec.Code, rec.Body, served, tc.served)
			}
		})
	}

	signIn := httptest.NewRequest(http.MethodPost, "/api/auth/dev", nil)
	signIn.Header.Set("Origin", cfg.SignIn.PublicURL)
	signIn.RemoteAddr = "127.0.0.1:50000"
	rec := httptest.NewRecorder()
	a.Handler().ServeHTTP(rec, signIn)
	cookies := rec.Result().Cookies()
	if rec.Code != http.StatusSeeOther || len(cookies) != 1 {
		t.Fatalf("dev sign-in: %d %v", rec.Code, cookies)
	}
	call := httptest.NewRequest(http.MethodPost, httpapi.RPCPrefix+appv1connect.ApiKeyServiceListApiKeysProcedure, strings.NewReader("{}"))
	call.Header.Set("Content-Type", "application/json")
	call.Header.Set("Connect-Protocol-Version", "1")
	call.Header.Set("Origin", cfg.SignIn.PublicURL)
	call.AddCookie(cookies[0])
	rec = httptest.NewRecorder()
	a.Handler().ServeHTTP(rec, call)
	if rec.Code != http.StatusOK {
		t.Errorf("ListApiKeys with the local admin's cookie: %d %s", rec.Code, rec.Body)
	}
}

// The OAuth callback page is served by the one server and by OAuthCredentialService's function,
// and asks a caller without a key to sign in.
func TestOAuthCallbackIsServedByItsServicesFunction(t *testing.T) {
	db, _ := testenv.Firestore(t)
	_, sealer := testenv.Keyset(t)
	a := New(Deps{DB: db, Config: config.Default(), Sealer: sealer})
	oauthFn, _ := a.ServiceHandler(appv1connect.OAuthCredentialServiceName)
	for name, h := range map[string]http.Handler{"the one server": a.Handler(), "OAuthCredentialService's function": oauthFn} {
		t.Run(name, func(t *testing.T) {
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, httpapi.OAuthCallbackPath+"?state=oaf_x&code=c", nil))
			if rec.Code != http.StatusUnauthorized || !strings.Contains(rec.Body.String(), "Sign in to Hangar") {
				t.Errorf("%d %q", rec.Code, rec.Body)
			}
		})
	}
}
