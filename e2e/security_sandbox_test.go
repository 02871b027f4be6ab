package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"connectrpc.com/connect"
	"golang.org/x/sys/unix"

	appv1 "github.com/hangar-dev/hangar/gen/svc/app/v1"
	"github.com/hangar-dev/hangar/internal/testenv"
	"github.com/hangar-dev/hangar/sandboxhosts/container/containertest"
	"github.com/hangar-dev/hangar/sandboxhosts/supervisor/supervisortest"
)

// sandboxOf returns the id of the session's sandbox.
func (s *sandboxStack) sandboxOf(t testing.TB, session string) string {
	t.Helper()
	resp, err := s.svc.GetSession(context.Background(), connect.NewRequest(&appv1.GetSessionRequest{SessionId: session}))
	if err != nil {
		t.Fatal(err)
	}
	return resp.Msg.GetSession().GetSandboxId()
}

// supervisorPID finds, on the host, the pid of the sandbox's PID 1: the process in the
// sandbox's cgroup that is 1 in its own pid namespace.
func supervisorPID(t testing.TB, sandboxID string) int {
	t.Helper()
	procs, _ := filepath.Glob("/proc/[0-9]*")
	for _, p := range procs {
		cg, err := os.ReadFile(p + "/cgroup")
		if err != nil || !strings.Contains(string(cg), "/"+sandboxID+"\n") {
			continue
		}
		status, err := os.ReadFile(p + "/status")
		if err != nil {
			continue
		}
		for line := range strings.Lines(string(status)) {
			if f := strings.Fields(line); len(f) > 1 && f[0] == "NSpid:" && f[len(f)-1] == "1" {
				pid, _ := strconv.Atoi(filepath.Base(p))
				return pid
			}
		}
	}
	t.Fatalf("no PID 1 of sandbox %s on this machine", sandboxID)
	return 0
}

// TestSecuritySandboxSocketSwapCannotRedirectTheHost replays the socket swap: a sandbox learns
// the host's data dir from its mount table and plants links, where the supervisor socket used to
// be, to another sandbox's socket under every layout; the host keeps talking to the sandbox's
// own supervisor, whose socket is nowhere the sandbox can see.
func TestSecuritySandboxSocketSwapCannotRedirectTheHost(t *testing.T) {
	s := newSandboxStack(t, 1, nil)
	attacker, victim := s.create(t, nil), s.create(t, nil)
	s.sh(t, victim, "echo victim > /root/whoami")
	s.sh(t, attacker, "echo attacker > /root/whoami")
	victimSbx := s.sandboxOf(t, victim)

	if out := s.sh(t, attacker, "find / -type s 2>/dev/null | grep -v '^/proc/' || true"); out != "" {
		t.Errorf("unix sockets visible inside the sandbox:\n%s", out)
	}
	// The run dir is on the sandbox's own disk, so its bind mount no longer names a host path;
	// the attacker is given the host's data dir anyway, as if it had learned it elsewhere.
	if runDir := strings.TrimSpace(s.sh(t, attacker, "awk '$5 == \"/.hangar/run\" {print $4}' /proc/self/mountinfo")); runDir != "/run" {
		t.Errorf("the run dir's mount shows %q, want /run on the sandbox's disk", runDir)
	}
	data := s.hosts[0].DataDir
	plant := fmt.Sprintf("rm -rf /.hangar/run/supervisor.sock; ln -s %s/run/%s/supervisor.sock /.hangar/run/supervisor.sock; ln -s %s/sock/%s.sock /.hangar/run/%s.sock",
		data, victimSbx, data, victimSbx, s.sandboxOf(t, attacker))
	s.sh(t, attacker, plant)

	for range 3 {
		if out := s.sh(t, attacker, "cat /root/whoami"); out != "attacker\n" {
			t.Fatalf("an exec in the attacker's session ran in %q", out)
		}
	}
	if out := s.sh(t, victim, "cat /root/whoami"); out != "victim\n" {
		t.Fatalf("an exec in the victim's session ran in %q", out)
	}
}

