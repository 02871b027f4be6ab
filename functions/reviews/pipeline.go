package reviews

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"cloud.google.com/go/firestore"
	"github.com/google/go-github/v88/github"

	"github.com/hangar-dev/hangar/platform/ids"
	"github.com/hangar-dev/hangar/platform/store"
)

// The review pipeline is a durable step machine on the review document itself rather than a
// built-in automation: an automation run walks a fixed graph of generic blocks (task, prompt,
// http, code), while a pass needs steps that read and write its own record (findings, verdicts,
// thread ids) atomically with its state, which blocks cannot. It keeps the runner's guarantees
// in the same way: a worker takes the pass's lease (Advance), does one step, and writes the
// step's result and the next state in one write under the lease; a worker that dies mid-step
// loses only that step, which the next one redoes after the lease runs out. Every step is
// idempotent: agents start with request ids derived from the pass, and posting looks for the
// pass's marker on the PR before it posts. Waits (an agent at work, a backoff, a rate limit)
// park the pass with wake_at instead of holding a worker; Tick hands parked and orphaned passes
// back. Each wait is bounded (agents by Limits.AgentTimeout, retries by Limits.Attempts), so no
// pass hangs.

// ErrRefused marks an Agents error that trying again cannot fix (a missing profile, a refused
// request): the pass fails at once.
var ErrRefused = errors.New("refused")

// passStart is a pass to make.
type passStart struct {
	ID             string
	Repo           string
	PRNumber       int
	Trigger        string
	Human          bool
	Actor          string
	InstallationID int64
	Enrollment     enrollment
	Why            string
}

func targetID(repo string, pr int) string {
	return fmt.Sprintf("github:%s#%d", strings.ToLower(repo), pr)
}

// startPass makes a pass unless one with its id exists (a redelivered trigger), and makes it the
// PR's active one: the passes before it become inactive, and those not finished superseded.
func (s *Service) startPass(ctx context.Context, st passStart) (*review, error) {
	now := s.now()
	target := targetID(st.Repo, st.PRNumber)
	var made review
	var superseded []review
	err := s.d.DB.RunTransaction(ctx, func(ctx context.Context, tx *firestore.Transaction) error {
		superseded = nil
		existing, err := store.Read[review](ctx, tx, s.reviewDoc(st.ID))
		if err == nil {
			made = *existing
			return nil
		}
		if !errors.Is(err, store.ErrNotFound) {
			return err
		}
		snaps, err := tx.Documents(s.d.DB.Collection(reviewsCol).Where("target_id", "==", target)).GetAll()
		if err != nil {
			return err
		}
		made = review{
			ID: st.ID, Repo: st.Repo, PRNumber: st.PRNumber, TargetID: target, Provider: "github",
			ProviderID: strconv.Itoa(st.PRNumber), Trigger: st.Trigger, HumanTrigger: st.Human, Status: StateQueued,
			Active: true, Pass: len(snaps) + 1, Actor: st.Actor, InstallationID: st.InstallationID,
			Autofix: st.Enrollment.Autofix, ProfileID: st.Enrollment.ProfileID, Engine: st.Enrollment.Engine,
			PRState: "open", CreatedAt: now, UpdatedAt: now, WakeAt: now,
		}
		made.addEvent(now, "queued", st.Why)
		for _, snap := range snaps {
			var old review
			if err := snap.DataTo(&old); err != nil {
				return err
			}
			if !old.Active {
				continue
			}
			old.Active, old.UpdatedAt = false, now
			if supersedable(old.Status) {
				superseded = append(superseded, old)
				old.Status = StateSuperseded
				old.addEvent(now, "superseded", "pass "+strconv.Itoa(made.Pass)+" ("+made.ID+") replaced it")
			}
			if err := tx.Set(snap.Ref, old); err != nil {
				return err
			}
		}
		return tx.Create(s.reviewDoc(made.ID), made)
	})
	if err != nil {
		return nil, fmt.Errorf("start a review pass of %s: %w", target, err)
	}
	// A superseded pass's agents would only spend time on a head nobody will see reviewed.
	for _, old := range superseded {
		for _, task := range []string{old.FinderTask, old.VerifierTask} {
			if task == "" {
				continue
			}
			if err := s.d.Agents.Stop(ctx, old.Actor, task); err != nil {
				s.d.Log.Warn("stop a superseded review's agent", "review", old.ID, "task", task, "err", err)
			}
		}
	}
	return &made, nil
}

