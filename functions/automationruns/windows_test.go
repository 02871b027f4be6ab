package automationruns_test

import (
	"strconv"
	"testing"
	"time"

	"github.com/hangar-dev/hangar/automation/runs"
	"github.com/hangar-dev/hangar/functions/automationruns"
)

func TestFilteredEventsGroupIntoTheWindowsBetweenRuns(t *testing.T) {
	t0 := time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)
	at := func(m int) time.Time { return t0.Add(time.Duration(m) * time.Minute) }
	// Runs newest first, as ListRuns lists them: run_b at 12:10, run_a at 12:05.
	list := []*runs.Run{{ID: "run_b", CreatedAt: at(10)}, {ID: "run_a", CreatedAt: at(5)}}
	filtered := func(minutes ...int) []runs.FilteredEvent {
		var out []runs.FilteredEvent
		for _, m := range minutes {
			out = append(out, runs.FilteredEvent{At: at(m)})
		}
		return out
	}
	cases := []struct {
		name     string
		filtered []runs.FilteredEvent
		want     []string // before_run_id:count:first-last minutes
	}{
		{"none", nil, nil},
		{"after the newest run", filtered(12, 11), []string{":2:11-12"}},
		{"between runs and before the oldest", filtered(12, 8, 7, 3), []string{":1:12-12", "run_b:2:7-8", "run_a:1:3-3"}},
		{"only before the oldest run", filtered(2, 1), []string{"run_a:2:1-2"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := automationruns.Windows(list, tc.filtered)
			if len(got) != len(tc.want) {
				t.Fatalf("windows %v, want %v", got, tc.want)
			}
			for i, w := range got {
				first, _ := time.Parse(time.RFC3339, w.GetFirstAt())
				last, _ := time.Parse(time.RFC3339, w.GetLastAt())
				s := w.GetBeforeRunId() + ":" + strconv.Itoa(int(w.GetCount())) + ":" + strconv.Itoa(int(first.Sub(t0).Minutes())) + "-" + strconv.Itoa(int(last.Sub(t0).Minutes()))
				if s != tc.want[i] {
					t.Fatalf("window %d = %s, want %s", i, s, tc.want[i])
				}
			}
		})
	}
}
