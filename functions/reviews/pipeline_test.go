package reviews_test

import (
	"cmp"
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"cloud.google.com/go/firestore"
	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/emptypb"

	"github.com/hangar-dev/hangar/automation/triggers"
	"github.com/hangar-dev/hangar/functions/reviews"
	"github.com/hangar-dev/hangar/functions/reviews/fakegithub"
	appv1 "github.com/hangar-dev/hangar/gen/svc/app/v1"
	"github.com/hangar-dev/hangar/internal/testenv"
	"github.com/hangar-dev/hangar/platform/auth"
)

// The whole path: a pull_request delivery makes a pass; the finder's findings off the diff are
// refused; the verifier's rejections are not posted; the confirmed ones are posted as one
// review with inline comments (suggestion blocks under autofix suggest), with their thread ids
// recorded, mentions and HTML neutralized and counts true.
func TestAPullRequestDeliveryEndsInOneReviewWithInlineCommentsOfConfirmedFindingsOnly(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	r.enroll(t, "suggest")
	pr := basePR("head111")
	r.gh.SetPR(repo, pr)
	hostile := aFinding("a.go", 11, 12, "high", "Nil map read <img src=https://evil.example/x>")
	hostile["body_md"] = "cc @octo-org/security and @alice <details>hidden</details> ```"
	r.agents.answers["finder"] = finderAnswer(
		hostile,
		aFinding("b.go", 2, 2, "low", "Unused var"),
		aFinding("c.go", 1, 1, "critical", "Outside the PR"),
		aFinding("a.go", 40, 41, "medium", "Off the diff"),
	)
	r.agents.answers["verifier"] = verdicts(map[string]string{"f1": "confirmed", "f2": "rejected"})

	r.deliver(t, admin, "pull_request", fakegithub.PullRequestEvent("opened", repo, pr, 0))
	r.drive(t, 4)

	got := r.only(t, 7)
	rv := got.GetReview()
	if rv.GetStatus() != "completed" || !rv.GetActive() || rv.GetHeadSha() != "head111" || rv.GetPrTitle() != "Add widget cache" || rv.GetPrAuthor() != "octocat" || rv.GetTrigger() != "push" || rv.GetHumanTrigger() {
		t.Fatalf("review %v; events %s", rv, kinds(got.GetEvents()))
	}
	if c := rv.GetFindingCounts(); c.GetTotal() != 1 || c.GetHigh() != 1 {
		t.Fatalf("counts %v", c)
	}
	if len(got.GetFindings()) != 2 || len(got.GetVerdicts()) != 2 {
		t.Fatalf("findings %v verdicts %v", got.GetFindings(), got.GetVerdicts())
	}
	posted := r.gh.Reviews(repo, 7)
	if len(posted) != 1 || len(posted[0].Comments) != 1 || rv.GetScmReviewId() == "" {
		t.Fatalf("posted %+v, scm id %q", posted, rv.GetScmReviewId())
	}
	c := posted[0].Comments[0]
	f1 := got.GetFindings()[0]
	if f1.GetState() != "posted" || f1.GetScmThreadId() == "" || c.Path != "a.go" || c.StartLine != 11 || c.Line != 12 {
		t.Fatalf("finding %v, comment %+v", f1, c)
	}
	for _, bad := range []string{"@octo-org", "@alice", "<img", "<details>"} {
		if strings.Contains(c.Body, bad) {
			t.Errorf("the comment carries %q: %s", bad, c.Body)
		}
	}
	if !strings.Contains(c.Body, "```suggestion\n  return cache[k]\n```") {
		t.Errorf("no suggestion block: %s", c.Body)
	}
	if !strings.Contains(posted[0].Body, "hangar-review:"+rv.GetId()+":1") {
		t.Errorf("the review lacks its pass marker: %s", posted[0].Body)
	}
	for _, k := range []string{"queued", "running", "finding.refused", "finder.done", "verifying", "posting", "posted", "completed"} {
		if !strings.Contains(kinds(got.GetEvents()), k) {
			t.Errorf("no %s event in %s", k, kinds(got.GetEvents()))
		}
	}
	// Redelivering the same push makes no second pass.
	r.deliver(t, admin, "pull_request", fakegithub.PullRequestEvent("synchronize", repo, pr, 0))
	r.drive(t, 2)
	if n := len(r.only(t, 7).GetPasses()); n != 1 {
		t.Fatalf("%d passes after a redelivery", n)
	}
}

