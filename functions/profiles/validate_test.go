package profiles

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"connectrpc.com/connect"

	appv1 "github.com/hangar-dev/hangar/gen/svc/app/v1"
	"github.com/hangar-dev/hangar/internal/testenv"
	"github.com/hangar-dev/hangar/platform/ids"
)

type mutation func(*appv1.CreateProfileRequest)

func manyStrings(n int, format string) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf(format, i)
	}
	return out
}

func secret(s *appv1.ProfileSecret) mutation {
	return func(r *appv1.CreateProfileRequest) { r.Secrets = []*appv1.ProfileSecret{s} }
}

func repo(p *appv1.ProfileRepo) mutation {
	return func(r *appv1.CreateProfileRequest) { r.Repos = []*appv1.ProfileRepo{p} }
}

func grant(g *appv1.ProfileIntegrationGrant) mutation {
	return func(r *appv1.CreateProfileRequest) { r.IntegrationGrants = []*appv1.ProfileIntegrationGrant{g} }
}

func apps(a ...*appv1.SessionApp) mutation {
	return func(r *appv1.CreateProfileRequest) { r.Apps = a }
}

// TestInvalidFieldIsNamed runs each invalid request through CreateProfile and UpdateProfile,
// which share one validation, and expects invalid_argument naming exactly that field.
func TestInvalidFieldIsNamed(t *testing.T) {
	t.Parallel()
	lim := defaultLimits()
	cases := []struct {
		name   string
		mutate mutation
		field  string
	}{
		{"name missing", func(r *appv1.CreateProfileRequest) { r.Name = "" }, "name"},
		{"name only spaces", func(r *appv1.CreateProfileRequest) { r.Name = " \t " }, "name"},
		{"name of 81 characters", func(r *appv1.CreateProfileRequest) { r.Name = strings.Repeat("é", 81) }, "name"},
		{"name with control character", func(r *appv1.CreateProfileRequest) { r.Name = "a\x07b" }, "name"},
		{"name with newline", func(r *appv1.CreateProfileRequest) { r.Name = "a\nb" }, "name"},
		{"image_id missing", func(r *appv1.CreateProfileRequest) { r.ImageId = " " }, "image_id"},
		{"image_id too long", func(r *appv1.CreateProfileRequest) { r.ImageId = strings.Repeat("i", 513) }, "image_id"},
		{"description too long", func(r *appv1.CreateProfileRequest) { r.Description = strings.Repeat("d", 2001) }, "description"},
		{"description with control character", func(r *appv1.CreateProfileRequest) { r.Description = "bell\x07" }, "description"},
		{"icon too long", func(r *appv1.CreateProfileRequest) { r.Icon = strings.Repeat("i", 65) }, "icon"},
		{"harness too long", func(r *appv1.CreateProfileRequest) { r.Harness = new(strings.Repeat("h", 101)) }, "harness"},
		{"model too long", func(r *appv1.CreateProfileRequest) { r.Model = new(strings.Repeat("m", 101)) }, "model"},
		{"effort too long", func(r *appv1.CreateProfileRequest) { r.Effort = new(strings.Repeat("e", 101)) }, "effort"},
		{"designation too long", func(r *appv1.CreateProfileRequest) { r.Designation = new(strings.Repeat("d", 101)) }, "designation"},
		{"model_router too long", func(r *appv1.CreateProfileRequest) { r.ModelRouter = new(strings.Repeat("r", 101)) }, "model_router"},

		{"env name starting with digit", func(r *appv1.CreateProfileRequest) { r.EnvVars["1BAD"] = "x" }, `env_vars["1BAD"]`},
		{"env name with dash", func(r *appv1.CreateProfileRequest) { r.EnvVars["MY-VAR"] = "x" }, `env_vars["MY-VAR"]`},
		{"env name empty", func(r *appv1.CreateProfileRequest) { r.EnvVars[""] = "x" }, `env_vars[""]`},
		{"env value too big", func(r *appv1.CreateProfileRequest) {
			r.EnvVars["BIG"] = strings.Repeat("v", lim.MaxValueBytes+1)
		}, `env_vars["BIG"]`},
		{"env value with NUL", func(r *appv1.CreateProfileRequest) { r.EnvVars["NUL"] = "a\x00b" }, `env_vars["NUL"]`},
		{"too many env vars", func(r *appv1.CreateProfileRequest) {
			for _, k := range manyStrings(lim.MaxProfileEnvVars+1, "V%d") {
				r.EnvVars[k] = ""
			}
		}, "env_vars"},

		{"skill with capital", func(r *appv1.CreateProfileRequest) { r.Skills = []string{"Go"} }, "skills[0]"},
		{"skill starting with dash", func(r *appv1.CreateProfileRequest) { r.Skills = []string{"go", "-x"} }, "skills[1]"},
		{"skill of 65 characters", func(r *appv1.CreateProfileRequest) { r.Skills = []string{strings.Repeat("s", 65)} }, "skills[0]"},
		{"duplicate skill", func(r *appv1.CreateProfileRequest) { r.Skills = []string{"go", "sql", "go"} }, "skills[2]"},
		{"too many skills", func(r *appv1.CreateProfileRequest) { r.Skills = manyStrings(lim.MaxProfileListItems+1, "s%d") }, "skills"},

		{"network default unknown", func(r *appv1.CreateProfileRequest) { r.Network.Default = "block" }, "network.default"},
		{"network default in capitals", func(r *appv1.CreateProfileRequest) { r.Network.Default = "DENY" }, "network.default"},
		{"allow host invalid", func(r *appv1.CreateProfileRequest) { r.Network.AllowHosts = []string{"ok.com", "bad_host.com"} }, "network.allow_hosts[1]"},
		{"allow host with wildcard", func(r *appv1.CreateProfileRequest) { r.Network.AllowHosts = []string{"*.github.com"} }, "network.allow_hosts[0]"},
		{"allow host with bad port", func(r *appv1.CreateProfileRequest) { r.Network.AllowHosts = []string{"github.com:70000"} }, "network.allow_hosts[0]"},
		{"allow host duplicate by case", func(r *appv1.CreateProfileRequest) {
			r.Network.AllowHosts = []string{"github.com", "GitHub.com"}
		}, "network.allow_hosts[1]"},
		{"too many allow hosts", func(r *appv1.CreateProfileRequest) {
			r.Network.AllowHosts = manyStrings(lim.MaxProfileListItems+1, "h%d.example.com")
		}, "network.allow_hosts"},
		{"pattern with inner wildcard", func(r *appv1.CreateProfileRequest) {
			r.Network.AllowHostPatterns = []string{"*.a.com", "*.b.com", "api.*.example.com"}
		}, "network.allow_host_patterns[2]"},
		{"pattern lone wildcard", func(r *appv1.CreateProfileRequest) { r.Network.AllowHostPatterns = []string{"*"} }, "network.allow_host_patterns[0]"},
		{"pattern duplicate", func(r *appv1.CreateProfileRequest) {
			r.Network.AllowHostPatterns = []string{"*.github.com", "*.GITHUB.com"}
		}, "network.allow_host_patterns[1]"},

		{"secret ref missing", secret(&appv1.ProfileSecret{EnvVar: "T"}), "secrets[0].ref"},
		{"secret ref with space", secret(&appv1.ProfileSecret{Ref: "my secret", EnvVar: "T"}), "secrets[0].ref"},
		{"secret ref too long", secret(&appv1.ProfileSecret{Ref: strings.Repeat("r", 129), EnvVar: "T"}), "secrets[0].ref"},
		{"secret env_var missing", secret(&appv1.ProfileSecret{Ref: "r"}), "secrets[0].env_var"},
		{"secret env_var invalid", secret(&appv1.ProfileSecret{Ref: "r", EnvVar: "9LIVES"}), "secrets[0].env_var"},
		{"secret env_var also in env_vars", secret(&appv1.ProfileSecret{Ref: "r", EnvVar: "GOFLAGS"}), "secrets[0].env_var"},
		{"two secrets with one env_var", func(r *appv1.CreateProfileRequest) {
			r.Secrets = []*appv1.ProfileSecret{{Ref: "a", EnvVar: "T"}, {Ref: "b", EnvVar: "T"}}
		}, "secrets[1].env_var"},
		{"secret mode unknown", secret(&appv1.ProfileSecret{Ref: "r", EnvVar: "T", Mode: "file"}), "secrets[0].mode"},
		{"proxy secret without hosts", secret(&appv1.ProfileSecret{Ref: "r", EnvVar: "T", Mode: "proxy"}), "secrets[0].allow_hosts"},
		{"env secret with hosts", secret(&appv1.ProfileSecret{Ref: "r", EnvVar: "T", AllowHosts: []string{"a.com"}}), "secrets[0].allow_hosts"},
		{"env secret with patterns", secret(&appv1.ProfileSecret{Ref: "r", EnvVar: "T", Mode: "env", AllowHostPatterns: []string{"*.a.com"}}), "secrets[0].allow_host_patterns"},
		{"proxy secret with invalid host", secret(&appv1.ProfileSecret{Ref: "r", EnvVar: "T", Mode: "proxy", AllowHosts: []string{"a..com"}}), "secrets[0].allow_hosts[0]"},
		{"proxy secret with invalid pattern", secret(&appv1.ProfileSecret{Ref: "r", EnvVar: "T", Mode: "proxy", AllowHostPatterns: []string{"a.*.com"}}), "secrets[0].allow_host_patterns[0]"},
		{"too many secrets", func(r *appv1.CreateProfileRequest) {
			for _, name := range manyStrings(lim.MaxProfileListItems+1, "S%d") {
				r.Secrets = append(r.Secrets, &appv1.ProfileSecret{Ref: "r", EnvVar: name})
			}
		}, "secrets"},

		{"grant without connection", grant(&appv1.ProfileIntegrationGrant{Operation: "op"}), "integration_grants[0].connection_id"},
		{"grant without operation", grant(&appv1.ProfileIntegrationGrant{ConnectionId: "c"}), "integration_grants[0].operation"},
		{"grant scope unknown", grant(&appv1.ProfileIntegrationGrant{ConnectionId: "c", Operation: "op", CredentialScope: "team"}), "integration_grants[0].credential_scope"},
		{"grant with empty constraint", grant(&appv1.ProfileIntegrationGrant{ConnectionId: "c", Operation: "op", ResourceConstraints: []string{"a", " "}}), "integration_grants[0].resource_constraints[1]"},

		{"repo path missing", repo(&appv1.ProfileRepo{}), "repos[0].path"},
		{"repo path relative", repo(&appv1.ProfileRepo{Path: "work/api"}), "repos[0].path"},
		{"repo path with trailing slash", repo(&appv1.ProfileRepo{Path: "/work/api/"}), "repos[0].path"},
		{"repo path with dot-dot", repo(&appv1.ProfileRepo{Path: "/work/../etc"}), "repos[0].path"},
		{"repo path escaping the root", repo(&appv1.ProfileRepo{Path: "/../etc"}), "repos[0].path"},
		{"repo path is the root", repo(&appv1.ProfileRepo{Path: "/"}), "repos[0].path"},
		{"repo path duplicate", func(r *appv1.CreateProfileRequest) {
			r.Repos = []*appv1.ProfileRepo{{Path: "/a"}, {Path: "/b"}, {Path: "/a"}}
		}, "repos[2].path"},
		{"repo remote is a local path", repo(&appv1.ProfileRepo{Path: "/a", RemoteUrl: "/srv/git/a.git"}), "repos[0].remote_url"},
		{"repo remote is a file URL", repo(&appv1.ProfileRepo{Path: "/a", RemoteUrl: "file:///srv/git/a.git"}), "repos[0].remote_url"},
		{"repo remote without owner", func(r *appv1.CreateProfileRequest) {
			r.Repos = []*appv1.ProfileRepo{{Path: "/a"}, {Path: "/b", RemoteUrl: "https://github.com/hangar"}}
		}, "repos[1].remote_url"},
		{"repo remote with token", repo(&appv1.ProfileRepo{Path: "/a", RemoteUrl: "https://x-access-token:ghp_abc@github.com/o/r.git"}), "repos[0].remote_url"},
		{"repo remote with an empty ref", repo(&appv1.ProfileRepo{Path: "/a", RemoteUrl: "https://github.com/o/r.git#"}), "repos[0].remote_url"},
		{"repo remote with an option for a ref", repo(&appv1.ProfileRepo{Path: "/a", RemoteUrl: "https://github.com/o/r.git#--upload-pack=sh"}), "repos[0].remote_url"},
		{"repo remote with a ref git refuses", repo(&appv1.ProfileRepo{Path: "/a", RemoteUrl: "git@github.com:o/r.git#a..b"}), "repos[0].remote_url"},
		{"repo remote with https user", repo(&appv1.ProfileRepo{Path: "/a", RemoteUrl: "https://ghp_abc@github.com/o/r.git"}), "repos[0].remote_url"},

		{"app name with capital", apps(&appv1.SessionApp{Name: "Web", Port: 80}), "apps[0].name"},
		{"app name of 32 characters", apps(&appv1.SessionApp{Name: "a" + strings.Repeat("b", 31), Port: 80}), "apps[0].name"},
		{"app name duplicate", apps(&appv1.SessionApp{Name: "web", Port: 80}, &appv1.SessionApp{Name: "web", Port: 81}), "apps[1].name"},
		{"app name reserved", apps(&appv1.SessionApp{Name: "ide", Port: 80}), "apps[0].name"},
		{"app port zero", apps(&appv1.SessionApp{Name: "web"}), "apps[0].port"},
		{"app port too big", apps(&appv1.SessionApp{Name: "web", Port: 65536}), "apps[0].port"},
		{"app port duplicate", apps(&appv1.SessionApp{Name: "web", Port: 80}, &appv1.SessionApp{Name: "api", Port: 80}), "apps[1].port"},

		{"profile too large to store", func(r *appv1.CreateProfileRequest) {
			for _, k := range manyStrings(30, "BIG%d") {
				r.EnvVars[k] = strings.Repeat("v", lim.MaxValueBytes)
			}
		}, "env_vars"},
	}
	f := newFixture(t, lim)
	ctx := as(t, alice)
	for _, tc := range cases {
		req := validRequest()
		tc.mutate(req)
		t.Run("create with "+tc.name, func(t *testing.T) {
			_, err := f.svc.CreateProfile(ctx, connect.NewRequest(req))
			if got := testenv.ViolatedFields(t, err); !slices.Equal(got, []string{tc.field}) {
				t.Fatalf("violations name %v, want [%s] (%v)", got, tc.field, err)
			}
		})
		t.Run("update with "+tc.name, func(t *testing.T) {
			_, err := f.update(t, ctx, ids.New(idPrefix), req)
			if got := testenv.ViolatedFields(t, err); !slices.Equal(got, []string{tc.field}) {
				t.Fatalf("violations name %v, want [%s] (%v)", got, tc.field, err)
			}
		})
	}
}

func TestEveryInvalidFieldIsReportedAtOnce(t *testing.T) {
	t.Parallel()
	f := newFixture(t, defaultLimits())
	req := validRequest()
	req.Name = ""
	req.EnvVars["1BAD"] = "x"
	req.Network.AllowHostPatterns = []string{"*.a.com", "*.b.com", "*"}
	req.Secrets[0].EnvVar = ""
	req.Repos[1].RemoteUrl = "../local"
	req.Apps[0].Port = 0
	want := []string{
		"name", `env_vars["1BAD"]`, "network.allow_host_patterns[2]", "secrets[0].env_var",
		"repos[1].remote_url", "apps[0].port",
	}
	_, err := f.svc.CreateProfile(as(t, alice), connect.NewRequest(req))
	if got := testenv.ViolatedFields(t, err); !slices.Equal(got, want) {
		t.Fatalf("violations name %v, want %v", got, want)
	}
	upd := toUpdate(t, "", req)
	_, err = f.svc.UpdateProfile(as(t, alice), connect.NewRequest(upd))
	if got := testenv.ViolatedFields(t, err); !slices.Equal(got, append([]string{"id"}, want...)) {
		t.Fatalf("update violations name %v, want id and %v", got, want)
	}
}
