package tasks

import (
	"context"
	"testing"
	"time"

	"connectrpc.com/connect"

	appv1 "github.com/hangar-dev/hangar/gen/svc/app/v1"
	"github.com/hangar-dev/hangar/internal/testenv"
	"github.com/hangar-dev/hangar/platform/auth"
	"github.com/hangar-dev/hangar/platform/clock"
	"github.com/hangar-dev/hangar/platform/config"
	"github.com/hangar-dev/hangar/platform/ids"
	"github.com/hangar-dev/hangar/records/sessiondb"
)

// storedSessions keeps real session records in the emulator, so that the moves a test makes
// through sessiondb are the writes a session's host and SessionService make. early runs on each
// new session before Start returns: what its host did before the task was stored.
type storedSessions struct {
	store *sessiondb.Store
	early func(ctx context.Context, id string) error
}

func (s storedSessions) Start(ctx context.Context, _ SessionSpec) (string, error) {
	caller, _ := auth.Caller(ctx)
	id := ids.New("sess")
	if _, err := s.store.Create(ctx, &sessiondb.Record{ID: id, Owner: caller.UserID, Status: sessiondb.Running, Harness: "bash"}, 0); err != nil {
		return "", err
	}
	if s.early != nil {
		return id, s.early(ctx, id)
	}
	return id, nil
}

func (s storedSessions) Sessions(context.Context, []string) (map[string]*appv1.Session, error) {
	return map[string]*appv1.Session{}, nil
}

func (s storedSessions) SyncTask(ctx context.Context, id string) error {
	return s.store.SyncTask(ctx, id)
}

func (s storedSessions) Delete(ctx context.Context, id string) error {
	_, _, err := s.store.Move(ctx, id, sessiondb.Deleted, "deleted", nil)
	return err
}

// sessionFixture is a fixture whose tasks run in storedSessions over the fixture's database.
func sessionFixture(t *testing.T, early func(ctx context.Context, st *sessiondb.Store, id string) error) (fixture, *sessiondb.Store) {
	t.Helper()
	db, _ := testenv.Firestore(t)
	st := sessiondb.NewStore(db, time.Now)
	sessions := storedSessions{store: st}
	if early != nil {
		sessions.early = func(ctx context.Context, id string) error { return early(ctx, st, id) }
	}
	c, users := clock.NewFake(t0), auth.NewUsers(db)
	return fixture{svc: New(db, profiles, sessions, users, c, config.Default().Limits), db: db, clock: c, users: users}, st
}

const launchFailed = "harness claude-code could not start: claude: command not found; install claude in the session's image"

