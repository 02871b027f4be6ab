package reviews

import (
	"slices"

	"github.com/hangar-dev/hangar/platform/states"
)

// Review (pass) states.
const (
	StateQueued     = "queued"
	StateRunning    = "running"
	StateVerifying  = "verifying"
	StatePosting    = "posting"
	StateFixing     = "fixing"
	StateCompleted  = "completed"
	StateFailed     = "failed"
	StateSuperseded = "superseded"
)

// stateMoves is the review state machine, in lifecycle order; docs/reviews.md's table is this one.
// A pass is queued when a trigger makes it, running while its finder works, verifying while its
// verifier judges the findings, posting while its GitHub review is written, fixing while the fix
// task autofix started works (until it ends, to record what it pushed). A newer push
// supersedes a pass that has not posted; a fixing pass has posted (the push may be its fix), so
// it only becomes inactive, as a finished one does, which stays completed. Failed and superseded are final: RetryReview makes a new pass rather than
// reviving one, so a pass's events tell one attempt's story.
var stateMoves = states.Table[string]{
	{From: StateQueued, To: []string{StateRunning, StateFailed, StateSuperseded}},
	{From: StateRunning, To: []string{StateVerifying, StatePosting, StateFailed, StateSuperseded}},
	{From: StateVerifying, To: []string{StatePosting, StateFailed, StateSuperseded}},
	{From: StatePosting, To: []string{StateFixing, StateCompleted, StateFailed, StateSuperseded}},
	{From: StateFixing, To: []string{StateCompleted}},
	{From: StateCompleted},
	{From: StateFailed},
	{From: StateSuperseded},
}

// States returns every review state in lifecycle order.
func States() []string { return stateMoves.States() }

// CanMove reports whether a review may move from one state to another.
func CanMove(from, to string) bool { return stateMoves.CanMove(from, to) }

// ended reports whether a review in state s will not move again.
func ended(s string) bool {
	return s == StateCompleted || s == StateFailed || s == StateSuperseded
}

// supersedable reports whether a newer pass supersedes a pass in state s: one that has not
// posted its review.
func supersedable(s string) bool { return !ended(s) && s != StateFixing }

func isState(s string) bool { return slices.Contains(States(), s) }

// Finding states. A finder's finding is proposed; the verifier confirms or rejects it; a
// confirmed one is posted as an inline comment; resolving its thread on GitHub resolves it, and
// a later push that changes its lines makes it outdated.
const (
	FindingProposed  = "proposed"
	FindingConfirmed = "confirmed"
	FindingRejected  = "rejected"
	FindingPosted    = "posted"
	FindingResolved  = "resolved"
	FindingOutdated  = "outdated"
)

// Severities, most severe first.
var severities = []string{"critical", "high", "medium", "low"}

// Enrollment values.
const (
	TriggerAutomatic = "automatic"
	TriggerOnRequest = "on_request"
	TriggerManual    = "manual"

	AutofixOff     = "off"
	AutofixSuggest = "suggest"
	AutofixTask    = "task"
)

var (
	triggerModes = []string{TriggerAutomatic, TriggerOnRequest, TriggerManual}
	autofixModes = []string{AutofixOff, AutofixSuggest, AutofixTask}
)
