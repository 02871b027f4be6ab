package reviews

import (
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	appv1 "github.com/hangar-dev/hangar/gen/svc/app/v1"
	"github.com/hangar-dev/hangar/platform/opt"
)

const (
	enrollments = "reviewEnrollments"
	reviewsCol  = "reviews"
)

// enrollment is a repository enrolled for reviews, as Firestore stores it (its id is
// enrollmentID(repo)).
type enrollment struct {
	Repo        string    `firestore:"repo"`
	TriggerMode string    `firestore:"trigger_mode"`
	Autofix     string    `firestore:"autofix"`
	ProfileID   string    `firestore:"profile_id"`
	Engine      string    `firestore:"engine"`
	CreatedAt   time.Time `firestore:"created_at"`
	UpdatedAt   time.Time `firestore:"updated_at"`
}

func (e enrollment) proto() *appv1.RepoEnrollment {
	return &appv1.RepoEnrollment{
		Repo: e.Repo, TriggerMode: e.TriggerMode, Autofix: e.Autofix, ProfileId: opt.String(e.ProfileID),
		Engine: e.Engine, CreatedAt: timestamppb.New(e.CreatedAt), UpdatedAt: timestamppb.New(e.UpdatedAt),
	}
}

// review is one pass of a review, as Firestore stores it. Its findings, their verdicts and its
// events live in the same document: a pass has a bounded number of each (maxFindings,
// maxEvents), and one document makes every step's change to them one atomic write, which is
// what keeps finding_counts true.
type review struct {
	ID       string `firestore:"id"`
	Repo     string `firestore:"repo"`
	PRNumber int    `firestore:"pr_number"`
	// TargetID names the pull request, "github:owner/name#7": every pass of one PR shares it.
	TargetID     string `firestore:"target_id"`
	Provider     string `firestore:"provider"`
	ProviderID   string `firestore:"provider_id"`
	TaskID       string `firestore:"task_id"`
	HeadSHA      string `firestore:"head_sha"`
	BaseSHA      string `firestore:"base_sha"`
	HeadBranch   string `firestore:"head_branch"`
	BaseBranch   string `firestore:"base_branch"`
	Title        string `firestore:"pr_title"`
	Author       string `firestore:"pr_author"`
	PRState      string `firestore:"pr_state"`
	PRURL        string `firestore:"pr_url"`
	Additions    int    `firestore:"additions"`
	Deletions    int    `firestore:"deletions"`
	ChangedFiles int    `firestore:"changed_files"`
	Trigger      string `firestore:"trigger"`
	HumanTrigger bool   `firestore:"human_trigger"`
	Status       string `firestore:"status"`
	Active       bool   `firestore:"active"`
	// Pass counts the PR's passes from 1; with the review id it keys the posted review.
	Pass int `firestore:"pass"`
	// Actor is the user the pass's agent tasks run as: the owner of the webhook registration
	// that triggered it, or the caller of RetryReview.
	Actor          string `firestore:"actor"`
	InstallationID int64  `firestore:"installation_id"`
	// Enrollment is the enrollment as it was when the pass was made.
	Autofix   string `firestore:"autofix"`
	ProfileID string `firestore:"profile_id"`
	Engine    string `firestore:"engine"`

	FinderTask      string `firestore:"finder_task_id"`
	FinderSession   string `firestore:"finder_session_id"`
	VerifierTask    string `firestore:"verifier_task_id"`
	VerifierSession string `firestore:"verifier_session_id"`
	FixTask         string `firestore:"fix_task_id"`
	// FixHead is the PR's head after the fix task pushed to it ("" when it did not).
	FixHead string `firestore:"fix_head_sha"`
	// CheckoutURL is the repository the agents clone the PR's head from, and CheckoutBranch
	// its branch there ("" when only the commit is known: a deleted fork's, read from the base).
	CheckoutURL    string    `firestore:"checkout_url"`
	CheckoutBranch string    `firestore:"checkout_branch"`
	SCMReviewID    string    `firestore:"scm_review_id"`
	Summary        string    `firestore:"summary_md"`
	Severities     []string  `firestore:"severities"`
	Counts         counts    `firestore:"finding_counts"`
	Findings       []finding `firestore:"findings"`
	Events         []event   `firestore:"events"`
	// Diff is the PR's changed lines at HeadSHA, per path: a finding must sit on them.
	Diff map[string][]lineRange `firestore:"diff"`

	// The step machine's bookkeeping: the worker holding the pass, until when; when it next
	// wants to be looked at; the deadline of the agent it waits on; how many attempts the
	// current step has had.
	LeaseOwner string    `firestore:"lease_owner"`
	LeaseUntil time.Time `firestore:"lease_until"`
	WakeAt     time.Time `firestore:"wake_at"`
	Deadline   time.Time `firestore:"deadline"`
	Attempts   int       `firestore:"attempts"`

	CreatedAt time.Time `firestore:"created_at"`
	UpdatedAt time.Time `firestore:"updated_at"`
}

// lineRange is an inclusive range of lines on the PR's head (the diff's RIGHT side).
type lineRange struct {
	Start int `firestore:"start"`
	End   int `firestore:"end"`
}

type counts struct {
	Critical int `firestore:"critical"`
	High     int `firestore:"high"`
	Medium   int `firestore:"medium"`
	Low      int `firestore:"low"`
	Total    int `firestore:"total"`
}

