// Package fakegithub is a GitHub for tests, on 127.0.0.1: the REST endpoints reviews call
// through go-github, in GitHub's wire format, over pull requests a test sets up; it checks the
// token, refuses inline comments off the diff with 422 as GitHub does, fails calls on request
// (403, 404, 422, rate limits), and sends deliveries signed as GitHub signs them.
package fakegithub

import (
	"bytes"
	"crypto/hmac"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v4"
)

// File is a changed file of a pull request: its unified diff patch.
type File struct {
	Name, Status, Patch string
}

// PR is a pull request.
type PR struct {
	Number           int
	Title, Author    string
	HeadSHA, HeadRef string
	BaseSHA, BaseRef string
	State            string // "open" (default) or "closed"
	Merged, Draft    bool
	// DeletedFork makes the PR's head repository gone (null), as a deleted fork's is.
	DeletedFork          bool
	Files                []File
	Additions, Deletions int
}

// Comment is a posted inline comment.
type Comment struct {
	ID        int64  `json:"id"`
	ReviewID  int64  `json:"pull_request_review_id"`
	Path      string `json:"path"`
	Line      int    `json:"line"`
	StartLine int    `json:"start_line,omitempty"`
	Side      string `json:"side"`
	Body      string `json:"body"`
	CommitID  string `json:"commit_id"`
}

// Review is a posted review.
type Review struct {
	ID       int64     `json:"id"`
	Body     string    `json:"body"`
	State    string    `json:"state"`
	CommitID string    `json:"commit_id"`
	User     user      `json:"user"`
	Comments []Comment `json:"-"`
}

type user struct {
	Login string `json:"login"`
}

// Fault is an answer a call gets instead of GitHub's.
type Fault struct {
	Status int
	// RateLimited adds the headers of an exhausted primary rate limit, resetting in a second.
	RateLimited bool
	Message     string
}

// GitHub is the fake.
type GitHub struct {
	URL   string
	Token string
	mu    sync.Mutex
	prs   map[string]*PR // "owner/name#n"
	// compare holds the files of base...head comparisons, keyed "owner/name base...head".
	compare map[string][]File
	reviews map[string][]*Review // by PR
	faults  map[string][]Fault   // by "METHOD pathsuffix" (e.g. "POST reviews"): served in order
	nextID  int64
	calls   []string
	// appKey, when set, makes the fake a GitHub App's host too: installation tokens are minted
	// for JWTs it verifies (see App).
	appKey *rsa.PublicKey
	appID  string
	minted []string
	scoped []string
	// cloneBase and head tie the fake to a git server: see Git.
	cloneBase string
	head      func(repo, branch string) string
}

// Git makes the PRs' repositories live in a git server at cloneBase (their clone_url is
// cloneBase + "owner/name.git"; the default is https://github.example/), and a PR's head the
// tip of its head branch there, as head answers it (when not ""), so a push to the branch moves
// the PR's head as on GitHub.
func (g *GitHub) Git(cloneBase string, head func(repo, branch string) string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.cloneBase, g.head = cloneBase, head
}

// App makes the fake accept a GitHub App: POST /app/installations/{id}/access_tokens with a JWT
// signed by key for app id answers an installation token (the fake's Token). Minted lists the
// installations tokens were minted for.
func (g *GitHub) App(appID int64, key *rsa.PublicKey) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.appID, g.appKey = strconv.FormatInt(appID, 10), key
}

// Scoped lists the restrictions of the tokens minted with any, in order: "repo,… perm:access,…"
// (e.g. "widgets contents:read").
func (g *GitHub) Scoped() []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return append([]string(nil), g.scoped...)
}

// Minted lists the installation ids tokens were minted for.
func (g *GitHub) Minted() []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return append([]string(nil), g.minted...)
}

var tokenRoute = regexp.MustCompile(`^/app/installations/(\d+)/access_tokens$`)

