package main

import (
	"encoding/json"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	appv1 "github.com/hangar-dev/hangar/gen/svc/app/v1"
	"github.com/hangar-dev/hangar/gen/svc/app/v1/appv1connect"
)

const secret = "hgr_k1_s3cr3t"

func newKeyReply(f *fakeAPI) {
	reply(f, appv1connect.ApiKeyServiceCreateApiKeyProcedure, &appv1.CreateApiKeyResponse{
		ApiKey: &appv1.ApiKey{Id: "k1", Name: "ci", Kind: "service_account", Prefix: "hgr_k1", CreatedAt: "2026-01-02T03:04:05Z"},
		Secret: secret,
	})
}

func TestKeysCreate(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		want *appv1.CreateApiKeyRequest
	}{
		{"defaults", []string{"--name", "ci"}, &appv1.CreateApiKeyRequest{Name: "ci", Kind: "personal"}},
		{"every flag", []string{"--name", "ci", "--kind", "service_account", "--email", "bot@example.com", "--user-name", "CI bot", "--admin"},
			&appv1.CreateApiKeyRequest{Name: "ci", Kind: "service_account", UserEmail: "bot@example.com", UserName: proto.String("CI bot"), Admin: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeAPI(t)
			newKeyReply(f)
			out := f.mustRun(t, append([]string{"keys", "create"}, tc.args...)...)
			f.assertRequest(t, appv1connect.ApiKeyServiceCreateApiKeyProcedure, tc.want)
			assertContains(t, out, "id: k1\n", "prefix: hgr_k1\n")
			if tail := "\nThe API key:\n\n    " + secret + "\n\nStore it now: it will not be shown again.\n"; !strings.HasSuffix(out, tail) {
				t.Errorf("output does not end with the secret and its warning:\n%s", out)
			}
		})
	}
}

func TestKeysCreateJSON(t *testing.T) {
	f := newFakeAPI(t)
	newKeyReply(f)
	out := f.mustRun(t, "keys", "create", "--name", "ci", "--json")
	var got struct {
		APIKey struct {
			ID     string `json:"id"`
			Prefix string `json:"prefix"`
		} `json:"api_key"`
		Secret string `json:"secret"`
	}
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, out)
	}
	if got.Secret != secret || got.APIKey.ID != "k1" || got.APIKey.Prefix != "hgr_k1" {
		t.Errorf("got %+v from\n%s", got, out)
	}
	if strings.Contains(out, "shown again") {
		t.Errorf("--json output has prose in it:\n%s", out)
	}
}

func TestKeysListAndRevoke(t *testing.T) {
	f := newFakeAPI(t)
	reply(f, appv1connect.ApiKeyServiceListApiKeysProcedure, &appv1.ListApiKeysResponse{ApiKeys: []*appv1.ApiKey{
		{Id: "k1", Prefix: "hgr_k1", Name: "ci", Kind: "service_account", UserId: "u9", CreatedAt: "2026-01-02"},
		{Id: "k2", Prefix: "hgr_k2", Name: "laptop", Kind: "personal", Admin: true, UserId: "u1",
			User: &appv1.User{Id: "u1", Email: "ada@example.com"}, CreatedAt: "2026-01-01", RevokedAt: proto.String("2026-01-03")},
	}})
	out := f.mustRun(t, "keys", "list", "--include-revoked")
	f.assertRequest(t, appv1connect.ApiKeyServiceListApiKeysProcedure, &appv1.ListApiKeysRequest{IncludeRevoked: true})
	want := "" +
		"ID  PREFIX  NAME    KIND             ADMIN  USER             CREATED     REVOKED\n" +
		"k1  hgr_k1  ci      service_account  no     u9               2026-01-02  -\n" +
		"k2  hgr_k2  laptop  personal         yes    ada@example.com  2026-01-01  2026-01-03\n"
	if out != want {
		t.Errorf("got\n%s\nwant\n%s", out, want)
	}

	reply(f, appv1connect.ApiKeyServiceRevokeApiKeyProcedure, &appv1.RevokeApiKeyResponse{ApiKey: &appv1.ApiKey{
		Id: "k1", Name: "ci", RevokedAt: proto.String("2026-01-04T00:00:00Z"),
	}})
	out = f.mustRun(t, "keys", "revoke", "k1")
	f.assertRequest(t, appv1connect.ApiKeyServiceRevokeApiKeyProcedure, &appv1.RevokeApiKeyRequest{Id: "k1"})
	assertContains(t, out, "id: k1\n", "revoked_at: 2026-01-04T00:00:00Z\n")
}
