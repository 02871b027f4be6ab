package profiles

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/hangar-dev/hangar/automation/catalog"
	appv1 "github.com/hangar-dev/hangar/gen/svc/app/v1"
	"github.com/hangar-dev/hangar/internal/testenv"
	"github.com/hangar-dev/hangar/platform/auth"
	"github.com/hangar-dev/hangar/platform/clock"
	"github.com/hangar-dev/hangar/platform/config"
	"github.com/hangar-dev/hangar/platform/ids"
	"github.com/hangar-dev/hangar/records/secrets"
)

var t0 = time.Date(2025, 3, 1, 9, 0, 0, 0, time.UTC)

const (
	alice = "user_alice"
	bob   = "user_bob"
	root  = "user_root"
)

type fixture struct {
	svc   *Service
	clock *clock.Fake
}

func newFixture(t *testing.T, lim config.Limits) fixture {
	t.Helper()
	db, _ := testenv.Firestore(t)
	c := clock.NewFake(t0)
	return fixture{svc: New(db, nil, nil, c, lim), clock: c}
}

func defaultLimits() config.Limits { return config.Default().Limits }

// as is a request context for a caller; root is the admin.
func as(t *testing.T, userID string) context.Context {
	return auth.WithPrincipal(t.Context(), auth.Principal{UserID: userID, Admin: userID == root})
}

// validRequest sets every field of a profile, validly.
func validRequest() *appv1.CreateProfileRequest {
	return &appv1.CreateProfileRequest{
		Name:              "Go backend",
		Description:       "Builds the API.\nUses Postgres.",
		Icon:              "🐹",
		ImageId:           "img_go",
		IncludeUserTokens: true,
		EnvVars:           map[string]string{"GOFLAGS": "-mod=mod", "_DEBUG": "1"},
		Skills:            []string{"go", "sql-review"},
		Network: &appv1.ProfileNetwork{
			Default:           "deny",
			AllowHosts:        []string{"proxy.golang.org", "10.0.0.5:5432"},
			AllowHostPatterns: []string{"*.github.com"},
		},
		Secrets: []*appv1.ProfileSecret{
			{Ref: "org/github-token", EnvVar: "GH_TOKEN", Mode: "proxy", AllowHosts: []string{"api.github.com"}, AllowHostPatterns: []string{"*.githubusercontent.com"}},
			{Ref: "team/pg.password", EnvVar: "PGPASSWORD", Mode: "env"},
		},
		Harness:     new("claude-code"),
		Model:       new("opus"),
		Effort:      new("high"),
		Designation: new("backend"),
		ModelRouter: new("router_main"),
		IntegrationGrants: []*appv1.ProfileIntegrationGrant{
			{ConnectionId: "conn_github", Operation: "pull_requests.create", ResourceConstraints: []string{"repo:hangar-dev/*"}, CredentialScope: "org"},
		},
		Repos: []*appv1.ProfileRepo{
			{Path: "/work/api", RemoteUrl: "git@github.com:hangar-dev/api.git"},
			{Path: "/work/scratch"},
		},
		Apps: []*appv1.SessionApp{{Name: "web", Port: 3000}, {Name: "api-docs", Port: 8080}},
	}
}

// storedValid is what validRequest becomes.
func storedValid(id string, created, updated time.Time) *appv1.Profile {
	in := validRequest()
	return &appv1.Profile{
		Id: id, Name: in.Name, Description: in.Description, Icon: in.Icon, ImageId: in.ImageId,
		IncludeUserTokens: true, EnvVars: in.EnvVars, Skills: in.Skills, Network: in.Network,
		Secrets: in.Secrets, Harness: in.Harness, Model: in.Model, Effort: in.Effort,
		Designation: in.Designation, ModelRouter: in.ModelRouter, IntegrationGrants: in.IntegrationGrants,
		Repos: []*appv1.ProfileRepo{
			{Path: "/work/api", RemoteUrl: "git@github.com:hangar-dev/api.git", Remote: &appv1.ProfileRepoRemote{Host: "github.com", Owner: "hangar-dev", Name: "api"}},
			{Path: "/work/scratch"},
		},
		Apps:      in.Apps,
		CreatedAt: clock.Format(created), UpdatedAt: clock.Format(updated),
	}
}

