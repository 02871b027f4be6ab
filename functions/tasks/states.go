package tasks

import (
	"context"
	"slices"

	"connectrpc.com/connect"

	appv1 "github.com/hangar-dev/hangar/gen/svc/app/v1"
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

// Progress is a task as the in-process callers that start one and wait on it (automation runs,
// review passes) follow it: its first session, and whether it is over.
type Progress struct {
	TaskID, SessionID, Status string
	Done, Failed              bool
}

// ProgressOf is t's progress. A task whose agent finished its turn waits for the user: for a
// caller waiting on the task, that task is done.
func ProgressOf(t *appv1.Task) Progress {
	p := Progress{TaskID: t.GetId(), Status: t.GetStatus()}
	if ss := t.GetSessions(); len(ss) > 0 {
		p.SessionID = ss[0].GetSessionId()
	}
	switch t.GetStatus() {
	case StateCompleted, StateWaiting:
		p.Done = true
	case StateFailed, StateCancelled:
		p.Done, p.Failed = true, true
	}
	return p
}

// Progress reads the caller's task taskID (following its session, as GetTask does) as
// ProgressOf sees it.
func (s *Service) Progress(ctx context.Context, taskID string) (Progress, error) {
	resp, err := s.GetTask(ctx, connect.NewRequest(&appv1.GetTaskRequest{TaskId: taskID}))
	if err != nil {
		return Progress{}, err
	}
	return ProgressOf(resp.Msg.GetTask()), nil
}
