package reviews

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/google/go-github/v88/github"

	"github.com/hangar-dev/hangar/automation/triggers"
)

// CommentCommand is what a PR comment starts with to ask for a review (trigger_mode automatic
// or on_request).
const CommentCommand = "/hangar review"

// trustedAssociations are the comment authors whose command starts a review: people with a
// say in the repository. Anyone can comment on a public repository's PR, and a review spends
// agent time and posts under the org's name.
var trustedAssociations = []string{"OWNER", "MEMBER", "COLLABORATOR"}

// HandleDelivery acts on a verified GitHub delivery the automation worker received: a
// pull_request opened, reopened, made ready or pushed to starts a pass (trigger_mode
// automatic); an issue_comment with CommentCommand starts one (automatic or on_request); a
// check_suite re-requested, GitHub's "Re-run" button, starts one in every mode; a pull_request_review_thread resolved or unresolved resolves or reopens the findings
// of its thread; a pull_request closed records the PR's state. Deliveries of repositories not
// enrolled, of other providers, or through a registration whose owner is not an admin are
// ignored: a registration's secret is its owner's, and only an admin may make the org's GitHub
// integration act. An error means the delivery should be retried.
func (s *Service) HandleDelivery(ctx context.Context, del triggers.Delivery) error {
	if del.Provider != triggers.ProviderGitHub {
		return nil
	}
	kind := del.Headers["x-github-event"]
	switch kind {
	case "pull_request", "issue_comment", "pull_request_review_thread", "check_suite":
	default:
		return nil
	}
	if ok, err := s.isAdmin(ctx, del.RegistrationOwner); err != nil || !ok {
		if err == nil {
			s.d.Log.Info("review trigger ignored: the webhook registration's owner is not an admin", "registration", del.RegistrationID, "event", del.EventKey)
		}
		return err
	}
	ev, err := github.ParseWebHook(kind, del.Payload)
	if err != nil {
		s.d.Log.Info("review trigger ignored: undecodable payload", "event", del.EventKey, "err", err)
		return nil
	}
	t := trigger{delivery: del, actor: del.RegistrationOwner}
	switch e := ev.(type) {
	case *github.PullRequestEvent:
		t.repo, t.installation = e.GetRepo().GetFullName(), e.GetInstallation().GetID()
		return s.onPullRequest(ctx, t, e)
	case *github.IssueCommentEvent:
		t.repo, t.installation = e.GetRepo().GetFullName(), e.GetInstallation().GetID()
		return s.onComment(ctx, t, e)
	case *github.PullRequestReviewThreadEvent:
		t.repo = e.GetRepo().GetFullName()
		return s.onThread(ctx, t, e)
	case *github.CheckSuiteEvent:
		t.repo, t.installation = e.GetRepo().GetFullName(), e.GetInstallation().GetID()
		return s.onCheckSuite(ctx, t, e)
	}
	return nil
}

type trigger struct {
	delivery     triggers.Delivery
	repo         string
	installation int64
	actor        string
}

func (s *Service) isAdmin(ctx context.Context, user string) (bool, error) {
	if s.d.Admin == nil || user == "" {
		return false, nil
	}
	return s.d.Admin(ctx, user)
}

// start makes a pass for an enrolled repository whose trigger mode allows how it was asked for.
func (s *Service) start(ctx context.Context, t trigger, pr int, kind string, human bool, id string, modes ...string) error {
	if !repoName.MatchString(t.repo) || pr <= 0 {
		return nil
	}
	e, err := s.enrollmentOf(ctx, t.repo)
	if err != nil || e == nil || !slices.Contains(modes, e.TriggerMode) {
		return err
	}
	pass, err := s.startPass(ctx, passStart{
		ID: id, Repo: e.Repo, PRNumber: pr, Trigger: kind, Human: human, Actor: t.actor,
		InstallationID: t.installation, Enrollment: *e, Why: fmt.Sprintf("%s (delivery %s)", t.delivery.EventKey, t.delivery.DeliveryKey),
	})
	if err != nil {
		return err
	}
	s.kick(ctx, pass.ID)
	return nil
}

