package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"gocloud.dev/blob"

	appv1 "github.com/hangar-dev/hangar/gen/svc/app/v1"
	"github.com/hangar-dev/hangar/internal/testenv"
	"github.com/hangar-dev/hangar/records/fleet"
	"github.com/hangar-dev/hangar/records/sessiondb"
	"github.com/hangar-dev/hangar/sandboxhosts/snapshots"
)

// seedTree makes files of several kinds the snapshots must carry: modes, a symlink, a hardlink,
// an empty dir, a deleted image file and a file large enough to be cut into several chunks.
func seedTree(t testing.TB, s *sandboxStack, id string) {
	t.Helper()
	s.sh(t, id, `mkdir -p /work/src/empty /work/bin && cd /work &&
		echo hello > src/a.txt && printf 'x%.0s' $(seq 1 5000) > src/b.txt &&
		printf '#!/bin/sh\necho tool\n' > bin/tool && chmod 750 bin/tool && chmod 600 src/a.txt &&
		ln -s ../src/a.txt bin/link && ln src/b.txt src/b-hard.txt &&
		dd if=/dev/urandom of=src/blob bs=1M count=3 2>/dev/null && rm /etc/motd`)
}

func TestSnapshotEvictResumeKeepsEveryFileFiftyTimes(t *testing.T) {
	s := newSandboxStack(t, 1, nil)
	ctx := context.Background()
	id := s.create(t, nil)
	seedTree(t, s, id)
	for i := range 50 {
		s.sh(t, id, fmt.Sprintf("echo cycle %d >> /work/src/log && echo %d > /work/src/cycle-%d", i, i, i%5))
		want := s.fileSums(t, id, "/work", "/etc")
		snap, err := s.svc.Snapshot(ctx, connect.NewRequest(&appv1.SnapshotRequest{SessionId: id}))
		if err != nil {
			t.Fatalf("cycle %d: snapshot: %v", i, err)
		}
		if _, err := s.svc.EvictLocal(ctx, connect.NewRequest(&appv1.EvictLocalRequest{SessionId: id})); err != nil {
			t.Fatalf("cycle %d: evict: %v", i, err)
		}
		if got := s.status(t, id); got != "evicted" {
			t.Fatalf("cycle %d: evicted session is %q", i, got)
		}
		res, err := s.svc.Resume(ctx, connect.NewRequest(&appv1.ResumeRequest{SessionId: id}))
		if err != nil {
			t.Fatalf("cycle %d: resume: %v", i, err)
		}
		if res.Msg.GetSnapshotId() != snap.Msg.GetSnapshotId() {
			t.Fatalf("cycle %d: resumed %s, want the latest checkpoint %s", i, res.Msg.GetSnapshotId(), snap.Msg.GetSnapshotId())
		}
		if i == 0 {
			cow, err := s.svc.GetCowState(ctx, connect.NewRequest(&appv1.GetCowStateRequest{SessionId: id}))
			if err != nil || cow.Msg.GetState().GetDirtyChunks() != 0 {
				t.Fatalf("a resumed session should start clean on its checkpoint: %v, %v", cow, err)
			}
		}
		if got := s.fileSums(t, id, "/work", "/etc"); got != want {
			t.Fatalf("cycle %d: files differ after resume\nbefore:\n%s\nafter:\n%s", i, want, got)
		}
	}
	if out := s.sh(t, id, "/work/bin/tool && cat /work/bin/link && test ! -e /etc/motd && echo motd-gone"); out != "tool\nhello\nmotd-gone\n" {
		t.Fatalf("after fifty cycles: %q", out)
	}
	cps, err := s.svc.ListCheckpoints(ctx, connect.NewRequest(&appv1.ListCheckpointsRequest{SessionId: id}))
	if err != nil {
		t.Fatal(err)
	}
	if n := len(cps.Msg.GetCheckpoints()); n != 50 || !cps.Msg.GetCheckpoints()[0].GetIsLatest() || cps.Msg.GetCheckpoints()[1].GetIsLatest() {
		t.Fatalf("%d checkpoints, latest first? %v", n, cps.Msg.GetCheckpoints()[:2])
	}
}