// mint answers an installation token request whose JWT the App's key signed.
func (g *GitHub) mint(w http.ResponseWriter, r *http.Request, installation string) {
	raw, _ := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	claims := jwt.RegisteredClaims{}
	tok, err := jwt.ParseWithClaims(raw, &claims, func(*jwt.Token) (any, error) { return g.appKey, nil }, jwt.WithValidMethods([]string{"RS256"}))
	if g.appKey == nil || err != nil || !tok.Valid || claims.Issuer != g.appID {
		writeError(w, http.StatusUnauthorized, "A JSON web token could not be decoded")
		return
	}
	g.minted = append(g.minted, installation)
	var opts struct {
		Repositories []string          `json:"repositories"`
		Permissions  map[string]string `json:"permissions"`
	}
	if json.NewDecoder(r.Body).Decode(&opts) == nil && (len(opts.Repositories) > 0 || len(opts.Permissions) > 0) {
		var perms []string
		for p, access := range opts.Permissions {
			perms = append(perms, p+":"+access)
		}
		slices.Sort(perms)
		g.scoped = append(g.scoped, strings.Join(opts.Repositories, ",")+" "+strings.Join(perms, ","))
	}
	writeJSON(w, http.StatusCreated, map[string]any{"token": g.Token, "expires_at": time.Now().Add(time.Hour).UTC().Format(time.RFC3339)})
}

// New starts a fake GitHub accepting token.
func New(t testing.TB, token string) *GitHub {
	g := &GitHub{Token: token, prs: map[string]*PR{}, compare: map[string][]File{}, reviews: map[string][]*Review{}, faults: map[string][]Fault{}, nextID: 1000}
	srv := httptest.NewServer(http.HandlerFunc(g.serve))
	t.Cleanup(srv.Close)
	g.URL = srv.URL + "/"
	return g
}

// SetPR adds or replaces a pull request of repo.
func (g *GitHub) SetPR(repo string, pr PR) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if pr.State == "" {
		pr.State = "open"
	}
	g.prs[fmt.Sprintf("%s#%d", repo, pr.Number)] = &pr
}

// SetCompare sets what comparing base...head of repo answers.
func (g *GitHub) SetCompare(repo, base, head string, files []File) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.compare[repo+" "+base+"..."+head] = files
}

// Fail makes the next calls to what (e.g. "GET pulls", "GET files", "POST reviews") answer faults,
// one each, in order.
func (g *GitHub) Fail(what string, faults ...Fault) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.faults[what] = append(g.faults[what], faults...)
}

// Reviews are the reviews posted on a PR.
func (g *GitHub) Reviews(repo string, pr int) []Review {
	g.mu.Lock()
	defer g.mu.Unlock()
	var out []Review
	for _, r := range g.reviews[fmt.Sprintf("%s#%d", repo, pr)] {
		out = append(out, *r)
	}
	return out
}

// Calls are the calls served, "METHOD path".
func (g *GitHub) Calls() []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return append([]string(nil), g.calls...)
}

var route = regexp.MustCompile(`^/repos/([^/]+/[^/]+)/(?:pulls/(\d+)(?:/(files|reviews)(?:/(\d+)/(comments))?)?|compare/([^.]+)\.\.\.(.+))$`)

