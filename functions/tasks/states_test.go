package tasks

import (
	"slices"
	"testing"

	appv1 "github.com/hangar-dev/hangar/gen/svc/app/v1"
)

func TestStateTable(t *testing.T) {
	t.Parallel()
	allowed := map[[2]string]bool{
		{StatePending, StateRunning}:   true,
		{StatePending, StateFailed}:    true,
		{StatePending, StateCancelled}: true,
		{StateRunning, StateWaiting}:   true,
		{StateRunning, StateCompleted}: true,
		{StateRunning, StateFailed}:    true,
		{StateRunning, StateCancelled}: true,
		{StateWaiting, StateRunning}:   true,
		{StateWaiting, StateCompleted}: true,
		{StateWaiting, StateFailed}:    true,
		{StateWaiting, StateCancelled}: true,
		{StateCompleted, StateRunning}: true,
		{StateFailed, StateRunning}:    true,
	}
	states := States()
	want := []string{StatePending, StateRunning, StateWaiting, StateCompleted, StateFailed, StateCancelled}
	if !slices.Equal(states, want) {
		t.Fatalf("States() = %v, want %v", states, want)
	}
	// Every pair of states, plus unknown ones, so that a refused move is tested as carefully as
	// an allowed one.
	for _, from := range append(states, "", "paused") {
		for _, to := range append(states, "", "paused") {
			if got := CanMove(from, to); got != allowed[[2]string{from, to}] {
				t.Errorf("CanMove(%q, %q) = %v, want %v", from, to, got, !got)
			}
		}
	}
}

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