func named(name string) *appv1.CreateProfileRequest {
	req := validRequest()
	req.Name = name
	return req
}

// toUpdate turns a create request into the equivalent update of profile id: the two messages
// carry the same fields under the same JSON names.
func toUpdate(t *testing.T, id string, in *appv1.CreateProfileRequest) *appv1.UpdateProfileRequest {
	t.Helper()
	b, err := protojson.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	out := &appv1.UpdateProfileRequest{}
	if err := protojson.Unmarshal(b, out); err != nil {
		t.Fatal(err)
	}
	out.Id = id
	return out
}

func (f fixture) create(t *testing.T, ctx context.Context, req *appv1.CreateProfileRequest) *appv1.Profile {
	t.Helper()
	resp, err := f.svc.CreateProfile(ctx, connect.NewRequest(req))
	if err != nil {
		t.Fatalf("create %q: %v", req.GetName(), err)
	}
	return resp.Msg.GetProfile()
}

func (f fixture) get(t *testing.T, id string) *appv1.Profile {
	t.Helper()
	resp, err := f.svc.GetProfile(as(t, bob), connect.NewRequest(&appv1.GetProfileRequest{Id: id}))
	if err != nil {
		t.Fatalf("get %s: %v", id, err)
	}
	return resp.Msg.GetProfile()
}

func (f fixture) update(t *testing.T, ctx context.Context, id string, in *appv1.CreateProfileRequest) (*appv1.Profile, error) {
	t.Helper()
	resp, err := f.svc.UpdateProfile(ctx, connect.NewRequest(toUpdate(t, id, in)))
	if err != nil {
		return nil, err
	}
	return resp.Msg.GetProfile(), nil
}

func (f fixture) remove(ctx context.Context, id string) error {
	_, err := f.svc.DeleteProfile(ctx, connect.NewRequest(&appv1.DeleteProfileRequest{Id: id}))
	return err
}

func (f fixture) list(t *testing.T, includeArchived bool) []string {
	t.Helper()
	resp, err := f.svc.ListProfiles(as(t, bob), connect.NewRequest(&appv1.ListProfilesRequest{IncludeArchived: includeArchived}))
	if err != nil {
		t.Fatalf("list: %v", err)
	}
	var names []string
	for _, p := range resp.Msg.GetProfiles() {
		names = append(names, p.GetName())
	}
	return names
}

func wantProto(t *testing.T, what string, got, want proto.Message) {
	t.Helper()
	if !proto.Equal(got, want) {
		t.Fatalf("%s:\n got %v\nwant %v", what, got, want)
	}
}

func TestCreatedProfileReadsBackFromGetAndList(t *testing.T) {
	t.Parallel()
	f := newFixture(t, defaultLimits())
	created := f.create(t, as(t, alice), validRequest())
	if !ids.Valid(idPrefix, created.GetId()) {
		t.Fatalf("id %q is not a profile id", created.GetId())
	}
	want := storedValid(created.GetId(), t0, t0)
	wantProto(t, "created", created, want)
	wantProto(t, "got", f.get(t, created.GetId()), want)

	resp, err := f.svc.ListProfiles(as(t, bob), connect.NewRequest(&appv1.ListProfilesRequest{}))
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Msg.GetProfiles()) != 1 {
		t.Fatalf("listed %d profiles, want 1", len(resp.Msg.GetProfiles()))
	}
	wantProto(t, "listed", resp.Msg.GetProfiles()[0], want)
}

