package e2e

import (
	"crypto/x509"
	"encoding/json"
	"path"
	"strconv"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/hangar-dev/hangar/composition"
	"github.com/hangar-dev/hangar/functions/reviews"
	"github.com/hangar-dev/hangar/functions/reviews/fakegithub"
	appv1 "github.com/hangar-dev/hangar/gen/svc/app/v1"
	"github.com/hangar-dev/hangar/gen/svc/app/v1/appv1connect"
	"github.com/hangar-dev/hangar/internal/modelfake"
	"github.com/hangar-dev/hangar/internal/testenv"
	"github.com/hangar-dev/hangar/internal/testkit"
	"github.com/hangar-dev/hangar/platform/auth"
	"github.com/hangar-dev/hangar/platform/egress"
	"github.com/hangar-dev/hangar/sandboxhosts/images"
	"github.com/hangar-dev/hangar/sandboxhosts/images/imagestest"
)

// widgetsFile is a.go on the PR's branch: the PR adds lines 10-12, whose line 11 reads a map
// nobody makes.
const widgetsFile = "package widgets\n\n// cache holds the widgets by key.\nvar cache map[string]string\n\n" +
	"// The PR adds get.\n//\n//\n//\nfunc get(k string) string {\n\treturn cache[k]\n}\n"

// The scripted agents of reviewerImage, which the bash harness runs by the first line of their
// prompts ("Review pull request R#N at SHA", "Verify findings of review ID for R#N at SHA",
// "Fix review findings on R#N at SHA"; the rest of a prompt is prose the shell stumbles over
// on stderr). Each works on the checkout at /work/widgets and first checks that it is at the
// head named: the finder's finding is what it reads there (the line of a.go reading cache[k]
// and its code), so the posted comment proves the checkout; the fixer edits that line, commits
// and pushes to the PR's branch with the credential the proxy injects.
const (
	reviewScript = `#!/bin/sh
cd /work/widgets && [ "$(git rev-parse HEAD)" = "$5" ] || { echo "the checkout is not at $5"; exit 1; }
if [ -s BROKEN ]; then printf '` + "```json\\n" + `{"findings": [ this is not JSON\n` + "```\\n" + `'; exit 0; fi
line=$(grep -n 'cache\[k\]' a.go | cut -d: -f1)
[ -n "$line" ] || { printf '` + "```json\\n" + `{"summary_md": "Fixed.", "findings": []}\n` + "```\\n" + `'; exit 0; }
code=$(sed -n "${line}p" a.go | sed 's/^[[:space:]]*//')
printf 'Reading a.go.\n` + "```json\\n" + `{"summary_md": "Adds a cache.", "findings": [{"path": "a.go", "start_line": %s, "end_line": %s, "side": "RIGHT", "category": "bug", "severity": "high", "confidence": "high", "title": "Nil map read in %s", "body_md": "the map is never made", "suggested_fix": "", "evidence": ["a.go:%s"]}]}\n` + "```\\n" + `' "$line" "$line" "$code" "$line"
`
	verifyScript = `#!/bin/sh
cd /work/widgets && [ "$(git rev-parse HEAD)" = "$8" ] || { echo "the checkout is not at $8"; exit 1; }
v=rejected; grep -q 'cache\[k\]' a.go && v=confirmed
printf '` + "```json\\n" + `{"verdicts": [{"finding_id": "f1", "verdict": "%s", "confidence": "high", "reasoning": "a.go reads cache[k]"}]}\n` + "```\\n" + `' "$v"
`
	fixScript = `#!/bin/sh
cd /work/widgets && [ "$(git rev-parse HEAD)" = "$6" ] || { echo "the checkout is not at $6"; exit 1; }
sed -i 's/cache\[k\]/lookup(k)/' a.go
git -c user.name=Fixer -c user.email=fixer@hangar.invalid commit -qam "Fix the nil map read" && git push -q origin HEAD:cache && echo pushed
`
)

