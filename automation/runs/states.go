package runs

import "github.com/hangar-dev/hangar/platform/states"

// Status is where a run is.
type Status string

// Run states. A run is queued when created, running while a worker executes its steps, waiting
// while it sleeps (a delay block, a retry backoff, a task it waits for) until WakeAt, and ends
// completed, failed, filtered (a filter block said no) or stopped (StopRun).
const (
	Queued    Status = "queued"
	Running   Status = "running"
	Waiting   Status = "waiting"
	Completed Status = "completed"
	Failed    Status = "failed"
	Filtered  Status = "filtered"
	Stopped   Status = "stopped"
)

// moves is the run state machine: each state and where it may go.
var moves = states.Table[Status]{
	{From: Queued, To: []Status{Running, Failed, Stopped}},
	{From: Running, To: []Status{Waiting, Completed, Failed, Filtered, Stopped}},
	{From: Waiting, To: []Status{Running, Failed, Stopped}},
	{From: Completed},
	{From: Failed},
	{From: Filtered},
	{From: Stopped},
}

// Statuses lists every run state in lifecycle order.
func Statuses() []Status {
	return moves.States()
}

// CanMove reports whether a run may go from one state to another. Staying put is not a move.
func CanMove(from, to Status) bool {
	return moves.CanMove(from, to)
}

// Ended reports whether a run in state s is over.
func (s Status) Ended() bool {
	return s == Completed || s == Failed || s == Filtered || s == Stopped
}

// StepStatus is where one step of a run is.
type StepStatus string

// Step states. A step is pending until the run reaches it, running while its block executes,
// waiting between retries or while its block waits (delay, task), and ends succeeded, failed,
// skipped (never reached: a filter before it said no or the run ended), simulated (a dry run
// recorded what the block would have done instead of doing it) or stopped.
const (
	StepPending   StepStatus = "pending"
	StepRunning   StepStatus = "running"
	StepWaiting   StepStatus = "waiting"
	StepSucceeded StepStatus = "succeeded"
	StepFailed    StepStatus = "failed"
	StepSkipped   StepStatus = "skipped"
	StepSimulated StepStatus = "simulated"
	StepStopped   StepStatus = "stopped"
)

var stepMoves = states.Table[StepStatus]{
	{From: StepPending, To: []StepStatus{StepRunning, StepSkipped, StepStopped}},
	// A running step found by a new worker (the old one died) stays running as its next attempt.
	{From: StepRunning, To: []StepStatus{StepWaiting, StepSucceeded, StepFailed, StepSimulated, StepStopped}},
	{From: StepWaiting, To: []StepStatus{StepRunning, StepSucceeded, StepFailed, StepStopped}},
	{From: StepSucceeded},
	{From: StepFailed},
	{From: StepSkipped},
	{From: StepSimulated},
	{From: StepStopped},
}

// StepStatuses lists every step state in lifecycle order.
func StepStatuses() []StepStatus {
	return stepMoves.States()
}

// CanMoveStep reports whether a step may go from one state to another.
func CanMoveStep(from, to StepStatus) bool {
	return stepMoves.CanMove(from, to)
}

// Done reports whether a step in state s will not run again in this run.
func (s StepStatus) Done() bool {
	switch s {
	case StepSucceeded, StepFailed, StepSkipped, StepSimulated, StepStopped:
		return true
	}
	return false
}
