package tasks

import (
	"slices"

	"github.com/hangar-dev/hangar/platform/states"
)

// Task states.
const (
	StatePending   = "pending"
	StateRunning   = "running"
	StateWaiting   = "waiting"
	StateCompleted = "completed"
	StateFailed    = "failed"
	StateCancelled = "cancelled"
)

// stateMoves is the task state machine, in lifecycle order: each state and the states it may
// move to. A new task is pending until its first session starts; waiting means the agent needs
// the user.
var stateMoves = states.Table[string]{
	{From: StatePending, To: []string{StateRunning, StateFailed, StateCancelled}},
	{From: StateRunning, To: []string{StateWaiting, StateCompleted, StateFailed, StateCancelled}},
	{From: StateWaiting, To: []string{StateRunning, StateCompleted, StateFailed, StateCancelled}},
	// A finished or failed task runs again on a follow-up prompt or a resume, as agent
	// dashboards allow (and as closed issues reopen).
	{From: StateCompleted, To: []string{StateRunning}},
	{From: StateFailed, To: []string{StateRunning}},
	// Cancelling is the user's explicit stop: nothing restarts the task behind their back.
	{From: StateCancelled},
}

// States returns every task state in lifecycle order.
func States() []string {
	return stateMoves.States()
}

// CanMove reports whether a task may move from one state to another. Staying in a state is not a
// move.
func CanMove(from, to string) bool {
	return stateMoves.CanMove(from, to)
}

func isState(s string) bool { return slices.Contains(States(), s) }
