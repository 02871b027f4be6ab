package tasks

import "slices"

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
var stateMoves = []struct {
	state string
	next  []string
}{
	{StatePending, []string{StateRunning, StateFailed, StateCancelled}},
	{StateRunning, []string{StateWaiting, StateCompleted, StateFailed, StateCancelled}},
	{StateWaiting, []string{StateRunning, StateCompleted, StateFailed, StateCancelled}},
	// A finished or failed task runs again on a follow-up prompt or a resume, as agent
	// dashboards allow (and as closed issues reopen).
	{StateCompleted, []string{StateRunning}},
	{StateFailed, []string{StateRunning}},
	// Cancelling is the user's explicit stop: nothing restarts the task behind their back.
	{StateCancelled, nil},
}

// States returns every task state in lifecycle order.
func States() []string {
	out := make([]string, len(stateMoves))
	for i, m := range stateMoves {
		out[i] = m.state
	}
	return out
}

// CanMove reports whether a task may move from one state to another. Staying in a state is not a
// move.
func CanMove(from, to string) bool {
	for _, m := range stateMoves {
		if m.state == from {
			return slices.Contains(m.next, to)
		}
	}
	return false
}

func isState(s string) bool { return slices.Contains(States(), s) }
