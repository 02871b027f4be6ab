package runs_test

import (
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/hangar-dev/hangar/automation/runs"
	"github.com/hangar-dev/hangar/internal/testenv"
	"github.com/hangar-dev/hangar/platform/clock"
	"github.com/hangar-dev/hangar/platform/ids"
)

func TestEndedRunsGoNowhere(t *testing.T) {
	t.Parallel()
	for _, from := range runs.Statuses() {
		for _, to := range runs.Statuses() {
			if from.Ended() && runs.CanMove(from, to) {
				t.Errorf("ended run may move %s → %s", from, to)
			}
		}
		if !from.Ended() && !runs.CanMove(from, runs.Stopped) {
			t.Errorf("a %s run cannot be stopped", from)
		}
	}
	for _, from := range runs.StepStatuses() {
		for _, to := range runs.StepStatuses() {
			if from.Done() && runs.CanMoveStep(from, to) {
				t.Errorf("done step may move %s → %s", from, to)
			}
		}
	}
}

func TestTheRunTableAllowsTheLifecycle(t *testing.T) {
	t.Parallel()
	path := []runs.Status{runs.Queued, runs.Running, runs.Waiting, runs.Running, runs.Completed}
	for i := 1; i < len(path); i++ {
		if !runs.CanMove(path[i-1], path[i]) {
			t.Errorf("%s → %s refused", path[i-1], path[i])
		}
	}
	if runs.CanMove(runs.Queued, runs.Completed) {
		t.Error("a queued run may complete without running")
	}
}

func newRun(t *testing.T, s *runs.Store) *runs.Run {
	t.Helper()
	r := &runs.Run{ID: ids.New("run"), AutomationID: "auto_x", Status: runs.Queued, Trigger: "{}",
		Steps: []runs.Step{{BlockID: "a", Status: runs.StepPending}, {BlockID: "b", Status: runs.StepPending}}}
	if err := s.Create(t.Context(), r); err != nil {
		t.Fatal(err)
	}
	return r
}

