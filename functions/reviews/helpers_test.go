package reviews_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"cloud.google.com/go/firestore"
	"connectrpc.com/connect"

	"github.com/hangar-dev/hangar/automation/triggers"
	"github.com/hangar-dev/hangar/functions/reviews"
	"github.com/hangar-dev/hangar/functions/reviews/fakegithub"
	appv1 "github.com/hangar-dev/hangar/gen/svc/app/v1"
	"github.com/hangar-dev/hangar/internal/testenv"
	"github.com/hangar-dev/hangar/platform/auth"
	"github.com/hangar-dev/hangar/platform/clock"
	"github.com/hangar-dev/hangar/platform/config"
	"github.com/hangar-dev/hangar/platform/ids"
)

const (
	repo    = "acme/widgets"
	admin   = "user_admin"
	profile = "prof_01jd3aaaaaaaaaaaaaaaaaaaaa"
)

// scripted plays the agents: each task answers what its role (finder, verifier, fix) is
// scripted to, once polled; a role scripted with hang never finishes.
type scripted struct {
	mu      sync.Mutex
	answers map[string]string
	hang    map[string]bool
	started []string
	prompts map[string]string
	// checkouts are the checkouts the latest task of each role was given.
	checkouts map[string]*reviews.Checkout
	stopped   []string
	// onStart runs after a task of role starts: what happens meanwhile elsewhere.
	onStart func(role string)
	// refuse names a role whose tasks cannot start.
	refuse string
}

func (a *scripted) role(taskID string) string { return taskID[strings.LastIndex(taskID, "-")+1:] }

func (a *scripted) Start(_ context.Context, actor, requestID string, spec reviews.AgentSpec) (reviews.AgentRun, error) {
	a.mu.Lock()
	if actor == "" || spec.ProfileID == "" || a.role(requestID) == a.refuse {
		a.mu.Unlock()
		return reviews.AgentRun{}, fmt.Errorf("%w: no actor or profile", reviews.ErrRefused)
	}
	a.started = append(a.started, requestID)
	a.prompts[a.role(requestID)] = spec.Prompt
	a.checkouts[a.role(requestID)] = spec.Checkout
	hook := a.onStart
	a.mu.Unlock()
	if hook != nil {
		hook(a.role(requestID))
	}
	return reviews.AgentRun{TaskID: requestID, SessionID: "sess-" + requestID}, nil
}

func (a *scripted) Poll(_ context.Context, _, taskID string) (reviews.AgentRun, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	run := reviews.AgentRun{TaskID: taskID, SessionID: "sess-" + taskID}
	if a.hang[a.role(taskID)] {
		return run, nil
	}
	run.Done, run.Output = true, a.answers[a.role(taskID)]
	return run, nil
}

func (a *scripted) Stop(_ context.Context, _, taskID string) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.stopped = append(a.stopped, taskID)
	return nil
}

func (a *scripted) Close(context.Context, string, string) error { return nil }

type secretMap map[string]string

func (m secretMap) Lookup(_ context.Context, name string) (string, bool, error) {
	v, ok := m[name]
	return v, ok, nil
}

type rig struct {
	db     *firestore.Client
	svc    *reviews.Service
	gh     *fakegithub.GitHub
	agents *scripted
	clock  *clock.Fake
	admin  context.Context
}

func newRig(t *testing.T) *rig {
	t.Helper()
	return newRigWith(t, secretMap{reviews.SecretToken: "ghs_test"})
}

// newRigWith is newRig with the GitHub integration's org secrets.
func newRigWith(t *testing.T, secrets secretMap) *rig {
	t.Helper()
	db, _ := testenv.Firestore(t)
	gh := fakegithub.New(t, "ghs_test")
	agents := &scripted{answers: map[string]string{}, hang: map[string]bool{}, prompts: map[string]string{}, checkouts: map[string]*reviews.Checkout{}}
	clk := clock.NewFake(time.Now()) // near real time: a rate limit's reset is a real instant
	lim := config.Default().Limits.Reviews
	lim.AgentTimeout, lim.Poll, lim.Attempts = 10*time.Minute, 10*time.Second, 3
	svc := reviews.New(reviews.Deps{
		DB: db, Agents: agents, GitHub: reviews.NewGitHub(secrets, gh.URL, nil),
		Clock: clk, Limits: lim, Worker: "test",
		Admin: func(_ context.Context, user string) (bool, error) { return user == admin, nil },
	})
	r := &rig{db: db, svc: svc, gh: gh, agents: agents, clock: clk, admin: auth.WithPrincipal(context.Background(), auth.Principal{UserID: admin, Admin: true})}
	return r
}