// reviewerImage is the git image with the scripted finder, verifier and fixer.
func reviewerImage(t *testing.T, registry string) string {
	t.Helper()
	return testenv.GitImage(t, registry, map[string]images.File{
		"/bin/Review": {Content: []byte(reviewScript), Mode: 0o755},
		"/bin/Verify": {Content: []byte(verifyScript), Mode: 0o755},
		"/bin/Fix":    {Content: []byte(fixScript), Mode: 0o755},
	})
}

// reviewRig is what a review e2e runs on: the API and its workers over a sandbox host whose
// egress proxy reaches a loopback git server as git.example.com, a fake GitHub whose clone URLs
// and PR heads are that server's, the agents' image enabled, and a GitHub webhook registration.
// enroll adds its repositories, each with its own PR, profile and enrollment.
type reviewRig struct {
	*stack
	gh      *fakegithub.GitHub
	git     *testenv.GitServer
	reviews appv1connect.ReviewServiceClient
	hook    string
	secret  []byte
	image   string
}

const (
	reviewRepo  = "acme/widgets"
	githubToken = "ghs_e2e"
)

// newReviewRig starts the rig; tune adjusts the sandboxes before the host starts, and image
// makes the agents' image in their registry, which the rig enables (with Pub/Sub, sessions
// start from enabled images only) once for all its repositories.
func newReviewRig(t *testing.T, tune func(*testenv.Sandboxes), image func(registry string) string) *reviewRig {
	t.Helper()
	testenv.RequirePlugins(t)
	db, _ := testenv.Firestore(t)
	sb := testenv.NewSandboxes(t, db)
	git := testenv.NewGitServer(t, githubToken)
	roots := x509.NewCertPool()
	roots.AddCert(git.Certificate())
	sb.EgressResolve, sb.EgressRootCAs = map[string]string{"git.example.com:443": git.Listener.Addr().String()}, roots
	if tune != nil {
		tune(sb)
	}
	sb.StartHost(t, "host-a")
	ps := testenv.PubSub(t)
	gh := fakegithub.New(t, githubToken)
	gh.Git("https://git.example.com/", func(repo, branch string) string { return git.Tip(t, repo, branch) })
	cfg := sb.Config
	cfg.Egress = egress.MustParse("127.0.0.1") // the fake GitHub is on loopback, as an operator would list GitHub Enterprise
	cfg.Limits.Reviews.GitHubAPI = gh.URL
	cfg.Limits.Reviews.Poll = 200 * time.Millisecond
	cfg.Limits.Reviews.AgentTimeout = 3 * time.Minute
	a := composition.New(composition.Deps{DB: sb.DB, Config: cfg, Bucket: sb.Bucket, Sealer: sb.Sealer, DefaultImage: sb.Image, PubSub: ps})
	r := &reviewRig{stack: serve(t, a), gh: gh, git: git}
	key := auth.WithKey(r.admin)
	r.reviews = appv1connect.NewReviewServiceClient(httpClient, r.rpcURL(), key)
	r.image = image(sb.Registry)
	runWorkers(t, a, ps, r.image)

	r.putOrgSecret(t, reviews.SecretToken, githubToken)
	reg, err := appv1connect.NewWebhookRegistrationServiceClient(httpClient, r.rpcURL(), key).CreateWebhookRegistration(t.Context(), connect.NewRequest(&appv1.CreateWebhookRegistrationRequest{Name: "github", Provider: "github"}))
	if err != nil {
		t.Fatal(err)
	}
	r.hook, r.secret = r.url+reg.Msg.GetRegistration().GetUrlPath(), []byte(reg.Msg.GetSecret())
	return r
}

// reviewedRepo is a repository of a reviewRig enrolled for reviews, on the git server with PR 7
// (branch cache adding a.go's get) on the fake GitHub.
type reviewedRepo struct {
	*reviewRig
	repo string
	pr   fakegithub.PR
	base string
}

