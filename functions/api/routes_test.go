package api

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/hangar-dev/hangar/functions/oauthcreds"
	"github.com/hangar-dev/hangar/functions/webhooks"
	"github.com/hangar-dev/hangar/gen/svc/app/v1/appv1connect"
	"github.com/hangar-dev/hangar/internal/testenv"
	"github.com/hangar-dev/hangar/platform/config"
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
			h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, oauthcreds.CallbackPath+"?state=oaf_x&code=c", nil))
			if rec.Code != http.StatusUnauthorized || !strings.Contains(rec.Body.String(), "Sign in to Hangar") {
				t.Errorf("%d %q", rec.Code, rec.Body)
			}
		})
	}
}