func TestSecondSnapshotUploadsOnlyChangedChunks(t *testing.T) {
	s := newSandboxStack(t, 1, nil)
	ctx := context.Background()
	id := s.create(t, nil)
	seedTree(t, s, id)
	s.sh(t, id, "dd if=/dev/urandom of=/work/big bs=1M count=16 2>/dev/null")
	if _, err := s.svc.Snapshot(ctx, connect.NewRequest(&appv1.SnapshotRequest{SessionId: id})); err != nil {
		t.Fatal(err)
	}
	cow, err := s.svc.GetCowState(ctx, connect.NewRequest(&appv1.GetCowStateRequest{SessionId: id}))
	if err != nil {
		t.Fatal(err)
	}
	if st := cow.Msg.GetState(); st.GetDirtyBytes() != 0 || st.GetDiskManifestVersion() != 1 || st.GetBaseChunks() == 0 || st.GetBaseChunksLocal() != st.GetBaseChunks() {
		t.Fatalf("cow state after the first snapshot: %v", st)
	}
	s.sh(t, id, "echo changed >> /work/src/a.txt")
	cow, err = s.svc.GetCowState(ctx, connect.NewRequest(&appv1.GetCowStateRequest{SessionId: id}))
	if err != nil {
		t.Fatal(err)
	}
	if st := cow.Msg.GetState(); st.GetDirtyChunks() != 1 || st.GetDirtyBytes() != uint64(len("hello\nchanged\n")) {
		t.Fatalf("cow state after one small change: %v", st)
	}
	if _, err := s.svc.Snapshot(ctx, connect.NewRequest(&appv1.SnapshotRequest{SessionId: id})); err != nil {
		t.Fatal(err)
	}
	taken := s.listEvents(t, id, "snapshot.taken")
	if len(taken) != 2 {
		t.Fatalf("%d snapshot.taken events, want 2", len(taken))
	}
	var first, second struct {
		Chunks         int   `json:"chunks"`
		ChunksUploaded int   `json:"chunks_uploaded"`
		BytesUploaded  int64 `json:"bytes_uploaded"`
		Version        int64 `json:"version"`
	}
	_ = json.Unmarshal([]byte(taken[0].GetPayloadJson()), &first)
	_ = json.Unmarshal([]byte(taken[1].GetPayloadJson()), &second)
	if first.ChunksUploaded < 10 || second.ChunksUploaded != 1 || second.BytesUploaded != int64(len("hello\nchanged\n")) || second.Version != 2 {
		t.Fatalf("first snapshot %+v, second %+v: the second should upload only the changed file's chunk", first, second)
	}
}

func TestEvictLocalNeedsACheckpointAndMovesAreChecked(t *testing.T) {
	s := newSandboxStack(t, 1, nil)
	ctx := context.Background()
	id := s.create(t, nil)
	// An exec first, so that the API has the running session's record fresh in hand when the
	// calls after the eviction come: they must still see the eviction.
	s.sh(t, id, "true")
	_, err := s.svc.EvictLocal(ctx, connect.NewRequest(&appv1.EvictLocalRequest{SessionId: id}))
	testenv.WantCode(t, err, connect.CodeFailedPrecondition)
	// EvictIdle leaves a busy session alone and says so.
	idle, err := s.svc.EvictIdle(ctx, connect.NewRequest(&appv1.EvictIdleRequest{SessionId: id}))
	if err != nil || idle.Msg.GetStatus() != "running" {
		t.Fatalf("EvictIdle of a running session = %v, %v", idle, err)
	}
	if _, err := s.svc.Snapshot(ctx, connect.NewRequest(&appv1.SnapshotRequest{SessionId: id})); err != nil {
		t.Fatal(err)
	}
	if _, err := s.svc.EvictLocal(ctx, connect.NewRequest(&appv1.EvictLocalRequest{SessionId: id})); err != nil {
		t.Fatal(err)
	}
	// An evicted session has no sandbox: exec is refused unless it asks to wake it.
	_, err = collectExec(ctx, s.svc, &appv1.ExecRequest{SessionId: id, Command: ptr("true")})
	testenv.WantCode(t, err, connect.CodeFailedPrecondition)
	_, err = s.svc.Snapshot(ctx, connect.NewRequest(&appv1.SnapshotRequest{SessionId: id}))
	testenv.WantCode(t, err, connect.CodeFailedPrecondition)
	res := s.exec(t, &appv1.ExecRequest{SessionId: id, Command: ptr("echo awake"), Wake: ptr(true)})
	if res.stdout != "awake\n" || s.status(t, id) != "running" {
		t.Fatalf("wake: %+v, status %s", res, s.status(t, id))
	}
	statuses := []string{}
	for _, e := range s.listEvents(t, id, "session.status") {
		var p struct{ To string }
		_ = json.Unmarshal([]byte(e.GetPayloadJson()), &p)
		statuses = append(statuses, p.To)
	}
	want := "running snapshotting running evicted running"
	if got := strings.Join(statuses, " "); got != want {
		t.Fatalf("status events %q, want %q", got, want)
	}
}

func TestIdleSessionsAreEvictedAndWokenByTheHost(t *testing.T) {
	s := newSandboxStack(t, 1, func(sb *testenv.Sandboxes) {
		sb.Config.Host.IdleAfter = 300 * time.Millisecond
		sb.Config.Host.EvictIdleAfter = 900 * time.Millisecond
	})
	id := s.create(t, nil)
	s.sh(t, id, "echo kept > /root/note")
	s.waitStatus(t, id, "idle", 10*time.Second)
	s.waitStatus(t, id, "evicted", 10*time.Second)
	res := s.exec(t, &appv1.ExecRequest{SessionId: id, Command: ptr("cat /root/note"), Wake: ptr(true)})
	if res.stdout != "kept\n" {
		t.Fatalf("after idle eviction and wake: %+v", res)
	}
}

