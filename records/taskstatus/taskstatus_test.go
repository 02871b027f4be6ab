package taskstatus

import (
	"slices"
	"testing"
)

// The one table of a task's moves: a task completes only once its agent finished (waiting),
// and a cancelled one never moves again.
func TestStateTableAllowsExactlyTheseMoves(t *testing.T) {
	t.Parallel()
	allowed := map[[2]string]bool{
		{Pending, Running}:   true,
		{Pending, Failed}:    true,
		{Pending, Cancelled}: true,
		{Running, Waiting}:   true,
		{Running, Failed}:    true,
		{Running, Cancelled}: true,
		{Waiting, Running}:   true,
		{Waiting, Completed}: true,
		{Waiting, Failed}:    true,
		{Waiting, Cancelled}: true,
		{Completed, Running}: true,
		{Failed, Running}:    true,
	}
	states := States()
	want := []string{Pending, Running, Waiting, Completed, Failed, Cancelled}
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