// addEvent appends an event; past maxEvents the middle ones give way, so the first (how the
// pass began) and the latest stay.
func (r *review) addEvent(now time.Time, kind, detail string) {
	if len(r.Events) >= maxEvents {
		r.Events = slices.Delete(r.Events, maxEvents/2, maxEvents/2+1)
	}
	r.Events = append(r.Events, event{ID: fmt.Sprintf("%s-%03d", r.ID, len(r.Events)+1), Kind: kind, Detail: truncate(detail, 2000), CreatedAt: now})
}

// move changes the pass's state as the table allows, recording it.
func (r *review) move(now time.Time, to, detail string) {
	if !CanMove(r.Status, to) {
		r.addEvent(now, "error", fmt.Sprintf("refused move %s → %s", r.Status, to))
		return
	}
	r.Status = to
	r.addEvent(now, to, detail)
}

func (r *review) fail(now time.Time, why string) {
	r.move(now, StateFailed, why)
	r.WakeAt = time.Time{}
}

// Advance takes a pass one step, if it is due and no other worker holds it. An error means the
// step could not be saved; the next Tick retries.
func (s *Service) Advance(ctx context.Context, id string) error {
	r, err := s.claim(ctx, id)
	if err != nil || r == nil {
		return err
	}
	now := s.now()
	if err := s.step(ctx, r); err != nil {
		s.fault(r, err)
	} else {
		r.Attempts = 0
	}
	r.UpdatedAt = now
	return s.release(ctx, r)
}

var errBusy = errors.New("review is not due or is held")

// claim takes a due pass's lease; nil when there is nothing to do now.
func (s *Service) claim(ctx context.Context, id string) (*review, error) {
	now := s.now()
	var r *review
	err := s.d.DB.RunTransaction(ctx, func(ctx context.Context, tx *firestore.Transaction) error {
		cur, err := store.Read[review](ctx, tx, s.reviewDoc(id))
		if err != nil {
			return err
		}
		if ended(cur.Status) || cur.WakeAt.After(now) || (cur.LeaseOwner != "" && cur.LeaseUntil.After(now)) {
			return errBusy
		}
		cur.LeaseOwner, cur.LeaseUntil = s.d.Worker, now.Add(s.d.Limits.Lease)
		// Should this worker die, the pass is due again once the lease runs out.
		cur.WakeAt = cur.LeaseUntil
		r = cur
		return tx.Set(s.reviewDoc(id), cur)
	})
	switch {
	case errors.Is(err, errBusy):
		return nil, nil
	case errors.Is(err, store.ErrNotFound):
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("claim review %s: %w", id, err)
	}
	return r, nil
}

// release writes the step's result and gives the lease back, unless the lease was lost or the
// pass was superseded meanwhile (then the newer pass matters, and this step's result does not).
func (s *Service) release(ctx context.Context, r *review) error {
	r.LeaseOwner, r.LeaseUntil = "", time.Time{}
	var dropped *review
	err := s.d.DB.RunTransaction(ctx, func(ctx context.Context, tx *firestore.Transaction) error {
		cur, err := store.Read[review](ctx, tx, s.reviewDoc(r.ID))
		if err != nil {
			return err
		}
		if cur.LeaseOwner != s.d.Worker || cur.Status == StateSuperseded {
			dropped = cur
			return nil
		}
		dropped = nil
		return tx.Set(s.reviewDoc(r.ID), r)
	})
	if err != nil {
		return fmt.Errorf("save review %s: %w", r.ID, err)
	}
	// An agent this step started for a pass superseded meanwhile is nobody's: stop it.
	if dropped != nil && dropped.Status == StateSuperseded {
		for _, task := range []string{r.FinderTask, r.VerifierTask} {
			if task != "" && task != dropped.FinderTask && task != dropped.VerifierTask {
				if err := s.d.Agents.Stop(ctx, r.Actor, task); err != nil {
					s.d.Log.Warn("stop a superseded review's agent", "review", r.ID, "task", task, "err", err)
				}
			}
		}
	}
	return nil
}

