package testenv

import (
	"encoding/base64"
	"net/http"
	"net/http/cgi"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/hangar-dev/hangar/internal/testkit"
	"github.com/hangar-dev/hangar/sandboxhosts/images"
	"github.com/hangar-dev/hangar/sandboxhosts/images/imagestest"
)

// gitHTTPBackend is Debian's git smart-HTTP server program.
const gitHTTPBackend = "/usr/lib/git-core/git-http-backend"

// GitServer is a loopback HTTPS git server (git http-backend) standing in for a git host that
// sandboxes reach through the egress proxy (map a name to its address with
// Sandboxes.EgressResolve, and trust Certificate with EgressRootCAs). It answers only requests
// carrying Token as GitHub-style Basic credentials (x-access-token), and they may clone, fetch
// and push.
type GitServer struct {
	*httptest.Server
	// Root holds the bare repositories, "owner/name.git".
	Root  string
	Token string

	mu    sync.Mutex
	auths []string
}

// NewGitServer starts a git server accepting token, whose certificate names hosts (httptest's
// example.com when none are given); it stops when t ends.
func NewGitServer(t testing.TB, token string, hosts ...string) *GitServer {
	t.Helper()
	testkit.RequireTool(t, "git", "apt-get install git")
	testkit.RequireFile(t, gitHTTPBackend, "apt-get install git")
	g := &GitServer{Root: t.TempDir(), Token: token}
	backend := &cgi.Handler{Path: gitHTTPBackend, Env: []string{"GIT_PROJECT_ROOT=" + g.Root, "GIT_HTTP_EXPORT_ALL=1"}}
	want := "Basic " + base64.StdEncoding.EncodeToString([]byte("x-access-token:"+token))
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		g.mu.Lock()
		g.auths = append(g.auths, r.Header.Get("Authorization"))
		g.mu.Unlock()
		if r.Header.Get("Authorization") != want {
			w.Header().Set("WWW-Authenticate", `Basic realm="git"`)
			http.Error(w, "who are you", http.StatusUnauthorized)
			return
		}
		backend.ServeHTTP(w, r)
	})
	if len(hosts) > 0 {
		g.Server = testkit.TLSServer(handler, hosts...)
	} else {
		g.Server = httptest.NewTLSServer(handler)
	}
	t.Cleanup(g.Close)
	return g
}

// Auths are the Authorization headers of every request the server got, in order.
func (g *GitServer) Auths() []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return append([]string(nil), g.auths...)
}

// Repo makes the bare repository name ("owner/name") whose branch main holds files in one
// commit, "first", and answers that commit.
func (g *GitServer) Repo(t testing.TB, name string, files map[string]string) string {
	t.Helper()
	bare := g.bare(name)
	gitRun(t, "", "init", "-q", "--bare", "-b", "main", bare)
	gitRun(t, bare, "config", "http.receivepack", "true")
	return g.Commit(t, name, "main", "", files, "first")
}

// Commit commits files (path → content) on branch of repository name, which starts at from (a
// revision of a fresh clone, such as "main" or "origin/cache") when it does not exist yet,
// pushes it, and answers the commit. A branch given as a full ref outside refs/heads (GitHub's
// "refs/pull/7/head") is such a ref, which clones do not fetch.
func (g *GitServer) Commit(t testing.TB, name, branch, from string, files map[string]string, message string) string {
	t.Helper()
	work := filepath.Join(t.TempDir(), "work")
	gitRun(t, "", "clone", "-q", g.bare(name), work)
	switch {
	case strings.HasPrefix(branch, "refs/") && g.Tip(t, name, branch) != "":
		gitRun(t, work, "fetch", "-q", "origin", branch)
		gitRun(t, work, "checkout", "-q", "--detach", "FETCH_HEAD")
	case strings.HasPrefix(branch, "refs/"):
		gitRun(t, work, "checkout", "-q", "--detach", from)
	case g.Tip(t, name, branch) != "":
		gitRun(t, work, "checkout", "-q", "-B", branch, "origin/"+branch)
	case from != "":
		gitRun(t, work, "checkout", "-q", "-B", branch, from)
	default:
		gitRun(t, work, "checkout", "-q", "--orphan", branch)
	}
	for p, content := range files {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(work, p)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(work, p), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	gitRun(t, work, "add", "-A")
	gitRun(t, work, "commit", "-q", "--allow-empty", "-m", message)
	gitRun(t, work, "push", "-q", "origin", "HEAD:"+fullRef(branch))
	return gitRun(t, work, "rev-parse", "HEAD")
}

// fullRef is a branch's ref; a full ref stays as it is.
func fullRef(branch string) string {
	if strings.HasPrefix(branch, "refs/") {
		return branch
	}
	return "refs/heads/" + branch
}

// Tip is the commit branch (or a full ref) of repository name points at; "" when there is none.
func (g *GitServer) Tip(t testing.TB, name, branch string) string {
	t.Helper()
	out, err := exec.Command("git", "-C", g.bare(name), "rev-parse", "-q", "--verify", fullRef(branch)).Output()
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(out))
}

// Show is git show's answer for rev (e.g. "cache:a.go", "cache^{commit}" with a format) in
// repository name.
func (g *GitServer) Show(t testing.TB, name string, args ...string) string {
	t.Helper()
	return gitRun(t, g.bare(name), append([]string{"show"}, args...)...)
}

func (g *GitServer) bare(name string) string { return filepath.Join(g.Root, name+".git") }

// gitRun runs git in dir with a test author and no user configuration, and answers its output.
func gitRun(t testing.TB, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=Hangar Test", "GIT_AUTHOR_EMAIL=test@hangar.invalid",
		"GIT_COMMITTER_NAME=Hangar Test", "GIT_COMMITTER_EMAIL=test@hangar.invalid", "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(string(out))
}

// GitImage pushes to registry a busybox image holding this machine's git (and the libraries it
// loads), so that a sandbox can clone, commit and push for real, plus files; it answers the
// image's reference.
func GitImage(t testing.TB, registry string, files map[string]images.File) string {
	t.Helper()
	testkit.RequireTool(t, "ldd", "apt-get install libc-bin")
	all := map[string]images.File{}
	add := func(p string) {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		all[p] = images.File{Content: b, Mode: 0o755}
	}
	lib := regexp.MustCompile(`(/\S+\.so[.\d]*)`)
	for _, bin := range []string{testkit.RequireTool(t, "git", "apt-get install git"), "/usr/lib/git-core/git-remote-https"} {
		add(bin)
		out, err := exec.Command("ldd", bin).Output()
		if err != nil {
			t.Fatalf("ldd %s: %v", bin, err)
		}
		for _, m := range lib.FindAllString(string(out), -1) {
			add(m)
		}
	}
	for p, f := range files {
		all[p] = f
	}
	img, err := images.Busybox(all)
	if err != nil {
		t.Fatal(err)
	}
	return imagestest.Push(t, registry, "test/git", img)
}
