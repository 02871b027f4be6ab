// Package reviews serves ReviewService and runs pull-request reviews: it owns repository
// enrollments, review passes (one per trigger: a push, a comment command, a check-suite re-run,
// a retry) with their findings, verdicts and events, and the durable step machine that takes a
// pass from queued to a posted GitHub review (see pipeline.go). GitHub deliveries reach it from
// the signed webhook route through the automation worker (HandleDelivery); agents run as tasks
// through Agents; every GitHub call goes through go-github (github.go).
package reviews

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"slices"
	"strings"
	"time"

	"cloud.google.com/go/firestore"
	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/emptypb"

	appv1 "github.com/hangar-dev/hangar/gen/svc/app/v1"
	"github.com/hangar-dev/hangar/gen/svc/app/v1/appv1connect"
	"github.com/hangar-dev/hangar/platform/apierr"
	"github.com/hangar-dev/hangar/platform/auth"
	"github.com/hangar-dev/hangar/platform/clock"
	"github.com/hangar-dev/hangar/platform/config"
	"github.com/hangar-dev/hangar/platform/ids"
	"github.com/hangar-dev/hangar/platform/store"
)

// Agents run a review's finder, verifier and fix agents as tasks of type review, acting as a
// user. The composition wires the task and session services in.
type Agents interface {
	// Start starts a task; requestID is stable across attempts, so a retried step finds the
	// task it started instead of starting another.
	Start(ctx context.Context, actor, requestID string, spec AgentSpec) (AgentRun, error)
	// Poll reports the task's progress and, once its agent's turn ended, what it answered.
	Poll(ctx context.Context, actor, taskID string) (AgentRun, error)
	// Stop ends a task's session (a timed-out agent must not keep working).
	Stop(ctx context.Context, actor, taskID string) error
	// Close marks a task whose agent finished as completed: the review took its answer.
	Close(ctx context.Context, actor, taskID string) error
}

// AgentSpec is a task an agent runs.
type AgentSpec struct {
	ProfileID, Harness, Title, Prompt string
	// Checkout is the pull request's head, cloned into the agent's session at its start (nil:
	// none).
	Checkout *Checkout
}

// Checkout is a pull request's head as an agent gets it: URL's Branch moved to Commit, cloned
// at Path, with Token (a GitHub token for the repository) injected by the sandbox's egress
// proxy into its requests to URL's host, so the agent clones, fetches and pushes with it but
// holds only a placeholder.
type Checkout struct {
	Path, URL, Branch, Commit string
	Token                     string
}

// AgentRun is an agent task's progress: Output is the text of its agent's messages once Done.
type AgentRun struct {
	TaskID, SessionID string
	Done, Failed      bool
	Output            string
}

// Deps are what the service runs on.
type Deps struct {
	DB     *firestore.Client
	Agents Agents
	GitHub *GitHub
	Clock  clock.Clock
	Limits config.ReviewLimits
	Log    *slog.Logger
	// Admin reports whether a user acting without a key is an admin: only deliveries through
	// an admin's webhook registration trigger reviews (nil: none does).
	Admin func(ctx context.Context, userID string) (bool, error)
	// Worker names this process in leases.
	Worker string
	// Profile checks that an enrollment's profile can start agents (nil: not checked): not_found
	// for an unknown one, failed_precondition for an archived one.
	Profile func(ctx context.Context, id string) error
	// Undriven says no worker ticks passes here (no Pub/Sub): RetryReview answers unavailable
	// rather than start a pass nothing would advance past its first step.
	Undriven bool
}

// Service implements ReviewService and runs reviews.
type Service struct {
	d Deps
}

var _ appv1connect.ReviewServiceHandler = (*Service)(nil)

// New returns the service over d.
func New(d Deps) *Service {
	if d.Log == nil {
		d.Log = slog.Default()
	}
	if d.Clock == nil {
		d.Clock = clock.Real{}
	}
	return &Service{d: d}
}

const (
	reviewPrefix = "rvw"
	// maxFindings bounds the findings a pass keeps (the finder's first ones), maxEvents its
	// events (the first ones and the last, see addEvent).
	maxFindings = 50
	maxEvents   = 200
	// maxFilterItems bounds each ListReviews filter list.
	maxFilterItems = 30
)

// repoName is GitHub's owner/name: owner of letters, digits and '-', name of letters, digits,
// '.', '_' and '-'.
var repoName = regexp.MustCompile(`^[A-Za-z0-9](?:[A-Za-z0-9-]{0,38})/[A-Za-z0-9._-]{1,100}$`)

func checkRepo(v *apierr.Violations, field, repo string) {
	if !repoName.MatchString(repo) || strings.HasSuffix(repo, "/.") || strings.HasSuffix(repo, "/..") {
		v.Add(field, `must be a GitHub repository "owner/name"`)
	}
}