// fault handles a step's error: a final one fails the pass, a transient one parks it for a
// backoff (or until a rate limit resets) until Limits.Attempts are spent.
func (s *Service) fault(r *review, err error) {
	now := s.now()
	wait, transient := gitHubFault(err, now)
	if errors.Is(err, ErrRefused) {
		transient = false
	}
	if !transient {
		r.fail(now, err.Error())
		return
	}
	r.Attempts++
	if r.Attempts >= s.d.Limits.Attempts {
		r.fail(now, fmt.Sprintf("gave up after %d attempts: %v", r.Attempts, err))
		return
	}
	if wait == 0 {
		wait = time.Duration(1<<min(r.Attempts, 6)) * time.Second
	}
	wait = min(wait, time.Hour)
	kind := "retry"
	if strings.Contains(err.Error(), "rate limit") || wait >= time.Minute {
		kind = "rate_limited"
	}
	r.addEvent(now, kind, fmt.Sprintf("attempt %d failed, next in %s: %v", r.Attempts, wait, err))
	r.WakeAt = now.Add(wait)
}

// step does what the pass's state asks.
func (s *Service) step(ctx context.Context, r *review) error {
	switch r.Status {
	case StateQueued:
		return s.stepQueued(ctx, r)
	case StateRunning:
		return s.stepFinder(ctx, r)
	case StateVerifying:
		return s.stepVerifier(ctx, r)
	case StatePosting:
		return s.stepPosting(ctx, r)
	case StateFixing:
		return s.stepFixing(ctx, r)
	}
	return nil
}

// readPR reads r's pull request as GitHub has it now, with the client that read it.
func (s *Service) readPR(ctx context.Context, r *review) (*github.Client, *github.PullRequest, error) {
	gh, err := s.d.GitHub.Client(ctx, r.InstallationID)
	if err != nil {
		return nil, nil, err
	}
	owner, name := splitRepo(r.Repo)
	pr, _, err := gh.PullRequests.Get(ctx, owner, name, r.PRNumber)
	if err != nil {
		return nil, nil, fmt.Errorf("read pull request %s#%d: %w", r.Repo, r.PRNumber, err)
	}
	return gh, pr, nil
}

// maxFiles bounds the PR files read (GitHub lists at most 3000).
const maxFiles = 3000

// stepQueued reads the PR from GitHub (never from the delivery: a webhook sender could say
// anything), records its diff, outdates earlier passes' findings on lines it changed, and
// starts the finder.
func (s *Service) stepQueued(ctx context.Context, r *review) error {
	now := s.now()
	gh, pr, err := s.readPR(ctx, r)
	if err != nil {
		return err
	}
	owner, name := splitRepo(r.Repo)
	r.HeadSHA, r.BaseSHA = pr.GetHead().GetSHA(), pr.GetBase().GetSHA()
	r.HeadBranch, r.BaseBranch = pr.GetHead().GetRef(), pr.GetBase().GetRef()
	r.Title, r.Author, r.PRURL = pr.GetTitle(), pr.GetUser().GetLogin(), pr.GetHTMLURL()
	r.Additions, r.Deletions, r.ChangedFiles = pr.GetAdditions(), pr.GetDeletions(), pr.GetChangedFiles()
	r.PRState = prState(pr)
	r.CheckoutURL, r.CheckoutBranch = pr.GetHead().GetRepo().GetCloneURL(), r.HeadBranch
	if r.CheckoutURL == "" { // a deleted fork: its head is still the base repository's to fetch
		r.CheckoutURL, r.CheckoutBranch = pr.GetBase().GetRepo().GetCloneURL(), ""
	}
	if r.PRState != "open" {
		r.fail(now, "the pull request is "+r.PRState)
		return nil
	}
	files, err := listAll(func(o *github.ListOptions) ([]*github.CommitFile, *github.Response, error) {
		return gh.PullRequests.ListFiles(ctx, owner, name, r.PRNumber, o)
	})
	if err != nil {
		return fmt.Errorf("list files of %s#%d: %w", r.Repo, r.PRNumber, err)
	}
	r.Diff = map[string][]lineRange{}
	var patches []filePatch
	for _, f := range files {
		right, _ := hunks(f.GetPatch())
		r.Diff[f.GetFilename()] = append(right, lineRange{}) // a file without a patch is still the PR's
		patches = append(patches, filePatch{f.GetFilename(), f.GetStatus(), f.GetPatch()})
	}
	if err := s.outdate(ctx, gh, r); err != nil {
		return err
	}
	co, err := s.checkout(ctx, r, false)
	if err != nil {
		return err
	}
	run, err := s.d.Agents.Start(ctx, r.Actor, r.ID+"-finder", AgentSpec{
		ProfileID: r.ProfileID, Harness: r.Engine, Title: fmt.Sprintf("Review %s#%d (pass %d)", r.Repo, r.PRNumber, r.Pass),
		Prompt: finderPrompt(r, patches), Checkout: co,
	})
	if err != nil {
		return fmt.Errorf("start the finder: %w", err)
	}
	r.TaskID, r.FinderTask, r.FinderSession = run.TaskID, run.TaskID, run.SessionID
	r.Deadline = now.Add(s.d.Limits.AgentTimeout)
	r.move(now, StateRunning, fmt.Sprintf("finder task %s on %s", run.TaskID, short(r.HeadSHA)))
	r.WakeAt = now.Add(s.d.Limits.Poll)
	return nil
}

