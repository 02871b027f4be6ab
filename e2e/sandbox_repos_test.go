package e2e

import (
	"context"
	"crypto/x509"
	"encoding/base64"
	"net/http"
	"net/http/cgi"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"connectrpc.com/connect"

	appv1 "github.com/hangar-dev/hangar/gen/svc/app/v1"
	"github.com/hangar-dev/hangar/gen/svc/app/v1/appv1connect"
	"github.com/hangar-dev/hangar/internal/testenv"
	"github.com/hangar-dev/hangar/platform/auth"
	"github.com/hangar-dev/hangar/sandboxhosts/images"
	"github.com/hangar-dev/hangar/sandboxhosts/images/imagestest"
)

const gitToken = "ghp-real-git-token"

// gitServer is a loopback HTTPS git server (git http-backend) holding org/app.git with one
// commit, which answers only requests carrying gitToken as GitHub-style Basic credentials.
func gitServer(t *testing.T) (*httptest.Server, *[]string) {
	t.Helper()
	gitBin, err := exec.LookPath("git")
	if err != nil {
		t.Skip("needs git")
	}
	root := t.TempDir()
	work := filepath.Join(t.TempDir(), "work")
	for _, args := range [][]string{
		{"init", "-q", "--bare", "-b", "main", filepath.Join(root, "org", "app.git")},
		{"init", "-q", "-b", "main", work},
		{"-C", work, "-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "-q", "--allow-empty", "-m", "first"},
		{"-C", work, "push", "-q", filepath.Join(root, "org", "app.git"), "main"},
	} {
		if out, err := exec.Command(gitBin, args...).CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	if err := os.WriteFile(filepath.Join(work, "README"), []byte("hello"), 0o644); err != nil {
		t.Fatal(err)
	}
	backend := &cgi.Handler{Path: "/usr/lib/git-core/git-http-backend", Env: []string{"GIT_PROJECT_ROOT=" + root, "GIT_HTTP_EXPORT_ALL=1"}}
	var auths []string
	want := "Basic " + base64.StdEncoding.EncodeToString([]byte("x-access-token:"+gitToken))
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		auths = append(auths, r.Header.Get("Authorization"))
		if r.Header.Get("Authorization") != want {
			w.Header().Set("WWW-Authenticate", `Basic realm="git"`)
			http.Error(w, "who are you", http.StatusUnauthorized)
			return
		}
		backend.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv, &auths
}

// gitImage is the test image with this machine's git and the libraries it loads, so that a
// sandbox can run a real git clone.
func gitImage(t *testing.T, s *sandboxStack) string {
	t.Helper()
	files := map[string]images.File{}
	add := func(p string) {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		files[p] = images.File{Content: b, Mode: 0o755}
	}
	lib := regexp.MustCompile(`(/\S+\.so[.\d]*)`)
	for _, bin := range []string{"/usr/bin/git", "/usr/lib/git-core/git-remote-https"} {
		add(bin)
		out, err := exec.Command("ldd", bin).Output()
		if err != nil {
			t.Fatalf("ldd %s: %v", bin, err)
		}
		for _, m := range lib.FindAllString(string(out), -1) {
			add(m)
		}
	}
	img, err := images.Busybox(files)
	if err != nil {
		t.Fatal(err)
	}
	return imagestest.Push(t, s.sb.Registry, "test/git", img)
}

func TestProfileReposAreClonedAtStartOverTheProxy(t *testing.T) {
	testenv.RequirePlugins(t)
	git, auths := gitServer(t)
	roots := x509.NewCertPool()
	roots.AddCert(git.Certificate())
	s := newSandboxStack(t, 1, func(sb *testenv.Sandboxes) {
		sb.EgressResolve = map[string]string{"git.example.com:443": git.Listener.Addr().String()}
		sb.EgressRootCAs = roots
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
		ProfileId: profile("with a repo", "https://git.example.com/org/app.git"),
		Prompt:    ptr(`git -C /work/app log --format=%s; env | grep -c ghp-real || true`),
	}))
	if err != nil {
		t.Fatal(err)
	}
	sid := created.Msg.GetTask().GetSessions()[0].GetSessionId()
	events := s.waitEvent(t, sid, "turn.done", promptOf(t, s, sid))
	// The clone's one commit, and no variable holding the token.
	if len(events) < 4 || events[2].Text != "first" || events[3].Text != "0" {
		t.Fatalf("the session's repo: %+v", events)
	}
	if n := len(s.listEvents(t, sid, "repo.clone.started", "repo.cloned")); n != 2 {
		t.Fatalf("%d clone events, want started and cloned", n)
	}
	for _, a := range *auths {
		if strings.Contains(a, "hangar-placeholder") {
			t.Fatal("the git server got the placeholder")
		}
	}
	s.noEventHolds(t, sid, gitToken)

	// A repo that cannot be cloned fails the task's session, saying why.
	_, err = tasks.CreateTask(ctx, connect.NewRequest(&appv1.CreateTaskRequest{
		ProfileId: profile("with a missing repo", "https://git.example.com/org/missing.git"), Prompt: ptr("true"),
	}))
	testenv.WantCode(t, err, connect.CodeFailedPrecondition)
	if !strings.Contains(err.Error(), "clone https://git.example.com/org/missing.git into /work/app") {
		t.Fatalf("the failure does not say which clone failed: %v", err)
	}
}
