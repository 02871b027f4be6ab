package fleet_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/hangar-dev/hangar/internal/testenv"
	"github.com/hangar-dev/hangar/platform/clock"
	"github.com/hangar-dev/hangar/records/fleet"
)

func TestPickPlacesOnTheEmptiestLiveHost(t *testing.T) {
	db, _ := testenv.Firestore(t)
	clk := clock.NewFake(time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC))
	f := fleet.New(db, clk.Now, 15*time.Second)
	ctx := context.Background()
	if _, err := pick(t, f); !errors.Is(err, fleet.ErrNoHost) {
		t.Fatalf("empty fleet: %v", err)
	}
	for _, h := range []fleet.Host{
		{ID: "full", Address: "http://a", MaxSandboxes: 2},
		{ID: "busy", Address: "http://b", MaxSandboxes: 10},
		{ID: "quiet", Address: "http://c", MaxSandboxes: 10},
		{ID: "no-memory", Address: "http://d", MaxSandboxes: 10, MemoryCapacityBytes: 8 << 30},
	} {
		if _, err := f.Register(ctx, h); err != nil {
			t.Fatal(err)
		}
	}
	for id, load := range map[string]fleet.Load{
		"full": {Sandboxes: 2}, "busy": {Sandboxes: 6}, "quiet": {Sandboxes: 3},
		// Emptiest by slots, but its sandboxes' memory limits fill its capacity.
		"no-memory": {Sandboxes: 1, MemoryReservedBytes: 8 << 30},
	} {
		if _, err := f.Heartbeat(ctx, id, load); err != nil {
			t.Fatal(err)
		}
	}
	if h, err := pick(t, f); err != nil || h.ID != "quiet" {
		t.Fatalf("pick: %+v, %v", h, err)
	}
	if _, err := f.Move(ctx, "quiet", fleet.Draining, nil); err != nil {
		t.Fatal(err)
	}
	if h, err := pick(t, f); err != nil || h.ID != "busy" {
		t.Fatalf("pick with quiet draining: %+v, %v", h, err)
	}

	clk.Advance(10 * time.Second)
	if _, err := f.Heartbeat(ctx, "full", fleet.Load{Sandboxes: 2}); err != nil {
		t.Fatal(err)
	}
	clk.Advance(10 * time.Second)
	if _, err := pick(t, f); !errors.Is(err, fleet.ErrNoHost) {
		t.Fatalf("only a full host alive: %v", err)
	}
	lost, err := f.Lost(ctx)
	if err != nil || len(lost) != 3 {
		t.Fatalf("lost: %v, %v", lost, err)
	}
	if _, err := f.Get(ctx, "nope"); !errors.Is(err, fleet.ErrNotFound) {
		t.Fatalf("get missing: %v", err)
	}
}

// pick is how placements use the fleet: list it, then take the first candidate.
func pick(t *testing.T, f *fleet.Fleet) (*fleet.Host, error) {
	t.Helper()
	hosts, err := f.List(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	c, err := f.Candidates(hosts)
	if err != nil {
		return nil, err
	}
	return c[0], nil
}

func TestCandidatesRankByFreeCapacityAndSkipHostsThatTakeNoSessions(t *testing.T) {
	db, _ := testenv.Firestore(t)
	f := fleet.New(db, time.Now, time.Minute)
	ctx := context.Background()
	for _, h := range []fleet.Host{
		{ID: "half", MaxSandboxes: 4}, {ID: "empty", MaxSandboxes: 4}, {ID: "cordoned", MaxSandboxes: 4},
		{ID: "quarter", MaxSandboxes: 4}, {ID: "tight-memory", MaxSandboxes: 4, MemoryCapacityBytes: 4 << 30},
	} {
		if _, err := f.Register(ctx, h); err != nil {
			t.Fatal(err)
		}
	}
	for id, load := range map[string]fleet.Load{
		"half": {Sandboxes: 2}, "quarter": {Sandboxes: 3}, "tight-memory": {Sandboxes: 0, MemoryReservedBytes: 3 << 30},
	} {
		if _, err := f.Heartbeat(ctx, id, load); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := f.Move(ctx, "cordoned", fleet.Cordoned, nil); err != nil {
		t.Fatal(err)
	}
	hosts, err := f.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	c, err := f.Candidates(hosts)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, h := range c {
		got = append(got, h.ID)
	}
	if want := []string{"empty", "tight-memory", "half", "quarter"}; !slices.Equal(got, want) {
		t.Errorf("candidates %v, want %v", got, want)
	}
}

func TestHostStateMovesFollowTheTable(t *testing.T) {
	db, _ := testenv.Firestore(t)
	f := fleet.New(db, time.Now, time.Minute)
	ctx := context.Background()
	if _, err := f.Register(ctx, fleet.Host{ID: "h", MaxSandboxes: 1}); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		to   fleet.State
		want bool
	}{
		{fleet.Cordoned, true},
		{fleet.Cordoned, true}, // staying put is a no-op
		{fleet.Drained, false},
		{fleet.Draining, true},
		{fleet.Drained, true},
		{fleet.Lost, false},
		{fleet.Ready, true},
		{fleet.Lost, true},
		{fleet.Cordoned, false},
	} {
		_, err := f.Move(ctx, "h", c.to, nil)
		var me *fleet.MoveError
		if c.want && err != nil || !c.want && !errors.As(err, &me) {
			t.Fatalf("move to %s: %v, want allowed=%v", c.to, err, c.want)
		}
	}
	if _, err := f.Move(ctx, "nope", fleet.Cordoned, nil); !errors.Is(err, fleet.ErrNotFound) {
		t.Errorf("move of a missing host: %v", err)
	}
}

func TestACordonOutlivesARestartButOtherStatesDoNot(t *testing.T) {
	db, _ := testenv.Firestore(t)
	f := fleet.New(db, time.Now, time.Minute)
	ctx := context.Background()
	for _, c := range []struct {
		before, after fleet.State
	}{{fleet.Cordoned, fleet.Cordoned}, {fleet.Draining, fleet.Ready}, {fleet.Lost, fleet.Ready}} {
		id := "h-" + string(c.before)
		if _, err := f.Register(ctx, fleet.Host{ID: id}); err != nil {
			t.Fatal(err)
		}
		if _, err := f.Move(ctx, id, c.before, nil); err != nil {
			t.Fatal(err)
		}
		got, err := f.Register(ctx, fleet.Host{ID: id})
		if err != nil || got != c.after {
			t.Errorf("restart of a %s host: %s, %v; want %s", c.before, got, err, c.after)
		}
	}
}
