package main

import (
	"context"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/hangar-dev/hangar/composition"
	appv1 "github.com/hangar-dev/hangar/gen/svc/app/v1"
	"github.com/hangar-dev/hangar/gen/svc/app/v1/appv1connect"
	"github.com/hangar-dev/hangar/internal/testenv"
	"github.com/hangar-dev/hangar/internal/testkit"
	"github.com/hangar-dev/hangar/platform/auth"
	"github.com/hangar-dev/hangar/platform/bucket"
	"github.com/hangar-dev/hangar/platform/httpapi"
	"github.com/hangar-dev/hangar/records/fleet"
	"github.com/hangar-dev/hangar/sandboxhosts/supervisor/supervisortest"
)

// hostProcess is `hangar host` running as a process of its own.
type hostProcess struct {
	cmd  *exec.Cmd
	done chan struct{} // closed when the process has exited, with its Wait error in err
	err  error
}

// startHostProcess runs bin (a built hangar) as a host and waits until the fleet lists it.
func startHostProcess(t *testing.T, bin, id, dataDir string, env []string, f *fleet.Fleet) *hostProcess {
	t.Helper()
	// A host restarted under an old id finds its own earlier record, maybe still alive: only a
	// registration newer than this start counts.
	started := time.Now()
	cmd := exec.Command(bin, "host", "--addr", "127.0.0.1:0", "--id", id, "--data-dir", dataDir)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdout, cmd.Stderr = io.Discard, os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &hostProcess{cmd: cmd, done: make(chan struct{})}
	go func() { p.err = cmd.Wait(); close(p.done) }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-p.done
	})
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		if h, err := f.Get(context.Background(), id); err == nil && f.Alive(h) && h.State == fleet.Ready && h.StartedAt.After(started) {
			return p
		}
		select {
		case <-p.done:
			t.Fatalf("hangar host exited: %v", p.err)
		case <-time.After(100 * time.Millisecond):
		}
	}
	t.Fatalf("hangar host %s never registered", id)
	return nil
}

// TestKilledHostProcessLeavesSessionsRecoverable SIGKILLs a real `hangar host` process mid-
// session: the session becomes lost within the heartbeat timeout, resumes on another host from
// its checkpoint, and the killed host, restarted, clears what it left behind.
func TestKilledHostProcessLeavesSessionsRecoverable(t *testing.T) {
	db, project := testenv.Firestore(t)
	testenv.RequireSandboxes(t)
	ctx := context.Background()

	dir := t.TempDir()
	bin := filepath.Join(dir, "hangar")
	build := exec.Command("go", "build", "-o", bin, ".")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	sup, err := os.ReadFile(supervisortest.Binary(t))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "hangar-supervisor"), sup, 0o755); err != nil {
		t.Fatal(err)
	}

	sb := testenv.NewSandboxes(t, db)
	blobDir := filepath.Join(dir, "blob")
	if err := os.MkdirAll(blobDir, 0o700); err != nil {
		t.Fatal(err)
	}
	// The process and this test share the blob store and keyset, as hosts and functions do.
	if sb.Bucket, err = bucket.Open(ctx, "file://"+blobDir); err != nil {
		t.Fatal(err)
	}
	ks, sealer := testenv.Keyset(t)
	sb.Sealer = sealer
	env := []string{
		"HANGAR_PROJECT=" + project, "HANGAR_BLOB_URL=file://" + blobDir, "HANGAR_SEAL_KEYSET=" + string(ks),
		"HANGAR_HOST_TOKEN=" + sb.Config.HostToken, "HANGAR_HEARTBEAT_INTERVAL=200ms", "HANGAR_HOST_TIMEOUT=2s",
		// The test registry is on loopback, which an operator lists for pulls.
		"HANGAR_PRIVATE_REGISTRIES=127.0.0.1",
	}
	f := fleet.New(db, time.Now, sb.Config.Host.HostTimeout)
	hostDir, err := os.MkdirTemp("", "hp-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(hostDir) })
	proc := startHostProcess(t, bin, "proc-host", hostDir, env, f)

	url, key := serveAPI(t, composition.Deps{DB: db, Config: sb.Config, Bucket: sb.Bucket, Sealer: sb.Sealer, DefaultImage: sb.Image}, "ops@example.com")
	svc := appv1connect.NewSessionServiceClient(http.DefaultClient, url+httpapi.RPCPrefix, auth.WithKey(key))

	created, err := svc.CreateSession(ctx, connect.NewRequest(&appv1.CreateSessionRequest{Secrets: map[string]string{"KEEP": "me"}}))
	if err != nil {
		t.Fatal(err)
	}
	id := created.Msg.GetSessionId()
	sh := func(command string) string {
		t.Helper()
		stream, err := svc.Exec(ctx, connect.NewRequest(&appv1.ExecRequest{SessionId: id, Command: &command}))
		if err != nil {
			t.Fatal(err)
		}
		var out strings.Builder
		for stream.Receive() {
			out.Write(stream.Msg().GetStdout())
		}
		if err := stream.Err(); err != nil {
			t.Fatalf("%s: %v", command, err)
		}
		return out.String()
	}
	sh("echo checkpointed > /root/kept")
	if _, err := svc.Snapshot(ctx, connect.NewRequest(&appv1.SnapshotRequest{SessionId: id})); err != nil {
		t.Fatal(err)
	}
	sh("echo later > /root/after")

	if err := proc.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-proc.done
	testkit.Eventually(t, 3*sb.Config.Host.HostTimeout, "the session lost with its host", func() (bool, string) {
		got, err := svc.GetSession(ctx, connect.NewRequest(&appv1.GetSessionRequest{SessionId: id}))
		if err != nil {
			t.Fatal(err)
		}
		return got.Msg.GetSession().GetStatus() == "lost", "the session is " + got.Msg.GetSession().GetStatus()
	})

	sb.StartHost(t, "rescue-host")
	if _, err := svc.Resume(ctx, connect.NewRequest(&appv1.ResumeRequest{SessionId: id})); err != nil {
		t.Fatal(err)
	}
	if out := sh(`cat /root/kept; echo "$KEEP"; test -e /root/after && echo after || echo no-after`); out != "checkpointed\nme\nno-after\n" {
		t.Fatalf("resumed elsewhere: %q", out)
	}

	// The killed host left its sandbox running (runc containers outlive their parent). Started
	// again with its id and data dir, it removes it and serves again; SIGTERM stops it cleanly.
	again := startHostProcess(t, bin, "proc-host", hostDir, env, f)
	if err := again.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-again.done:
		if again.err != nil {
			t.Fatalf("restarted host exited badly after SIGTERM: %v", again.err)
		}
	case <-time.After(time.Minute):
		t.Fatal("restarted host did not stop on SIGTERM")
	}
	if entries, _ := os.ReadDir(filepath.Join(hostDir, "sandboxes")); len(entries) != 0 {
		t.Fatalf("the restarted host left %d sandbox dirs", len(entries))
	}
	if h, err := f.Get(ctx, "proc-host"); err != nil || h.State != fleet.Drained {
		t.Fatalf("host record after SIGTERM: %+v, %v", h, err)
	}
}