func prState(pr *github.PullRequest) string {
	switch {
	case pr.GetMerged():
		return "merged"
	case pr.GetState() == "closed":
		return "closed"
	}
	return "open"
}

func short(sha string) string { return sha[:min(len(sha), 12)] }

// listAll reads every page of a GitHub list, up to maxFiles items.
func listAll[T any](list func(*github.ListOptions) ([]T, *github.Response, error)) ([]T, error) {
	var out []T
	opts := &github.ListOptions{PerPage: 100}
	for len(out) < maxFiles {
		page, resp, err := list(opts)
		if err != nil {
			return nil, err
		}
		out = append(out, page...)
		if resp == nil || resp.NextPage == 0 {
			break
		}
		opts.Page = resp.NextPage
	}
	return out, nil
}

// waitAgent polls an agent: nil run while it works (the pass is parked), or the finished run.
func (s *Service) waitAgent(ctx context.Context, r *review, taskID, role string) (*AgentRun, error) {
	now := s.now()
	run, err := s.d.Agents.Poll(ctx, r.Actor, taskID)
	if err != nil {
		return nil, fmt.Errorf("check on the %s: %w", role, err)
	}
	if run.Done {
		if !run.Failed {
			// The answer is read: the agent's task is done with, and says so. A task left open
			// costs nothing but a stale status, so a failure here does not fail the review.
			if err := s.d.Agents.Close(ctx, r.Actor, taskID); err != nil {
				s.d.Log.Warn("close a review agent's task", "review", r.ID, "task", taskID, "err", err)
			}
		}
		return &run, nil
	}
	if now.After(r.Deadline) {
		if err := s.d.Agents.Stop(ctx, r.Actor, taskID); err != nil {
			s.d.Log.Warn("stop a timed-out review agent", "review", r.ID, "task", taskID, "err", err)
		}
		r.fail(now, fmt.Sprintf("the %s did not answer within %s", role, s.d.Limits.AgentTimeout))
		return nil, nil
	}
	r.WakeAt = now.Add(s.d.Limits.Poll)
	return nil, nil
}

