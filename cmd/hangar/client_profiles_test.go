package main

import (
	"testing"

	"google.golang.org/protobuf/proto"

	appv1 "github.com/hangar-dev/hangar/gen/svc/app/v1"
	"github.com/hangar-dev/hangar/gen/svc/app/v1/appv1connect"
)

const profileJSON = `{
  "name": "from-file",
  "image_id": "img-file",
  "secrets": [{"ref": "gh", "env_var": "GH_TOKEN", "mode": "env", "allow_hosts": ["github.com"]}],
  "integration_grants": [{"connection_id": "c1", "operation": "issues.read"}],
  "env_vars": {"FROM": "file"}
}`

func TestProfilesCreate(t *testing.T) {
	file := writeTemp(t, "profile.json", profileJSON)
	fromFile := &appv1.CreateProfileRequest{
		Name: "from-file", ImageId: "img-file", EnvVars: map[string]string{"FROM": "file"},
		Secrets:           []*appv1.ProfileSecret{{Ref: "gh", EnvVar: "GH_TOKEN", Mode: "env", AllowHosts: []string{"github.com"}}},
		IntegrationGrants: []*appv1.ProfileIntegrationGrant{{ConnectionId: "c1", Operation: "issues.read"}},
	}
	overridden := proto.Clone(fromFile).(*appv1.CreateProfileRequest)
	overridden.Name, overridden.Skills = "from-flag", []string{"go"}
	for _, tc := range []struct {
		name  string
		stdin string
		args  []string
		want  *appv1.CreateProfileRequest
	}{
		{name: "every flag", args: []string{"--name", "web", "--image", "img1", "--description", "The web app", "--icon", "globe",
			"--env", "A=1", "--env", "B=x=y", "--skill", "go", "--skill", "sql", "--network-default", "deny",
			"--allow-host", "github.com", "--allow-host-pattern", "*.npmjs.org", "--harness", "claude", "--model", "opus",
			"--effort", "high", "--designation", "dev", "--model-router", "r1", "--repo", "/src/app=https://github.com/o/app",
			"--app", "web=3000", "--app", "api=8080", "--include-user-tokens"},
			want: &appv1.CreateProfileRequest{Name: "web", ImageId: "img1", Description: "The web app", Icon: "globe",
				EnvVars: map[string]string{"A": "1", "B": "x=y"}, Skills: []string{"go", "sql"},
				Network: &appv1.ProfileNetwork{Default: "deny", AllowHosts: []string{"github.com"}, AllowHostPatterns: []string{"*.npmjs.org"}},
				Harness: proto.String("claude"), Model: proto.String("opus"), Effort: proto.String("high"), Designation: proto.String("dev"),
				ModelRouter: proto.String("r1"), Repos: []*appv1.ProfileRepo{{Path: "/src/app", RemoteUrl: "https://github.com/o/app"}},
				Apps: []*appv1.SessionApp{{Name: "web", Port: 3000}, {Name: "api", Port: 8080}}, IncludeUserTokens: true}},
		{name: "from file", args: []string{"--from-file", file}, want: fromFile},
		{name: "from stdin", stdin: profileJSON, args: []string{"--from-file", "-"}, want: fromFile},
		{name: "flags override the file", args: []string{"--from-file", file, "--name", "from-flag", "--skill", "go"}, want: overridden},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeAPI(t)
			reply(f, appv1connect.ProfileServiceCreateProfileProcedure, &appv1.CreateProfileResponse{Profile: &appv1.Profile{Id: "p1", Name: "web"}})
			r := f.runWithInput(t, tc.stdin, append([]string{"profiles", "create"}, tc.args...)...)
			if r.err != nil {
				t.Fatalf("exit %d: %v", r.code, r.err)
			}
			f.assertRequest(t, appv1connect.ProfileServiceCreateProfileProcedure, tc.want)
			assertContains(t, r.out, "id: p1\n", "name: web\n")
		})
	}
}