func (g *GitHub) serve(w http.ResponseWriter, r *http.Request) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.calls = append(g.calls, r.Method+" "+r.URL.Path)
	if m := tokenRoute.FindStringSubmatch(r.URL.Path); m != nil && r.Method == http.MethodPost {
		g.mint(w, r, m[1])
		return
	}
	if auth := r.Header.Get("Authorization"); auth != "Bearer "+g.Token && auth != "token "+g.Token {
		writeError(w, http.StatusUnauthorized, "Bad credentials")
		return
	}
	m := route.FindStringSubmatch(r.URL.Path)
	if m == nil {
		writeError(w, http.StatusNotFound, "Not Found")
		return
	}
	repo, num := m[1], m[2]
	what := "pulls"
	switch {
	case m[6] != "":
		what = "compare"
	case m[5] != "":
		what = "comments"
	case m[3] != "":
		what = m[3]
	}
	key := r.Method + " " + what
	if fs := g.faults[key]; len(fs) > 0 {
		g.faults[key] = fs[1:]
		f := fs[0]
		if f.RateLimited {
			w.Header().Set("X-RateLimit-Limit", "5000")
			w.Header().Set("X-RateLimit-Remaining", "0")
			w.Header().Set("X-RateLimit-Reset", strconv.FormatInt(time.Now().Add(time.Second).Unix(), 10))
			f.Message = "API rate limit exceeded"
		}
		writeError(w, f.Status, f.Message)
		return
	}
	if what == "compare" {
		files, ok := g.compare[repo+" "+m[6]+"..."+m[7]]
		if !ok {
			writeError(w, http.StatusNotFound, "Not Found")
			return
		}
		writeJSON(w, http.StatusOK, map[string]any{"files": fileJSON(files)})
		return
	}
	prKey := repo + "#" + num
	pr, ok := g.prs[prKey]
	if !ok {
		writeError(w, http.StatusNotFound, "Not Found")
		return
	}
	switch key {
	case "GET pulls":
		cloneBase, head := "https://github.example/", g.headOf(repo, pr)
		if g.cloneBase != "" {
			cloneBase = g.cloneBase
		}
		repoJSON := map[string]any{"full_name": repo, "clone_url": cloneBase + repo + ".git"}
		headRepo := any(repoJSON)
		if pr.DeletedFork {
			headRepo = nil
		}
		writeJSON(w, http.StatusOK, map[string]any{
			"number": pr.Number, "state": pr.State, "merged": pr.Merged, "draft": pr.Draft, "title": pr.Title,
			"user": user{pr.Author}, "html_url": "https://github.example/" + repo + "/pull/" + num,
			"head": map[string]any{"sha": head, "ref": pr.HeadRef, "repo": headRepo}, "base": map[string]any{"sha": pr.BaseSHA, "ref": pr.BaseRef, "repo": repoJSON},
			"additions": pr.Additions, "deletions": pr.Deletions, "changed_files": len(pr.Files),
		})
	case "GET files":
		writeJSON(w, http.StatusOK, fileJSON(pr.Files))
	case "GET reviews":
		out := []*Review{}
		out = append(out, g.reviews[prKey]...)
		writeJSON(w, http.StatusOK, out)
	case "POST reviews":
		g.createReview(w, r, prKey, pr, g.headOf(repo, pr))
	case "GET comments":
		id, _ := strconv.ParseInt(m[4], 10, 64)
		for _, rv := range g.reviews[prKey] {
			if rv.ID == id {
				writeJSON(w, http.StatusOK, rv.Comments)
				return
			}
		}
		writeError(w, http.StatusNotFound, "Not Found")
	default:
		writeError(w, http.StatusNotFound, "Not Found")
	}
}

// headOf is a PR's head: its head branch's tip in the git server (see Git), else its HeadSHA.
func (g *GitHub) headOf(repo string, pr *PR) string {
	if g.head != nil {
		if sha := g.head(repo, pr.HeadRef); sha != "" {
			return sha
		}
	}
	return pr.HeadSHA
}

func (g *GitHub) createReview(w http.ResponseWriter, r *http.Request, prKey string, pr *PR, head string) {
	var req struct {
		CommitID string `json:"commit_id"`
		Body     string `json:"body"`
		Event    string `json:"event"`
		Comments []struct {
			Path      string `json:"path"`
			Line      int    `json:"line"`
			Side      string `json:"side"`
			StartLine int    `json:"start_line"`
			StartSide string `json:"start_side"`
			Body      string `json:"body"`
		} `json:"comments"`
	}
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		writeError(w, http.StatusBadRequest, "Problems parsing JSON")
		return
	}
	if req.CommitID != head {
		writeError(w, http.StatusUnprocessableEntity, "commit_id is not the pull request's head")
		return
	}
	g.nextID++
	rv := &Review{ID: g.nextID, Body: req.Body, State: "COMMENTED", CommitID: req.CommitID, User: user{"hangar[bot]"}}
	for _, c := range req.Comments {
		start := c.StartLine
		if start == 0 {
			start = c.Line
		}
		if !onDiff(pr.Files, c.Path, start, c.Line) {
			writeError(w, http.StatusUnprocessableEntity, "Pull request review thread line must be part of the diff")
			return
		}
		g.nextID++
		rv.Comments = append(rv.Comments, Comment{ID: g.nextID, ReviewID: rv.ID, Path: c.Path, Line: c.Line, StartLine: c.StartLine, Side: c.Side, Body: c.Body, CommitID: req.CommitID})
	}
	g.reviews[prKey] = append(g.reviews[prKey], rv)
	writeJSON(w, http.StatusOK, rv)
}

