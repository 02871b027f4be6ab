package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"connectrpc.com/connect"

	appv1 "github.com/hangar-dev/hangar/gen/svc/app/v1"
	"github.com/hangar-dev/hangar/internal/testenv"
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
	wrote := s.listEvents(t, id)
	after := wrote[len(wrote)-1].GetIdx()

	// A checkpoint taken after the write, whose events cursor covers it.
	var snapshotID string
	until(t, func() (bool, string) {
		for _, e := range s.listEvents(t, id, "snapshot.taken") {
			var p struct {
				SnapshotID   string `json:"snapshot_id"`
				EventsCursor int64  `json:"events_cursor"`
			}
			_ = json.Unmarshal([]byte(e.GetPayloadJson()), &p)
			if p.EventsCursor >= after {
				snapshotID = p.SnapshotID
				return true, ""
			}
		}
		return false, fmt.Sprintf("no checkpoint after event %d", after)
	})

	got, err := s.svc.GetSession(ctx, connect.NewRequest(&appv1.GetSessionRequest{SessionId: id}))
	if err != nil {
		t.Fatal(err)
	}
	dead := got.Msg.GetSession().GetHostId()
	for _, h := range s.hosts {
		if h.ID() == dead {
			h.Kill(t)
		}
	}
	s.waitStatus(t, id, "lost", 3*s.sb.Config.Host.HostTimeout)
	res, err := s.svc.Resume(ctx, connect.NewRequest(&appv1.ResumeRequest{SessionId: id}))
	if err != nil {
		t.Fatal(err)
	}
	if res.Msg.GetSnapshotId() == "" {
		t.Fatalf("resumed from nothing, want a periodic checkpoint such as %s", snapshotID)
	}
	if out := s.sh(t, id, "cat /root/kept"); out != "periodic\n" {
		t.Fatalf("after the host's crash the file is %q, want what the periodic checkpoint kept", out)
	}
}
