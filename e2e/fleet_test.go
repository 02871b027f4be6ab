package e2e

import (
	"bytes"
	"context"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"connectrpc.com/connect"

	appv1 "github.com/hangar-dev/hangar/gen/svc/app/v1"
	"github.com/hangar-dev/hangar/gen/svc/app/v1/appv1connect"
	"github.com/hangar-dev/hangar/internal/testenv"
	"github.com/hangar-dev/hangar/internal/testkit"
	"github.com/hangar-dev/hangar/platform/auth"
)

// fleet is a FleetService client with key.
func (s *stack) fleet(key string) appv1connect.FleetServiceClient {
	return appv1connect.NewFleetServiceClient(httpClient, s.rpcURL(), auth.WithKey(key))
}

// hostOf is the host a session is placed on.
func (s *sandboxStack) hostOf(t testing.TB, session string) string {
	t.Helper()
	got, err := s.svc.GetSession(context.Background(), connect.NewRequest(&appv1.GetSessionRequest{SessionId: session}))
	if err != nil {
		t.Fatal(err)
	}
	return got.Msg.GetSession().GetHostId()
}

// waitFleetJob polls a drain or evacuation until it ends.
func (s *sandboxStack) waitFleetJob(t testing.TB, id string) *appv1.FleetJob {
	t.Helper()
	var job *appv1.FleetJob
	testkit.Eventually(t, 3*time.Minute, "fleet job "+id+" ends", func() (bool, string) {
		resp, err := s.fleet(s.admin).GetFleetJob(context.Background(), connect.NewRequest(&appv1.GetFleetJobRequest{JobId: id}))
		if err != nil {
			t.Fatal(err)
		}
		job = resp.Msg.GetJob()
		return job.GetState() != "running", job.String()
	})
	return job
}

func TestFleetServiceIsForAdminsOnly(t *testing.T) {
	s := newSessionsStack(t)
	user := s.fleet(s.mintKey(t, "dev@example.com", false))
	ctx := context.Background()
	for _, c := range []struct {
		name string
		call func() error
	}{
		{"ListHosts", func() error { _, err := user.ListHosts(ctx, connect.NewRequest(&appv1.ListHostsRequest{})); return err }},
		{"GetHost", func() error {
			_, err := user.GetHost(ctx, connect.NewRequest(&appv1.GetHostRequest{HostId: "h"}))
			return err
		}},
		{"CordonHost", func() error {
			_, err := user.CordonHost(ctx, connect.NewRequest(&appv1.CordonHostRequest{HostId: "h"}))
			return err
		}},
		{"UncordonHost", func() error {
			_, err := user.UncordonHost(ctx, connect.NewRequest(&appv1.UncordonHostRequest{HostId: "h"}))
			return err
		}},
		{"DrainHost", func() error {
			_, err := user.DrainHost(ctx, connect.NewRequest(&appv1.DrainHostRequest{HostId: "h"}))
			return err
		}},
		{"EvacuateHost", func() error {
			_, err := user.EvacuateHost(ctx, connect.NewRequest(&appv1.EvacuateHostRequest{HostId: "h"}))
			return err
		}},
		{"GetFleetJob", func() error {
			_, err := user.GetFleetJob(ctx, connect.NewRequest(&appv1.GetFleetJobRequest{JobId: "fjob_x"}))
			return err
		}},
	} {
		t.Run(c.name, func(t *testing.T) { testenv.WantCode(t, c.call(), connect.CodePermissionDenied) })
	}
	// An admin is let through, to the answers of an empty fleet.
	admin := s.fleet(s.admin)
	resp, err := admin.ListHosts(ctx, connect.NewRequest(&appv1.ListHostsRequest{}))
	if err != nil || len(resp.Msg.GetHosts()) != 0 {
		t.Fatalf("admin ListHosts of no hosts: %v, %v", resp, err)
	}
	_, err = admin.GetHost(ctx, connect.NewRequest(&appv1.GetHostRequest{HostId: "nope"}))
	testenv.WantCode(t, err, connect.CodeNotFound)
	_, err = admin.CordonHost(ctx, connect.NewRequest(&appv1.CordonHostRequest{}))
	testenv.WantCode(t, err, connect.CodeInvalidArgument)
}