// currentProfile is the profile the update tests start from, with every field set.
func currentProfile() *appv1.Profile {
	return &appv1.Profile{
		Id: "p1", Name: "web", Description: "The web app", Icon: "globe", ImageId: "img1", IncludeUserTokens: true,
		EnvVars: map[string]string{"A": "1", "B": "2"}, Archived: false, CreatedAt: "2026-01-01T00:00:00Z", UpdatedAt: "2026-01-02T00:00:00Z",
		Skills:  []string{"go", "sql"},
		Network: &appv1.ProfileNetwork{Default: "deny", AllowHosts: []string{"github.com"}, AllowHostPatterns: []string{"*.npmjs.org"}},
		Secrets: []*appv1.ProfileSecret{{Ref: "gh", EnvVar: "GH_TOKEN", Mode: "env", AllowHosts: []string{"github.com"}, AllowHostPatterns: []string{"*.github.com"}}},
		Harness: proto.String("claude"), Model: proto.String("opus"), Effort: proto.String("high"), Designation: proto.String("dev"),
		IntegrationGrants: []*appv1.ProfileIntegrationGrant{{ConnectionId: "c1", Operation: "issues.read", ResourceConstraints: []string{"o/app"}, CredentialScope: "user"}},
		Repos: []*appv1.ProfileRepo{{Path: "/src/app", RemoteUrl: "https://github.com/o/app",
			Remote: &appv1.ProfileRepoRemote{Host: "github.com", Owner: "o", Name: "app"}}},
		ModelRouter: proto.String("r1"),
		Apps:        []*appv1.SessionApp{{Name: "web", Port: 3000}},
	}
}

// unchanged is the update request that sends currentProfile back as it is.
func unchanged() *appv1.UpdateProfileRequest {
	p := currentProfile()
	return &appv1.UpdateProfileRequest{
		Id: p.Id, Name: p.Name, Description: p.Description, Icon: p.Icon, ImageId: p.ImageId, IncludeUserTokens: p.IncludeUserTokens,
		EnvVars: p.EnvVars, Skills: p.Skills, Network: p.Network, Secrets: p.Secrets, Harness: p.Harness, Model: p.Model,
		Effort: p.Effort, Designation: p.Designation, IntegrationGrants: p.IntegrationGrants, Repos: p.Repos,
		ModelRouter: p.ModelRouter, Apps: p.Apps,
	}
}

func TestProfilesUpdate(t *testing.T) {
	file := writeTemp(t, "grants.json", `{"integration_grants": [{"connection_id": "c2", "operation": "pr.write"}]}`)
	for _, tc := range []struct {
		name   string
		args   []string
		change func(r *appv1.UpdateProfileRequest)
	}{
		{"no flags", nil, func(*appv1.UpdateProfileRequest) {}},
		{"description", []string{"--description", "New"}, func(r *appv1.UpdateProfileRequest) { r.Description = "New" }},
		{"name and image", []string{"--name", "api", "--image", "img2"}, func(r *appv1.UpdateProfileRequest) { r.Name, r.ImageId = "api", "img2" }},
		{"env replaces the map", []string{"--env", "C=3"}, func(r *appv1.UpdateProfileRequest) { r.EnvVars = map[string]string{"C": "3"} }},
		{"empty list flag clears", []string{"--skill", "", "--app", ""}, func(r *appv1.UpdateProfileRequest) { r.Skills, r.Apps = nil, nil }},
		{"empty optional clears", []string{"--harness", ""}, func(r *appv1.UpdateProfileRequest) { r.Harness = nil }},
		{"bool off", []string{"--include-user-tokens=false"}, func(r *appv1.UpdateProfileRequest) { r.IncludeUserTokens = false }},
		{"one network flag", []string{"--allow-host", "gitlab.com"}, func(r *appv1.UpdateProfileRequest) { r.Network.AllowHosts = []string{"gitlab.com"} }},
		{"repos", []string{"--repo", "/src/lib=https://github.com/o/lib"}, func(r *appv1.UpdateProfileRequest) {
			r.Repos = []*appv1.ProfileRepo{{Path: "/src/lib", RemoteUrl: "https://github.com/o/lib"}}
		}},
		{"file sets what it names", []string{"--from-file", file}, func(r *appv1.UpdateProfileRequest) {
			r.IntegrationGrants = []*appv1.ProfileIntegrationGrant{{ConnectionId: "c2", Operation: "pr.write"}}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeAPI(t)
			reply(f, appv1connect.ProfileServiceGetProfileProcedure, &appv1.GetProfileResponse{Profile: currentProfile()})
			reply(f, appv1connect.ProfileServiceUpdateProfileProcedure, &appv1.UpdateProfileResponse{Profile: currentProfile()})
			out := f.mustRun(t, append([]string{"profiles", "update", "p1"}, tc.args...)...)
			f.assertRequest(t, appv1connect.ProfileServiceGetProfileProcedure, &appv1.GetProfileRequest{Id: "p1"})
			want := unchanged()
			tc.change(want)
			f.assertRequest(t, appv1connect.ProfileServiceUpdateProfileProcedure, want)
			assertContains(t, out, "id: p1\n")
		})
	}
}