func TestCreateStoresNormalisedValues(t *testing.T) {
	t.Parallel()
	f := newFixture(t, defaultLimits())
	req := &appv1.CreateProfileRequest{
		Name:    "  Spaced name \t",
		ImageId: " img_1 ",
		Network: &appv1.ProfileNetwork{
			AllowHosts:        []string{"API.GitHub.com:0443", "[2001:DB8::1]:443"},
			AllowHostPatterns: []string{"*.GitHub.com"},
		},
		Secrets:           []*appv1.ProfileSecret{{Ref: "a/b", EnvVar: "TOKEN"}},
		IntegrationGrants: []*appv1.ProfileIntegrationGrant{{ConnectionId: "conn_1", Operation: "issues.read"}},
		Repos: []*appv1.ProfileRepo{{
			Path: "/work/app", RemoteUrl: "https://GitLab.com/group/sub/app.git/",
			Remote: &appv1.ProfileRepoRemote{Host: "evil.example.com", Owner: "x", Name: "y"},
		}},
		Harness: new(""),
		Model:   new("  sonnet "),
	}
	got := f.create(t, as(t, alice), req)
	want := &appv1.Profile{
		Id: got.GetId(), Name: "Spaced name", ImageId: "img_1",
		Network: &appv1.ProfileNetwork{
			Default:           "deny",
			AllowHosts:        []string{"api.github.com:443", "[2001:db8::1]:443"},
			AllowHostPatterns: []string{"*.github.com"},
		},
		Secrets:           []*appv1.ProfileSecret{{Ref: "a/b", EnvVar: "TOKEN", Mode: "env"}},
		IntegrationGrants: []*appv1.ProfileIntegrationGrant{{ConnectionId: "conn_1", Operation: "issues.read", CredentialScope: "user"}},
		Repos: []*appv1.ProfileRepo{{
			Path: "/work/app", RemoteUrl: "https://GitLab.com/group/sub/app.git/",
			Remote: &appv1.ProfileRepoRemote{Host: "gitlab.com", Owner: "group/sub", Name: "app"},
		}},
		Model:     new("sonnet"),
		CreatedAt: clock.Format(t0), UpdatedAt: clock.Format(t0),
	}
	wantProto(t, "created", got, want)
	wantProto(t, "got", f.get(t, got.GetId()), want)
}

func TestUpdateReplacesEveryField(t *testing.T) {
	t.Parallel()
	f := newFixture(t, defaultLimits())
	created := f.create(t, as(t, alice), validRequest())
	f.clock.Advance(time.Hour)

	sparse := &appv1.CreateProfileRequest{Name: "Renamed", ImageId: "img_2", Network: &appv1.ProfileNetwork{Default: "allow"}}
	updated, err := f.update(t, as(t, alice), created.GetId(), sparse)
	if err != nil {
		t.Fatal(err)
	}
	want := &appv1.Profile{
		Id: created.GetId(), Name: "Renamed", ImageId: "img_2", Network: &appv1.ProfileNetwork{Default: "allow"},
		CreatedAt: clock.Format(t0), UpdatedAt: clock.Format(t0.Add(time.Hour)),
	}
	wantProto(t, "updated", updated, want)
	wantProto(t, "got", f.get(t, created.GetId()), want)

	full, err := f.update(t, as(t, alice), created.GetId(), validRequest())
	if err != nil {
		t.Fatal(err)
	}
	wantProto(t, "updated back", full, storedValid(created.GetId(), t0, t0.Add(time.Hour)))
}

func TestRenameFreesTheOldName(t *testing.T) {
	t.Parallel()
	f := newFixture(t, defaultLimits())
	p := f.create(t, as(t, alice), named("Old"))
	if _, err := f.update(t, as(t, alice), p.GetId(), named("New")); err != nil {
		t.Fatal(err)
	}
	f.create(t, as(t, bob), named("old"))
	_, err := f.svc.CreateProfile(as(t, bob), connect.NewRequest(named("NEW")))
	testenv.WantCode(t, err, connect.CodeAlreadyExists)
}