// enroll makes repo (owner/name) on the git server with its PR and enrolls it with its own
// profile of the rig's image, which profile completes (the org secrets it names are the
// caller's to put); the enrollment's engine is the profile's harness.
func (r *reviewRig) enroll(t *testing.T, repo, autofix string, profile func(*appv1.CreateProfileRequest)) *reviewedRepo {
	t.Helper()
	req := &appv1.CreateProfileRequest{Name: "reviewer of " + repo, ImageId: r.image, Harness: ptr("bash")}
	if profile != nil {
		profile(req)
	}
	p, err := appv1connect.NewProfileServiceClient(httpClient, r.rpcURL(), auth.WithKey(r.admin)).CreateProfile(t.Context(), connect.NewRequest(req))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.reviews.UpsertEnrollment(t.Context(), connect.NewRequest(&appv1.UpsertEnrollmentRequest{Repo: repo, TriggerMode: "automatic", Autofix: autofix, ProfileId: ptr(p.Msg.GetProfile().GetId()), Engine: req.Harness})); err != nil {
		t.Fatal(err)
	}

	rr := &reviewedRepo{reviewRig: r, repo: repo}
	rr.base = r.git.Repo(t, repo, map[string]string{"README": path.Base(repo) + "\n"})
	r.git.Commit(t, repo, "cache", "main", map[string]string{"a.go": widgetsFile}, "Add widget cache")
	rr.pr = fakegithub.PR{Number: 7, Title: "Add widget cache", Author: "octocat", HeadRef: "cache", BaseSHA: rr.base, BaseRef: "main",
		Files: []fakegithub.File{{Name: "a.go", Patch: fakegithub.Patch(10, "func get(k string) string {", "\treturn cache[k]", "}")}}}
	r.gh.SetPR(repo, rr.pr)
	return rr
}

// push delivers a signed pull_request event as GitHub sends it for action, on the branch's tip.
func (r *reviewedRepo) push(t *testing.T, action string) {
	t.Helper()
	r.pr.HeadSHA = r.git.Tip(t, r.repo, r.pr.HeadRef)
	r.gh.SetPR(r.repo, r.pr)
	if code := fakegithub.Deliver(t, r.hook, r.secret, "pull_request", fakegithub.PullRequestEvent(action, r.repo, r.pr, 0)); code != 202 {
		t.Fatalf("delivery answered %d", code)
	}
}

// sessionEvents are the session's events.
func (r *reviewRig) sessionEvents(t *testing.T, session string) []*appv1.SessionEvent {
	t.Helper()
	c := appv1connect.NewSessionServiceClient(httpClient, r.rpcURL(), auth.WithKey(r.admin))
	resp, err := c.ListSessionEvents(t.Context(), connect.NewRequest(&appv1.ListSessionEventsRequest{SessionId: session, Limit: ptr[int64](1000)}))
	if err != nil {
		t.Fatal(err)
	}
	return resp.Msg.GetEvents()
}

// sessionsHold fails when an event of any of the sessions carries secret.
func (r *reviewRig) sessionsHold(t *testing.T, secret string, sessions ...string) {
	t.Helper()
	for _, id := range sessions {
		for _, e := range r.sessionEvents(t, id) {
			if strings.Contains(e.GetPayloadJson(), secret) {
				t.Fatalf("session %s's %s event carries the secret: %s", id, e.GetKind(), e.GetPayloadJson())
			}
		}
	}
}

func eventOf(events []*appv1.ReviewEvent, kind string) *appv1.ReviewEvent {
	for _, e := range events {
		if e.GetKind() == kind {
			return e
		}
	}
	return nil
}