func TestUpdateRefusesMovesTheTableForbidsAndWritesOfALostLease(t *testing.T) {
	t.Parallel()
	db, _ := testenv.Firestore(t)
	s := runs.NewStore(db, clock.Real{}.Now)
	r := newRun(t, s)
	if _, err := s.Update(t.Context(), r.ID, func(w *runs.Run) error { w.Status = runs.Completed; return nil }); err == nil {
		t.Fatal("queued → completed was written")
	}
	held, err := s.Update(t.Context(), r.ID, func(w *runs.Run) error { w.Status, w.LeaseOwner = runs.Running, "a"; return nil })
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.UpdateLeased(t.Context(), held, "b", func(w *runs.Run) error { return nil }); !errors.Is(err, runs.ErrLeaseLost) {
		t.Fatalf("a write by a worker without the lease: %v", err)
	}
	// Someone else writes after the worker's copy: the worker's write starts over from the
	// stored run and keeps what the other wrote.
	if _, err := s.Update(t.Context(), r.ID, func(w *runs.Run) error { w.StopRequested = "enough"; return nil }); err != nil {
		t.Fatal(err)
	}
	got, err := s.UpdateLeased(t.Context(), held, "a", func(w *runs.Run) error {
		w.End(runs.Stopped, "stopped: test", time.Now())
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if got.Steps[0].Status != runs.StepSkipped || got.LeaseOwner != "" || got.EndedAt.IsZero() || got.StopRequested != "enough" {
		t.Fatalf("ended run %+v", got)
	}
	if _, err := s.Get(t.Context(), ids.New("run")); !errors.Is(err, runs.ErrNotFound) {
		t.Fatalf("missing run: %v", err)
	}
}

func TestRunsByDayCountsRunsAndFilteredEvents(t *testing.T) {
	t.Parallel()
	db, _ := testenv.Firestore(t)
	c := clock.NewFake(time.Date(2026, 11, 20, 10, 0, 0, 0, time.UTC))
	s := runs.NewStore(db, c.Now)
	for _, st := range []runs.Status{runs.Completed, runs.Failed} {
		r := &runs.Run{ID: ids.New("run"), AutomationID: "auto_x", Status: st, Trigger: "{}"}
		if err := s.Create(t.Context(), r); err != nil {
			t.Fatal(err)
		}
	}
	c.Advance(48 * time.Hour)
	if err := s.Create(t.Context(), &runs.Run{ID: ids.New("run"), AutomationID: "auto_x", Status: runs.Queued, Trigger: "{}"}); err != nil {
		t.Fatal(err)
	}
	if err := s.RecordFiltered(t.Context(), runs.FilteredEvent{AutomationID: "auto_x", DeliveryKey: "d1"}); err != nil {
		t.Fatal(err)
	}
	days, err := s.RunsByDay(t.Context(), "auto_x", c.Now().AddDate(0, 0, -6))
	if err != nil {
		t.Fatal(err)
	}
	if len(days) != 7 || days[0].Day != "2026-11-16" || days[6].Day != "2026-11-22" {
		t.Fatalf("days %v", days)
	}
	if d := days[4]; d.Completed != 1 || d.Failed != 1 {
		t.Fatalf("2026-11-20: %v", d)
	}
	if d := days[6]; d.Other != 1 || d.Filtered != 1 {
		t.Fatalf("2026-11-22: %v", d)
	}
	last, err := s.LastRun(t.Context(), "auto_x")
	if err != nil || last.GetStatus() != string(runs.Queued) {
		t.Fatalf("last run %v (%v)", last, err)
	}
}

func TestSecurityConcurrentDeliveriesOfOneBodyClaimItOnce(t *testing.T) {
	t.Parallel()
	db, _ := testenv.Firestore(t)
	s := runs.NewStore(db, time.Now)
	at := time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)
	keys := []string{"guid-1", "guid-forged-1", "guid-forged-2", "guid-forged-3"}
	earlier := make([]string, len(keys))
	errs := make([]error, len(keys))
	var wg sync.WaitGroup
	for i, key := range keys {
		wg.Go(func() { earlier[i], errs[i] = s.ClaimBody(t.Context(), "auto_x", "sha256:body", key, at, time.Hour) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	winners := 0
	for i, e := range earlier {
		if e == "" {
			winners++
		} else if !slices.Contains(keys, e) || e == keys[i] {
			t.Errorf("%s was told the body came first as %q", keys[i], e)
		}
	}
	if winners != 1 {
		t.Fatalf("claims answered %q: want exactly one delivery to claim the body", earlier)
	}
}

// A body's claim answers the delivery that first brought it within the window, for as long as
// the window runs from that delivery (a redelivery does not move it); past it, the next delivery
// claims the body afresh. Copies of one delivery arriving at once all pass.
func TestClaimBodyAnswersTheFirstDeliveryWithinItsWindow(t *testing.T) {
	t.Parallel()
	db, _ := testenv.Firestore(t)
	s := runs.NewStore(db, time.Now)
	start := time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		name, key string
		after     time.Duration
		want      string
	}{
		{"the first delivery claims the body", "guid-1", 0, ""},
		{"another delivery within the window is told the first", "guid-2", 10 * time.Minute, "guid-1"},
		{"a redelivery of the first passes", "guid-1", 50 * time.Minute, ""},
		{"the window still runs from the first", "guid-3", 59 * time.Minute, "guid-1"},
		{"past the window the next delivery claims it", "guid-4", 61 * time.Minute, ""},
		{"and is told to the deliveries after it", "guid-5", 90 * time.Minute, "guid-4"},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := s.ClaimBody(t.Context(), "auto_w", "sha256:body", c.key, start.Add(c.after), time.Hour)
			if err != nil || got != c.want {
				t.Fatalf("ClaimBody(%s) = %q, %v; want %q", c.key, got, err, c.want)
			}
		})
	}
	t.Run("copies of one delivery at once all pass", func(t *testing.T) {
		errs := make([]error, 4)
		earlier := make([]string, 4)
		var wg sync.WaitGroup
		for i := range errs {
			wg.Go(func() {
				earlier[i], errs[i] = s.ClaimBody(t.Context(), "auto_w", "sha256:other", "guid-copy", start, time.Hour)
			})
		}
		wg.Wait()
		if err := errors.Join(errs...); err != nil || slices.ContainsFunc(earlier, func(e string) bool { return e != "" }) {
			t.Fatalf("copies answered %q, %v; want every one to pass", earlier, err)
		}
	})
}

// Drops lists the events an entrypoint filter rejected with the drops, newest first, up to
// the limit; a dry run is neither the last run nor counted per day.
func TestDropsListFilteredEventsAndDryRunsAreNotTheLastRun(t *testing.T) {
	t.Parallel()
	db, _ := testenv.Firestore(t)
	c := clock.NewFake(time.Date(2026, 11, 20, 10, 0, 0, 0, time.UTC))
	s := runs.NewStore(db, c.Now)
	ctx := t.Context()
	real := &runs.Run{ID: ids.New("run"), AutomationID: "auto_x", Status: runs.Completed, Trigger: "{}"}
	if err := s.Create(ctx, real); err != nil {
		t.Fatal(err)
	}
	for i, step := range []func() error{
		func() error {
			return s.RecordDrop(ctx, runs.Drop{AutomationID: "auto_x", EventKey: "e", DeliveryKey: "d1", Reason: runs.DropDisabled})
		},
		func() error {
			return s.RecordFiltered(ctx, runs.FilteredEvent{AutomationID: "auto_x", EntrypointID: "on", EventKey: "e", DeliveryKey: "d2"})
		},
		func() error {
			return s.RecordDrop(ctx, runs.Drop{AutomationID: "auto_x", EventKey: "e", DeliveryKey: "d3", Reason: runs.DropConcurrency})
		},
		func() error {
			return s.Create(ctx, &runs.Run{ID: ids.New("run"), AutomationID: "auto_x", Status: runs.Failed, DryRun: true, Trigger: "{}"})
		},
	} {
		c.Advance(time.Minute)
		if err := step(); err != nil {
			t.Fatalf("step %d: %v", i, err)
		}
	}
	for _, tc := range []struct {
		limit int
		want  []string
	}{
		{3, []string{"d3", "d2", "d1"}},
		{2, []string{"d3", "d2"}},
	} {
		drops, err := s.Drops(ctx, "auto_x", tc.limit)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, d := range drops {
			got = append(got, d.DeliveryKey)
		}
		if !slices.Equal(got, tc.want) || drops[1].Reason != runs.DropFiltered || drops[1].EntrypointID != "on" || drops[1].EventKey != "e" {
			t.Fatalf("Drops(limit %d) = %+v, want %v with d2 filtered", tc.limit, drops, tc.want)
		}
	}
	last, err := s.LastRun(ctx, "auto_x")
	if err != nil || last.GetId() != real.ID {
		t.Fatalf("last run %v (%v), want %s, not the dry run", last, err, real.ID)
	}
	days, err := s.RunsByDay(ctx, "auto_x", c.Now())
	if err != nil {
		t.Fatal(err)
	}
	if d := days[0]; d.Completed != 1 || d.Failed != 0 {
		t.Fatalf("day %v, want the completed run alone", d)
	}
}