func TestDeleteArchives(t *testing.T) {
	t.Parallel()
	f := newFixture(t, defaultLimits())
	ctx := as(t, alice)
	a := f.create(t, ctx, named("Alpha"))
	f.create(t, ctx, named("Beta"))
	f.clock.Advance(time.Minute)
	if err := f.remove(ctx, a.GetId()); err != nil {
		t.Fatal(err)
	}

	t.Run("get still returns it, archived", func(t *testing.T) {
		got := f.get(t, a.GetId())
		if !got.GetArchived() || got.GetUpdatedAt() != clock.Format(t0.Add(time.Minute)) {
			t.Fatalf("archived=%v updated_at=%s, want true and the time of the delete", got.GetArchived(), got.GetUpdatedAt())
		}
	})
	t.Run("list hides it unless include_archived", func(t *testing.T) {
		if got := f.list(t, false); !slices.Equal(got, []string{"Beta"}) {
			t.Fatalf("list = %v, want [Beta]", got)
		}
		if got := f.list(t, true); !slices.Equal(got, []string{"Alpha", "Beta"}) {
			t.Fatalf("list with archived = %v, want [Alpha Beta]", got)
		}
	})
	t.Run("deleting again succeeds", func(t *testing.T) {
		if err := f.remove(ctx, a.GetId()); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("update is refused", func(t *testing.T) {
		_, err := f.update(t, ctx, a.GetId(), named("Alpha"))
		testenv.WantCode(t, err, connect.CodeFailedPrecondition)
	})
	t.Run("name is free again", func(t *testing.T) {
		f.create(t, as(t, bob), named("ALPHA"))
	})
}

func TestOnlyCreatorOrAdminMayChange(t *testing.T) {
	t.Parallel()
	f := newFixture(t, defaultLimits())
	cases := []struct {
		caller string
		want   connect.Code // 0 means allowed
	}{
		{alice, 0},
		{bob, connect.CodePermissionDenied},
		{root, 0},
		{"", connect.CodePermissionDenied},
	}
	for _, tc := range cases {
		t.Run("update by "+tc.caller, func(t *testing.T) {
			p := f.create(t, as(t, alice), named(ids.New("name")))
			_, err := f.update(t, as(t, tc.caller), p.GetId(), named(ids.New("renamed")))
			if tc.want == 0 && err != nil {
				t.Fatalf("update refused: %v", err)
			}
			if tc.want != 0 {
				testenv.WantCode(t, err, tc.want)
				wantProto(t, "unchanged", f.get(t, p.GetId()), p)
			}
		})
		t.Run("delete by "+tc.caller, func(t *testing.T) {
			p := f.create(t, as(t, alice), named(ids.New("name")))
			err := f.remove(as(t, tc.caller), p.GetId())
			if tc.want == 0 && err != nil {
				t.Fatalf("delete refused: %v", err)
			}
			if tc.want != 0 {
				testenv.WantCode(t, err, tc.want)
			}
			if archived := f.get(t, p.GetId()).GetArchived(); archived != (tc.want == 0) {
				t.Fatalf("archived = %v after delete by %q", archived, tc.caller)
			}
		})
	}
	t.Run("anyone reads anyone's profile", func(t *testing.T) {
		p := f.create(t, as(t, alice), named("Shared"))
		wantProto(t, "read by bob", f.get(t, p.GetId()), p)
	})
}

func TestDuplicateNameIsAlreadyExists(t *testing.T) {
	t.Parallel()
	f := newFixture(t, defaultLimits())
	taken := f.create(t, as(t, alice), named("Go Backend"))
	other := f.create(t, as(t, alice), named("Other"))
	cases := []struct {
		name string
		do   func() error
	}{
		{"create with same name", func() error { return createErr(f, t, "Go Backend") }},
		{"create differing in case", func() error { return createErr(f, t, "go BACKEND") }},
		{"create differing in surrounding space", func() error { return createErr(f, t, "  Go Backend ") }},
		{"rename another profile to it", func() error {
			_, err := f.update(t, as(t, alice), other.GetId(), named("GO BACKEND"))
			return err
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			testenv.WantCode(t, tc.do(), connect.CodeAlreadyExists)
		})
	}
	t.Run("a profile may change the case of its own name", func(t *testing.T) {
		got, err := f.update(t, as(t, alice), taken.GetId(), named("go backend"))
		if err != nil || got.GetName() != "go backend" {
			t.Fatalf("update = %v, %v", got.GetName(), err)
		}
	})
}

func createErr(f fixture, t *testing.T, name string) error {
	_, err := f.svc.CreateProfile(as(t, bob), connect.NewRequest(named(name)))
	return err
}

func TestConcurrentCreatesOfOneNameLetExactlyOneWin(t *testing.T) {
	t.Parallel()
	f := newFixture(t, defaultLimits())
	const n = 5
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { errs[i] = createErr(f, t, "Race") })
	}
	wg.Wait()
	won := 0
	for _, err := range errs {
		switch {
		case err == nil:
			won++
		case connect.CodeOf(err) != connect.CodeAlreadyExists:
			t.Fatalf("create failed with %v, want success or already_exists", err)
		}
	}
	if won != 1 || len(f.list(t, false)) != 1 {
		t.Fatalf("%d creates won and %d profiles exist, want 1 and 1", won, len(f.list(t, false)))
	}
}

