package e2e

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"connectrpc.com/connect"

	appv1 "github.com/hangar-dev/hangar/gen/svc/app/v1"
	"github.com/hangar-dev/hangar/gen/svc/app/v1/appv1connect"
	"github.com/hangar-dev/hangar/internal/modelfake"
	"github.com/hangar-dev/hangar/internal/testenv"
	"github.com/hangar-dev/hangar/internal/testkit"
	"github.com/hangar-dev/hangar/platform/auth"
)

const gitToken = "ghp-" + realMark + "-git-token"

// gitHost is testenv's git server for gitHostName, holding org/<name>.git for each name it was
// made with: main has one commit, "first", with modelfake.EditedFile as modelfake.Before, and
// the branch release one more, "release notes". It accepts gitToken.
type gitHost struct{ *testenv.GitServer }

const gitHostName = "git.example.com"

func gitServer(t *testing.T, names ...string) gitHost {
	t.Helper()
	g := gitHost{testenv.NewGitServer(t, gitToken, gitHostName)}
	for _, name := range names {
		g.Repo(t, "org/"+name, map[string]string{modelfake.EditedFile: modelfake.Before})
		g.Commit(t, "org/"+name, "release", "main", nil, "release notes")
	}
	return g
}

// URL is the https URL of repo name under its real host name.
func (g gitHost) URL(name string) string { return "https://" + gitHostName + "/org/" + name + ".git" }

// Pushed is the subject of main's last commit in repo name and its modelfake.EditedFile, both
// trimmed of surrounding space.
func (g gitHost) Pushed(t *testing.T, name string) (subject, content string) {
	t.Helper()
	return g.Show(t, "org/"+name, "-s", "--format=%s", "main"), g.Show(t, "org/"+name, "main:"+modelfake.EditedFile)
}

// gitImage is the test image with this machine's git and the libraries it loads, so that a
// sandbox can run a real git clone.
func gitImage(t *testing.T, s *sandboxStack) string {
	return testenv.GitImage(t, s.sb.Registry, nil)
}