// A push makes a second pass; the first becomes inactive, and its findings on the lines the
// push changed become outdated (no longer counted). Resolving a thread resolves its finding;
// unresolving it reopens it.
func TestASecondPushMakesASecondPassAndOutdatesFindingsOnChangedLines(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	r.enroll(t, "off")
	pr := basePR("head111")
	r.gh.SetPR(repo, pr)
	r.agents.answers["finder"] = finderAnswer(aFinding("a.go", 11, 11, "high", "Nil map"), aFinding("b.go", 1, 2, "medium", "Shadowed"))
	r.agents.answers["verifier"] = verdicts(map[string]string{"f1": "confirmed", "f2": "confirmed"})
	r.deliver(t, admin, "pull_request", fakegithub.PullRequestEvent("opened", repo, pr, 0))
	r.drive(t, 4)
	first := r.only(t, 7)
	if first.GetReview().GetFindingCounts().GetTotal() != 2 {
		t.Fatalf("first pass %v", first.GetReview())
	}

	// The push changes line 11 of a.go only.
	pr2 := basePR("head222")
	r.gh.SetPR(repo, pr2)
	r.gh.SetCompare(repo, "head111", "head222", []fakegithub.File{{Name: "a.go", Patch: "@@ -11,1 +11,1 @@\n-  v := cache[k]\n+  v, ok := cache[k]"}})
	r.agents.answers["finder"] = finderAnswer()
	r.deliver(t, admin, "pull_request", fakegithub.PullRequestEvent("synchronize", repo, pr2, 0))
	r.drive(t, 4)

	second := r.only(t, 7)
	if second.GetReview().GetId() == first.GetReview().GetId() || len(second.GetPasses()) != 2 || second.GetReview().GetStatus() != "completed" {
		t.Fatalf("second pass %v, passes %d", second.GetReview(), len(second.GetPasses()))
	}
	old := r.get(t, first.GetReview().GetId())
	states := map[string]string{}
	for _, f := range old.GetFindings() {
		states[f.GetPath()] = f.GetState()
	}
	if old.GetReview().GetActive() || states["a.go"] != "outdated" || states["b.go"] != "posted" || old.GetReview().GetFindingCounts().GetTotal() != 1 {
		t.Fatalf("first pass after the push: active %v, states %v, counts %v", old.GetReview().GetActive(), states, old.GetReview().GetFindingCounts())
	}
	if len(r.gh.Reviews(repo, 7)) != 2 {
		t.Fatalf("%d reviews posted, want one per pass", len(r.gh.Reviews(repo, 7)))
	}

	// Resolving b.go's thread resolves its finding.
	var thread int64
	for _, c := range r.gh.Reviews(repo, 7)[0].Comments {
		if c.Path == "b.go" {
			thread = c.ID
		}
	}
	r.deliver(t, admin, "pull_request_review_thread", fakegithub.ThreadEvent("resolved", repo, 7, thread, "octocat"))
	old = r.get(t, first.GetReview().GetId())
	if n := old.GetReview().GetFindingCounts().GetTotal(); n != 0 || !strings.Contains(kinds(old.GetEvents()), "finding.resolved") {
		t.Fatalf("after resolving: counts %v, events %s", old.GetReview().GetFindingCounts(), kinds(old.GetEvents()))
	}
	r.deliver(t, admin, "pull_request_review_thread", fakegithub.ThreadEvent("unresolved", repo, 7, thread, "octocat"))
	if n := r.get(t, first.GetReview().GetId()).GetReview().GetFindingCounts().GetTotal(); n != 1 {
		t.Fatalf("after unresolving: %d open findings", n)
	}
}

// A push while a pass still runs supersedes it: it never posts.
func TestAPushWhileAPassRunsSupersedesIt(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	r.enroll(t, "off")
	r.agents.hang["finder"] = true
	r.open(t, admin)
	r.drive(t, 1)
	first := r.only(t, 7).GetReview()
	r.gh.SetPR(repo, basePR("head222"))
	r.deliver(t, admin, "pull_request", fakegithub.PullRequestEvent("synchronize", repo, basePR("head222"), 0))
	if got := r.get(t, first.GetId()).GetReview(); got.GetStatus() != "superseded" || got.GetActive() {
		t.Fatalf("first pass %s active %v", got.GetStatus(), got.GetActive())
	}
	if len(r.agents.stopped) != 1 || r.agents.stopped[0] != first.GetId()+"-finder" {
		t.Fatalf("stopped %v, want the superseded pass's finder", r.agents.stopped)
	}
	r.agents.hang["finder"] = false
	r.agents.answers["finder"] = finderAnswer()
	r.drive(t, 4)
	if n := len(r.gh.Reviews(repo, 7)); n != 1 {
		t.Fatalf("%d reviews posted, want the second pass's only", n)
	}
}

