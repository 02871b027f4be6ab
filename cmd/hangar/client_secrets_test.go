package main

import (
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	appv1 "github.com/hangar-dev/hangar/gen/svc/app/v1"
	"github.com/hangar-dev/hangar/gen/svc/app/v1/appv1connect"
)

func TestSecretsPut(t *testing.T) {
	file := writeTemp(t, "key", "sk-from-file\n")
	for _, tc := range []struct {
		name  string
		stdin string
		args  []string
		want  *appv1.PutOrgSecretRequest
	}{
		{"from stdin, its last newline dropped", "sk-typed\n", []string{"org/key"},
			&appv1.PutOrgSecretRequest{Name: "org/key", Value: "sk-typed"}},
		{"from a file, exactly", "", []string{"org/key", "--from-file", file, "--description", "router key", "--expected-version", "0"},
			&appv1.PutOrgSecretRequest{Name: "org/key", Value: "sk-from-file\n", Description: proto.String("router key"), ExpectedVersion: proto.Int64(0)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeAPI(t)
			reply(f, appv1connect.OrgSecretServicePutOrgSecretProcedure, &appv1.PutOrgSecretResponse{
				Secret: &appv1.OrgSecret{Name: "org/key", Version: 1, Description: "router key"}, Created: true,
			})
			r := f.runWithInput(t, tc.stdin, append([]string{"secrets", "put"}, tc.args...)...)
			if r.err != nil {
				t.Fatalf("exit %d: %v", r.code, r.err)
			}
			f.assertRequest(t, appv1connect.OrgSecretServicePutOrgSecretProcedure, tc.want)
			assertContains(t, r.out, "name: org/key\n", "version: 1\n")
			if strings.Contains(r.out, "sk-") {
				t.Errorf("the output shows the value:\n%s", r.out)
			}
		})
	}
}

func TestSecretsListAndDelete(t *testing.T) {
	f := newFakeAPI(t)
	reply(f, appv1connect.OrgSecretServiceListOrgSecretsProcedure, &appv1.ListOrgSecretsResponse{Secrets: []*appv1.OrgSecret{
		{Name: "gh/token", Version: 3, UpdatedAt: "2026-01-02", Description: "CI",
			Access: &appv1.OrgSecretAccess{Visibility: appv1.OrgSecretVisibility_ORG_SECRET_VISIBILITY_ALL_USERS}},
		{Name: "org/key", Version: 1, UpdatedAt: "2026-01-01"},
	}})
	out := f.mustRun(t, "secrets", "list")
	want := "" +
		"NAME      VERSION  UPDATED     ACCESS       DESCRIPTION\n" +
		"gh/token  3        2026-01-02  all_users    CI\n" +
		"org/key   1        2026-01-01  admins_only  -\n"
	if out != want {
		t.Errorf("list:\n%s\nwant:\n%s", out, want)
	}
	f.mustRun(t, "secrets", "delete", "gh/token", "--expected-version", "3")
	f.assertRequest(t, appv1connect.OrgSecretServiceDeleteOrgSecretProcedure, &appv1.DeleteOrgSecretRequest{Name: "gh/token", ExpectedVersion: proto.Int64(3)})
}

func TestSecretsAccess(t *testing.T) {
	f := newFakeAPI(t)
	reply(f, appv1connect.OrgSecretServiceSetOrgSecretAccessProcedure, &appv1.SetOrgSecretAccessResponse{Secret: &appv1.OrgSecret{Name: "gh/token", Version: 3}})
	f.mustRun(t, "secrets", "access", "gh/token", "--visibility", "selected", "--user", "user_a", "--user", "user_b", "--profile", "prof_x")
	f.assertRequest(t, appv1connect.OrgSecretServiceSetOrgSecretAccessProcedure, &appv1.SetOrgSecretAccessRequest{Name: "gh/token", Access: &appv1.OrgSecretAccess{
		Visibility: appv1.OrgSecretVisibility_ORG_SECRET_VISIBILITY_SELECTED, UserIds: []string{"user_a", "user_b"}, ProfileIds: []string{"prof_x"},
	}})
	if r := f.run(t, "secrets", "access", "gh/token", "--visibility", "friends"); r.err == nil || !strings.Contains(r.err.Error(), "--visibility") {
		t.Fatalf("an unknown visibility: %v", r.err)
	}
}
