package tasks

import (
	"slices"
	"testing"
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