func TestListSortsByNameCaseInsensitivelyThenID(t *testing.T) {
	t.Parallel()
	f := newFixture(t, defaultLimits())
	ctx := as(t, alice)
	f.create(t, ctx, named("beta"))
	first := f.create(t, ctx, named("Dup"))
	if err := f.remove(ctx, first.GetId()); err != nil {
		t.Fatal(err)
	}
	second := f.create(t, ctx, named("dup"))
	f.create(t, ctx, named("Alpha"))
	if got, want := f.list(t, false), []string{"Alpha", "beta", "dup"}; !slices.Equal(got, want) {
		t.Fatalf("list = %v, want %v", got, want)
	}
	want := []string{"Alpha", "beta", "Dup", "dup"}
	if second.GetId() < first.GetId() {
		want[2], want[3] = want[3], want[2]
	}
	if got := f.list(t, true); !slices.Equal(got, want) {
		t.Fatalf("list with archived = %v, want %v", got, want)
	}
}

func TestProfileCountIsCapped(t *testing.T) {
	t.Parallel()
	lim := defaultLimits()
	lim.Profiles.Max = 2
	f := newFixture(t, lim)
	ctx := as(t, alice)
	a := f.create(t, ctx, named("a"))
	f.create(t, ctx, named("b"))
	testenv.WantCode(t, createErr(f, t, "c"), connect.CodeResourceExhausted)
	if err := f.remove(ctx, a.GetId()); err != nil {
		t.Fatal(err)
	}
	f.create(t, ctx, named("c"))
	if got := f.list(t, false); !slices.Equal(got, []string{"b", "c"}) {
		t.Fatalf("list = %v, want [b c]", got)
	}
	if got := f.list(t, true); !slices.Equal(got, []string{"a", "b"}) {
		t.Fatalf("list with archived = %v, want the first two by name, [a b]", got)
	}
}

func TestIDIsRequiredAndMustName(t *testing.T) {
	t.Parallel()
	f := newFixture(t, defaultLimits())
	ctx := as(t, alice)
	calls := []struct {
		method, field string
		call          func(id string) error
	}{
		{"GetProfile", "id", func(id string) error {
			_, err := f.svc.GetProfile(ctx, connect.NewRequest(&appv1.GetProfileRequest{Id: id}))
			return err
		}},
		{"UpdateProfile", "id", func(id string) error {
			_, err := f.update(t, ctx, id, validRequest())
			return err
		}},
		{"DeleteProfile", "id", func(id string) error { return f.remove(ctx, id) }},
		{"DiscoverProfileRepos", "profile_id", func(id string) error {
			_, err := f.svc.DiscoverProfileRepos(ctx, connect.NewRequest(&appv1.DiscoverProfileReposRequest{ProfileId: id}))
			return err
		}},
	}
	for _, c := range calls {
		t.Run(c.method+" without id", func(t *testing.T) {
			if got := testenv.ViolatedFields(t, c.call("")); !slices.Equal(got, []string{c.field}) {
				t.Fatalf("violations name %v, want [%s]", got, c.field)
			}
		})
		for _, id := range []string{"nope", ids.New("task"), ids.New(idPrefix)} {
			t.Run(c.method+" of "+id, func(t *testing.T) {
				testenv.WantCode(t, c.call(id), connect.CodeNotFound)
			})
		}
	}
}