// Every agent gets the PR's head checked out: the head repository's branch moved to the head
// reviewed (a deleted fork's head: the base repository's commit), with the integration's token
// for the proxy to inject.
func TestEveryAgentGetsThePullRequestsHeadCheckedOut(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name        string
		deletedFork bool
		branch      string
	}{
		{"the head repository's branch at the head", false, "cache"},
		{"a deleted fork's head from the base repository by its commit", true, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r := newRig(t)
			r.enroll(t, "task")
			pr := basePR("head111")
			pr.DeletedFork = tc.deletedFork
			r.gh.SetPR(repo, pr)
			r.agents.answers["finder"] = finderAnswer(aFinding("a.go", 11, 11, "high", "Nil map"))
			r.agents.answers["verifier"] = verdicts(map[string]string{"f1": "confirmed"})
			r.deliver(t, admin, "pull_request", fakegithub.PullRequestEvent("opened", repo, pr, 0))
			r.drive(t, 5)
			want := reviews.Checkout{Path: "/work/widgets", URL: "https://github.example/acme/widgets.git", Branch: tc.branch, Commit: "head111", Token: "ghs_test"}
			for _, role := range []string{"finder", "verifier", "fix"} {
				if co := r.agents.checkouts[role]; co == nil || *co != want {
					t.Errorf("the %s's checkout is %+v, want %+v", role, co, want)
				}
				if !strings.Contains(r.agents.prompts[role], "checked out at /work/widgets") {
					t.Errorf("the %s's prompt does not say where the checkout is:\n%s", role, r.agents.prompts[role])
				}
			}
		})
	}
}

// With autofix task, a pass with confirmed findings starts a fix task after posting and waits
// for it (fixing): a push it made to the PR's branch is recorded, and a pass of that pushed head
// does not fix the fix again.
func TestAutofixTaskStartsAFixTaskAndRecordsItsPush(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	r.enroll(t, "task")
	r.agents.answers["finder"] = finderAnswer(aFinding("a.go", 11, 11, "high", "Nil map"))
	r.agents.answers["verifier"] = verdicts(map[string]string{"f1": "confirmed"})
	r.agents.hang["fix"] = true
	r.open(t, admin)
	r.drive(t, 4)
	got := r.only(t, 7)
	if got.GetReview().GetStatus() != "fixing" || !strings.Contains(kinds(got.GetEvents()), "autofix.task") || !strings.HasSuffix(r.agents.started[len(r.agents.started)-1], "-fix") {
		t.Fatalf("status %s, events %s, started %v", got.GetReview().GetStatus(), kinds(got.GetEvents()), r.agents.started)
	}
	if p := r.agents.prompts["fix"]; !strings.Contains(p, "a.go:11-11") || !strings.Contains(p, "branch cache") || !strings.Contains(p, "git push origin cache") {
		t.Fatalf("fix prompt: %s", p)
	}
	// The fix's push arrives before the fix task ends: a newer pass does not supersede the
	// fixing one, which has posted.
	r.gh.SetPR(repo, basePR("head222"))
	r.gh.SetCompare(repo, "head111", "head222", []fakegithub.File{{Name: "a.go", Patch: "@@ -11,1 +11,1 @@\n-  v := cache[k]\n+  v := lookup(k)"}})
	r.deliver(t, admin, "pull_request", fakegithub.PullRequestEvent("synchronize", repo, basePR("head222"), 0))
	r.agents.hang["fix"] = false
	r.drive(t, 1)
	first := r.get(t, got.GetReview().GetId())
	pushed := slices.IndexFunc(first.GetEvents(), func(e *appv1.ReviewEvent) bool { return e.GetKind() == "autofix.pushed" })
	if first.GetReview().GetStatus() != "completed" || first.GetReview().GetActive() || pushed < 0 || !strings.Contains(first.GetEvents()[pushed].GetDetail(), "head222") {
		t.Fatalf("after the fix: status %s, active %v, events %v", first.GetReview().GetStatus(), first.GetReview().GetActive(), first.GetEvents())
	}
	r.drive(t, 4)
	second := r.only(t, 7)
	if second.GetReview().GetStatus() != "completed" || !strings.Contains(kinds(second.GetEvents()), "autofix.skipped") || strings.Contains(kinds(second.GetEvents()), "autofix.task") {
		t.Fatalf("the fix's pass: status %s, events %s", second.GetReview().GetStatus(), kinds(second.GetEvents()))
	}
}

