package states_test

import (
	"slices"
	"testing"

	"github.com/hangar-dev/hangar/platform/states"
)

func TestTableAnswersFromItsRowsOnly(t *testing.T) {
	table := states.Table[string]{
		{From: "new", To: []string{"running", "failed"}},
		{From: "running", To: []string{"done", "failed"}},
		{From: "done"},
		{From: "failed"},
	}
	if got := table.States(); !slices.Equal(got, []string{"new", "running", "done", "failed"}) {
		t.Fatalf("States() = %v", got)
	}
	tests := []struct {
		from, to string
		want     bool
	}{
		{"new", "running", true},
		{"running", "done", true},
		{"new", "done", false},
		{"done", "running", false},
		{"running", "running", false},
		{"unknown", "new", false},
	}
	for _, tt := range tests {
		if got := table.CanMove(tt.from, tt.to); got != tt.want {
			t.Errorf("CanMove(%s, %s) = %v, want %v", tt.from, tt.to, got, tt.want)
		}
	}
}
