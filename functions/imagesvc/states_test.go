package imagesvc

import (
	"slices"
	"testing"
)

// TestEveryStageMoveIsInTheTable walks the stages as the worker does, with and without a warm
// command, and checks each move, each failure and each retry against the one table.
func TestEveryStageMoveIsInTheTable(t *testing.T) {
	for _, tc := range []struct {
		name string
		warm bool
		want []State
	}{
		{"without a warm command", false, []State{Queued, Resolving, Pulling, Chunking, Prestaging, Ready}},
		{"with a warm command", true, []State{Queued, Resolving, Pulling, Chunking, Prestaging, Warming, Ready}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := []State{Queued}
			for s := Queued; !s.Ended(); {
				to := next(s, tc.warm)
				if !Table.CanMove(s, to) {
					t.Fatalf("the worker moves %s → %s, which the table does not allow", s, to)
				}
				if s != Queued {
					if !Table.CanMove(s, Failed) || !Table.CanMove(Failed, s) {
						t.Fatalf("stage %s cannot fail, or a failed job cannot be retried from it", s)
					}
				}
				got = append(got, to)
				s = to
			}
			if !slices.Equal(got, tc.want) {
				t.Fatalf("stages %v, want %v", got, tc.want)
			}
		})
	}
	for _, s := range Table.States() {
		if s.Ended() != (s == Ready || s == Failed || s == Superseded) {
			t.Errorf("%s: Ended() = %v", s, s.Ended())
		}
	}
	if Table.CanMove(Ready, Resolving) || Table.CanMove(Superseded, Resolving) {
		t.Error("a ready or superseded job can run again: a new job must be started instead")
	}
}
