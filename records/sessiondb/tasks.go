package sessiondb

import (
	"context"

	"github.com/hangar-dev/hangar/records/taskstatus"
)

// taskOfSession is the status a task moves to when its session moves to status, and ok false
// when that move says nothing about the task (a snapshot, an eviction, a resume: the agent's
// work goes on, or resumes, where it was).
//
//	session failed   → failed
//	session deleted  → cancelled
func taskOfSession(status Status) (string, bool) {
	switch status {
	case Failed:
		return taskstatus.Failed, true
	case Deleted:
		return taskstatus.Cancelled, true
	}
	return "", false
}

// taskOfAgent is the status a task moves to when its session's agent moves to state.
//
//	working, waiting_for_tool (a turn runs)       → running
//	waiting (a turn ended, the queue is empty)    → waiting
//	failed (a turn could not run: launch, plan)   → failed
func taskOfAgent(state string) (string, bool) {
	switch state {
	case AgentWorking, AgentWaitingForTool:
		return taskstatus.Running, true
	case AgentWaiting:
		return taskstatus.Waiting, true
	case AgentFailed:
		return taskstatus.Failed, true
	}
	return "", false
}

// SyncTask moves the task of session id to where the session is now: what a task created
// after its session started needs, since the moves its session made before the task existed
// had no task to move.
func (s *Store) SyncTask(ctx context.Context, id string) error {
	r, err := s.Get(ctx, id)
	if err != nil {
		return err
	}
	if task, ok := taskOfSession(r.Status); ok {
		return s.tasks.FollowSession(ctx, id, task, r.StatusReason)
	}
	if task, ok := taskOfAgent(r.AgentState); ok {
		return s.tasks.FollowSession(ctx, id, task, r.AgentReason)
	}
	return nil
}