// enrollmentID is the document id of repo's enrollment: GitHub names are case-insensitive.
func enrollmentID(repo string) string { return ids.FromKey("enr", strings.ToLower(repo)) }

func (s *Service) enrollmentDoc(repo string) *firestore.DocumentRef {
	return s.d.DB.Collection(enrollments).Doc(enrollmentID(repo))
}

func (s *Service) reviewDoc(id string) *firestore.DocumentRef {
	return s.d.DB.Collection(reviewsCol).Doc(id)
}

func requireAdmin(ctx context.Context) error {
	if p, _ := auth.Caller(ctx); !p.Admin {
		return apierr.PermissionDenied("only admins change enrollments and retry reviews")
	}
	return nil
}

// ListEnrollments lists every enrolled repository.
func (s *Service) ListEnrollments(ctx context.Context, _ *connect.Request[emptypb.Empty]) (*connect.Response[appv1.ListEnrollmentsResponse], error) {
	recs, err := store.All[enrollment](s.d.DB.Collection(enrollments).OrderBy("repo", firestore.Asc).Documents(ctx))
	if err != nil {
		return nil, fmt.Errorf("list enrollments: %w", err)
	}
	out := &appv1.ListEnrollmentsResponse{}
	for _, e := range recs {
		out.Enrollments = append(out.Enrollments, e.proto())
	}
	return connect.NewResponse(out), nil
}

// UpsertEnrollment enrolls a repository or changes its enrollment (admins only).
func (s *Service) UpsertEnrollment(ctx context.Context, req *connect.Request[appv1.UpsertEnrollmentRequest]) (*connect.Response[appv1.UpsertEnrollmentResponse], error) {
	if err := requireAdmin(ctx); err != nil {
		return nil, err
	}
	m := req.Msg
	var v apierr.Violations
	repo := strings.TrimSpace(m.GetRepo())
	checkRepo(&v, "repo", repo)
	mode := m.GetTriggerMode()
	if mode == "" {
		mode = TriggerAutomatic
	}
	if !slices.Contains(triggerModes, mode) {
		v.Add("trigger_mode", "must be one of "+strings.Join(triggerModes, ", "))
	}
	autofix := m.GetAutofix()
	if autofix == "" {
		autofix = AutofixOff
	}
	if !slices.Contains(autofixModes, autofix) {
		v.Add("autofix", "must be one of "+strings.Join(autofixModes, ", "))
	}
	profile := strings.TrimSpace(m.GetProfileId())
	if profile == "" {
		v.Add("profile_id", "is required: the profile gives the agents their image, repos and harness")
	} else if err := ids.Check("profile_id", profile); err != nil {
		v.Add("profile_id", "is not a profile id")
	}
	engine := strings.TrimSpace(m.GetEngine())
	if len(engine) > 100 || strings.ContainsFunc(engine, func(r rune) bool { return r <= ' ' || r > '~' }) {
		v.Add("engine", "must be a harness name")
	}
	if err := v.Err(); err != nil {
		return nil, err
	}
	if s.d.Profile != nil {
		if err := s.d.Profile(ctx, profile); err != nil {
			return nil, err
		}
	}
	now := s.d.Clock.Now()
	var saved enrollment
	err := s.d.DB.RunTransaction(ctx, func(ctx context.Context, tx *firestore.Transaction) error {
		old, err := store.Read[enrollment](ctx, tx, s.enrollmentDoc(repo))
		if err != nil && !errors.Is(err, store.ErrNotFound) {
			return err
		}
		saved = enrollment{Repo: repo, TriggerMode: mode, Autofix: autofix, ProfileID: profile, Engine: engine, CreatedAt: now, UpdatedAt: now}
		if old != nil {
			saved.CreatedAt = old.CreatedAt
		}
		return tx.Set(s.enrollmentDoc(repo), saved)
	})
	if err != nil {
		return nil, fmt.Errorf("enroll %s: %w", repo, err)
	}
	return connect.NewResponse(&appv1.UpsertEnrollmentResponse{Enrollment: saved.proto()}), nil
}

// DeleteEnrollment unenrolls a repository (admins only); its reviews stay.
func (s *Service) DeleteEnrollment(ctx context.Context, req *connect.Request[appv1.DeleteEnrollmentRequest]) (*connect.Response[emptypb.Empty], error) {
	if err := requireAdmin(ctx); err != nil {
		return nil, err
	}
	repo := strings.TrimSpace(req.Msg.GetRepo())
	var v apierr.Violations
	checkRepo(&v, "repo", repo)
	if err := v.Err(); err != nil {
		return nil, err
	}
	_, err := s.enrollmentDoc(repo).Delete(ctx, firestore.Exists)
	if store.IsNotFound(err) {
		return nil, apierr.NotFound("enrollment", repo)
	}
	if err != nil {
		return nil, fmt.Errorf("unenroll %s: %w", repo, err)
	}
	return connect.NewResponse(&emptypb.Empty{}), nil
}