// A fix task that cannot start, ends without a push, or does not end in time, completes its
// posted pass saying so.
func TestAFixTaskWithoutAPushOrPastItsTimeCompletesThePassSayingSo(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, event string
		hang        bool
		refused     bool
	}{
		{"that cannot start", "autofix.failed", false, true},
		{"ended without a push", "autofix.unpushed", false, false},
		{"stopped past the agent timeout", "autofix.timeout", true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r := newRig(t)
			r.enroll(t, "task")
			r.agents.answers["finder"] = finderAnswer(aFinding("a.go", 11, 11, "high", "Nil map"))
			r.agents.answers["verifier"] = verdicts(map[string]string{"f1": "confirmed"})
			r.agents.hang["fix"] = tc.hang
			if tc.refused {
				r.agents.refuse = "fix"
			}
			r.open(t, admin)
			r.drive(t, 4)
			r.clock.Advance(11 * time.Minute)
			r.drive(t, 1)
			got := r.only(t, 7)
			if got.GetReview().GetStatus() != "completed" || !strings.Contains(kinds(got.GetEvents()), tc.event) {
				t.Fatalf("status %s, events %s", got.GetReview().GetStatus(), kinds(got.GetEvents()))
			}
			if tc.hang != slices.Contains(r.agents.stopped, got.GetReview().GetId()+"-fix") {
				t.Fatalf("stopped %v", r.agents.stopped)
			}
		})
	}
}