// The whole path on real parts: a signed pull_request delivery on the webhook route, the
// automation worker handing it to reviews, a finder and a verifier played by the bash harness
// in sandboxes where the PR's head is checked out (cloned over the egress proxy from the git
// server the fake GitHub names, the GitHub token injected by the proxy, never in the sandbox),
// the confirmed finding posted to a GitHub on loopback as one review with an inline comment,
// and the autofix task's agent pushing its fix to the PR's branch. Then that push makes a
// second pass that outdates the finding, and a finder that answers broken JSON fails a third.
func TestAPullRequestWebhookEndsInAPostedReviewWithInlineComments(t *testing.T) {
	r := newReviewRig(t, nil, func(registry string) string { return reviewerImage(t, registry) }).enroll(t, reviewRepo, "task", nil)
	head := r.git.Tip(t, reviewRepo, "cache")
	r.push(t, "opened")
	first := r.waitReview(t, 1)
	if first.GetReview().GetStatus() != "completed" || first.GetReview().GetHeadSha() != head || len(first.GetFindings()) != 1 {
		t.Fatalf("first pass %v; events %v", first.GetReview(), first.GetEvents())
	}
	// The finding is what the finder read in its checkout: the line and its code.
	posted := r.gh.Reviews(reviewRepo, 7)
	if len(posted) != 1 || len(posted[0].Comments) != 1 || posted[0].Comments[0].Line != 11 || !strings.Contains(posted[0].Comments[0].Body, "Nil map read in return cache[k]") {
		t.Fatalf("posted %+v", posted)
	}
	if first.GetFindings()[0].GetScmThreadId() == "" || first.GetReview().GetFinderSessionId() == "" || first.GetReview().GetVerifierSessionId() == "" {
		t.Fatalf("finding %v, review %v", first.GetFindings()[0], first.GetReview())
	}

	// Autofix: the fix task's agent pushed its commit to the PR's branch over the proxy, and
	// the pass recorded the push.
	fixHead := r.git.Tip(t, reviewRepo, "cache")
	if fixHead == head || r.git.Show(t, reviewRepo, "-s", "--format=%s %P", fixHead) != "Fix the nil map read "+head ||
		!strings.Contains(r.git.Show(t, reviewRepo, fixHead+":a.go"), "return lookup(k)") {
		t.Fatalf("the branch cache is at %s after the fix, from %s", fixHead, head)
	}
	pushed := eventOf(first.GetEvents(), "autofix.pushed")
	if pushed == nil || !strings.Contains(pushed.GetDetail(), fixHead[:12]) {
		t.Fatalf("no autofix.pushed event naming %s: %v", fixHead, first.GetEvents())
	}
	fixTask := strings.TrimPrefix(eventOf(first.GetEvents(), "autofix.task").GetDetail(), "fix task ")
	task, err := appv1connect.NewTaskServiceClient(httpClient, r.rpcURL(), auth.WithKey(r.admin)).GetTask(t.Context(), connect.NewRequest(&appv1.GetTaskRequest{TaskId: fixTask}))
	if err != nil || task.Msg.GetTask().GetType() != "review" {
		t.Fatalf("fix task %q: %v, %v", fixTask, task, err)
	}
	// The token reached the git server only through the proxy: the sandboxes held placeholders.
	for _, a := range r.git.Auths() {
		if strings.Contains(a, "hangar-placeholder") {
			t.Fatal("the git server got a placeholder")
		}
	}
	r.sessionsHold(t, githubToken, first.GetReview().GetFinderSessionId(), first.GetReview().GetVerifierSessionId(), task.Msg.GetTask().GetSessions()[0].GetSessionId())

	// Resolving the finding's thread on GitHub resolves it; unresolving reopens it.
	thread, _ := strconv.ParseInt(first.GetFindings()[0].GetScmThreadId(), 10, 64)
	for _, step := range []struct {
		action string
		open   int32
	}{{"resolved", 0}, {"unresolved", 1}} {
		if code := fakegithub.Deliver(t, r.hook, r.secret, "pull_request_review_thread", fakegithub.ThreadEvent(step.action, reviewRepo, 7, thread, "octocat")); code != 202 {
			t.Fatalf("delivery answered %d", code)
		}
		testkit.Eventually(t, time.Minute, "the thread's finding "+step.action, func() (bool, string) {
			got, err := r.reviews.GetReview(t.Context(), connect.NewRequest(&appv1.GetReviewRequest{Id: first.GetReview().GetId()}))
			if err != nil {
				t.Fatal(err)
			}
			return got.Msg.GetReview().GetFindingCounts().GetTotal() == step.open, got.Msg.GetFindings()[0].GetState()
		})
	}

	// GitHub announces the fix's push: the second pass, on the fixed head, finds nothing, and
	// the first pass's finding on the line the fix changed is outdated.
	r.gh.SetCompare(reviewRepo, head, fixHead, []fakegithub.File{{Name: "a.go", Patch: "@@ -11,1 +11,1 @@\n-\treturn cache[k]\n+\treturn lookup(k)"}})
	r.push(t, "synchronize")
	second := r.waitReview(t, 2)
	if second.GetReview().GetStatus() != "completed" || second.GetReview().GetHeadSha() != fixHead {
		t.Fatalf("second pass %v; events %v", second.GetReview(), second.GetEvents())
	}
	old, err := r.reviews.GetReview(t.Context(), connect.NewRequest(&appv1.GetReviewRequest{Id: first.GetReview().GetId()}))
	if err != nil {
		t.Fatal(err)
	}
	if old.Msg.GetFindings()[0].GetState() != "outdated" || old.Msg.GetReview().GetActive() || old.Msg.GetReview().GetFindingCounts().GetTotal() != 0 {
		t.Fatalf("first pass after the push: %v %v", old.Msg.GetReview(), old.Msg.GetFindings())
	}

	// A finder that answers broken JSON fails its pass, saying so; nothing is posted.
	r.git.Commit(t, reviewRepo, "cache", "", map[string]string{"BROKEN": "yes\n"}, "Break the finder")
	r.push(t, "synchronize")
	third := r.waitReview(t, 3)
	last := third.GetEvents()[len(third.GetEvents())-1]
	if third.GetReview().GetStatus() != "failed" || !strings.Contains(last.GetDetail(), "the finder's") || len(r.gh.Reviews(reviewRepo, 7)) != 2 {
		t.Fatalf("third pass %v; last event %v; %d reviews posted", third.GetReview(), last, len(r.gh.Reviews(reviewRepo, 7)))
	}

	// A deleted fork's head: GitHub names no head repository and the head is only the base
	// repository's refs/pull/7/head, which clones do not fetch; the agents clone the base's
	// default branch and fetch the head by its commit.
	r.pr.DeletedFork, r.pr.HeadRef = true, "refs/pull/7/head"
	fourthHead := r.git.Commit(t, reviewRepo, r.pr.HeadRef, "origin/cache", map[string]string{"BROKEN": ""}, "Mend the finder")
	r.push(t, "synchronize")
	fourth := r.waitReview(t, 4)
	if fourth.GetReview().GetStatus() != "completed" || fourth.GetReview().GetHeadSha() != fourthHead {
		t.Fatalf("fourth pass %v; events %v", fourth.GetReview(), fourth.GetEvents())
	}
}

