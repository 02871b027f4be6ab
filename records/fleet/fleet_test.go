package fleet_test

import (
	"context"
	"errors"
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
		if err := f.Register(ctx, h); err != nil {
			t.Fatal(err)
		}
	}
	for id, load := range map[string]fleet.Load{
		"full": {Sandboxes: 2}, "busy": {Sandboxes: 6}, "quiet": {Sandboxes: 3},
		// Emptiest by slots, but its sandboxes' memory limits fill its capacity.
		"no-memory": {Sandboxes: 1, MemoryReservedBytes: 8 << 30},
	} {
		if err := f.Heartbeat(ctx, id, load); err != nil {
			t.Fatal(err)
		}
	}
	if h, err := pick(t, f); err != nil || h.ID != "quiet" {
		t.Fatalf("pick: %+v, %v", h, err)
	}
	if err := f.SetState(ctx, "quiet", fleet.Draining); err != nil {
		t.Fatal(err)
	}
	if h, err := pick(t, f); err != nil || h.ID != "busy" {
		t.Fatalf("pick with quiet draining: %+v, %v", h, err)
	}

	clk.Advance(10 * time.Second)
	if err := f.Heartbeat(ctx, "full", fleet.Load{Sandboxes: 2}); err != nil {
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

// pick is how placements use the fleet: list it, then choose.
func pick(t *testing.T, f *fleet.Fleet) (*fleet.Host, error) {
	t.Helper()
	hosts, err := f.List(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return f.Choose(hosts)
}
