package e2e

import (
	"context"
	"net/http"
	"slices"
	"testing"

	"connectrpc.com/connect"

	appv1 "github.com/hangar-dev/hangar/gen/svc/app/v1"
	"github.com/hangar-dev/hangar/gen/svc/app/v1/appv1connect"
	"github.com/hangar-dev/hangar/internal/testenv"
	"github.com/hangar-dev/hangar/platform/auth"
)

func TestAuthMatrix(t *testing.T) {
	s := newStack(t)
	ctx := context.Background()
	admin := appv1connect.NewApiKeyServiceClient(httpClient, s.rpcURL(), auth.WithKey(s.admin))
	created, err := admin.CreateApiKey(ctx, connect.NewRequest(&appv1.CreateApiKeyRequest{Name: "to revoke", UserEmail: "rev@example.com"}))
	if err != nil {
		t.Fatal(err)
	}
	revoked := created.Msg.GetSecret()
	// Use the key once so it is cached as valid: revocation must still win at once.
	if _, err := appv1connect.NewTaskServiceClient(httpClient, s.rpcURL(), auth.WithKey(revoked)).
		ListTasks(ctx, connect.NewRequest(&appv1.ListTasksRequest{})); err != nil {
		t.Fatalf("fresh key refused: %v", err)
	}
	if _, err := admin.RevokeApiKey(ctx, connect.NewRequest(&appv1.RevokeApiKeyRequest{Id: created.Msg.GetApiKey().GetId()})); err != nil {
		t.Fatal(err)
	}
	member := s.mintKey(t, "member@example.com", false)

	listKeys := appv1.File_svc_app_v1_api_key_proto.Services().ByName("ApiKeyService").Methods().ByName("ListApiKeys")
	listTasks := appv1.File_svc_app_v1_task_proto.Services().ByName("TaskService").Methods().ByName("ListTasks")
	cases := []struct {
		name       string
		key        string
		method     string
		wantStatus int
		wantCode   string
	}{
		{"no key", "", "tasks", http.StatusUnauthorized, "unauthenticated"},
		{"malformed key", "not-a-key", "tasks", http.StatusUnauthorized, "unauthenticated"},
		{"unknown key", "hgr_aaaaaaaaaaaa_bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb", "tasks", http.StatusUnauthorized, "unauthenticated"},
		{"revoked key", revoked, "tasks", http.StatusUnauthorized, "unauthenticated"},
		{"member on admin-only service", member, "keys", http.StatusForbidden, "permission_denied"},
		{"member on a member service", member, "tasks", http.StatusOK, ""},
		{"admin on admin-only service", s.admin, "keys", http.StatusOK, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			md := listTasks
			if tc.method == "keys" {
				md = listKeys
			}
			status, ce := call(t, s.url, tc.key, md)
			if status != tc.wantStatus {
				t.Fatalf("status %d, want %d (error %+v)", status, tc.wantStatus, ce)
			}
			if tc.wantCode == "" {
				if ce != nil {
					t.Fatalf("unexpected error %+v", ce)
				}
				return
			}
			if ce == nil || ce.Code != tc.wantCode {
				t.Fatalf("error %+v, want code %s", ce, tc.wantCode)
			}
			if tc.wantCode == "unauthenticated" && ce.Message != "missing or invalid API key" {
				t.Fatalf("unauthenticated message %q says more than that the key is bad", ce.Message)
			}
		})
	}
}

func TestListedKeysShowPrefixNeverSecret(t *testing.T) {
	s := newStack(t)
	ctx := context.Background()
	admin := appv1connect.NewApiKeyServiceClient(httpClient, s.rpcURL(), auth.WithKey(s.admin))
	created, err := admin.CreateApiKey(ctx, connect.NewRequest(&appv1.CreateApiKeyRequest{Name: "ci bot", Kind: "service_account"}))
	if err != nil {
		t.Fatal(err)
	}
	secret := created.Msg.GetSecret()
	list, err := admin.ListApiKeys(ctx, connect.NewRequest(&appv1.ListApiKeysRequest{}))
	if err != nil {
		t.Fatal(err)
	}
	var found bool
	for _, k := range list.Msg.GetApiKeys() {
		if k.GetId() != created.Msg.GetApiKey().GetId() {
			continue
		}
		found = true
		if k.GetPrefix() == "" || len(k.GetPrefix()) >= len(secret) || secret[:len(k.GetPrefix())] != k.GetPrefix() {
			t.Fatalf("prefix %q is not a proper prefix of the key", k.GetPrefix())
		}
		if k.GetUser().GetKind() != "service_account" {
			t.Fatalf("service-account key belongs to a %q user", k.GetUser().GetKind())
		}
	}
	if !found {
		t.Fatal("created key not listed")
	}
	// The service-account key works.
	if _, err := appv1connect.NewTaskServiceClient(httpClient, s.rpcURL(), auth.WithKey(secret)).
		ListTasks(ctx, connect.NewRequest(&appv1.ListTasksRequest{})); err != nil {
		t.Fatalf("service-account key refused: %v", err)
	}
}

func TestCreateApiKeyValidationNamesFields(t *testing.T) {
	s := newStack(t)
	admin := appv1connect.NewApiKeyServiceClient(httpClient, s.rpcURL(), auth.WithKey(s.admin))
	cases := []struct {
		name  string
		req   *appv1.CreateApiKeyRequest
		field string
	}{
		{"no name", &appv1.CreateApiKeyRequest{}, "name"},
		{"bad kind", &appv1.CreateApiKeyRequest{Name: "x", Kind: "robot"}, "kind"},
		{"bad email", &appv1.CreateApiKeyRequest{Name: "x", UserEmail: "not an email"}, "user_email"},
		{"email on service account", &appv1.CreateApiKeyRequest{Name: "x", Kind: "service_account", UserEmail: "a@b.c"}, "user_email"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := admin.CreateApiKey(context.Background(), connect.NewRequest(tc.req))
			assertFieldViolation(t, err, tc.field)
		})
	}
	_, err := admin.RevokeApiKey(context.Background(), connect.NewRequest(&appv1.RevokeApiKeyRequest{Id: "nosuchkey000"}))
	if connect.CodeOf(err) != connect.CodeNotFound {
		t.Fatalf("revoking an unknown key: %v, want not_found", err)
	}
}

// assertFieldViolation checks err is invalid_argument with a BadRequest detail naming field.
func assertFieldViolation(t *testing.T, err error, field string) {
	t.Helper()
	if fields := testenv.ViolatedFields(t, err); !slices.Contains(fields, field) {
		t.Fatalf("error %v names fields %v, want %q", err, fields, field)
	}
}
