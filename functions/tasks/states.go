package tasks

import (
	"context"
	"slices"

	"connectrpc.com/connect"

	appv1 "github.com/hangar-dev/hangar/gen/svc/app/v1"
	"github.com/hangar-dev/hangar/records/taskstatus"
)

// Task states; the state machine is records/taskstatus's, shared with the writers of sessions,
// which move tasks as their sessions move.
const (
	StatePending   = taskstatus.Pending
	StateRunning   = taskstatus.Running
	StateWaiting   = taskstatus.Waiting
	StateCompleted = taskstatus.Completed
	StateFailed    = taskstatus.Failed
	StateCancelled = taskstatus.Cancelled
)

// States returns every task state in lifecycle order.
func States() []string { return taskstatus.States() }

// CanMove reports whether a task may move from one state to another. Staying in a state is not a
// move.
func CanMove(from, to string) bool { return taskstatus.CanMove(from, to) }

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

// Progress reads the caller's task taskID, its status as stored (the current one: its sessions'
// writers keep it), as ProgressOf sees it.
func (s *Service) Progress(ctx context.Context, taskID string) (Progress, error) {
	resp, err := s.GetTask(ctx, connect.NewRequest(&appv1.GetTaskRequest{TaskId: taskID}))
	if err != nil {
		return Progress{}, err
	}
	return ProgressOf(resp.Msg.GetTask()), nil
}