func (s *Service) onPullRequest(ctx context.Context, t trigger, e *github.PullRequestEvent) error {
	pr := e.GetPullRequest()
	switch e.GetAction() {
	case "opened", "reopened", "synchronize", "ready_for_review":
		if pr.GetDraft() {
			return nil
		}
		// One pass per pushed head: "opened" and a redelivery of it, or two events naming the
		// same commit, make one. The head in the payload only names the pass; the pass reads
		// the PR from GitHub.
		id := passID(targetID(t.repo, e.GetNumber()), pr.GetHead().GetSHA(), "push")
		return s.start(ctx, t, e.GetNumber(), "push", false, id, TriggerAutomatic)
	case "closed":
		state := "closed"
		if pr.GetMerged() {
			state = "merged"
		}
		return s.setPRState(ctx, targetID(t.repo, e.GetNumber()), state)
	}
	return nil
}

func (s *Service) onComment(ctx context.Context, t trigger, e *github.IssueCommentEvent) error {
	body := strings.TrimSpace(e.GetComment().GetBody())
	if e.GetAction() != "created" || !e.GetIssue().IsPullRequest() || !strings.HasPrefix(body, CommentCommand) {
		return nil
	}
	if !slices.Contains(trustedAssociations, e.GetComment().GetAuthorAssociation()) {
		s.d.Log.Info("review command ignored: the commenter has no role in the repository", "repo", t.repo, "author", e.GetComment().GetUser().GetLogin())
		return nil
	}
	id := passID(targetID(t.repo, e.GetIssue().GetNumber()), "comment", strconv.FormatInt(e.GetComment().GetID(), 10))
	return s.start(ctx, t, e.GetIssue().GetNumber(), "comment", true, id, TriggerAutomatic, TriggerOnRequest)
}

func (s *Service) onCheckSuite(ctx context.Context, t trigger, e *github.CheckSuiteEvent) error {
	if e.GetAction() != "rerequested" {
		return nil
	}
	for _, pr := range e.GetCheckSuite().PullRequests {
		// Each re-run updates the suite's updated_at; a replayed body (under any delivery id)
		// names the same re-run and makes no second pass.
		id := passID(targetID(t.repo, pr.GetNumber()), "check_suite", strconv.FormatInt(e.GetCheckSuite().GetID(), 10), e.GetCheckSuite().GetUpdatedAt().String())
		if err := s.start(ctx, t, pr.GetNumber(), "check_suite", true, id, TriggerAutomatic, TriggerOnRequest, TriggerManual); err != nil {
			return err
		}
	}
	return nil
}

// onThread resolves (or reopens) the findings whose inline comment opened the thread.
func (s *Service) onThread(ctx context.Context, t trigger, e *github.PullRequestReviewThreadEvent) error {
	var resolved bool
	switch e.GetAction() {
	case "resolved":
		resolved = true
	case "unresolved":
	default:
		return nil
	}
	var comments []string
	for _, c := range e.GetThread().Comments {
		comments = append(comments, strconv.FormatInt(c.GetID(), 10))
	}
	passes, err := s.passes(ctx, targetID(t.repo, e.GetPullRequest().GetNumber()))
	if err != nil || len(comments) == 0 {
		return err
	}
	by := e.GetSender().GetLogin()
	for _, p := range passes {
		err := s.updateReview(ctx, p.ID, func(r *review) bool {
			changed := false
			for i := range r.Findings {
				f := &r.Findings[i]
				if f.SCMThreadID == "" || !slices.Contains(comments, f.SCMThreadID) {
					continue
				}
				switch {
				case resolved && f.State == FindingPosted:
					f.State, f.Resolution = FindingResolved, "thread resolved on GitHub by "+neutralize(truncate(by, 50))
				case !resolved && f.State == FindingResolved:
					f.State, f.Resolution = FindingPosted, ""
				default:
					continue
				}
				changed = true
				r.addEvent(s.now(), "finding."+e.GetAction(), fmt.Sprintf("%s (thread %s) by %s", f.ID, f.SCMThreadID, neutralize(truncate(by, 50))))
			}
			if changed {
				r.recount()
			}
			return changed
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// setPRState records a closed or merged PR on every pass of it.
func (s *Service) setPRState(ctx context.Context, target, state string) error {
	passes, err := s.passes(ctx, target)
	if err != nil {
		return err
	}
	for _, p := range passes {
		if p.PRState == state {
			continue
		}
		if err := s.updateReview(ctx, p.ID, func(r *review) bool {
			r.PRState = state
			r.addEvent(s.now(), "pr."+state, "")
			return true
		}); err != nil {
			return err
		}
	}
	return nil
}
