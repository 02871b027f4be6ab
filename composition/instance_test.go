package composition

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
)

// A start-up failure (Firestore unreachable for a moment) is not kept for the instance's
// lifetime: the next request opens again, and once one open succeeds it is kept.
func TestInstanceRetriesAFailedOpenAndKeepsASuccessfulOne(t *testing.T) {
	opens := 0
	i := NewInstance(func(context.Context) (*API, error) {
		opens++
		if opens == 1 {
			return nil, errors.New("firestore unreachable")
		}
		ok := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusNoContent) })
		return &API{services: map[string]http.Handler{"svc.app.v1.TaskService": ok}}, nil
	}, nil)
	fn := Function{EntryPoint: "TaskService", Service: "svc.app.v1.TaskService", Public: true}
	wants := []int{http.StatusServiceUnavailable, http.StatusNoContent, http.StatusNoContent}
	for n, want := range wants {
		rec := httptest.NewRecorder()
		i.Handler(fn)(rec, httptest.NewRequest(http.MethodPost, "/svc.app.v1.TaskService/ListTasks", nil))
		if rec.Code != want {
			t.Fatalf("request %d: status %d, want %d", n+1, rec.Code, want)
		}
	}
	if opens != 2 {
		t.Fatalf("opened %d times, want 2: once failing, once for good", opens)
	}
}

func TestFunctionNamesAreCloudRunNames(t *testing.T) {
	for entry, want := range map[string]string{
		"TaskService": "hangar-task-service", "OAuthCredentialService": "hangar-oauth-credential-service",
		"AutomationWorker": "hangar-automation-worker",
	} {
		if got := (Function{EntryPoint: entry}).Name(); got != want {
			t.Errorf("%s: %s, want %s", entry, got, want)
		}
	}
}