func TestACordonedHostGetsNoNewSessionsAndKeepsItsOwn(t *testing.T) {
	s := newSandboxStack(t, 2, func(sb *testenv.Sandboxes) { sb.Config.Limits.MaxSessionsPerUser = 100 })
	ctx := context.Background()
	fl := s.fleet(s.admin)
	kept := s.create(t, nil)
	cordoned := s.hostOf(t, kept)
	resp, err := fl.CordonHost(ctx, connect.NewRequest(&appv1.CordonHostRequest{HostId: cordoned}))
	if err != nil || resp.Msg.GetHost().GetState() != "cordoned" {
		t.Fatalf("cordon %s: %v, %v", cordoned, resp, err)
	}
	for range 4 {
		if id := s.create(t, nil); s.hostOf(t, id) == cordoned {
			t.Fatalf("session %s was placed on cordoned host %s", id, cordoned)
		}
	}
	if got := s.sh(t, kept, "echo still here"); got != "still here\n" {
		t.Errorf("the cordoned host's session answered %q", got)
	}
	got, err := fl.GetHost(ctx, connect.NewRequest(&appv1.GetHostRequest{HostId: cordoned}))
	if err != nil {
		t.Fatal(err)
	}
	if h := got.Msg.GetHost(); h.GetState() != "cordoned" || h.GetSessionsByState()["running"] != 1 || h.GetCapacity().GetSandboxes() == 0 || h.GetAddress() == "" {
		t.Errorf("GetHost of the cordoned host: %v", h)
	}
	if _, err := fl.UncordonHost(ctx, connect.NewRequest(&appv1.UncordonHostRequest{HostId: cordoned})); err != nil {
		t.Fatal(err)
	}
	// Uncordoned, it is the emptier host again and takes new sessions once the fleet's
	// heartbeat counts say so.
	testkit.Eventually(t, time.Minute, "a new session on the uncordoned host", func() (bool, string) {
		got := s.hostOf(t, s.create(t, nil))
		return got == cordoned, "placed on " + got
	})
}

func TestPlacementPassesARefusedSandboxToTheNextHost(t *testing.T) {
	var refused atomic.Int32
	// host-a answers CreateSandbox and Resume as a full host does; it ranks first, as both hosts
	// are empty and host-a lists first.
	s := newSandboxStack(t, 2, func(sb *testenv.Sandboxes) {
		sb.WrapHost = func(id string, next http.Handler) http.Handler {
			return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if id == "host-a" && (strings.HasSuffix(r.URL.Path, "/CreateSandbox") || strings.HasSuffix(r.URL.Path, "/Resume")) {
					refused.Add(1)
					w.Header().Set("Content-Type", "application/json")
					w.WriteHeader(http.StatusTooManyRequests)
					_, _ = w.Write([]byte(`{"code":"resource_exhausted","message":"host host-a holds its most sandboxes (1); retry to be placed elsewhere"}`))
					return
				}
				next.ServeHTTP(w, r)
			})
		}
	})
	ctx := context.Background()
	id := s.create(t, nil)
	if refused.Load() == 0 {
		t.Fatal("host-a was never asked: the test did not exercise a refusal")
	}
	if got := s.hostOf(t, id); got != "host-b" {
		t.Fatalf("session placed on %s, want host-b after host-a refused", got)
	}
	body := []byte("placed after a refusal\n")
	s.write(t, id, "/data/note.txt", body, nil)
	if _, err := s.svc.Snapshot(ctx, connect.NewRequest(&appv1.SnapshotRequest{SessionId: id})); err != nil {
		t.Fatal(err)
	}
	if _, err := s.svc.EvictLocal(ctx, connect.NewRequest(&appv1.EvictLocalRequest{SessionId: id})); err != nil {
		t.Fatal(err)
	}
	before := refused.Load()
	if _, err := s.svc.Resume(ctx, connect.NewRequest(&appv1.ResumeRequest{SessionId: id})); err != nil {
		t.Fatalf("resume with host-a refusing: %v", err)
	}
	if refused.Load() == before {
		t.Error("resume did not try host-a first")
	}
	if got, _ := s.read(t, id, "/data/note.txt"); !bytes.Equal(got, body) {
		t.Errorf("after resume elsewhere the file is %q", got)
	}
}