// waitReview waits until the PR's pass number pass has ended and answers it.
func (r *reviewedRepo) waitReview(t *testing.T, pass int) *appv1.GetReviewResponse {
	t.Helper()
	var got *appv1.GetReviewResponse
	testkit.Eventually(t, 3*time.Minute, "the review pass ending", func() (bool, string) {
		list, err := r.reviews.ListReviews(t.Context(), connect.NewRequest(&appv1.ListReviewsRequest{Repos: []string{r.repo}}))
		if err != nil {
			t.Fatal(err)
		}
		if len(list.Msg.GetReviews()) == 0 {
			return false, "no review"
		}
		one, err := r.reviews.GetReview(t.Context(), connect.NewRequest(&appv1.GetReviewRequest{Id: list.Msg.GetReviews()[0].GetId()}))
		if err != nil {
			t.Fatal(err)
		}
		got = one.Msg
		st := got.GetReview().GetStatus()
		newest := len(got.GetPasses()) == pass && got.GetPasses()[pass-1].GetId() == got.GetReview().GetId()
		return newest && (st == "completed" || st == "failed"), st
	})
	return got
}

// reviewCLI is one real CLI of the agent image as a review's agents: how it reaches its model
// API and the tool calls its scripted model makes.
type reviewCLI struct {
	harness string
	// repo is the repository (owner/name) it reviews in the rig the CLIs share.
	repo string
	// hosts are the names the fake answers as, the model API first: the test resolver maps
	// them all to it, so nothing the CLI asks for is dialed off this machine.
	hosts []string
	// secret is the org secret of the API key, envVar the variable the CLI reads it from, the
	// profile holding it as a proxy-mode secret for the API's host.
	secret, envVar, key string
	// endpoint is the path of the API's model calls.
	endpoint string
	// env and allow are the profile's further variables and egress hosts.
	env   map[string]string
	allow []string
	// read, edit and shell are the CLI's tool calls that read a file, replace its line old by
	// new, and run a shell command.
	read  func(path string) *modelfake.ToolCall
	edit  func(path, old, new string) *modelfake.ToolCall
	shell func(command string) *modelfake.ToolCall
}

