package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	"connectrpc.com/connect"

	appv1 "github.com/hangar-dev/hangar/gen/svc/app/v1"
	"github.com/hangar-dev/hangar/internal/testenv"
	"github.com/hangar-dev/hangar/internal/testkit"
)

// TestSecurityABusySessionIsCheckpointedPeriodicallySoItsHostsCrashLosesABoundedWindow: a
// session that changed is checkpointed by its host once CheckpointInterval passes, with nobody
// asking, and resumes from that checkpoint on another host after its own dies uncheckpointed.
func TestSecurityABusySessionIsCheckpointedPeriodicallySoItsHostsCrashLosesABoundedWindow(t *testing.T) {
	s := newSandboxStack(t, 2, func(sb *testenv.Sandboxes) {
		sb.Config.Host.CheckpointInterval = 500 * time.Millisecond
	})
	ctx := context.Background()
	id := s.create(t, nil)
	s.sh(t, id, "echo periodic > /root/kept")
	wrote := time.Now().Truncate(time.Millisecond)

	// A checkpoint begun after the write: nobody asks for it.
	testkit.Eventually(t, 2*time.Minute, "a periodic checkpoint", func() (bool, string) {
		cow, err := s.svc.GetCowState(ctx, connect.NewRequest(&appv1.GetCowStateRequest{SessionId: id}))
		if err != nil {
			t.Fatal(err)
		}
		at, err := time.Parse(time.RFC3339Nano, cow.Msg.GetState().GetLastSnapshotAt())
		return err == nil && !at.Before(wrote), fmt.Sprintf("last checkpoint at %q, want one after %s", cow.Msg.GetState().GetLastSnapshotAt(), wrote)
	})

	s.killHostOf(t, id)
	res, err := s.svc.Resume(ctx, connect.NewRequest(&appv1.ResumeRequest{SessionId: id}))
	if err != nil {
		t.Fatal(err)
	}
	if res.Msg.GetSnapshotId() == "" {
		t.Fatal("resumed from nothing, want the periodic checkpoint")
	}
	if out := s.sh(t, id, "cat /root/kept"); out != "periodic\n" {
		t.Fatalf("after the host's crash the file is %q, want what the periodic checkpoint kept", out)
	}
}
