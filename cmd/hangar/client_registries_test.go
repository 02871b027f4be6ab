package main

import (
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	appv1 "github.com/hangar-dev/hangar/gen/svc/app/v1"
	"github.com/hangar-dev/hangar/gen/svc/app/v1/appv1connect"
)

func TestRegistriesAdd(t *testing.T) {
	for _, tc := range []struct {
		name  string
		stdin string
		args  []string
		want  *appv1.AddRegistryRequest
	}{
		{"a password from stdin, its last newline dropped", "ghp_token\n", []string{"ghcr.io", "--username", "octocat", "--password-stdin"},
			&appv1.AddRegistryRequest{Host: "ghcr.io", Auth: &appv1.AddRegistryRequest_Static{Static: &appv1.StaticRegistryAuth{Username: "octocat", Password: "ghp_token"}}}},
		{"anonymous", "", []string{"quay.io", "--anonymous"},
			&appv1.AddRegistryRequest{Host: "quay.io", Auth: &appv1.AddRegistryRequest_Anonymous{Anonymous: &appv1.AnonymousRegistryAuth{}}}},
		{"a service account to impersonate", "", []string{"europe-docker.pkg.dev", "--impersonate-sa", "puller@p.iam.gserviceaccount.com"},
			&appv1.AddRegistryRequest{Host: "europe-docker.pkg.dev", Auth: &appv1.AddRegistryRequest_WorkloadIdentity{
				WorkloadIdentity: &appv1.WorkloadIdentityRegistryAuth{ImpersonateSa: proto.String("puller@p.iam.gserviceaccount.com")}}}},
		{"the host's own Google identity", "", []string{"gcr.io", "--workload-identity"},
			&appv1.AddRegistryRequest{Host: "gcr.io", Auth: &appv1.AddRegistryRequest_WorkloadIdentity{WorkloadIdentity: &appv1.WorkloadIdentityRegistryAuth{}}}},
		{"an AWS role to assume", "", []string{"123456789012.dkr.ecr.eu-west-1.amazonaws.com", "--assume-role-arn", "arn:aws:iam::123456789012:role/ecr-pull"},
			&appv1.AddRegistryRequest{Host: "123456789012.dkr.ecr.eu-west-1.amazonaws.com", Auth: &appv1.AddRegistryRequest_CloudRegistry{
				CloudRegistry: &appv1.CloudRegistryAuth{AssumeRoleArn: proto.String("arn:aws:iam::123456789012:role/ecr-pull")}}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeAPI(t)
			reply(f, appv1connect.ImageServiceAddRegistryProcedure, &appv1.AddRegistryResponse{Id: "reg_1", Host: "ghcr.io", AuthKind: "static", AuthPrincipal: proto.String("octocat")})
			r := f.runWithInput(t, tc.stdin, append([]string{"registries", "add"}, tc.args...)...)
			if r.err != nil {
				t.Fatalf("exit %d: %v", r.code, r.err)
			}
			f.assertRequest(t, appv1connect.ImageServiceAddRegistryProcedure, tc.want)
			assertContains(t, r.out, "id: reg_1\n", "auth_kind: static\n")
			if strings.Contains(r.out, "ghp_") {
				t.Errorf("the output shows the password:\n%s", r.out)
			}
		})
	}
}

func TestRegistriesAddNeedsOneWayToSignIn(t *testing.T) {
	for _, tc := range []struct {
		name    string
		args    []string
		wantMsg string
	}{
		{"none", []string{"ghcr.io"}, "say how to sign in"},
		{"two", []string{"ghcr.io", "--anonymous", "--ecr"}, "say how to sign in"},
		{"a username without a password", []string{"ghcr.io", "--username", "u"}, "--username and --password-stdin go together"},
		{"a password without a username", []string{"ghcr.io", "--password-stdin"}, "--username and --password-stdin go together"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeAPI(t)
			r := f.runWithInput(t, "pw\n", append([]string{"registries", "add"}, tc.args...)...)
			if r.code != 2 || !strings.Contains(r.msg(), tc.wantMsg) {
				t.Fatalf("exit %d %q, want 2 saying %q", r.code, r.msg(), tc.wantMsg)
			}
			if n := len(f.requests(appv1connect.ImageServiceAddRegistryProcedure)); n != 0 {
				t.Fatalf("%d requests sent", n)
			}
		})
	}
}

func TestRegistriesListAndDelete(t *testing.T) {
	f := newFakeAPI(t)
	reply(f, appv1connect.ImageServiceListRegistriesProcedure, &appv1.ListRegistriesResponse{Registries: []*appv1.RegistryCredentialSummary{
		{Id: "reg_1", RegistryHost: "ghcr.io", AuthKind: "static", AuthPrincipal: proto.String("octocat"), CreatedAt: "2026-01-02"},
		{Id: "reg_2", RegistryHost: "quay.io", AuthKind: "anonymous", CreatedAt: "2026-01-01"},
	}})
	out := f.mustRun(t, "registries", "list")
	want := "" +
		"HOST     KIND       PRINCIPAL  CREATED\n" +
		"ghcr.io  static     octocat    2026-01-02\n" +
		"quay.io  anonymous  -          2026-01-01\n"
	if out != want {
		t.Errorf("list:\n%s\nwant:\n%s", out, want)
	}
	out = f.mustRun(t, "registries", "delete", "ghcr.io")
	f.assertRequest(t, appv1connect.ImageServiceDeleteRegistryProcedure, &appv1.DeleteRegistryRequest{Host: "ghcr.io"})
	if out != "deleted registry ghcr.io\n" {
		t.Errorf("delete: %q", out)
	}
}