// enrollmentOf reads repo's enrollment; nil when it is not enrolled.
func (s *Service) enrollmentOf(ctx context.Context, repo string) (*enrollment, error) {
	snap, err := s.enrollmentDoc(repo).Get(ctx)
	if store.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read enrollment of %s: %w", repo, err)
	}
	var e enrollment
	if err := snap.DataTo(&e); err != nil {
		return nil, fmt.Errorf("decode enrollment of %s: %w", repo, err)
	}
	return &e, nil
}

// load reads a review; apierr NotFound when there is none.
func (s *Service) load(ctx context.Context, id string) (*review, error) {
	if err := ids.Lookup("id", "review", reviewPrefix, id); err != nil {
		return nil, err
	}
	snap, err := s.reviewDoc(id).Get(ctx)
	if store.IsNotFound(err) {
		return nil, apierr.NotFound("review", id)
	}
	if err != nil {
		return nil, fmt.Errorf("read review %s: %w", id, err)
	}
	var r review
	if err := snap.DataTo(&r); err != nil {
		return nil, fmt.Errorf("decode review %s: %w", id, err)
	}
	return &r, nil
}

// GetReview returns a pass with its findings, verdicts, events and every pass of its PR.
func (s *Service) GetReview(ctx context.Context, req *connect.Request[appv1.GetReviewRequest]) (*connect.Response[appv1.GetReviewResponse], error) {
	r, err := s.load(ctx, req.Msg.GetId())
	if err != nil {
		return nil, err
	}
	out := &appv1.GetReviewResponse{Review: r.proto()}
	for _, f := range r.Findings {
		out.Findings = append(out.Findings, f.proto(r.ID))
		if f.Verdict != "" {
			out.Verdicts = append(out.Verdicts, &appv1.ReviewVerdict{
				FindingId: f.ID, Verdict: f.Verdict, Confidence: f.VerdictConfidence, Reasoning: f.VerdictReason, SessionId: f.VerdictSession,
			})
		}
	}
	for _, e := range r.Events {
		out.Events = append(out.Events, e.proto(r.ID))
	}
	passes, err := s.passes(ctx, r.TargetID)
	if err != nil {
		return nil, err
	}
	for _, p := range passes {
		out.Passes = append(out.Passes, p.proto())
	}
	return connect.NewResponse(out), nil
}

// passes lists a PR's passes, first first, without their findings and events.
func (s *Service) passes(ctx context.Context, target string) ([]review, error) {
	recs, err := store.All[review](s.d.DB.Collection(reviewsCol).Where("target_id", "==", target).Select(listed...).Documents(ctx))
	if err != nil {
		return nil, fmt.Errorf("list passes of %s: %w", target, err)
	}
	slices.SortFunc(recs, func(a, b review) int { return a.Pass - b.Pass })
	return recs, nil
}

// RetryReview starts a new pass of a review's PR at its current head (admins only). The new
// pass is the workflow: its id is the workflow_id, and review_id names it too.
func (s *Service) RetryReview(ctx context.Context, req *connect.Request[appv1.RetryReviewRequest]) (*connect.Response[appv1.RetryReviewResponse], error) {
	if err := requireAdmin(ctx); err != nil {
		return nil, err
	}
	if s.d.Undriven {
		return nil, connect.NewError(connect.CodeUnavailable, errors.New("reviews are not run here: their passes advance on the automation worker, which needs Pub/Sub"))
	}
	old, err := s.load(ctx, req.Msg.GetId())
	if err != nil {
		return nil, err
	}
	e, err := s.enrollmentOf(ctx, old.Repo)
	if err != nil {
		return nil, err
	}
	if e == nil {
		return nil, apierr.FailedPrecondition("%s is not enrolled for reviews any more: enroll it again to retry", old.Repo)
	}
	caller, _ := auth.Caller(ctx)
	pass, err := s.startPass(ctx, passStart{
		ID: ids.New(reviewPrefix), Repo: old.Repo, PRNumber: old.PRNumber, Trigger: "retry", Human: true,
		Actor: caller.UserID, InstallationID: old.InstallationID, Enrollment: *e, Why: "retry of " + old.ID,
	})
	if err != nil {
		return nil, err
	}
	s.kick(ctx, pass.ID)
	return connect.NewResponse(&appv1.RetryReviewResponse{WorkflowId: pass.ID, ReviewId: &pass.ID}), nil
}

// kick advances a new pass at once; a failure leaves it to the next tick.
func (s *Service) kick(ctx context.Context, id string) {
	if err := s.Advance(context.WithoutCancel(ctx), id); err != nil {
		s.d.Log.Warn("advance review; the next tick retries", "review", id, "err", err)
	}
}

// now is the service's clock, in UTC.
func (s *Service) now() time.Time { return s.d.Clock.Now() }