func (s *Service) stepFinder(ctx context.Context, r *review) error {
	run, err := s.waitAgent(ctx, r, r.FinderTask, "finder")
	if run == nil || err != nil {
		return err
	}
	now := s.now()
	var out finderOutput
	if err := decodeAnswer(run.Output, &out); err != nil {
		why := "the finder's answer is not valid: " + err.Error()
		if run.Failed {
			why = "the finder's task failed: " + err.Error()
		}
		r.fail(now, why)
		return nil
	}
	r.Summary = neutralize(truncate(out.Summary, maxBody))
	r.Findings = nil
	for i, ff := range out.Findings {
		if i == maxFindings {
			r.addEvent(now, "finding.refused", fmt.Sprintf("%d findings beyond the first %d were dropped", len(out.Findings)-maxFindings, maxFindings))
			break
		}
		f, why := admit(ff, r.Diff)
		if why != "" {
			r.addEvent(now, "finding.refused", fmt.Sprintf("finding %d refused: %s", i+1, why))
			continue
		}
		f.ID, f.State, f.SessionID, f.CreatedAt = fmt.Sprintf("f%d", len(r.Findings)+1), FindingProposed, r.FinderSession, now
		r.Findings = append(r.Findings, f)
	}
	r.addEvent(now, "finder.done", fmt.Sprintf("%d findings proposed", len(r.Findings)))
	if len(r.Findings) == 0 {
		r.move(now, StatePosting, "nothing to verify")
		r.WakeAt = now
		return nil
	}
	co, err := s.checkout(ctx, r, false)
	if err != nil {
		return err
	}
	vrun, err := s.d.Agents.Start(ctx, r.Actor, r.ID+"-verifier", AgentSpec{
		ProfileID: r.ProfileID, Harness: r.Engine, Title: fmt.Sprintf("Verify review of %s#%d (pass %d)", r.Repo, r.PRNumber, r.Pass),
		Prompt: verifierPrompt(r), Checkout: co,
	})
	if err != nil {
		return fmt.Errorf("start the verifier: %w", err)
	}
	r.VerifierTask, r.VerifierSession = vrun.TaskID, vrun.SessionID
	r.Deadline = now.Add(s.d.Limits.AgentTimeout)
	r.move(now, StateVerifying, "verifier task "+vrun.TaskID)
	r.WakeAt = now.Add(s.d.Limits.Poll)
	return nil
}

func (s *Service) stepVerifier(ctx context.Context, r *review) error {
	run, err := s.waitAgent(ctx, r, r.VerifierTask, "verifier")
	if run == nil || err != nil {
		return err
	}
	now := s.now()
	var out verifierOutput
	if err := decodeAnswer(run.Output, &out); err != nil {
		r.fail(now, "the verifier's answer is not valid: "+err.Error())
		return nil
	}
	judged := map[string]bool{}
	for _, v := range out.Verdicts {
		i := slices.IndexFunc(r.Findings, func(f finding) bool { return f.ID == v.FindingID })
		verdict := strings.ToLower(v.Verdict)
		switch {
		case i < 0:
			r.addEvent(now, "verdict.ignored", fmt.Sprintf("no finding %q", truncate(v.FindingID, 50)))
			continue
		case judged[v.FindingID]:
			r.addEvent(now, "verdict.ignored", "a second verdict on "+v.FindingID)
			continue
		case verdict != VerdictConfirmed && verdict != VerdictRejected:
			r.addEvent(now, "verdict.ignored", fmt.Sprintf("verdict %q on %s is not confirmed or rejected", truncate(v.Verdict, 50), v.FindingID))
			continue
		}
		judged[v.FindingID] = true
		f := &r.Findings[i]
		f.Verdict, f.VerdictConfidence = verdict, strings.ToLower(v.Confidence)
		f.VerdictReason, f.VerdictSession = neutralize(truncate(v.Reasoning, maxReason)), r.VerifierSession
		f.State = FindingRejected
		if verdict == VerdictConfirmed {
			f.State = FindingConfirmed
		}
	}
	for i := range r.Findings {
		if f := &r.Findings[i]; f.State == FindingProposed {
			f.State, f.VerdictReason = FindingRejected, "the verifier gave no verdict"
		}
	}
	r.recount()
	r.move(now, StatePosting, fmt.Sprintf("%d of %d findings confirmed", r.Counts.Total, len(r.Findings)))
	r.WakeAt = now
	return nil
}

