package e2e

import (
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/hangar-dev/hangar/functions/api"
	"github.com/hangar-dev/hangar/functions/reviews/fakegithub"
	appv1 "github.com/hangar-dev/hangar/gen/svc/app/v1"
	"github.com/hangar-dev/hangar/gen/svc/app/v1/appv1connect"
	"github.com/hangar-dev/hangar/internal/testenv"
	"github.com/hangar-dev/hangar/internal/testkit"
	"github.com/hangar-dev/hangar/platform/auth"
	"github.com/hangar-dev/hangar/platform/egress"
	"github.com/hangar-dev/hangar/sandboxhosts/images"
	"github.com/hangar-dev/hangar/sandboxhosts/images/imagestest"
)

// reviewerImage is busybox with the scripted finder and verifier: the bash harness runs a
// review prompt as a script, whose first line ("Review pull request R#N at SHA", "Verify
// findings of review ID for R#N at SHA") runs /bin/Review or /bin/Verify, which print the
// answer scripted for that head. The rest of the prompt is prose the shell stumbles over on
// stderr, which the answer's ```json block stands apart from.
func reviewerImage(t *testing.T, registry string, answers map[string]string) string {
	t.Helper()
	files := map[string]images.File{
		"/bin/Review": {Content: []byte("#!/bin/sh\ncat \"/opt/review/find-$5\"\n"), Mode: 0o755},
		"/bin/Verify": {Content: []byte("#!/bin/sh\ncat \"/opt/review/verify-$8\"\n"), Mode: 0o755},
	}
	for name, body := range answers {
		files["/opt/review/"+name] = images.File{Content: []byte(body)}
	}
	img, err := images.Busybox(files)
	if err != nil {
		t.Fatal(err)
	}
	return imagestest.Push(t, registry, "test/reviewer", img)
}

func fenced(v any) string {
	b, _ := json.Marshal(v)
	return "```json\n" + string(b) + "\n```\n"
}