func TestDrainMovesEverySessionToTheOtherHostWithItsFiles(t *testing.T) {
	s := newSandboxStack(t, 2, func(sb *testenv.Sandboxes) { sb.Config.Limits.MaxSessionsPerUser = 100 })
	ctx := context.Background()
	fl := s.fleet(s.admin)
	// Both sessions on host-a: host-b cordoned while they are made.
	if _, err := fl.CordonHost(ctx, connect.NewRequest(&appv1.CordonHostRequest{HostId: "host-b"})); err != nil {
		t.Fatal(err)
	}
	bodies := map[string][]byte{}
	for i := range 2 {
		id := s.create(t, nil)
		if got := s.hostOf(t, id); got != "host-a" {
			t.Fatalf("session %d on %s with host-b cordoned", i, got)
		}
		bodies[id] = bytes.Repeat([]byte(id+" moves with its host's drain\n"), 20_000)
		s.write(t, id, "/data/work.txt", bodies[id], nil)
	}
	if _, err := fl.UncordonHost(ctx, connect.NewRequest(&appv1.UncordonHostRequest{HostId: "host-b"})); err != nil {
		t.Fatal(err)
	}
	resp, err := fl.DrainHost(ctx, connect.NewRequest(&appv1.DrainHostRequest{HostId: "host-a"}))
	if err != nil {
		t.Fatal(err)
	}
	job := s.waitFleetJob(t, resp.Msg.GetJob().GetId())
	if job.GetState() != "succeeded" || job.GetTotal() != 2 || job.GetMoved() != 2 || job.GetFailed() != 0 {
		t.Fatalf("drain job: %v", job)
	}
	for id, body := range bodies {
		if got := s.hostOf(t, id); got != "host-b" {
			t.Errorf("session %s is on %s after the drain", id, got)
		}
		got, meta := s.read(t, id, "/data/work.txt")
		if sum(got) != sum(body) || meta.GetSha256() != sum(body) {
			t.Errorf("session %s's file after the move: sha256 %s, want %s", id, sum(got), sum(body))
		}
	}
	h, err := fl.GetHost(ctx, connect.NewRequest(&appv1.GetHostRequest{HostId: "host-a"}))
	if err != nil || h.Msg.GetHost().GetState() != "drained" || len(h.Msg.GetHost().GetSessionsByState()) != 0 {
		t.Fatalf("host-a after the drain: %v, %v", h, err)
	}
	// A drained host takes nothing new.
	if id := s.create(t, nil); s.hostOf(t, id) != "host-b" {
		t.Error("a new session went to the drained host")
	}
}

func TestDrainArchivesSessionsWhenNoOtherHostHasRoom(t *testing.T) {
	s := newSandboxStack(t, 1, nil)
	ctx := context.Background()
	id := s.create(t, nil)
	body := []byte("archived, not lost\n")
	s.write(t, id, "/data/keep.txt", body, nil)
	resp, err := s.fleet(s.admin).DrainHost(ctx, connect.NewRequest(&appv1.DrainHostRequest{HostId: "host-a"}))
	if err != nil {
		t.Fatal(err)
	}
	job := s.waitFleetJob(t, resp.Msg.GetJob().GetId())
	if job.GetState() != "succeeded" || job.GetArchived() != 1 || !strings.Contains(job.GetMessage(), "no other host had room") {
		t.Fatalf("drain of the only host: %v", job)
	}
	if got := s.status(t, id); got != "evicted" {
		t.Fatalf("archived session is %s, want evicted", got)
	}
	if _, err := s.fleet(s.admin).UncordonHost(ctx, connect.NewRequest(&appv1.UncordonHostRequest{HostId: "host-a"})); err != nil {
		t.Fatal(err)
	}
	// A refused resume leaves the session resumable; retry until the host takes it.
	testkit.Eventually(t, time.Minute, "the archived session resumes", func() (bool, string) {
		_, err := s.svc.Resume(ctx, connect.NewRequest(&appv1.ResumeRequest{SessionId: id}))
		if err != nil && connect.CodeOf(err) != connect.CodeUnavailable {
			t.Fatal(err)
		}
		if err != nil {
			return false, "resume: " + err.Error()
		}
		return true, ""
	})
	if got, _ := s.read(t, id, "/data/keep.txt"); !bytes.Equal(got, body) {
		t.Errorf("after the archive's resume the file is %q", got)
	}
}