// reviewCLIs are Claude Code, which reaches the fake as api.example.com by its base URL, and
// Codex, which has no variable for its API's base URL and reaches it as api.openai.com; each
// reviews its own repository, so that no row can pass on the other's PR or branch.
var reviewCLIs = []reviewCLI{
	{
		harness: "claude-code", repo: reviewRepo, hosts: []string{"api.example.com"}, endpoint: "/v1/messages",
		secret: "anthropic/key", envVar: "ANTHROPIC_API_KEY", key: "sk-ant-e2e-real-key",
		env: map[string]string{"ANTHROPIC_BASE_URL": "https://api.example.com"}, allow: []string{"api.example.com"},
		read: func(path string) *modelfake.ToolCall {
			return &modelfake.ToolCall{Name: "Read", Input: map[string]any{"file_path": path}}
		},
		edit: func(path, old, new string) *modelfake.ToolCall {
			return &modelfake.ToolCall{Name: "Edit", Input: map[string]any{"file_path": path, "old_string": old, "new_string": new}}
		},
		shell: func(command string) *modelfake.ToolCall {
			return &modelfake.ToolCall{Name: "Bash", Input: map[string]any{"command": command, "description": "Run it"}}
		},
	},
	{
		harness: "codex", repo: "acme/gadgets", hosts: []string{"api.openai.com", "chatgpt.com", "auth.openai.com"}, endpoint: "/v1/responses",
		secret: "openai/key", envVar: "OPENAI_API_KEY", key: "sk-proj-e2e-real-key",
		read: func(path string) *modelfake.ToolCall {
			return &modelfake.ToolCall{Name: "exec_command", Input: map[string]any{"cmd": "cat " + path}}
		},
		edit: func(path, old, new string) *modelfake.ToolCall {
			patch := "*** Begin Patch\n*** Update File: " + path + "\n@@\n-" + old + "\n+" + new + "\n*** End Patch\n"
			return &modelfake.ToolCall{Name: "apply_patch", Custom: true, Input: patch}
		},
		shell: func(command string) *modelfake.ToolCall {
			return &modelfake.ToolCall{Name: "exec_command", Input: map[string]any{"cmd": command}}
		},
	},
}