// stepPosting posts the pass's review once: it first looks for a review carrying the pass's
// marker (a post whose result a dead worker never saved), and posts only when there is none.
func (s *Service) stepPosting(ctx context.Context, r *review) error {
	now := s.now()
	gh, err := s.d.GitHub.Client(ctx, r.InstallationID)
	if err != nil {
		return err
	}
	owner, name := splitRepo(r.Repo)
	marker := postMarker(r.ID, r.Pass)
	if r.SCMReviewID == "" {
		posted, err := listAll(func(o *github.ListOptions) ([]*github.PullRequestReview, *github.Response, error) {
			return gh.PullRequests.ListReviews(ctx, owner, name, r.PRNumber, o)
		})
		if err != nil {
			return fmt.Errorf("list reviews of %s#%d: %w", r.Repo, r.PRNumber, err)
		}
		for _, p := range posted {
			if strings.Contains(p.GetBody(), marker) {
				r.SCMReviewID = strconv.FormatInt(p.GetID(), 10)
				r.addEvent(now, "posting.found", "the review was posted already: "+r.SCMReviewID)
			}
		}
	}
	if r.SCMReviewID == "" {
		req := &github.PullRequestReviewRequest{CommitID: &r.HeadSHA, Event: github.Ptr("COMMENT"), Body: github.Ptr(r.summary() + "\n\n" + marker)}
		for _, f := range r.Findings {
			if f.State != FindingConfirmed {
				continue
			}
			c := &github.DraftReviewComment{Path: github.Ptr(f.Path), Line: github.Ptr(f.EndLine), Side: github.Ptr(f.Side), Body: github.Ptr(commentBody(f, r.Autofix == AutofixSuggest))}
			if f.StartLine < f.EndLine {
				c.StartLine, c.StartSide = github.Ptr(f.StartLine), github.Ptr(f.Side)
			}
			req.Comments = append(req.Comments, c)
		}
		posted, _, err := gh.PullRequests.CreateReview(ctx, owner, name, r.PRNumber, req)
		if err != nil {
			return fmt.Errorf("post the review on %s#%d: %w", r.Repo, r.PRNumber, err)
		}
		r.SCMReviewID = strconv.FormatInt(posted.GetID(), 10)
		r.addEvent(now, "posted", fmt.Sprintf("review %s with %d inline comments", r.SCMReviewID, len(req.Comments)))
	}
	if err := s.recordThreads(ctx, gh, r); err != nil {
		return err
	}
	if r.Autofix == AutofixTask && r.Counts.Total > 0 {
		fixed, err := s.fixedBy(ctx, r)
		if err != nil {
			return err
		}
		if fixed == 0 {
			return s.startFix(ctx, r)
		}
		r.addEvent(now, "autofix.skipped", fmt.Sprintf("the head is the push of pass %d's fix task: a fix is not fixed again", fixed))
	}
	r.move(now, StateCompleted, fmt.Sprintf("%d findings posted", r.Counts.Total))
	r.WakeAt = time.Time{}
	return nil
}

// startFix starts the fix task of a posted pass's confirmed findings, on a checkout of the PR's
// branch it can push to, and waits for it (fixing).
func (s *Service) startFix(ctx context.Context, r *review) error {
	now := s.now()
	co, err := s.checkout(ctx, r, true)
	if err != nil {
		return err
	}
	run, err := s.d.Agents.Start(ctx, r.Actor, r.ID+"-fix", AgentSpec{
		ProfileID: r.ProfileID, Harness: r.Engine, Title: fmt.Sprintf("Fix review findings on %s#%d", r.Repo, r.PRNumber),
		Prompt: fixPrompt(r, co), Checkout: co,
	})
	if errors.Is(err, ErrRefused) {
		// The review is posted: a fix task that cannot start (its checkout failed, its profile
		// went away) is the autofix's failure, not the pass's.
		r.addEvent(now, "autofix.failed", "the fix task could not start: "+err.Error())
		r.move(now, StateCompleted, fmt.Sprintf("%d findings posted", r.Counts.Total))
		r.WakeAt = time.Time{}
		return nil
	}
	if err != nil {
		return fmt.Errorf("start the fix task: %w", err)
	}
	r.FixTask = run.TaskID
	r.addEvent(now, "autofix.task", "fix task "+run.TaskID)
	r.Deadline = now.Add(s.d.Limits.AgentTimeout)
	r.move(now, StateFixing, fmt.Sprintf("%d findings posted; fix task %s works", r.Counts.Total, run.TaskID))
	r.WakeAt = now.Add(s.d.Limits.Poll)
	return nil
}

// fixedBy is the pass whose fix task pushed r's head (0: none), so that a fix's own push is not
// fixed again, which could go on forever.
func (s *Service) fixedBy(ctx context.Context, r *review) (int, error) {
	passes, err := s.passes(ctx, r.TargetID)
	if err != nil {
		return 0, err
	}
	for _, p := range passes {
		if p.ID != r.ID && p.FixHead != "" && p.FixHead == r.HeadSHA {
			return p.Pass, nil
		}
	}
	return 0, nil
}