var hunk = regexp.MustCompile(`(?m)^@@ -\d+(?:,\d+)? \+(\d+)(?:,(\d+))? @@`)

func onDiff(files []File, path string, start, end int) bool {
	for _, f := range files {
		if f.Name != path {
			continue
		}
		for _, m := range hunk.FindAllStringSubmatch(f.Patch, -1) {
			s, _ := strconv.Atoi(m[1])
			n := 1
			if m[2] != "" {
				n, _ = strconv.Atoi(m[2])
			}
			if start >= s && end <= s+n-1 {
				return true
			}
		}
	}
	return false
}

func fileJSON(files []File) []map[string]any {
	out := []map[string]any{}
	for _, f := range files {
		st := f.Status
		if st == "" {
			st = "modified"
		}
		out = append(out, map[string]any{"filename": f.Name, "status": st, "patch": f.Patch})
	}
	return out
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func writeError(w http.ResponseWriter, status int, msg string) {
	writeJSON(w, status, map[string]string{"message": msg, "documentation_url": "https://docs.github.com/rest"})
}

// Deliver posts a webhook delivery of event with payload to url, signed under secret as GitHub
// signs (X-Hub-Signature-256 over the raw body), and answers the status.
func Deliver(t testing.TB, url string, secret []byte, event string, payload any) int {
	t.Helper()
	body, err := json.Marshal(payload)
	if err != nil {
		t.Fatal(err)
	}
	mac := hmac.New(sha256.New, secret)
	mac.Write(body)
	req, err := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	id := make([]byte, 16)
	_, _ = rand.Read(id)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-GitHub-Event", event)
	req.Header.Set("X-GitHub-Delivery", hex.EncodeToString(id))
	req.Header.Set("X-Hub-Signature-256", "sha256="+hex.EncodeToString(mac.Sum(nil)))
	req.Header.Set("User-Agent", "GitHub-Hookshot/fake")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// PullRequestEvent is a pull_request delivery's payload.
func PullRequestEvent(action, repo string, pr PR, installation int64) map[string]any {
	return map[string]any{
		"action": action, "number": pr.Number,
		"pull_request": map[string]any{"number": pr.Number, "draft": pr.Draft, "merged": pr.Merged, "state": pr.State,
			"head": map[string]any{"sha": pr.HeadSHA, "ref": pr.HeadRef}, "base": map[string]any{"sha": pr.BaseSHA, "ref": pr.BaseRef}},
		"repository":   map[string]any{"full_name": repo},
		"installation": map[string]any{"id": installation},
		"sender":       user{pr.Author},
	}
}

// CommentEvent is an issue_comment created on a PR by login with the given association.
func CommentEvent(repo string, pr int, commentID int64, body, login, association string) map[string]any {
	return map[string]any{
		"action":     "created",
		"issue":      map[string]any{"number": pr, "pull_request": map[string]any{"url": "https://api.github.example/x"}},
		"comment":    map[string]any{"id": commentID, "body": body, "user": user{login}, "author_association": association},
		"repository": map[string]any{"full_name": repo}, "sender": user{login},
	}
}

// ThreadEvent is a pull_request_review_thread resolved or unresolved, whose first comment is
// commentID.
func ThreadEvent(action, repo string, pr int, commentID int64, login string) map[string]any {
	return map[string]any{
		"action": action, "pull_request": map[string]any{"number": pr},
		"thread":     map[string]any{"node_id": "PRRT_x", "comments": []map[string]any{{"id": commentID}}},
		"repository": map[string]any{"full_name": repo}, "sender": user{login},
	}
}

// Patch is a one-hunk patch adding lines at line start of a new file side.
func Patch(start int, lines ...string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "@@ -%d,0 +%d,%d @@\n", start, start, len(lines))
	for _, l := range lines {
		b.WriteString("+" + l + "\n")
	}
	return strings.TrimSuffix(b.String(), "\n")
}
