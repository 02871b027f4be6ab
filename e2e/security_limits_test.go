package e2e

import (
	"context"
	"crypto/rand"
	"os"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"golang.org/x/sys/unix"

	appv1 "github.com/hangar-dev/hangar/gen/svc/app/v1"
	"github.com/hangar-dev/hangar/gen/svc/app/v1/appv1connect"
	"github.com/hangar-dev/hangar/internal/testenv"
	"github.com/hangar-dev/hangar/platform/auth"
	"github.com/hangar-dev/hangar/sandboxhosts/images/imagestest"
)

// These replay the resource-exhaustion attacks of the security review through the API: each
// first does what the attacker did, then checks it is stopped and that nobody else pays.

// tmpFree is the free space of the file system the test hosts keep their sandboxes on.
func tmpFree(t *testing.T) int64 {
	t.Helper()
	var st unix.Statfs_t
	if err := unix.Statfs(os.TempDir(), &st); err != nil {
		t.Fatal(err)
	}
	return int64(st.Bavail) * st.Bsize
}

// The attack: a 2 GiB write inside a sandbox went straight to the host's disk.
func TestSecurityADiskFillingWriteGetsENOSPCAndSparesTheHostAndOtherSandboxes(t *testing.T) {
	const quota = 64 << 20
	s := newSandboxStack(t, 1, func(sb *testenv.Sandboxes) { sb.Config.Host.SandboxDiskBytes = quota })
	greedy, other := s.create(t, nil), s.create(t, nil)
	before := tmpFree(t)

	for _, target := range []string{"/root/big", "/.hangar/run/big"} {
		cmd := "dd if=/dev/zero of=" + target + " bs=1M count=2048"
		res := s.exec(t, &appv1.ExecRequest{SessionId: greedy, Command: &cmd})
		if res.exit.GetExitStatus() == 0 || !strings.Contains(res.stderr, "No space left on device") {
			t.Fatalf("%s in a sandbox with a %d MiB disk: exit %d, %q; want ENOSPC", cmd, quota>>20, res.exit.GetExitStatus(), res.stderr)
		}
	}
	// Other writers share the machine: a bound far below the 4 GiB asked for, far above the quota.
	if lost := before - tmpFree(t); lost > 1<<30 {
		t.Errorf("the host lost %d MiB of free space to a sandbox with a %d MiB disk", lost>>20, quota>>20)
	}
	if got := s.sh(t, other, "dd if=/dev/zero of=/root/fits bs=1M count=16 2>/dev/null && wc -c < /root/fits"); strings.TrimSpace(got) != "16777216" {
		t.Errorf("another sandbox's 16 MiB write kept %q bytes", got)
	}
	// The full sandbox still works once it frees space.
	if got := s.sh(t, greedy, "rm /root/big /.hangar/run/big && echo ok > /root/small && cat /root/small"); strings.TrimSpace(got) != "ok" {
		t.Errorf("after freeing its disk the sandbox wrote %q", got)
	}
}

// The attack: image pulls had no size limit.
func TestSecurityAnImageOverTheSizeLimitIsRefused(t *testing.T) {
	const limit = 4 << 20
	s := newSandboxStack(t, 1, func(sb *testenv.Sandboxes) {
		sb.Config.Host.MaxImageBytes = limit
		sb.Config.Host.WarmSandboxes = 0
	})
	noise := make([]byte, 2*limit)
	if _, err := rand.Read(noise); err != nil {
		t.Fatal(err)
	}
	huge := imagestest.Push(t, s.sb.Registry, "test/huge", imagestest.Image(t, imagestest.Layer(t, imagestest.File("noise", string(noise), 0o644))))
	_, err := s.svc.CreateSession(context.Background(), connect.NewRequest(&appv1.CreateSessionRequest{ImageUri: huge}))
	testenv.WantCode(t, err, connect.CodeResourceExhausted)
	if !strings.Contains(err.Error(), huge) {
		t.Errorf("refusal %v does not name the image %s", err, huge)
	}
	// The test image is under the limit and still runs.
	s.create(t, nil)
}