// stepFixing waits for the fix task, then records what it did to the PR's branch: GitHub's
// head of the PR (read, as every step reads the PR) moved, or not. A fix task not done within
// the agent timeout is stopped. The pass completes either way: its review is posted.
func (s *Service) stepFixing(ctx context.Context, r *review) error {
	now := s.now()
	run, err := s.d.Agents.Poll(ctx, r.Actor, r.FixTask)
	if err != nil {
		return fmt.Errorf("check on the fix task: %w", err)
	}
	timedOut := !run.Done && now.After(r.Deadline)
	if !run.Done && !timedOut {
		r.WakeAt = now.Add(s.d.Limits.Poll)
		return nil
	}
	if timedOut {
		if err := s.d.Agents.Stop(ctx, r.Actor, r.FixTask); err != nil {
			s.d.Log.Warn("stop a timed-out fix task", "review", r.ID, "task", r.FixTask, "err", err)
		}
		r.addEvent(now, "autofix.timeout", fmt.Sprintf("fix task %s did not end within %s and was stopped", r.FixTask, s.d.Limits.AgentTimeout))
	}
	_, pr, err := s.readPR(ctx, r)
	if err != nil {
		return err
	}
	switch head := pr.GetHead().GetSHA(); {
	case head != "" && head != r.HeadSHA:
		r.FixHead = head
		r.addEvent(now, "autofix.pushed", fmt.Sprintf("the branch %s moved from %s to %s while fix task %s worked", r.HeadBranch, short(r.HeadSHA), short(head), r.FixTask))
	case run.Failed:
		r.addEvent(now, "autofix.failed", fmt.Sprintf("fix task %s failed without a push", r.FixTask))
	case !timedOut:
		r.addEvent(now, "autofix.unpushed", fmt.Sprintf("fix task %s ended without a push to %s", r.FixTask, r.HeadBranch))
	}
	r.move(now, StateCompleted, "fix task "+r.FixTask+" ended")
	r.WakeAt = time.Time{}
	return nil
}

// checkoutRoot is where agents find the pull request's repository: /work/<name>.
const checkoutRoot = "/work/"

// checkout is the PR's head for an agent's session, with a fresh token for the repository that
// can push only when push (the fix agent's) (nil when GitHub named no clone URL).
func (s *Service) checkout(ctx context.Context, r *review, push bool) (*Checkout, error) {
	if r.CheckoutURL == "" {
		return nil, nil
	}
	token, err := s.d.GitHub.Token(ctx, r.InstallationID, r.Repo, push)
	if err != nil {
		return nil, err
	}
	_, name := splitRepo(r.Repo)
	return &Checkout{Path: checkoutRoot + name, URL: r.CheckoutURL, Branch: r.CheckoutBranch, Commit: r.HeadSHA, Token: token}, nil
}

// recordThreads maps the posted review's inline comments to the confirmed findings by path and
// line, in the order they were posted, and marks those findings posted.
func (s *Service) recordThreads(ctx context.Context, gh *github.Client, r *review) error {
	owner, name := splitRepo(r.Repo)
	id, _ := strconv.ParseInt(r.SCMReviewID, 10, 64)
	comments, err := listAll(func(o *github.ListOptions) ([]*github.PullRequestComment, *github.Response, error) {
		return gh.PullRequests.ListReviewComments(ctx, owner, name, r.PRNumber, id, o)
	})
	if err != nil {
		return fmt.Errorf("list the comments of review %s: %w", r.SCMReviewID, err)
	}
	used := map[int64]bool{}
	for i := range r.Findings {
		f := &r.Findings[i]
		if f.State != FindingConfirmed {
			continue
		}
		for _, c := range comments {
			if !used[c.GetID()] && c.GetPath() == f.Path && c.GetLine() == f.EndLine {
				used[c.GetID()] = true
				f.SCMThreadID, f.State = strconv.FormatInt(c.GetID(), 10), FindingPosted
				break
			}
		}
	}
	r.recount()
	return nil
}