// Every fault ends the pass failed with its reason in its last event, or retried (an event
// saying why) and then completed; none hangs and none posts twice. Each case is the pass of PR
// 7 at head111 whose finder and verifier answer what the case scripts (by default: one finding,
// confirmed), driven past every backoff and the agent timeout.
func TestFaultsFailOrRetryWithTheReasonInTheEvents(t *testing.T) {
	t.Parallel()
	oneFinding := finderAnswer(aFinding("a.go", 11, 11, "high", "x"))
	tests := []struct {
		name string
		// secrets are the org secrets (nil: a working token).
		secrets secretMap
		// finder and verifier are the agents' answers ("" the default); hang names a role
		// that never answers.
		finder, verifier, hang string
		// faults are GitHub's answers to calls, by call (fakegithub.Fail).
		faults map[string][]fakegithub.Fault
		// wantStatus is the pass's end; wantEvent the event saying why, holding wantReason.
		wantStatus, wantEvent, wantReason string
		wantPosted                        int
	}{
		{name: "a finder answer that is not JSON fails the pass saying so", finder: "```json\n{\"findings\": [oops\n```",
			wantStatus: "failed", wantEvent: "failed", wantReason: "the finder's answer is not valid"},
		{name: "a finder answer with an unknown field fails the pass naming it", finder: `{"issues": []}`,
			wantStatus: "failed", wantEvent: "failed", wantReason: "unknown field"},
		{name: "a finder that never answers fails the pass at the agent timeout", hang: "finder",
			wantStatus: "failed", wantEvent: "failed", wantReason: "the finder did not answer within"},
		{name: "a verifier answer that is not JSON fails the pass saying so", verifier: "no json here",
			wantStatus: "failed", wantEvent: "failed", wantReason: "the verifier's answer is not valid"},
		{name: "a verifier that never answers fails the pass at the agent timeout", hang: "verifier",
			wantStatus: "failed", wantEvent: "failed", wantReason: "the verifier did not answer within"},
		{name: "no GitHub credentials fail the pass naming the secrets to set", secrets: secretMap{},
			wantStatus: "failed", wantEvent: "failed", wantReason: reviews.SecretToken},
		{name: "a token GitHub refuses (401) fails the pass", secrets: secretMap{reviews.SecretToken: "ghs_wrong"},
			wantStatus: "failed", wantEvent: "failed", wantReason: "401"},
		{name: "a PR GitHub does not find (404) fails the pass", faults: map[string][]fakegithub.Fault{"GET pulls": {{Status: http.StatusNotFound, Message: "Not Found"}}},
			wantStatus: "failed", wantEvent: "failed", wantReason: "404"},
		{name: "a PR the integration may not read (403) fails the pass", faults: map[string][]fakegithub.Fault{"GET pulls": {{Status: http.StatusForbidden, Message: "Resource not accessible by integration"}}},
			wantStatus: "failed", wantEvent: "failed", wantReason: "403"},
		{name: "a review GitHub refuses (422) fails the pass, posting nothing", faults: map[string][]fakegithub.Fault{"POST reviews": {{Status: http.StatusUnprocessableEntity, Message: "Validation Failed"}}},
			wantStatus: "failed", wantEvent: "failed", wantReason: "422"},
		{name: "a rate limit parks the pass until the reset, then it completes", faults: map[string][]fakegithub.Fault{"GET pulls": {{Status: http.StatusForbidden, RateLimited: true}}},
			wantStatus: "completed", wantEvent: "rate_limited", wantReason: "rate limit", wantPosted: 1},
		{name: "a 5xx is retried with backoff, then it completes", faults: map[string][]fakegithub.Fault{"POST reviews": {{Status: http.StatusBadGateway}}},
			wantStatus: "completed", wantEvent: "retry", wantReason: "502", wantPosted: 1},
		{name: "5xx answers past the attempts fail the pass saying it gave up", faults: map[string][]fakegithub.Fault{"GET files": {{Status: 502}, {Status: 502}, {Status: 502}}},
			wantStatus: "failed", wantEvent: "failed", wantReason: "gave up after 3 attempts"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			secrets := tt.secrets
			if secrets == nil {
				secrets = secretMap{reviews.SecretToken: "ghs_test"}
			}
			r := newRigWith(t, secrets)
			r.enroll(t, "off")
			r.gh.SetPR(repo, basePR("head111"))
			r.agents.answers["finder"] = cmp.Or(tt.finder, oneFinding)
			r.agents.answers["verifier"] = cmp.Or(tt.verifier, verdicts(map[string]string{"f1": "confirmed"}))
			if tt.hang != "" {
				r.agents.hang[tt.hang] = true
			}
			for call, faults := range tt.faults {
				r.gh.Fail(call, faults...)
			}
			r.deliver(t, admin, "pull_request", fakegithub.PullRequestEvent("opened", repo, basePR("head111"), 0))
			for range 12 {
				r.clock.Advance(2 * time.Minute) // past backoffs and, eventually, the agent timeout
				if err := r.svc.Tick(context.Background()); err != nil {
					t.Fatal(err)
				}
			}
			got := r.only(t, 7)
			if got.GetReview().GetStatus() != tt.wantStatus {
				t.Fatalf("status %s, events %s", got.GetReview().GetStatus(), kinds(got.GetEvents()))
			}
			i := slices.IndexFunc(got.GetEvents(), func(e *appv1.ReviewEvent) bool { return e.GetKind() == tt.wantEvent })
			if i < 0 || !strings.Contains(strings.ToLower(got.GetEvents()[i].GetDetail()), strings.ToLower(tt.wantReason)) {
				t.Fatalf("no %s event saying %q: %v", tt.wantEvent, tt.wantReason, got.GetEvents())
			}
			if tt.wantStatus == "failed" && got.GetEvents()[len(got.GetEvents())-1].GetKind() != "failed" {
				t.Fatalf("the last event of a failed pass is %v", got.GetEvents()[len(got.GetEvents())-1])
			}
			if n := len(r.gh.Reviews(repo, 7)); n != tt.wantPosted {
				t.Fatalf("%d reviews posted, want %d", n, tt.wantPosted)
			}
		})
	}
}

// A posting step whose result was lost (the worker died after GitHub answered) finds its review
// by the pass's marker and does not post again.
func TestARepeatedPostingStepFindsItsReviewAndDoesNotPostTwice(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	r.enroll(t, "off")
	r.agents.answers["finder"] = finderAnswer(aFinding("a.go", 11, 11, "high", "x"))
	r.agents.answers["verifier"] = verdicts(map[string]string{"f1": "confirmed"})
	r.open(t, admin)
	r.drive(t, 4)
	id := r.only(t, 7).GetReview().GetId()
	// As if the worker died after GitHub answered: the pass is still posting, with no review id.
	if _, err := r.db.Collection("reviews").Doc(id).Update(context.Background(), []firestore.Update{
		{Path: "status", Value: "posting"}, {Path: "scm_review_id", Value: ""}, {Path: "wake_at", Value: r.clock.Now()},
	}); err != nil {
		t.Fatal(err)
	}
	r.drive(t, 2)
	got := r.get(t, id)
	if n := len(r.gh.Reviews(repo, 7)); n != 1 || got.GetReview().GetStatus() != "completed" || !strings.Contains(kinds(got.GetEvents()), "posting.found") {
		t.Fatalf("%d reviews posted; status %s; events %s", n, got.GetReview().GetStatus(), kinds(got.GetEvents()))
	}
}