// TestSecuritySandboxKillOneDoesNotWedgeTheSession replays `kill 1` with every signal whose
// default would stop the supervisor, and `kill -9 -1`: the supervisor, PID 1, stays, and the
// session keeps working, snapshot included.
func TestSecuritySandboxKillOneDoesNotWedgeTheSession(t *testing.T) {
	s := newSandboxStack(t, 1, nil)
	ctx := context.Background()
	id := s.create(t, nil)
	s.sh(t, id, "for sig in TERM INT HUP QUIT ABRT SEGV USR1 PIPE KILL; do kill -$sig 1; done; kill -9 -1; echo sent")
	if out := s.sh(t, id, "echo still here"); out != "still here\n" {
		t.Fatalf("exec after kill 1: %q", out)
	}
	if _, err := s.svc.Snapshot(ctx, connect.NewRequest(&appv1.SnapshotRequest{SessionId: id})); err != nil {
		t.Fatalf("snapshot after kill 1: %v", err)
	}
	if got := s.status(t, id); got != "running" {
		t.Fatalf("session is %q after kill 1, want running", got)
	}
}

// TestSecuritySandboxDeadSupervisorLeavesTheSessionResumable kills the supervisor from the host
// side, as a crash or the OOM killer would: the session leaves running for lost by itself,
// exec and snapshot answer failed_precondition, and Resume brings it back from its checkpoint.
func TestSecuritySandboxDeadSupervisorLeavesTheSessionResumable(t *testing.T) {
	s := newSandboxStack(t, 1, nil)
	ctx := context.Background()
	id := s.create(t, nil)
	s.sh(t, id, "echo checkpointed > /root/kept")
	if _, err := s.svc.Snapshot(ctx, connect.NewRequest(&appv1.SnapshotRequest{SessionId: id})); err != nil {
		t.Fatal(err)
	}
	sbx := s.sandboxOf(t, id)
	// A command running when the sandbox dies ends with failed_precondition, not an internal error.
	inFlight := make(chan error, 1)
	started := make(chan struct{})
	go func() {
		stream, err := s.svc.Exec(ctx, connect.NewRequest(&appv1.ExecRequest{SessionId: id, Argv: []string{"sleep", "600"}}))
		if err != nil {
			close(started)
			inFlight <- err
			return
		}
		defer stream.Close()
		for stream.Receive() {
			if stream.Msg().GetStarted() != nil {
				close(started)
			}
		}
		inFlight <- stream.Err()
	}()
	<-started
	if err := syscall.Kill(supervisorPID(t, sbx), syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	testenv.WantCode(t, <-inFlight, connect.CodeFailedPrecondition)
	s.waitStatus(t, id, "lost", time.Minute)

	cmd := "true"
	_, err := collectExec(ctx, s.svc, &appv1.ExecRequest{SessionId: id, Command: &cmd})
	testenv.WantCode(t, err, connect.CodeFailedPrecondition)
	_, err = s.svc.Snapshot(ctx, connect.NewRequest(&appv1.SnapshotRequest{SessionId: id}))
	testenv.WantCode(t, err, connect.CodeFailedPrecondition)
	// The status event is written in the log's next batch, which may follow the record's move.
	var reason string
	for deadline := time.Now().Add(time.Minute); reason == "" && time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		for _, ev := range s.listEvents(t, id, "session.status") {
			if strings.Contains(ev.GetPayloadJson(), `"to":"lost"`) {
				reason = ev.GetPayloadJson()
			}
		}
	}
	if !strings.Contains(reason, sbx+" died") {
		t.Errorf("the move to lost says %q, want the sandbox's death", reason)
	}

	if _, err := s.svc.Resume(ctx, connect.NewRequest(&appv1.ResumeRequest{SessionId: id})); err != nil {
		t.Fatalf("resume: %v", err)
	}
	if out := s.sh(t, id, "cat /root/kept"); out != "checkpointed\n" {
		t.Fatalf("after resume: %q", out)
	}
	if got := s.status(t, id); got != "running" {
		t.Fatalf("session is %q after resume, want running", got)
	}
}