// summary is the posted review's body: the finder's overview and a count per severity.
func (r *review) summary() string {
	var b strings.Builder
	fmt.Fprintf(&b, "### Hangar review (pass %d)\n\n", r.Pass)
	if r.Summary != "" {
		b.WriteString(r.Summary + "\n\n")
	}
	if r.Counts.Total == 0 {
		b.WriteString("No confirmed findings.")
		return b.String()
	}
	fmt.Fprintf(&b, "%d confirmed findings:", r.Counts.Total)
	for _, sev := range severities {
		if n := r.countOf(sev); n > 0 {
			fmt.Fprintf(&b, " %d %s", n, sev)
		}
	}
	return b.String()
}

// outdate marks the findings of the PR's earlier passes on lines this pass's head changed since
// theirs: outdated, no longer counted. A finding whose file the push removed or renamed is
// outdated too.
func (s *Service) outdate(ctx context.Context, gh *github.Client, r *review) error {
	passes, err := s.passes(ctx, r.TargetID)
	if err != nil {
		return err
	}
	owner, name := splitRepo(r.Repo)
	for _, p := range passes {
		if p.ID == r.ID || p.HeadSHA == "" || p.HeadSHA == r.HeadSHA || p.Counts.Total == 0 {
			continue
		}
		cmp, _, err := gh.Repositories.CompareCommits(ctx, owner, name, p.HeadSHA, r.HeadSHA, nil)
		if err != nil {
			return fmt.Errorf("compare %s...%s: %w", short(p.HeadSHA), short(r.HeadSHA), err)
		}
		changed := map[string][]lineRange{}
		gone := map[string]bool{}
		for _, f := range cmp.Files {
			changed[f.GetFilename()] = changedLines(f.GetPatch())
			if st := f.GetStatus(); st == "removed" || st == "renamed" {
				gone[f.GetFilename()] = true
				gone[f.GetPreviousFilename()] = true
			}
		}
		err = s.updateReview(ctx, p.ID, func(old *review) bool {
			n := 0
			for i := range old.Findings {
				f := &old.Findings[i]
				if f.open() && (gone[f.Path] || overlaps(changed[f.Path], f.StartLine, f.EndLine)) {
					f.State, f.Resolution = FindingOutdated, "lines changed by "+short(r.HeadSHA)
					n++
				}
			}
			if n == 0 {
				return false
			}
			old.recount()
			old.addEvent(s.now(), "findings.outdated", fmt.Sprintf("%d findings on lines changed by %s (pass %d)", n, short(r.HeadSHA), r.Pass))
			return true
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// errLeased is a change to a pass a worker holds: its step's write would overwrite the change,
// so the change waits (a delivery is redelivered) until the worker releases the pass.
var errLeased = errors.New("a worker holds the review now; try again")

// updateReview changes a review in a transaction; change reports whether it changed anything.
// A pass a worker holds (and whose step result will be saved) answers errLeased.
func (s *Service) updateReview(ctx context.Context, id string, change func(*review) bool) error {
	err := s.d.DB.RunTransaction(ctx, func(ctx context.Context, tx *firestore.Transaction) error {
		r, err := store.Read[review](ctx, tx, s.reviewDoc(id))
		if err != nil {
			return err
		}
		if r.LeaseOwner != "" && r.LeaseUntil.After(s.now()) && r.Status != StateSuperseded {
			return errLeased
		}
		if !change(r) {
			return nil
		}
		r.UpdatedAt = s.now()
		return tx.Set(s.reviewDoc(id), r)
	})
	if err != nil {
		return fmt.Errorf("update review %s: %w", id, err)
	}
	return nil
}

// Tick advances every pass that is due: parked ones whose wait is over and ones whose worker
// lost its lease.
func (s *Service) Tick(ctx context.Context) error {
	due, err := s.d.DB.Collection(reviewsCol).
		Where("status", "in", []string{StateQueued, StateRunning, StateVerifying, StatePosting, StateFixing}).
		Where("wake_at", "<=", s.now()).Select().Limit(100).Documents(ctx).GetAll()
	if err != nil {
		return fmt.Errorf("find due reviews: %w", err)
	}
	var errs []error
	for _, d := range due {
		errs = append(errs, s.Advance(ctx, d.Ref.ID))
	}
	return errors.Join(errs...)
}

// passID is the id of the pass a trigger makes: a redelivery (or the same commit pushed twice)
// makes no second one.
func passID(parts ...string) string {
	return ids.FromKey(reviewPrefix, strings.Join(parts, "\x00"))
}