// Who can trigger: only deliveries through an admin's registration; a comment command only
// from someone with a role in the repository; and only enrolled repositories.
func TestSecurityReviewTriggersComeOnlyFromAdminRegistrationsMembersAndEnrolledRepos(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	r.enroll(t, "off")
	r.agents.answers["finder"] = finderAnswer()
	r.open(t, "user_mallory")
	r.deliver(t, admin, "issue_comment", fakegithub.CommentEvent(repo, 7, 1, "/hangar review", "stranger", "NONE"))
	r.deliver(t, admin, "pull_request", fakegithub.PullRequestEvent("opened", "acme/other", basePR("head111"), 0))
	if n := len(r.list(t, &appv1.ListReviewsRequest{}).GetReviews()); n != 0 {
		t.Fatalf("%d reviews from untrusted triggers", n)
	}
	r.deliver(t, admin, "issue_comment", fakegithub.CommentEvent(repo, 7, 2, "/hangar review please", "maintainer", "MEMBER"))
	r.drive(t, 3)
	got := r.only(t, 7).GetReview()
	if got.GetTrigger() != "comment" || !got.GetHumanTrigger() || got.GetStatus() != "completed" {
		t.Fatalf("comment-triggered review %v", got)
	}
	// The same comment's body replayed (under a new delivery id) makes no second pass.
	r.deliver(t, admin, "issue_comment", fakegithub.CommentEvent(repo, 7, 2, "/hangar review please", "maintainer", "MEMBER"))
	if n := len(r.only(t, 7).GetPasses()); n != 1 {
		t.Fatalf("%d passes after a replayed comment", n)
	}
}

func TestEnrollmentsAreValidatedAndOnlyAdminsChangeThem(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	user := auth.WithPrincipal(context.Background(), auth.Principal{UserID: "user_bob"})
	_, err := r.svc.UpsertEnrollment(user, connect.NewRequest(&appv1.UpsertEnrollmentRequest{Repo: repo, ProfileId: ptr(profile)}))
	testenv.WantCode(t, err, connect.CodePermissionDenied)
	_, err = r.svc.UpsertEnrollment(r.admin, connect.NewRequest(&appv1.UpsertEnrollmentRequest{Repo: "not a repo", TriggerMode: "sometimes", Autofix: "yes"}))
	if got := testenv.ViolatedFields(t, err); !slices.Equal(got, []string{"repo", "trigger_mode", "autofix", "profile_id"}) {
		t.Fatalf("violations %v", got)
	}
	r.enroll(t, "suggest")
	list, err := r.svc.ListEnrollments(user, connect.NewRequest(&emptypb.Empty{}))
	if err != nil || len(list.Msg.GetEnrollments()) != 1 || list.Msg.GetEnrollments()[0].GetAutofix() != "suggest" {
		t.Fatalf("list %v, %v", list, err)
	}
	_, err = r.svc.DeleteEnrollment(r.admin, connect.NewRequest(&appv1.DeleteEnrollmentRequest{Repo: repo}))
	if err != nil {
		t.Fatal(err)
	}
	_, err = r.svc.DeleteEnrollment(r.admin, connect.NewRequest(&appv1.DeleteEnrollmentRequest{Repo: repo}))
	testenv.WantCode(t, err, connect.CodeNotFound)
}

