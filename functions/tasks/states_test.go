package tasks

import (
	"testing"

	appv1 "github.com/hangar-dev/hangar/gen/svc/app/v1"
)

// A caller waiting on a task (an automation run, a review pass) sees it over once its agent
// waits for the user, and failed once it failed or was cancelled.
func TestProgressSaysWhenAWaitedOnTaskIsOver(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		status       string
		done, failed bool
	}{
		{StatePending, false, false},
		{StateRunning, false, false},
		{StateWaiting, true, false},
		{StateCompleted, true, false},
		{StateFailed, true, true},
		{StateCancelled, true, true},
	} {
		t.Run(tc.status, func(t *testing.T) {
			t.Parallel()
			p := ProgressOf(&appv1.Task{Id: "task_1", Status: tc.status, Sessions: []*appv1.TaskSessionRef{{SessionId: "sess_1"}, {SessionId: "sess_2"}}})
			want := Progress{TaskID: "task_1", SessionID: "sess_1", Status: tc.status, Done: tc.done, Failed: tc.failed}
			if p != want {
				t.Fatalf("ProgressOf = %+v, want %+v", p, want)
			}
		})
	}
}