func TestProfilesCommands(t *testing.T) {
	for _, tc := range []struct {
		name      string
		args      []string
		procedure string
		want      proto.Message
		wantOut   string // the whole output, or with exact false a part of it with padding squashed
		exact     bool
	}{
		{"list", []string{"list"}, appv1connect.ProfileServiceListProfilesProcedure, &appv1.ListProfilesRequest{},
			"ID  NAME  IMAGE  HARNESS  ARCHIVED\n" +
				"p1  web   img1   claude   no\n" +
				"p2  old   img0   -        yes\n", true},
		{"list archived", []string{"list", "--include-archived"}, appv1connect.ProfileServiceListProfilesProcedure,
			&appv1.ListProfilesRequest{IncludeArchived: true}, "p2 old img0 - yes\n", false},
		{"get", []string{"get", "p1"}, appv1connect.ProfileServiceGetProfileProcedure, &appv1.GetProfileRequest{Id: "p1"},
			"env_vars.A: 1\nenv_vars.B: 2\ncreated_at: 2026-01-01T00:00:00Z\nupdated_at: 2026-01-02T00:00:00Z\nskills: go, sql\n" +
				"network.default: deny\nnetwork.allow_hosts: github.com\n", false},
		{"delete archives", []string{"delete", "p1"}, appv1connect.ProfileServiceDeleteProfileProcedure, &appv1.DeleteProfileRequest{Id: "p1"},
			"archived profile p1\n", true},
		{"repos", []string{"repos", "p1"}, appv1connect.ProfileServiceDiscoverProfileReposProcedure,
			&appv1.DiscoverProfileReposRequest{ProfileId: "p1"},
			"PATH      REMOTE    URL\n" +
				"/src/app  origin    https://github.com/o/app\n" +
				"/src/app  upstream  https://github.com/u/app\n" +
				"/scratch  -         -\n", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeAPI(t)
			reply(f, appv1connect.ProfileServiceGetProfileProcedure, &appv1.GetProfileResponse{Profile: currentProfile()})
			reply(f, appv1connect.ProfileServiceListProfilesProcedure, &appv1.ListProfilesResponse{Profiles: []*appv1.Profile{
				currentProfile(), {Id: "p2", Name: "old", ImageId: "img0", Archived: true},
			}})
			reply(f, appv1connect.ProfileServiceDiscoverProfileReposProcedure, &appv1.DiscoverProfileReposResponse{Repos: []*appv1.DiscoveredRepo{
				{Path: "/src/app", Remotes: []*appv1.DiscoveredRemote{{Name: "origin", Url: "https://github.com/o/app"}, {Name: "upstream", Url: "https://github.com/u/app"}}},
				{Path: "/scratch"},
			}})
			out := f.mustRun(t, append([]string{"profiles"}, tc.args...)...)
			f.assertRequest(t, tc.procedure, tc.want)
			if tc.exact && out != tc.wantOut {
				t.Errorf("got\n%s\nwant\n%s", out, tc.wantOut)
			}
			if !tc.exact {
				assertContains(t, out, tc.wantOut)
			}
		})
	}
}