func TestListReviewsFiltersPagesAndCountsWithFacets(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	r.enroll(t, "off")
	r.agents.answers["finder"] = finderAnswer(aFinding("a.go", 11, 11, "high", "x"))
	r.agents.answers["verifier"] = verdicts(map[string]string{"f1": "confirmed"})
	for n := 1; n <= 3; n++ {
		pr := basePR("head" + string(rune('0'+n)))
		pr.Number, pr.Author = n, []string{"", "ann", "bob", "ann"}[n]
		r.gh.SetPR(repo, pr)
		r.deliver(t, admin, "pull_request", fakegithub.PullRequestEvent("opened", repo, pr, 0))
	}
	r.drive(t, 4)
	all := r.list(t, &appv1.ListReviewsRequest{PageSize: 2})
	if all.GetTotalCount() != 3 || len(all.GetReviews()) != 2 || !slices.Equal(all.GetFacets().GetAuthors(), []string{"ann", "bob"}) {
		t.Fatalf("list %v", all)
	}
	if got := r.list(t, &appv1.ListReviewsRequest{Authors: []string{"ann"}, Severities: []string{"high"}, Statuses: []string{"completed"}}); got.GetTotalCount() != 2 {
		t.Fatalf("ann's high findings: %v", got)
	}
	if got := r.list(t, &appv1.ListReviewsRequest{Severities: []string{"critical"}}); got.GetTotalCount() != 0 {
		t.Fatalf("critical: %v", got)
	}
	if got := r.list(t, &appv1.ListReviewsRequest{Search: "WIDGET #2"}); got.GetTotalCount() != 1 || got.GetReviews()[0].GetPrNumber() != 2 {
		t.Fatalf("search: %v", got)
	}
	_, err := r.svc.ListReviews(r.admin, connect.NewRequest(&appv1.ListReviewsRequest{Statuses: []string{"done"}, PageSize: -1}))
	testenv.WantCode(t, err, connect.CodeInvalidArgument)
	// RetryReview makes a new pass and answers its id as the workflow id.
	id := all.GetReviews()[0].GetId()
	retry, err := r.svc.RetryReview(r.admin, connect.NewRequest(&appv1.RetryReviewRequest{Id: id}))
	if err != nil || retry.Msg.GetWorkflowId() == "" || retry.Msg.GetWorkflowId() == id {
		t.Fatalf("retry %v, %v", retry, err)
	}
	if got := r.get(t, retry.Msg.GetWorkflowId()).GetReview(); got.GetTrigger() != "retry" || !got.GetActive() {
		t.Fatalf("retried pass %v", got)
	}
}

// With a GitHub App in the org secrets, every call uses an installation token minted for the
// installation the delivery named, with a JWT signed by the App's key; the agents' checkouts get
// tokens of their own for the repository only, which only the fix agent's can push with.
func TestAGitHubAppAuthenticatesWithAnInstallationToken(t *testing.T) {
	t.Parallel()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	keyPEM := pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)})
	r := newRigWith(t, secretMap{reviews.SecretAppID: "42", reviews.SecretPrivateKey: string(keyPEM)})
	r.gh.App(42, &key.PublicKey)
	r.enroll(t, "task")
	r.gh.SetPR(repo, basePR("head111"))
	r.agents.answers["finder"] = finderAnswer(aFinding("a.go", 11, 11, "high", "Nil map"))
	r.agents.answers["verifier"] = verdicts(map[string]string{"f1": "confirmed"})
	r.deliver(t, admin, "pull_request", fakegithub.PullRequestEvent("opened", repo, basePR("head111"), 99))
	r.drive(t, 5)
	if got := r.only(t, 7).GetReview(); got.GetStatus() != "completed" {
		t.Fatalf("review %v", got)
	}
	if minted := r.gh.Minted(); len(minted) == 0 || minted[0] != "99" {
		t.Fatalf("tokens minted for %v, want installation 99", minted)
	}
	if len(r.gh.Reviews(repo, 7)) != 1 {
		t.Fatal("no review posted")
	}
	want := []string{"widgets contents:read", "widgets contents:read", "widgets contents:write"}
	if got := r.gh.Scoped(); !slices.Equal(got, want) {
		t.Fatalf("the checkouts' tokens were scoped %q, want the finder's and verifier's to read and the fixer's to write %q", got, want)
	}
}

// A check suite re-run starts a pass even for a manual enrollment; a push does not.
func TestACheckSuiteRerunStartsAPassOfAManualEnrollment(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	if _, err := r.svc.UpsertEnrollment(r.admin, connect.NewRequest(&appv1.UpsertEnrollmentRequest{Repo: repo, TriggerMode: "manual", ProfileId: ptr(profile)})); err != nil {
		t.Fatal(err)
	}
	r.agents.answers["finder"] = finderAnswer()
	r.open(t, admin)
	if n := len(r.list(t, &appv1.ListReviewsRequest{}).GetReviews()); n != 0 {
		t.Fatalf("a push made %d reviews of a manual enrollment", n)
	}
	r.deliver(t, admin, "check_suite", map[string]any{
		"action": "rerequested", "check_suite": map[string]any{"id": 5, "pull_requests": []map[string]any{{"number": 7}}},
		"repository": map[string]any{"full_name": repo},
	})
	r.drive(t, 3)
	if got := r.only(t, 7).GetReview(); got.GetTrigger() != "check_suite" || got.GetStatus() != "completed" {
		t.Fatalf("review %v", got)
	}
}