// TestSecuritySandboxPID1AndTheKernelAreOutOfReach replays, through the API, the reaches for PID
// 1 (the supervisor) and for syscalls outside the allow-list: each is refused.
func TestSecuritySandboxPID1AndTheKernelAreOutOfReach(t *testing.T) {
	s := newSandboxStack(t, 1, nil)
	id := s.create(t, nil)
	probe, err := os.ReadFile(containertest.Sysprobe(t))
	if err != nil {
		t.Fatal(err)
	}
	s.write(t, id, "/root/sysprobe", probe, ptr(uint32(0o755)))
	sys := func(nr int, args ...int) string {
		cmd := "/root/sysprobe " + strconv.Itoa(nr)
		for _, a := range args {
			cmd += " " + strconv.Itoa(a)
		}
		return cmd
	}

	for _, c := range []struct{ name, command string }{
		{"write the host's log file through /proc/1/fd", "echo planted >> /proc/1/fd/1"},
		{"learn host paths from PID 1's descriptors", "readlink /proc/1/fd/1"},
		{"read PID 1's environment", "cat /proc/1/environ"},
		{"read PID 1's memory", "head -c 1 /proc/1/mem"},
	} {
		t.Run(c.name, func(t *testing.T) {
			cmd := c.command + " 2>/dev/null"
			if res := s.exec(t, &appv1.ExecRequest{SessionId: id, Command: &cmd}); res.exit.GetExitStatus() == 0 {
				t.Errorf("%q succeeded inside: %q", c.command, res.stdout)
			}
		})
	}
	for _, c := range []struct{ name, command, want string }{
		{"ptrace PID 1", sys(unix.SYS_PTRACE, unix.PTRACE_ATTACH, 1), "EPERM"},
		{"keyctl (not on the allow-list)", sys(unix.SYS_KEYCTL, unix.KEYCTL_GET_KEYRING_ID, 0), "EPERM"},
		{"io_uring_setup (not on the allow-list)", sys(unix.SYS_IO_URING_SETUP, 1, 0), "EPERM"},
		{"a new user namespace", sys(unix.SYS_UNSHARE, unix.CLONE_NEWUSER), "EPERM"},
		{"an allowed syscall", sys(unix.SYS_GETPID), "ok"},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := strings.TrimSpace(s.sh(t, id, c.command)); got != c.want {
				t.Errorf("%s inside = %s, want %s", c.name, got, c.want)
			}
		})
	}
	mounts := s.sh(t, id, "cat /proc/self/mountinfo")
	if strings.Contains(mounts, "upperdir=/") || strings.Contains(mounts, "lowerdir=/") {
		t.Errorf("the overlay's host paths show in the sandbox's mount table:\n%s", mounts)
	}
	// Nor does any bind mount: the supervisor is bound from the host's shared tmpfs, the run
	// dir, resolver and trust bundle from the sandbox's own disk (issue 23, item 12).
	sup := supervisortest.Binary(t)
	for _, hostPath := range []string{s.hosts[0].DataDir, sup, filepath.Dir(sup)} {
		if strings.Contains(mounts, hostPath) {
			t.Errorf("the sandbox's mount table names the host path %s:\n%s", hostPath, mounts)
		}
	}
	roots := s.sh(t, id, `awk '{print $5, $4}' /proc/self/mountinfo | grep -E '^(/\.hangar/[^ ]*|/etc/resolv\.conf|/etc/ssl/certs/ca-certificates\.crt) '`)
	if want := "/.hangar/bin/supervisor /hangar-supervisor\n/.hangar/run /run\n/etc/resolv.conf /net/resolv.conf\n/etc/ssl/certs/ca-certificates.crt /net/ca-certificates.crt\n"; roots != want {
		t.Errorf("the bind mounts' roots inside =\n%swant\n%s", roots, want)
	}
}