// The attack: one user could take every sandbox slot.
func TestSecurityOneUserCannotHoldMoreThanItsShareOfSessions(t *testing.T) {
	testenv.RequirePlugins(t)
	const perUser = 2
	s := newSandboxStack(t, 1, func(sb *testenv.Sandboxes) { sb.Config.Limits.MaxSessionsPerUser = perUser })
	ctx := context.Background()
	first, second := s.create(t, nil), s.create(t, nil)

	overLimit := func(what string, err error) {
		t.Helper()
		testenv.WantCode(t, err, connect.CodeResourceExhausted)
		if !strings.Contains(err.Error(), "HANGAR_MAX_SESSIONS_PER_USER") {
			t.Errorf("%s over the limit: %v does not name the limit", what, err)
		}
	}
	_, err := s.svc.CreateSession(ctx, connect.NewRequest(&appv1.CreateSessionRequest{}))
	overLimit("CreateSession", err)
	profiles := appv1connect.NewProfileServiceClient(httpClient, s.rpcURL(), auth.WithKey(s.admin))
	p, err := profiles.CreateProfile(ctx, connect.NewRequest(&appv1.CreateProfileRequest{Name: "work", ImageId: s.sb.Image, Harness: ptr("bash")}))
	if err != nil {
		t.Fatal(err)
	}
	tasks := appv1connect.NewTaskServiceClient(httpClient, s.rpcURL(), auth.WithKey(s.admin))
	_, err = tasks.CreateTask(ctx, connect.NewRequest(&appv1.CreateTaskRequest{ProfileId: p.Msg.GetProfile().GetId(), Prompt: ptr("true")}))
	overLimit("CreateTask", err)

	// Another user is not affected.
	if _, err := s.sessions(s.mintKey(t, "someone@example.com", false)).CreateSession(ctx, connect.NewRequest(&appv1.CreateSessionRequest{})); err != nil {
		t.Fatalf("another user's session: %v", err)
	}

	// An evicted session holds no sandbox and does not count; resuming it when the user is back
	// at the limit does not pass.
	if _, err := s.svc.Snapshot(ctx, connect.NewRequest(&appv1.SnapshotRequest{SessionId: first})); err != nil {
		t.Fatal(err)
	}
	if _, err := s.svc.EvictLocal(ctx, connect.NewRequest(&appv1.EvictLocalRequest{SessionId: first})); err != nil {
		t.Fatal(err)
	}
	third := s.create(t, nil)
	_, err = s.svc.Resume(ctx, connect.NewRequest(&appv1.ResumeRequest{SessionId: first}))
	overLimit("Resume", err)
	for _, id := range []string{second, third} {
		if _, err := s.svc.DeleteSession(ctx, connect.NewRequest(&appv1.DeleteSessionRequest{SessionId: id})); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.svc.Resume(ctx, connect.NewRequest(&appv1.ResumeRequest{SessionId: first})); err != nil {
		t.Fatalf("Resume under the limit: %v", err)
	}
}

// The attack: sandboxes' memory limits added up to more than the host's RAM.
func TestSecurityAHostRefusesSandboxesPastItsMemory(t *testing.T) {
	var si unix.Sysinfo_t
	if err := unix.Sysinfo(&si); err != nil {
		t.Fatal(err)
	}
	ram := float64(si.Totalram) * float64(si.Unit)
	const sandboxMemory = 512 << 20
	s := newSandboxStack(t, 1, func(sb *testenv.Sandboxes) {
		sb.Config.Host.WarmSandboxes = 0
		sb.Config.Host.SandboxMemoryBytes = sandboxMemory
		// Room for one and a half sandboxes.
		sb.Config.Host.MemoryOvercommitRatio = 1.5 * sandboxMemory / ram
	})
	ctx := context.Background()
	first := s.create(t, nil)
	_, err := s.svc.CreateSession(ctx, connect.NewRequest(&appv1.CreateSessionRequest{RequestedSessionId: ptr("no-memory-left")}))
	// The host refuses; once its heartbeat tells the fleet, placements skip it (unavailable).
	switch connect.CodeOf(err) {
	case connect.CodeResourceExhausted:
		if !strings.Contains(err.Error(), "HANGAR_MEMORY_OVERCOMMIT_RATIO") {
			t.Errorf("refusal %v does not name the ratio", err)
		}
	case connect.CodeUnavailable:
	default:
		t.Fatalf("a sandbox past the host's memory: %v, want resource_exhausted or unavailable", err)
	}
	if _, err := s.svc.DeleteSession(ctx, connect.NewRequest(&appv1.DeleteSessionRequest{SessionId: first})); err != nil {
		t.Fatal(err)
	}
	// The memory is free again; the fleet learns it at the next heartbeat.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		_, err := s.svc.CreateSession(ctx, connect.NewRequest(&appv1.CreateSessionRequest{}))
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("a session after the first was deleted: %v", err)
		}
	}
}