// A task's stored status follows what its session and agent do as they do it: ListTasks,
// asked by status with no read of the task in between, finds it where its session left it.
func TestTasksMoveWithTheirSessionsAsTheyMove(t *testing.T) {
	t.Parallel()
	type step func(ctx context.Context, st *sessiondb.Store, f fixture, task, session string) error
	agent := func(state, reason string) step {
		return func(ctx context.Context, st *sessiondb.Store, _ fixture, _, session string) error {
			return st.SetAgentState(ctx, session, state, reason)
		}
	}
	session := func(to sessiondb.Status, reason string) step {
		return func(ctx context.Context, st *sessiondb.Store, _ fixture, _, session string) error {
			_, _, err := st.Move(ctx, session, to, reason, nil)
			return err
		}
	}
	closeTask := func(ctx context.Context, _ *sessiondb.Store, f fixture, task, _ string) error {
		_, err := f.svc.UpdateTask(ctx, connect.NewRequest(&appv1.UpdateTaskRequest{TaskId: task, Status: new(StateCompleted)}))
		return err
	}
	for _, tc := range []struct {
		name       string
		steps      []step
		want       string
		wantReason string
	}{
		{"a turn runs", []step{agent(sessiondb.AgentWorking, "")}, StateRunning, ""},
		{"a turn waits on a client tool", []step{agent(sessiondb.AgentWorking, ""), agent(sessiondb.AgentWaitingForTool, "")}, StateRunning, ""},
		{"the agent finished its turn", []step{agent(sessiondb.AgentWorking, ""), agent(sessiondb.AgentWaiting, "")}, StateWaiting, ""},
		{"its harness did not launch", []step{agent(sessiondb.AgentWorking, ""), agent(sessiondb.AgentFailed, launchFailed)}, StateFailed, launchFailed},
		{"its session failed", []step{session(sessiondb.Failed, "image pull failed")}, StateFailed, "image pull failed"},
		{"its session was deleted", []step{session(sessiondb.Deleted, "deleted by alice")}, StateCancelled, "deleted by alice"},
		{"a snapshot says nothing about the task", []step{agent(sessiondb.AgentWaiting, ""), session(sessiondb.Snapshotting, "snapshot"), session(sessiondb.Idle, "idle")}, StateWaiting, ""},
		{"a follow-up prompt reopens a failed task", []step{agent(sessiondb.AgentFailed, launchFailed), agent(sessiondb.AgentWorking, "")}, StateRunning, ""},
		{"the user closed it once the agent finished", []step{agent(sessiondb.AgentWaiting, ""), closeTask}, StateCompleted, "closed by " + alice},
		{"a closed task stays completed when its session goes", []step{agent(sessiondb.AgentWaiting, ""), closeTask, session(sessiondb.Deleted, "deleted")}, StateCompleted, "closed by " + alice},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f, st := sessionFixture(t, nil)
			ctx := as(t, alice)
			task := f.titled(t, ctx, "Follow")
			if task.GetStatus() != StateRunning {
				t.Fatalf("a new task with a session is %s, want %s", task.GetStatus(), StateRunning)
			}
			sid := ProgressOf(task).SessionID
			for _, s := range tc.steps {
				if err := s(ctx, st, f, task.GetId(), sid); err != nil {
					t.Fatal(err)
				}
			}
			for _, state := range States() {
				res := f.list(t, ctx, &appv1.ListTasksRequest{States: []string{state}})
				var want []*appv1.Task
				if state == tc.want {
					want = []*appv1.Task{task}
				}
				wantIDs(t, "tasks "+state, res.GetTasks(), want...)
				if state == tc.want && res.GetTasks()[0].GetStatusReason() != tc.wantReason {
					t.Fatalf("status_reason %q, want %q", res.GetTasks()[0].GetStatusReason(), tc.wantReason)
				}
			}
		})
	}
}

// A session that moved before its task was stored (a turn that ended at once, a harness that
// did not launch) is caught up with as the task is created.
func TestCreateTaskCatchesUpWithItsSessionsFirstMoves(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name         string
		state        string
		want, reason string
	}{
		{"a launch that failed", sessiondb.AgentFailed, StateFailed, launchFailed},
		{"a turn that ended", sessiondb.AgentWaiting, StateWaiting, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f, _ := sessionFixture(t, func(ctx context.Context, st *sessiondb.Store, id string) error {
				return st.SetAgentState(ctx, id, tc.state, tc.reason)
			})
			ctx := as(t, alice)
			task := f.titled(t, ctx, "Early")
			if task.GetStatus() != tc.want || task.GetStatusReason() != tc.reason {
				t.Fatalf("created task: %s (%q), want %s (%q)", task.GetStatus(), task.GetStatusReason(), tc.want, tc.reason)
			}
			wantIDs(t, "tasks "+tc.want, f.list(t, ctx, &appv1.ListTasksRequest{States: []string{tc.want}}).GetTasks(), task)
		})
	}
}

// Only a task whose agent finished can be closed, and only to completed: every other status
// is its sessions'.
func TestUpdateTaskClosesOnlyAFinishedTask(t *testing.T) {
	t.Parallel()
	f, _ := sessionFixture(t, nil)
	ctx := as(t, alice)
	task := f.titled(t, ctx, "Busy")
	for _, tc := range []struct {
		name   string
		status string
		code   connect.Code
	}{
		{"a running task", StateCompleted, connect.CodeFailedPrecondition},
		{"a status of its sessions", StateFailed, connect.CodeInvalidArgument},
		{"an unknown status", "done", connect.CodeInvalidArgument},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := f.svc.UpdateTask(ctx, connect.NewRequest(&appv1.UpdateTaskRequest{TaskId: task.GetId(), Status: new(tc.status)}))
			testenv.WantCode(t, err, tc.code)
		})
	}
	if got := f.mustGet(t, ctx, task.GetId()); got.GetStatus() != StateRunning {
		t.Fatalf("refused closes left the task %s", got.GetStatus())
	}
}