func TestEvacuateResumesALostHostsSessionsElsewhere(t *testing.T) {
	s := newSandboxStack(t, 2, func(sb *testenv.Sandboxes) { sb.Config.Limits.MaxSessionsPerUser = 100 })
	ctx := context.Background()
	fl := s.fleet(s.admin)
	if _, err := fl.CordonHost(ctx, connect.NewRequest(&appv1.CordonHostRequest{HostId: "host-b"})); err != nil {
		t.Fatal(err)
	}
	saved, unsaved := s.create(t, nil), s.create(t, nil)
	body := bytes.Repeat([]byte("checkpointed before the crash\n"), 10_000)
	s.write(t, saved, "/data/saved.txt", body, nil)
	if _, err := s.svc.Snapshot(ctx, connect.NewRequest(&appv1.SnapshotRequest{SessionId: saved})); err != nil {
		t.Fatal(err)
	}
	if _, err := fl.UncordonHost(ctx, connect.NewRequest(&appv1.UncordonHostRequest{HostId: "host-b"})); err != nil {
		t.Fatal(err)
	}
	_, err := fl.EvacuateHost(ctx, connect.NewRequest(&appv1.EvacuateHostRequest{HostId: "host-a"}))
	testenv.WantCode(t, err, connect.CodeFailedPrecondition) // alive: drain it instead

	if dead := s.killHostOf(t, saved); dead != "host-a" {
		t.Fatalf("killed %s", dead)
	}
	var job *appv1.FleetJob
	testkit.Eventually(t, 3*s.sb.Config.Host.HostTimeout, "host-a counts as lost", func() (bool, string) {
		resp, err := fl.EvacuateHost(ctx, connect.NewRequest(&appv1.EvacuateHostRequest{HostId: "host-a"}))
		if connect.CodeOf(err) == connect.CodeFailedPrecondition {
			return false, err.Error()
		}
		if err != nil {
			t.Fatal(err)
		}
		job = resp.Msg.GetJob()
		return true, ""
	})
	job = s.waitFleetJob(t, job.GetId())
	if job.GetState() != "succeeded" || job.GetMoved() != 1 || !slices.Equal(job.GetWithoutCheckpoint(), []string{unsaved}) ||
		!strings.Contains(job.GetMessage(), unsaved) {
		t.Fatalf("evacuation: %v", job)
	}
	if got := s.hostOf(t, saved); got != "host-b" {
		t.Errorf("evacuated session on %s", got)
	}
	if got, meta := s.read(t, saved, "/data/saved.txt"); sum(got) != sum(body) || meta.GetSha256() != sum(body) {
		t.Errorf("evacuated session's file: sha256 %s, want %s", sum(got), sum(body))
	}
	if got := s.status(t, unsaved); got != "lost" {
		t.Errorf("the session without a checkpoint is %s, want lost", got)
	}
	h, err := fl.GetHost(ctx, connect.NewRequest(&appv1.GetHostRequest{HostId: "host-a"}))
	if err != nil || h.Msg.GetHost().GetState() != "lost" {
		t.Errorf("host-a after evacuation: %v, %v", h, err)
	}
}

func TestDrainEvictsIdleSessionsInsteadOfMovingThem(t *testing.T) {
	s := newSandboxStack(t, 2, func(sb *testenv.Sandboxes) { sb.Config.Host.IdleAfter = 300 * time.Millisecond })
	ctx := context.Background()
	id := s.create(t, nil)
	from := s.hostOf(t, id)
	s.sh(t, id, "echo kept > /root/note")
	s.waitStatus(t, id, "idle", 10*time.Second)
	resp, err := s.fleet(s.admin).DrainHost(ctx, connect.NewRequest(&appv1.DrainHostRequest{HostId: from}))
	if err != nil {
		t.Fatal(err)
	}
	job := s.waitFleetJob(t, resp.Msg.GetJob().GetId())
	if job.GetState() != "succeeded" || job.GetEvicted() != 1 || job.GetMoved() != 0 {
		t.Fatalf("drain of an idle session: %v", job)
	}
	if got := s.status(t, id); got != "evicted" {
		t.Fatalf("the idle session is %s after the drain, want evicted", got)
	}
	// Its next use wakes it on the other host.
	res := s.exec(t, &appv1.ExecRequest{SessionId: id, Command: ptr("cat /root/note"), Wake: ptr(true)})
	if res.stdout != "kept\n" || s.hostOf(t, id) == from {
		t.Fatalf("after the drain the woken session said %q on %s", res.stdout, s.hostOf(t, id))
	}
}