// Each real CLI of the agent image (the enrollment's engine, the profile's harness) is the
// finder, the verifier and the fixer: the loopback fake of its model API plays their
// conversations (the finder reads a.go in its checkout with the CLI's own tool, then answers
// the findings JSON; the verifier reads it and confirms; the fixer reads, edits, and commits and
// pushes with its shell tool), reached through the egress proxy, which injects the API key the
// sandboxes hold only a placeholder of. The review posts the confirmed finding and records the
// push. The CLIs share one rig, each with its own repository, profile and fake: the ~470 MB
// image is pushed and enabled (pulled, unpacked and chunked, minutes under -race) once.
func TestRealCLIsFindVerifyAndFixAReviewsFindings(t *testing.T) {
	img := modelfake.AgentImage(t)
	fakes := make([]*modelfake.Server, len(reviewCLIs))
	for i, cli := range reviewCLIs {
		fakes[i] = cli.fake()
		t.Cleanup(fakes[i].Close)
	}
	r := newReviewRig(t, func(sb *testenv.Sandboxes) {
		forRealAgents(sb)
		for i, cli := range reviewCLIs {
			reachFake(sb, fakes[i], cli.hosts...)
		}
	}, func(registry string) string {
		// Pushed, not seeded (testenv.SeedImage): with Pub/Sub, sessions start from enabled
		// images only, and enabling pulls the image from its registry and chunks it.
		return imagestest.Push(t, registry, "hangar/agent", img)
	})
	for i, cli := range reviewCLIs {
		t.Run(cli.harness, func(t *testing.T) { realCLIReview(t, r, fakes[i], cli) })
	}
}

// checkout is where the agents of the CLI's repository find its checkout (the reviews'
// /work/<name>).
func (cli reviewCLI) checkout() string { return "/work/" + path.Base(cli.repo) }

// fake starts the fake of the CLI's model API playing its finder, verifier and fixer on its
// repository's PR 7.
func (cli reviewCLI) fake() *modelfake.Server {
	finding := map[string]any{"path": "a.go", "start_line": 11, "end_line": 11, "side": "RIGHT", "category": "bug", "severity": "high",
		"confidence": "high", "title": "Nil map read", "body_md": "`cache` is never made.", "suggested_fix": "", "evidence": []string{"a.go:11"}}
	file := cli.checkout() + "/a.go"
	return modelfake.StartTLS(cli.hosts,
		modelfake.Script{Match: "Fix review findings on " + cli.repo + "#7", Steps: []modelfake.Step{
			{Text: "Reading it.", Tool: cli.read(file), InputTokens: 900, OutputTokens: 20},
			{Tool: cli.edit(file, "\treturn cache[k]", "\treturn lookup(k)"), InputTokens: 1000, OutputTokens: 30},
			{Tool: cli.shell("cd " + cli.checkout() + " && git -c user.name=Fixer -c user.email=fixer@hangar.invalid commit -qam 'Fix the nil map read' && git push -q origin cache"), InputTokens: 1100, OutputTokens: 30},
			{Text: "Fixed and pushed.", InputTokens: 1200, OutputTokens: 10},
		}},
		modelfake.Script{Match: "Verify findings of review", Steps: []modelfake.Step{
			{Text: "Let me check a.go.", Tool: cli.read(file), InputTokens: 800, OutputTokens: 30},
			{Text: "Checked a.go.\n" + fenced(map[string]any{"verdicts": []any{map[string]string{"finding_id": "f1", "verdict": "confirmed", "confidence": "high", "reasoning": "cache is never made"}}}), InputTokens: 900, OutputTokens: 40},
		}},
		modelfake.Script{Match: "Review pull request " + cli.repo + "#7", Steps: []modelfake.Step{
			{Text: "Let me read the change.", Tool: cli.read(file), InputTokens: 1200, OutputTokens: 30},
			{Text: "Found one.\n" + fenced(map[string]any{"summary_md": "Adds a cache.", "findings": []any{finding}}), InputTokens: 1400, OutputTokens: 90},
		}},
	)
}