func TestDiscoverProfileReposReportsConfiguredRemotes(t *testing.T) {
	t.Parallel()
	f := newFixture(t, defaultLimits())
	req := named("Repos")
	req.Repos = append(req.Repos, &appv1.ProfileRepo{Path: "/work/lib", RemoteUrl: "https://gitlab.com/group/sub/lib"})
	p := f.create(t, as(t, alice), req)
	resp, err := f.svc.DiscoverProfileRepos(as(t, bob), connect.NewRequest(&appv1.DiscoverProfileReposRequest{ProfileId: p.GetId()}))
	if err != nil {
		t.Fatal(err)
	}
	want := &appv1.DiscoverProfileReposResponse{Repos: []*appv1.DiscoveredRepo{
		{Path: "/work/api", Remotes: []*appv1.DiscoveredRemote{{
			Name: "origin", Url: "git@github.com:hangar-dev/api.git",
			Parsed: &appv1.ProfileRepoRemote{Host: "github.com", Owner: "hangar-dev", Name: "api"},
		}}},
		{Path: "/work/scratch"},
		{Path: "/work/lib", Remotes: []*appv1.DiscoveredRemote{{
			Name: "origin", Url: "https://gitlab.com/group/sub/lib",
			Parsed: &appv1.ProfileRepoRemote{Host: "gitlab.com", Owner: "group/sub", Name: "lib"},
		}}},
	}}
	wantProto(t, "discovered", resp.Msg, want)
}

func TestLaunch(t *testing.T) {
	t.Parallel()
	f := newFixture(t, defaultLimits())
	ctx := as(t, alice)
	live := f.create(t, ctx, named("Live"))
	archived := f.create(t, ctx, named("Gone"))
	if err := f.remove(ctx, archived.GetId()); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		id   string
		want connect.Code // 0 means a snapshot
	}{
		{"of a live profile", live.GetId(), 0},
		{"of an unknown id", ids.New(idPrefix), connect.CodeNotFound},
		{"of a malformed id", "prof_nope", connect.CodeNotFound},
		{"of an empty id", "", connect.CodeNotFound},
		{"of an archived profile", archived.GetId(), connect.CodeFailedPrecondition},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, env, secrets, err := f.svc.Launch(t.Context(), tc.id)
			if tc.want != 0 {
				testenv.WantCode(t, err, tc.want)
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			in := validRequest()
			if !maps.Equal(env, in.GetEnvVars()) {
				t.Fatalf("env vars %v, want %v", env, in.GetEnvVars())
			}
			if len(secrets) != len(in.GetSecrets()) || len(secrets) == 0 || secrets[0].GetRef() != in.GetSecrets()[0].GetRef() ||
				secrets[0].GetEnvVar() != in.GetSecrets()[0].GetEnvVar() {
				t.Fatalf("secrets %v, want %v", secrets, in.GetSecrets())
			}
			wantProto(t, "snapshot", got, &appv1.ProfileSnapshot{
				Id: live.GetId(), Name: "Live", ImageId: in.GetImageId(), Harness: in.Harness, Model: in.Model,
				Effort: in.Effort, ModelRouter: in.ModelRouter, UpdatedAt: clock.Format(t0), Apps: in.Apps,
				IncludeUserTokens: in.GetIncludeUserTokens(),
			})
		})
	}
}