// The whole path on real parts: a signed pull_request delivery on the webhook route, the
// automation worker handing it to reviews, a finder and a verifier played by the bash harness
// in sandboxes, and the confirmed finding posted to a GitHub on loopback as one review with an
// inline comment; then a push makes a second pass that outdates it.
func TestAPullRequestWebhookEndsInAPostedReviewWithInlineComments(t *testing.T) {
	testenv.RequirePlugins(t)
	db, _ := testenv.Firestore(t)
	sb := testenv.NewSandboxes(t, db)
	sb.StartHost(t, "host-a")
	ps := testenv.PubSub(t)
	gh := fakegithub.New(t, "ghs_e2e")
	cfg := sb.Config
	cfg.Egress = egress.MustParse("127.0.0.1") // the fake GitHub is on loopback, as an operator would list GitHub Enterprise
	cfg.Limits.Reviews.GitHubAPI = gh.URL
	cfg.Limits.Reviews.Poll = 200 * time.Millisecond
	cfg.Limits.Reviews.AgentTimeout = 3 * time.Minute
	a := api.New(api.Deps{DB: sb.DB, Config: cfg, Bucket: sb.Bucket, Sealer: sb.Sealer, DefaultImage: sb.Image, PubSub: ps})
	s := serve(t, a)
	key := auth.WithKey(s.admin)
	reviewsClient := appv1connect.NewReviewServiceClient(httpClient, s.rpcURL(), key)
	const repo = "acme/widgets"
	finding := map[string]any{"path": "a.go", "start_line": 11, "end_line": 11, "side": "RIGHT", "category": "bug", "severity": "high",
		"confidence": "high", "title": "Nil map read", "body_md": "`cache` may be nil.", "suggested_fix": "", "evidence": []string{"a.go:11"}}
	image := reviewerImage(t, sb.Registry, map[string]string{
		"find-head111":   "Reading the diff.\n" + fenced(map[string]any{"summary_md": "Adds a cache.", "findings": []any{finding}}),
		"verify-head111": fenced(map[string]any{"verdicts": []any{map[string]string{"finding_id": "f1", "verdict": "confirmed", "confidence": "high", "reasoning": "cache is never made"}}}),
		"find-head222":   fenced(map[string]any{"summary_md": "Fixed.", "findings": []any{}}),
		"find-head333":   "```json\n{\"findings\": [ this is not JSON\n```\n",
	})
	runWorkers(t, a, ps, image)

	if _, err := appv1connect.NewOrgSecretServiceClient(httpClient, s.rpcURL(), key).PutOrgSecret(t.Context(), connect.NewRequest(&appv1.PutOrgSecretRequest{Name: "GITHUB_TOKEN", Value: "ghs_e2e"})); err != nil {
		t.Fatal(err)
	}
	reg, err := appv1connect.NewWebhookRegistrationServiceClient(httpClient, s.rpcURL(), key).CreateWebhookRegistration(t.Context(), connect.NewRequest(&appv1.CreateWebhookRegistrationRequest{Name: "github", Provider: "github"}))
	if err != nil {
		t.Fatal(err)
	}
	p, err := appv1connect.NewProfileServiceClient(httpClient, s.rpcURL(), key).CreateProfile(t.Context(), connect.NewRequest(&appv1.CreateProfileRequest{Name: "reviewer", ImageId: image, Harness: ptr("bash")}))
	if err != nil {
		t.Fatal(err)
	}
	_, err = reviewsClient.UpsertEnrollment(t.Context(), connect.NewRequest(&appv1.UpsertEnrollmentRequest{Repo: repo, ProfileId: ptr("prof_01jd3aaaaaaaaaaaaaaaaaaaaa")}))
	testenv.WantCode(t, err, connect.CodeNotFound)
	if _, err := reviewsClient.UpsertEnrollment(t.Context(), connect.NewRequest(&appv1.UpsertEnrollmentRequest{Repo: repo, TriggerMode: "automatic", Autofix: "task", ProfileId: ptr(p.Msg.GetProfile().GetId())})); err != nil {
		t.Fatal(err)
	}

	pr := fakegithub.PR{Number: 7, Title: "Add widget cache", Author: "octocat", HeadSHA: "head111", HeadRef: "cache", BaseSHA: "base000", BaseRef: "main",
		Files: []fakegithub.File{{Name: "a.go", Patch: fakegithub.Patch(10, "func get(k string) string {", "  return cache[k]", "}")}}}
	gh.SetPR(repo, pr)
	hook := s.url + reg.Msg.GetRegistration().GetUrlPath()
	if code := fakegithub.Deliver(t, hook, []byte(reg.Msg.GetSecret()), "pull_request", fakegithub.PullRequestEvent("opened", repo, pr, 0)); code != 202 {
		t.Fatalf("delivery answered %d", code)
	}
	first := waitReview(t, reviewsClient, 1)
	if first.GetReview().GetStatus() != "completed" || first.GetReview().GetFindingCounts().GetHigh() != 1 {
		t.Fatalf("first pass %v; events %v", first.GetReview(), first.GetEvents())
	}
	posted := gh.Reviews(repo, 7)
	if len(posted) != 1 || len(posted[0].Comments) != 1 || posted[0].Comments[0].Line != 11 || !strings.Contains(posted[0].Comments[0].Body, "Nil map read") {
		t.Fatalf("posted %+v", posted)
	}
	if first.GetFindings()[0].GetScmThreadId() == "" || first.GetReview().GetFinderSessionId() == "" || first.GetReview().GetVerifierSessionId() == "" {
		t.Fatalf("finding %v, review %v", first.GetFindings()[0], first.GetReview())
	}
	// autofix task: the confirmed finding became a review task asked to push a fix.
	var fixTask string
	for _, e := range first.GetEvents() {
		if e.GetKind() == "autofix.task" {
			fixTask = strings.TrimPrefix(e.GetDetail(), "fix task ")
		}
	}
	task, err := appv1connect.NewTaskServiceClient(httpClient, s.rpcURL(), key).GetTask(t.Context(), connect.NewRequest(&appv1.GetTaskRequest{TaskId: fixTask}))
	if err != nil || task.Msg.GetTask().GetType() != "review" || !strings.Contains(task.Msg.GetTask().GetSourceJson(), "Fix review findings on acme/widgets#7") {
		t.Fatalf("fix task %q: %v, %v", fixTask, task, err)
	}

	// Resolving the finding's thread on GitHub resolves it; unresolving reopens it.
	thread, _ := strconv.ParseInt(first.GetFindings()[0].GetScmThreadId(), 10, 64)
	for _, step := range []struct {
		action string
		open   int32
	}{{"resolved", 0}, {"unresolved", 1}} {
		if code := fakegithub.Deliver(t, hook, []byte(reg.Msg.GetSecret()), "pull_request_review_thread", fakegithub.ThreadEvent(step.action, repo, 7, thread, "octocat")); code != 202 {
			t.Fatalf("delivery answered %d", code)
		}
		testkit.Eventually(t, time.Minute, "the thread's finding "+step.action, func() (bool, string) {
			r, err := reviewsClient.GetReview(t.Context(), connect.NewRequest(&appv1.GetReviewRequest{Id: first.GetReview().GetId()}))
			if err != nil {
				t.Fatal(err)
			}
			return r.Msg.GetReview().GetFindingCounts().GetTotal() == step.open, r.Msg.GetFindings()[0].GetState()
		})
	}

	// A push: the second pass finds nothing, and the first pass's finding on the changed line
	// is outdated.
	pr.HeadSHA = "head222"
	gh.SetPR(repo, pr)
	gh.SetCompare(repo, "head111", "head222", []fakegithub.File{{Name: "a.go", Patch: "@@ -11,1 +11,1 @@\n-  return cache[k]\n+  return lookup(k)"}})
	if code := fakegithub.Deliver(t, hook, []byte(reg.Msg.GetSecret()), "pull_request", fakegithub.PullRequestEvent("synchronize", repo, pr, 0)); code != 202 {
		t.Fatalf("delivery answered %d", code)
	}
	second := waitReview(t, reviewsClient, 2)
	if second.GetReview().GetStatus() != "completed" || second.GetReview().GetHeadSha() != "head222" {
		t.Fatalf("second pass %v; events %v", second.GetReview(), second.GetEvents())
	}
	old, err := reviewsClient.GetReview(t.Context(), connect.NewRequest(&appv1.GetReviewRequest{Id: first.GetReview().GetId()}))
	if err != nil {
		t.Fatal(err)
	}
	if old.Msg.GetFindings()[0].GetState() != "outdated" || old.Msg.GetReview().GetActive() || old.Msg.GetReview().GetFindingCounts().GetTotal() != 0 {
		t.Fatalf("first pass after the push: %v %v", old.Msg.GetReview(), old.Msg.GetFindings())
	}

	// A finder that answers broken JSON fails its pass, saying so; nothing is posted.
	pr.HeadSHA = "head333"
	gh.SetPR(repo, pr)
	if code := fakegithub.Deliver(t, hook, []byte(reg.Msg.GetSecret()), "pull_request", fakegithub.PullRequestEvent("synchronize", repo, pr, 0)); code != 202 {
		t.Fatalf("delivery answered %d", code)
	}
	third := waitReview(t, reviewsClient, 3)
	last := third.GetEvents()[len(third.GetEvents())-1]
	if third.GetReview().GetStatus() != "failed" || !strings.Contains(last.GetDetail(), "the finder's") || len(gh.Reviews(repo, 7)) != 2 {
		t.Fatalf("third pass %v; last event %v; %d reviews posted", third.GetReview(), last, len(gh.Reviews(repo, 7)))
	}
}

// waitReview waits until the PR's pass number pass has ended and answers it.
func waitReview(t *testing.T, c appv1connect.ReviewServiceClient, pass int) *appv1.GetReviewResponse {
	t.Helper()
	var got *appv1.GetReviewResponse
	testkit.Eventually(t, 3*time.Minute, "the review pass ending", func() (bool, string) {
		list, err := c.ListReviews(t.Context(), connect.NewRequest(&appv1.ListReviewsRequest{}))
		if err != nil {
			t.Fatal(err)
		}
		if len(list.Msg.GetReviews()) == 0 {
			return false, "no review"
		}
		r, err := c.GetReview(t.Context(), connect.NewRequest(&appv1.GetReviewRequest{Id: list.Msg.GetReviews()[0].GetId()}))
		if err != nil {
			t.Fatal(err)
		}
		got = r.Msg
		st := got.GetReview().GetStatus()
		newest := len(got.GetPasses()) == pass && got.GetPasses()[pass-1].GetId() == got.GetReview().GetId()
		return newest && (st == "completed" || st == "failed"), st
	})
	return got
}