func (r *rig) enroll(t *testing.T, autofix string) {
	t.Helper()
	_, err := r.svc.UpsertEnrollment(r.admin, connect.NewRequest(&appv1.UpsertEnrollmentRequest{Repo: repo, TriggerMode: "automatic", Autofix: autofix, ProfileId: ptr(profile), Engine: ptr("bash")}))
	if err != nil {
		t.Fatal(err)
	}
}

// deliver hands the service a delivery as the automation worker does, through owner's
// registration.
func (r *rig) deliver(t *testing.T, owner, event string, payload any) {
	t.Helper()
	body, _ := json.Marshal(payload)
	err := r.svc.HandleDelivery(context.Background(), triggers.Delivery{
		RegistrationID: "hook_x", RegistrationOwner: owner, Provider: triggers.ProviderGitHub,
		EventKey: "github." + event, DeliveryKey: ids.New("dlv"), Payload: body,
		Headers: map[string]string{"x-github-event": event},
	})
	if err != nil {
		t.Fatal(err)
	}
}

// open sets the PR at head111 on the fake GitHub and delivers its "opened" event through
// owner's registration.
func (r *rig) open(t *testing.T, owner string) {
	t.Helper()
	r.gh.SetPR(repo, basePR("head111"))
	r.deliver(t, owner, "pull_request", fakegithub.PullRequestEvent("opened", repo, basePR("head111"), 0))
}

// drive ticks the clock and the service until no pass is due, at most n times.
func (r *rig) drive(t *testing.T, n int) {
	t.Helper()
	for range n {
		r.clock.Advance(11 * time.Second)
		if err := r.svc.Tick(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
}

func (r *rig) list(t *testing.T, req *appv1.ListReviewsRequest) *appv1.ListReviewsResponse {
	t.Helper()
	resp, err := r.svc.ListReviews(r.admin, connect.NewRequest(req))
	if err != nil {
		t.Fatal(err)
	}
	return resp.Msg
}

func (r *rig) get(t *testing.T, id string) *appv1.GetReviewResponse {
	t.Helper()
	resp, err := r.svc.GetReview(r.admin, connect.NewRequest(&appv1.GetReviewRequest{Id: id}))
	if err != nil {
		t.Fatal(err)
	}
	return resp.Msg
}

// only is the one active review of the PR.
func (r *rig) only(t *testing.T, pr int32) *appv1.GetReviewResponse {
	t.Helper()
	for _, rv := range r.list(t, &appv1.ListReviewsRequest{Repos: []string{repo}}).GetReviews() {
		if rv.GetPrNumber() == pr {
			return r.get(t, rv.GetId())
		}
	}
	t.Fatalf("no active review of %s#%d", repo, pr)
	return nil
}

func kinds(events []*appv1.ReviewEvent) string {
	var out []string
	for _, e := range events {
		out = append(out, e.GetKind())
	}
	return strings.Join(out, " ")
}

func ptr[T any](v T) *T { return &v }

// basePR is PR 7: two files, a.go with lines 10-14 added and b.go with 1-2 added.
func basePR(head string) fakegithub.PR {
	return fakegithub.PR{
		Number: 7, Title: "Add widget cache", Author: "octocat", HeadSHA: head, HeadRef: "cache", BaseSHA: "base000", BaseRef: "main",
		Files: []fakegithub.File{
			{Name: "a.go", Patch: fakegithub.Patch(10, "func get(k string) {", "  v := cache[k]", "  return v", "}", "")},
			{Name: "b.go", Patch: fakegithub.Patch(1, "package b", "var x = 1")},
		},
	}
}

// finderAnswer is a finder's answer in a ```json block after some chatter.
func finderAnswer(findings ...map[string]any) string {
	b, _ := json.Marshal(map[string]any{"summary_md": "Adds a cache.", "findings": findings})
	return "Looking at the diff...\n```json\n" + string(b) + "\n```\n"
}

func verdicts(v map[string]string) string {
	var list []map[string]string
	for id, verdict := range v {
		list = append(list, map[string]string{"finding_id": id, "verdict": verdict, "confidence": "high", "reasoning": "checked " + id})
	}
	b, _ := json.Marshal(map[string]any{"verdicts": list})
	return "```json\n" + string(b) + "\n```"
}

func aFinding(path string, start, end int, severity, title string) map[string]any {
	return map[string]any{"path": path, "start_line": start, "end_line": end, "side": "RIGHT", "category": "bug",
		"severity": severity, "confidence": "high", "title": title, "body_md": "It breaks.", "suggested_fix": "  return cache[k]", "evidence": []string{"line " + fmt.Sprint(start)}}
}