// finding is a finder's finding, with the verifier's verdict once judged.
type finding struct {
	ID           string   `firestore:"id"`
	Path         string   `firestore:"path"`
	StartLine    int      `firestore:"start_line"`
	EndLine      int      `firestore:"end_line"`
	Side         string   `firestore:"side"`
	Category     string   `firestore:"category"`
	Severity     string   `firestore:"severity"`
	Confidence   string   `firestore:"confidence"`
	Title        string   `firestore:"title"`
	BodyMD       string   `firestore:"body_md"`
	SuggestedFix string   `firestore:"suggested_fix"`
	Evidence     []string `firestore:"evidence"`
	State        string   `firestore:"state"`
	SessionID    string   `firestore:"session_id"`
	// The verdict: "" until the verifier judged the finding.
	Verdict           string `firestore:"verdict"`
	VerdictConfidence string `firestore:"verdict_confidence"`
	VerdictReason     string `firestore:"verdict_reason"`
	VerdictSession    string `firestore:"verdict_session_id"`
	// SCMThreadID is the id of the posted inline comment that opens the finding's thread.
	SCMThreadID string    `firestore:"scm_thread_id"`
	Resolution  string    `firestore:"resolution"`
	CreatedAt   time.Time `firestore:"created_at"`
}

type event struct {
	ID        string    `firestore:"id"`
	Kind      string    `firestore:"kind"`
	Detail    string    `firestore:"detail"`
	CreatedAt time.Time `firestore:"created_at"`
}

// open reports whether the finding counts: confirmed by the verifier and neither resolved nor
// outdated since.
func (f finding) open() bool { return f.State == FindingConfirmed || f.State == FindingPosted }

// recount derives finding_counts and the severity index from the findings, the one place
// they are computed, so that every write that changes a finding keeps them true.
func (r *review) recount() {
	r.Counts = counts{}
	r.Severities = nil
	for _, f := range r.Findings {
		if !f.open() {
			continue
		}
		switch f.Severity {
		case "critical":
			r.Counts.Critical++
		case "high":
			r.Counts.High++
		case "medium":
			r.Counts.Medium++
		case "low":
			r.Counts.Low++
		}
		r.Counts.Total++
	}
	for _, s := range severities {
		if r.countOf(s) > 0 {
			r.Severities = append(r.Severities, s)
		}
	}
}

func (r *review) countOf(severity string) int {
	switch severity {
	case "critical":
		return r.Counts.Critical
	case "high":
		return r.Counts.High
	case "medium":
		return r.Counts.Medium
	case "low":
		return r.Counts.Low
	}
	return 0
}

func optInt(n int) *int32 {
	if n == 0 {
		return nil
	}
	v := int32(n)
	return &v
}

func (r *review) proto() *appv1.Review {
	return &appv1.Review{
		Id: r.ID, Repo: r.Repo, PrNumber: int32(r.PRNumber), TaskId: r.TaskID, HeadSha: r.HeadSHA, BaseSha: r.BaseSHA,
		Trigger: r.Trigger, Status: r.Status, ScmReviewId: opt.String(r.SCMReviewID), SummaryMd: opt.String(r.Summary),
		CreatedAt: timestamppb.New(r.CreatedAt), UpdatedAt: timestamppb.New(r.UpdatedAt),
		FindingCounts: &appv1.FindingCounts{
			Critical: int32(r.Counts.Critical), High: int32(r.Counts.High), Medium: int32(r.Counts.Medium),
			Low: int32(r.Counts.Low), Total: int32(r.Counts.Total),
		},
		FinderSessionId: opt.String(r.FinderSession), VerifierSessionId: opt.String(r.VerifierSession),
		PrTitle: opt.String(r.Title), PrAuthor: opt.String(r.Author), HeadBranch: opt.String(r.HeadBranch),
		BaseBranch: opt.String(r.BaseBranch), PrState: opt.String(r.PRState),
		Additions: optInt(r.Additions), Deletions: optInt(r.Deletions), ChangedFiles: optInt(r.ChangedFiles),
		TargetId: r.TargetID, Provider: r.Provider, ProviderId: opt.String(r.ProviderID), PrUrl: opt.String(r.PRURL),
		Active: r.Active, HumanTrigger: r.HumanTrigger,
	}
}

func (f finding) proto(reviewID string) *appv1.ReviewFinding {
	return &appv1.ReviewFinding{
		Id: f.ID, ReviewId: reviewID, Path: f.Path, StartLine: optInt(f.StartLine), EndLine: optInt(f.EndLine),
		Side: opt.String(f.Side), Category: f.Category, Severity: f.Severity, Confidence: f.Confidence,
		Title: f.Title, BodyMd: f.BodyMD, SuggestedFix: opt.String(f.SuggestedFix), Evidence: f.Evidence,
		State: f.State, VerdictReason: opt.String(f.VerdictReason), ScmThreadId: opt.String(f.SCMThreadID),
		Resolution: opt.String(f.Resolution), SessionId: f.SessionID, CreatedAt: timestamppb.New(f.CreatedAt),
	}
}

func (e event) proto(reviewID string) *appv1.ReviewEvent {
	return &appv1.ReviewEvent{Id: e.ID, ReviewId: reviewID, Kind: e.Kind, Detail: opt.String(e.Detail), CreatedAt: timestamppb.New(e.CreatedAt)}
}