func TestProfileReposAreClonedAtStartOverTheProxy(t *testing.T) {
	testenv.RequirePlugins(t)
	git := gitServer(t, "app")
	s := newSandboxStack(t, 1, func(sb *testenv.Sandboxes) {
		sb.EgressResolve = map[string]string{gitHostName + ":443": git.Listener.Addr().String()}
		sb.EgressRootCAs = testkit.Roots(git.Server)
	})
	s.putOrgSecret(t, "gh/token", gitToken)
	image := gitImage(t, s)
	ctx := context.Background()
	profiles := appv1connect.NewProfileServiceClient(httpClient, s.rpcURL(), auth.WithKey(s.admin))
	tasks := appv1connect.NewTaskServiceClient(httpClient, s.rpcURL(), auth.WithKey(s.admin))
	profile := func(name, remote string) string {
		p, err := profiles.CreateProfile(ctx, connect.NewRequest(&appv1.CreateProfileRequest{
			Name: name, ImageId: image, Harness: ptr("bash"),
			Repos:   []*appv1.ProfileRepo{{Path: "/work/app", RemoteUrl: remote}},
			Secrets: []*appv1.ProfileSecret{{Ref: "gh/token", EnvVar: "GH_TOKEN", Mode: "proxy", AllowHosts: []string{"git.example.com"}}},
		}))
		if err != nil {
			t.Fatal(err)
		}
		return p.Msg.GetProfile().GetId()
	}

	created, err := tasks.CreateTask(ctx, connect.NewRequest(&appv1.CreateTaskRequest{
		ProfileId: profile("with a repo", git.URL("app")),
		Prompt:    ptr(`pwd; git log --format=%s; env | grep -c ` + realMark + ` || true`),
	}))
	if err != nil {
		t.Fatal(err)
	}
	sid := created.Msg.GetTask().GetSessions()[0].GetSessionId()
	events := s.waitEvent(t, sid, "turn.done", promptOf(t, s, sid))
	// The harness runs in the clone, at its default branch's one commit, and no variable holds
	// the token.
	if got := said(events); got != "/work/app\nfirst\n0" {
		t.Fatalf("the session's repo: the harness said %q; events %+v", got, events)
	}
	// Resumed from a checkpoint (no clone then), the harness still runs in the repo.
	if _, err := s.svc.Snapshot(ctx, connect.NewRequest(&appv1.SnapshotRequest{SessionId: sid})); err != nil {
		t.Fatal(err)
	}
	if _, err := s.svc.EvictLocal(ctx, connect.NewRequest(&appv1.EvictLocalRequest{SessionId: sid})); err != nil {
		t.Fatal(err)
	}
	if _, err := s.svc.SendPrompt(ctx, connect.NewRequest(&appv1.SendPromptRequest{SessionId: sid, PromptId: "after", Text: "pwd"})); err != nil {
		t.Fatal(err)
	}
	if after := s.waitEvent(t, sid, "turn.done", "after"); said(after) != "/work/app" {
		t.Fatalf("the harness after resume: %+v", after)
	}
	if n := len(s.listEvents(t, sid, "repo.clone.started", "repo.cloned")); n != 2 {
		t.Fatalf("%d clone events, want started and cloned", n)
	}
	for _, a := range git.Auths() {
		if strings.Contains(a, "hangar-placeholder") {
			t.Fatal("the git server got the placeholder")
		}
	}
	s.noEventHolds(t, sid, gitToken)

	// A "#ref" on the remote_url checks out that branch.
	created, err = tasks.CreateTask(ctx, connect.NewRequest(&appv1.CreateTaskRequest{
		ProfileId: profile("at a branch", git.URL("app")+"#release"), Prompt: ptr(`git log -1 --format=%s`),
	}))
	if err != nil {
		t.Fatal(err)
	}
	sid = created.Msg.GetTask().GetSessions()[0].GetSessionId()
	if events := s.waitEvent(t, sid, "turn.done", promptOf(t, s, sid)); said(events) != "release notes" {
		t.Fatalf("the session's repo at #release: %+v", events)
	}

	// A repo that cannot be cloned, or not at its ref, fails the task's session, saying why, in
	// the error and in the session's log.
	for _, tc := range []struct{ name, remote, which, why string }{
		{"a missing repo", "https://git.example.com/org/missing.git", "clone https://git.example.com/org/missing.git into /work/app: ", "exited 128"},
		{"a missing ref", git.URL("app") + "#nope", "clone https://git.example.com/org/app.git#nope into /work/app: ", "Remote branch nope not found in upstream origin"},
	} {
		_, err = tasks.CreateTask(ctx, connect.NewRequest(&appv1.CreateTaskRequest{ProfileId: profile("with "+tc.name, tc.remote), Prompt: ptr("true")}))
		testenv.WantCode(t, err, connect.CodeFailedPrecondition)
		if !strings.Contains(err.Error(), tc.which) || !strings.Contains(err.Error(), tc.why) {
			t.Fatalf("%s: the failure does not say which clone failed and why: %v", tc.name, err)
		}
		if !s.failedCloneLogged(t, tc.which, tc.why) {
			t.Fatalf("%s: no failed session logged repo.clone.failed saying %q and %q", tc.name, tc.which, tc.why)
		}
	}
}

// failedCloneLogged reports whether a failed session of the stack logged repo.clone.failed for
// the clone which names (as its error does) with an error holding why.
func (s *sandboxStack) failedCloneLogged(t *testing.T, which, why string) bool {
	t.Helper()
	for _, events := range s.failedSessionEvents(t, "repo.clone.failed") {
		for _, e := range events {
			var p struct {
				URL, Ref, Error string
			}
			_ = json.Unmarshal([]byte(e.GetPayloadJson()), &p)
			if strings.Contains("clone "+p.URL+refSuffix(p.Ref)+" into /work/app: ", which) && strings.Contains(p.Error, why) {
				return true
			}
		}
	}
	return false
}

func refSuffix(ref string) string {
	if ref == "" {
		return ""
	}
	return "#" + ref
}

// said is what a prompt's assistant messages said, one line each, however the harness's output
// was cut into messages.
func said(events []promptEvent) string {
	var lines []string
	for _, e := range events {
		if e.Kind == "assistant.message" {
			lines = append(lines, strings.TrimSpace(e.Text))
		}
	}
	return strings.Join(lines, "\n")
}
