package tasks

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"

	"connectrpc.com/connect"

	appv1 "github.com/hangar-dev/hangar/gen/svc/app/v1"
	"github.com/hangar-dev/hangar/internal/testenv"
	"github.com/hangar-dev/hangar/platform/auth"
	"github.com/hangar-dev/hangar/platform/clock"
	"github.com/hangar-dev/hangar/platform/config"
)

// recordingSessions starts sessions with made-up ids, knows none of their states, and notes
// which it is asked to delete.
type recordingSessions struct {
	mu      sync.Mutex
	started int
	deleted []string
}

func (r *recordingSessions) Start(context.Context, SessionSpec) (string, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.started++
	return fmt.Sprintf("sess_%d", r.started), nil
}

func (r *recordingSessions) Sessions(context.Context, []string) (map[string]*appv1.Session, error) {
	return map[string]*appv1.Session{}, nil
}

func (r *recordingSessions) SyncTask(context.Context, string) error { return nil }

func (r *recordingSessions) Delete(_ context.Context, id string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.deleted = append(r.deleted, id)
	return nil
}

// Stopping a task's agent deletes its session, only for a caller who may see the task, and
// leaves the task to follow its session's end.
func TestStopSessionsDeletesTheTasksSessionsForItsCreator(t *testing.T) {
	t.Parallel()
	db, _ := testenv.Firestore(t)
	rec := &recordingSessions{}
	svc := New(db, profiles, rec, auth.NewUsers(db), clock.NewFake(t0), config.Default().Limits)
	res, err := svc.CreateTask(as(t, alice), connect.NewRequest(&appv1.CreateTaskRequest{ProfileId: profBare, Prompt: new("go")}))
	if err != nil {
		t.Fatal(err)
	}
	task := res.Msg.GetTask()
	sid := ProgressOf(task).SessionID
	if sid == "" {
		t.Fatalf("task %v started no session", task)
	}

	testenv.WantCode(t, svc.StopSessions(as(t, bob), task.GetId()), connect.CodeNotFound)
	testenv.WantCode(t, svc.StopSessions(as(t, alice), "task_nosuchtask"), connect.CodeNotFound)
	if len(rec.deleted) != 0 {
		t.Fatalf("refused stops deleted %v", rec.deleted)
	}
	if err := svc.StopSessions(as(t, alice), task.GetId()); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(rec.deleted, []string{sid}) {
		t.Fatalf("deleted %v, want [%s]", rec.deleted, sid)
	}
	if _, err := svc.Progress(as(t, alice), task.GetId()); err != nil {
		t.Fatalf("the stopped task: %v", err)
	}
}