func TestKilledHostLeavesItsSessionsRecoverableElsewhere(t *testing.T) {
	s := newSandboxStack(t, 2, nil)
	ctx := context.Background()
	id := s.create(t, nil)
	s.sh(t, id, "echo checkpointed > /root/kept")
	if _, err := s.svc.Snapshot(ctx, connect.NewRequest(&appv1.SnapshotRequest{SessionId: id})); err != nil {
		t.Fatal(err)
	}
	s.sh(t, id, "echo after > /root/lost-with-host")
	dead := s.killHostOf(t, id)
	res, err := s.svc.Resume(ctx, connect.NewRequest(&appv1.ResumeRequest{SessionId: id}))
	if err != nil {
		hosts, _ := fleet.New(s.sb.DB, time.Now, time.Second).List(ctx)
		for _, h := range hosts {
			t.Logf("host %+v (now %v)", *h, time.Now().UTC())
		}
		t.Fatal(err)
	}
	got, err := s.svc.GetSession(ctx, connect.NewRequest(&appv1.GetSessionRequest{SessionId: id}))
	if err != nil {
		t.Fatal(err)
	}
	if got.Msg.GetSession().GetHostId() == dead || got.Msg.GetSession().GetStatus() != "running" || res.Msg.GetSnapshotId() == "" {
		t.Fatalf("resumed on %s (dead: %s), status %s, from %q", got.Msg.GetSession().GetHostId(), dead, got.Msg.GetSession().GetStatus(), res.Msg.GetSnapshotId())
	}
	if out := s.sh(t, id, "cat /root/kept; test -e /root/lost-with-host && echo survived || echo gone"); out != "checkpointed\ngone\n" {
		t.Fatalf("after resume elsewhere: %q", out)
	}
}

func TestSessionPlacedButNeverStartedIsNotStuck(t *testing.T) {
	s := newSandboxStack(t, 1, nil)
	ctx := context.Background()
	admin, err := s.api.Users().EnsureHuman(ctx, "admin@example.com", "", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	// A function placed this session on host-a two minutes ago and died before asking the host
	// to start it.
	twoMinutesAgo := func() time.Time { return time.Now().Add(-2 * time.Minute) }
	_, err = sessiondb.NewStore(s.sb.DB, twoMinutesAgo).Create(ctx, &sessiondb.Record{
		ID: "orphan-1", Owner: admin.ID, Status: sessiondb.Creating, HostID: "host-a", ImageURI: s.sb.Image, Mode: "sandbox",
	}, 0)
	if err != nil {
		t.Fatal(err)
	}
	s.waitStatus(t, "orphan-1", "lost", 10*time.Second)
	res, err := s.svc.Resume(ctx, connect.NewRequest(&appv1.ResumeRequest{SessionId: "orphan-1"}))
	if err != nil {
		t.Fatal(err)
	}
	if res.Msg.GetSnapshotId() != "" || s.status(t, "orphan-1") != "running" {
		t.Fatalf("resume of a never-started session: %v, status %s", res.Msg, s.status(t, "orphan-1"))
	}
}

func TestDeleteSessionDropsItsCheckpointsAndArtifacts(t *testing.T) {
	s := newSandboxStack(t, 1, nil)
	ctx := context.Background()
	id := s.create(t, nil)
	s.sh(t, id, "echo report > /root/report.txt")
	if _, err := s.svc.Snapshot(ctx, connect.NewRequest(&appv1.SnapshotRequest{SessionId: id})); err != nil {
		t.Fatal(err)
	}
	if _, err := s.svc.CreateArtifactFromPath(ctx, connect.NewRequest(&appv1.CreateArtifactFromPathRequest{SessionId: id, Path: "/root/report.txt"})); err != nil {
		t.Fatal(err)
	}
	if _, err := s.svc.EvictLocal(ctx, connect.NewRequest(&appv1.EvictLocalRequest{SessionId: id})); err != nil {
		t.Fatal(err)
	}
	snaps := snapshots.NewStore(s.sb.Bucket, t.TempDir(), snapshots.Options{})
	if list, err := snaps.List(ctx, id); err != nil || len(list) != 1 {
		t.Fatalf("checkpoints before delete: %v, %v", list, err)
	}
	if _, err := s.svc.DeleteSession(ctx, connect.NewRequest(&appv1.DeleteSessionRequest{SessionId: id})); err != nil {
		t.Fatal(err)
	}
	if list, err := snaps.List(ctx, id); err != nil || len(list) != 0 {
		t.Fatalf("checkpoints after delete: %v, %v", list, err)
	}
	left, err := s.sb.Bucket.List(&blob.ListOptions{Prefix: sessiondb.ArtifactPrefix(id)}).Next(ctx)
	if !errors.Is(err, io.EOF) {
		t.Fatalf("artifact left after delete: %v, %v", left, err)
	}
}