// A profile may name only org secrets its saver may use: naming an admins-only secret is how a
// non-admin would read it (`env` in a session of the profile).
func TestSavingAProfileChecksTheSecretsPolicy(t *testing.T) {
	t.Parallel()
	db, _ := testenv.Firestore(t)
	_, sealer := testenv.Keyset(t)
	c := clock.NewFake(t0)
	store := secrets.New(db, sealer, c.Now, secrets.Limits{MaxValueBytes: 64, MaxSecrets: 10})
	svc := New(db, nil, store, c, defaultLimits())
	for name, access := range map[string]secrets.Access{
		"org/admin-only": {},
		"org/shared":     {Visibility: secrets.AllUsers},
		"org/for-bob":    {Visibility: secrets.Selected, UserIDs: []string{bob}},
	} {
		if _, _, err := store.Put(t.Context(), secrets.Put{Name: name, Value: "v", Access: &access}); err != nil {
			t.Fatal(err)
		}
	}
	req := func(name, ref string) *appv1.CreateProfileRequest {
		return &appv1.CreateProfileRequest{Name: name, ImageId: "img_go", Secrets: []*appv1.ProfileSecret{{Ref: ref, EnvVar: "TOKEN"}}}
	}
	cases := []struct {
		name, caller, ref string
		want              connect.Code // 0: saved
	}{
		{"a user naming an admins-only secret", alice, "org/admin-only", connect.CodePermissionDenied},
		{"a user naming a secret nobody put", alice, "org/none", connect.CodePermissionDenied},
		{"a user naming another user's selected secret", alice, "org/for-bob", connect.CodePermissionDenied},
		{"the selected user", bob, "org/for-bob", 0},
		{"a user naming an all-users secret", alice, "org/shared", 0},
		{"an admin naming an admins-only secret", root, "org/admin-only", 0},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := svc.CreateProfile(as(t, tc.caller), connect.NewRequest(req(fmt.Sprint("p", i), tc.ref)))
			if tc.want == 0 {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			testenv.WantCode(t, err, tc.want)
			if !strings.Contains(err.Error(), `"`+tc.ref+`"`) {
				t.Fatalf("error does not name the secret: %v", err)
			}
		})
	}
	t.Run("an update naming an admins-only secret", func(t *testing.T) {
		created, err := svc.CreateProfile(as(t, alice), connect.NewRequest(req("mine", "org/shared")))
		if err != nil {
			t.Fatal(err)
		}
		up := &appv1.UpdateProfileRequest{Id: created.Msg.GetProfile().GetId(), Name: "mine", ImageId: "img_go", Secrets: []*appv1.ProfileSecret{{Ref: "org/admin-only", EnvVar: "TOKEN"}}}
		_, err = svc.UpdateProfile(as(t, alice), connect.NewRequest(up))
		testenv.WantCode(t, err, connect.CodePermissionDenied)
	})
}

func TestKeyOptionsAnswerProfilesAndTheirRepos(t *testing.T) {
	t.Parallel()
	f := newFixture(t, defaultLimits())
	ctx := as(t, alice)
	backend := f.create(t, ctx, named("Backend"))
	docs := named("Docs")
	docs.Repos = []*appv1.ProfileRepo{
		{Path: "/work/api", RemoteUrl: "https://github.com/hangar-dev/api.git"},
		{Path: "/work/site", RemoteUrl: "https://gitlab.com/group/sub/site.git"},
		{Path: "/work/scratch"},
	}
	docsProfile := f.create(t, ctx, docs)
	gone := f.create(t, ctx, named("Gone"))
	if err := f.remove(ctx, gone.GetId()); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		noun string
		want []catalog.KeyOption
	}{
		{catalog.NounProfile, []catalog.KeyOption{{Key: backend.GetId(), Label: "Backend"}, {Key: docsProfile.GetId(), Label: "Docs"}}},
		{catalog.NounRepo, []catalog.KeyOption{
			{Key: "hangar-dev/api", Label: "github.com/hangar-dev/api (Backend, Docs)"},
			{Key: "gitlab.com/group/sub/site", Label: "gitlab.com/group/sub/site (Docs)"},
		}},
	} {
		t.Run(tc.noun, func(t *testing.T) {
			got, ok, err := f.svc.KeyOptions(ctx, tc.noun)
			if err != nil || !ok {
				t.Fatalf("KeyOptions(%q): ok %v, %v", tc.noun, ok, err)
			}
			if !slices.Equal(got, tc.want) {
				t.Fatalf("KeyOptions(%q) = %v\nwant %v", tc.noun, got, tc.want)
			}
		})
	}
	if _, ok, err := f.svc.KeyOptions(ctx, "planet"); ok || err != nil {
		t.Fatalf("KeyOptions(planet): ok %v, %v; want not ok", ok, err)
	}
}