// Closing or merging a PR records its state on every pass, which ListReviews filters on.
func TestAClosedOrMergedPullRequestIsRecordedOnItsPasses(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	r.enroll(t, "off")
	r.agents.answers["finder"] = finderAnswer()
	r.open(t, admin)
	r.drive(t, 3)
	merged := basePR("head111")
	merged.State, merged.Merged = "closed", true
	r.deliver(t, admin, "pull_request", fakegithub.PullRequestEvent("closed", repo, merged, 0))
	if got := r.list(t, &appv1.ListReviewsRequest{PrStates: []string{"merged"}}); got.GetTotalCount() != 1 || got.GetReviews()[0].GetPrState() != "merged" {
		t.Fatalf("merged reviews %v", got)
	}
	if got := r.list(t, &appv1.ListReviewsRequest{PrStates: []string{"open"}}); got.GetTotalCount() != 0 {
		t.Fatalf("open reviews %v", got)
	}
}

// A push that supersedes a pass while its step is starting the verifier: the step's result is
// dropped, and the verifier it started is stopped rather than left working for nobody.
func TestAPassSupersededDuringAStepStopsTheAgentThatStepStarted(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	r.enroll(t, "off")
	r.agents.answers["finder"] = finderAnswer(aFinding("a.go", 11, 11, "high", "x"))
	r.agents.answers["verifier"] = verdicts(map[string]string{"f1": "confirmed"})
	r.open(t, admin)
	first := r.only(t, 7).GetReview().GetId()
	r.agents.onStart = func(role string) {
		if role == "verifier" {
			r.agents.mu.Lock()
			r.agents.onStart = nil
			r.agents.mu.Unlock()
			r.gh.SetPR(repo, basePR("head222"))
			r.deliver(t, admin, "pull_request", fakegithub.PullRequestEvent("synchronize", repo, basePR("head222"), 0))
		}
	}
	r.drive(t, 2)
	if got := r.get(t, first).GetReview(); got.GetStatus() != "superseded" {
		t.Fatalf("first pass %s", got.GetStatus())
	}
	if !slices.Contains(r.agents.stopped, first+"-verifier") {
		t.Fatalf("stopped %v, want the first pass's verifier", r.agents.stopped)
	}
}

// A thread resolved while a worker holds the pass is not lost to the step's write: the delivery
// fails (Pub/Sub redelivers it) until the pass is released, and then applies.
func TestAThreadResolvedWhileAWorkerHoldsThePassWaitsForIt(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	r.enroll(t, "off")
	r.agents.answers["finder"] = finderAnswer(aFinding("a.go", 11, 11, "high", "x"))
	r.agents.answers["verifier"] = verdicts(map[string]string{"f1": "confirmed"})
	r.open(t, admin)
	r.drive(t, 4)
	got := r.only(t, 7)
	doc := r.db.Collection("reviews").Doc(got.GetReview().GetId())
	hold := func(owner string, until time.Time) {
		if _, err := doc.Update(context.Background(), []firestore.Update{{Path: "lease_owner", Value: owner}, {Path: "lease_until", Value: until}}); err != nil {
			t.Fatal(err)
		}
	}
	hold("another-worker", r.clock.Now().Add(time.Minute))
	thread, _ := strconv.ParseInt(got.GetFindings()[0].GetScmThreadId(), 10, 64)
	body, _ := json.Marshal(fakegithub.ThreadEvent("resolved", repo, 7, thread, "octocat"))
	del := triggers.Delivery{RegistrationOwner: admin, Provider: triggers.ProviderGitHub, EventKey: "github.pull_request_review_thread.resolved",
		DeliveryKey: "d1", Payload: body, Headers: map[string]string{"x-github-event": "pull_request_review_thread"}}
	if err := r.svc.HandleDelivery(context.Background(), del); err == nil {
		t.Fatal("the delivery was taken while a worker held the pass")
	}
	hold("", time.Time{})
	if err := r.svc.HandleDelivery(context.Background(), del); err != nil {
		t.Fatal(err)
	}
	if n := r.get(t, got.GetReview().GetId()).GetReview().GetFindingCounts().GetTotal(); n != 0 {
		t.Fatalf("%d open findings after the redelivery", n)
	}
}