// realCLIReview has cli review, verify and fix its repository's PR in the shared rig, its
// model API played by fake.
func realCLIReview(t *testing.T, rig *reviewRig, fake *modelfake.Server, cli reviewCLI) {
	rig.putOrgSecret(t, cli.secret, cli.key)
	r := rig.enroll(t, cli.repo, "task", func(req *appv1.CreateProfileRequest) {
		req.Harness, req.EnvVars = ptr(cli.harness), cli.env
		if cli.allow != nil {
			req.Network = &appv1.ProfileNetwork{AllowHosts: cli.allow}
		}
		req.Secrets = []*appv1.ProfileSecret{{Ref: cli.secret, EnvVar: cli.envVar, Mode: "proxy", AllowHosts: cli.hosts[:1]}}
	})
	head := r.git.Tip(t, r.repo, "cache")
	r.push(t, "opened")
	got := r.waitReview(t, 1)
	if got.GetReview().GetStatus() != "completed" || got.GetReview().GetFindingCounts().GetHigh() != 1 {
		t.Fatalf("review %v; events %v", got.GetReview(), got.GetEvents())
	}
	posted := r.gh.Reviews(r.repo, 7)
	if len(posted) != 1 || len(posted[0].Comments) != 1 || posted[0].Comments[0].Line != 11 || !strings.Contains(posted[0].Comments[0].Body, "Nil map read") {
		t.Fatalf("posted %+v", posted)
	}
	if v := got.GetVerdicts(); len(v) != 1 || v[0].GetVerdict() != "confirmed" {
		t.Fatalf("verdicts %v", v)
	}
	// Both agents read the checkout: their read tool's result, sent back to the model by the
	// CLI's API call, is a.go at the PR's head, whose line 3 no prompt quotes (the patch is
	// lines 10-12).
	for _, role := range []string{"Review pull request", "Verify findings of review"} {
		read := false
		for _, req := range fake.Requests() {
			read = read || (req.Path == cli.endpoint && strings.Contains(string(req.Body), role) && strings.Contains(string(req.Body), "cache holds the widgets by key"))
		}
		if !read {
			t.Errorf("no request of the conversation %q carried a.go as %s read it from the checkout", role, cli.harness)
		}
	}
	// The fixer's commit is on the PR's branch, and the pass recorded it.
	fixHead := r.git.Tip(t, r.repo, "cache")
	if fixHead == head || r.git.Show(t, r.repo, "-s", "--format=%s", fixHead) != "Fix the nil map read" || !strings.Contains(r.git.Show(t, r.repo, fixHead+":a.go"), "return lookup(k)") {
		t.Fatalf("the branch cache is at %s after the fix, from %s", fixHead, head)
	}
	if pushed := eventOf(got.GetEvents(), "autofix.pushed"); pushed == nil || !strings.Contains(pushed.GetDetail(), fixHead[:12]) {
		t.Fatalf("no autofix.pushed event naming %s: %v", fixHead, got.GetEvents())
	}
	if creds := fake.Credentials(); len(creds) != 1 || creds[0] != cli.key {
		t.Fatalf("the model API was sent credentials %q, want only the key the proxy injects", creds)
	}
	agents := []string{got.GetReview().GetFinderSessionId(), got.GetReview().GetVerifierSessionId()}
	r.sessionsHold(t, cli.key, agents...)
	r.sessionsHold(t, githubToken, agents...)
	// The harness read the CLI's output without a complaint.
	for _, id := range agents {
		for _, e := range r.sessionEvents(t, id) {
			if e.GetKind() == "error" {
				t.Errorf("session %s logged an error: %s", id, e.GetPayloadJson())
			}
		}
	}
}

// fenced is v as an answer's ```json block.
func fenced(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return "```json\n" + string(b) + "\n```\n"
}
