package e2e

import (
	"bytes"
	"context"
	"crypto/rand"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"google.golang.org/protobuf/types/known/emptypb"

	hostv1 "github.com/hangar-dev/hangar/gen/host/v1"
	appv1 "github.com/hangar-dev/hangar/gen/svc/app/v1"
	"github.com/hangar-dev/hangar/gen/svc/app/v1/appv1connect"
	"github.com/hangar-dev/hangar/internal/testenv"
	"github.com/hangar-dev/hangar/internal/testkit"
	"github.com/hangar-dev/hangar/platform/auth"
	"github.com/hangar-dev/hangar/records/fleet"
	"github.com/hangar-dev/hangar/sandboxhosts/hostclient"
	"github.com/hangar-dev/hangar/sandboxhosts/images"
	"github.com/hangar-dev/hangar/sandboxhosts/images/imagestest"
)

func TestSessionLifecycleAndOwnership(t *testing.T) {
	s := newSandboxStack(t, 1, nil)
	ctx := context.Background()
	id := s.create(t, &appv1.CreateSessionRequest{
		RequestedSessionId: ptr("life-1"),
		Secrets:            map[string]string{"API_TOKEN": "s3cret-value"},
		HarnessEnv:         map[string]string{"HARNESS_MODE": "plain"},
	})
	if id != "life-1" {
		t.Fatalf("session id %q, want the requested life-1", id)
	}
	if got := s.sh(t, id, `echo "$API_TOKEN $HARNESS_MODE"`); got != "s3cret-value plain\n" {
		t.Fatalf("sandbox env = %q", got)
	}
	// The same requested id again is the same session, not a second sandbox.
	again, err := s.svc.CreateSession(ctx, connect.NewRequest(&appv1.CreateSessionRequest{RequestedSessionId: ptr("life-1")}))
	if err != nil || again.Msg.GetSessionId() != id || again.Msg.GetStatus() != "running" {
		t.Fatalf("repeated create = %v, %v", again, err)
	}
	// A requested id is its owner's alone: bob's "life-1" is a session of his own.
	bob := s.sessions(s.mintKey(t, "bob@example.com", false))
	his, err := bob.CreateSession(ctx, connect.NewRequest(&appv1.CreateSessionRequest{RequestedSessionId: ptr("life-1")}))
	if err != nil || his.Msg.GetSessionId() != "life-1" {
		t.Fatalf("bob's life-1: %v, %v", his, err)
	}
	if _, err := bob.DeleteSession(ctx, connect.NewRequest(&appv1.DeleteSessionRequest{SessionId: "life-1"})); err != nil {
		t.Fatal(err)
	}
	if got := s.sh(t, id, "echo still mine"); got != "still mine\n" {
		t.Fatalf("admin's life-1 after bob deleted his: %q", got)
	}
	_, err = bob.GetSession(ctx, connect.NewRequest(&appv1.GetSessionRequest{SessionId: id}))
	testenv.WantCode(t, err, connect.CodeNotFound)
	_, err = collectExec(ctx, bob, &appv1.ExecRequest{SessionId: id, Command: ptr("true")})
	testenv.WantCode(t, err, connect.CodeNotFound)

	list, err := s.svc.ListSessions(ctx, connect.NewRequest(&emptypb.Empty{}))
	if err != nil {
		t.Fatal(err)
	}
	if len(list.Msg.GetSessions()) != 1 || list.Msg.GetSessions()[0].GetOwnerEmail() != "admin@example.com" {
		t.Fatalf("list = %v", list.Msg)
	}
	got, err := s.svc.GetSession(ctx, connect.NewRequest(&appv1.GetSessionRequest{SessionId: id}))
	if err != nil {
		t.Fatal(err)
	}
	if g := got.Msg.GetSession(); g.GetImage() != s.sb.Image || g.GetHostId() != "host-a" || g.GetSandboxId() == "" || g.GetMode() != "sandbox" {
		t.Fatalf("session = %v", g)
	}

	if _, err := s.svc.DeleteSession(ctx, connect.NewRequest(&appv1.DeleteSessionRequest{SessionId: id})); err != nil {
		t.Fatal(err)
	}
	if _, err := s.svc.DeleteSession(ctx, connect.NewRequest(&appv1.DeleteSessionRequest{SessionId: id})); err != nil {
		t.Fatalf("second delete: %v", err)
	}
	_, err = s.svc.GetSession(ctx, connect.NewRequest(&appv1.GetSessionRequest{SessionId: id}))
	testenv.WantCode(t, err, connect.CodeNotFound)
	if n := s.hosts[0].Host.Sandboxes(); n != 0 {
		t.Fatalf("host still holds %d sandboxes after delete", n)
	}
}

func TestCreateSessionRefusesBadInput(t *testing.T) {
	s := newSandboxStack(t, 1, nil)
	for _, tc := range []struct {
		name  string
		req   *appv1.CreateSessionRequest
		field string
	}{
		{"unknown mode", &appv1.CreateSessionRequest{Mode: "vm"}, "mode"},
		{"bad requested id", &appv1.CreateSessionRequest{RequestedSessionId: ptr("Has Spaces")}, "requested_session_id"},
		{"bad secret name", &appv1.CreateSessionRequest{Secrets: map[string]string{"1BAD": "x"}}, "secrets"},
		{"unpullable image", &appv1.CreateSessionRequest{ImageUri: s.sb.Registry + "/no/such:image"}, "image_uri"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := s.svc.CreateSession(context.Background(), connect.NewRequest(tc.req))
			if fields := testenv.ViolatedFields(t, err); len(fields) == 0 || fields[0] != tc.field {
				t.Fatalf("violations %v, want %s", fields, tc.field)
			}
		})
	}
}

func TestExecStreamsOutputAndShellExitCodes(t *testing.T) {
	s := newSandboxStack(t, 1, nil)
	id := s.create(t, nil)
	for _, tc := range []struct {
		name           string
		req            *appv1.ExecRequest
		stdout, stderr string
		status         int32
	}{
		{"command under sh -c", &appv1.ExecRequest{Command: ptr("echo out; echo err >&2; exit 3")}, "out\n", "err\n", 3},
		{"argv runs directly", &appv1.ExecRequest{Argv: []string{"echo", "$HOME", "a b"}}, "$HOME a b\n", "", 0},
		{"env and workdir", &appv1.ExecRequest{Command: ptr(`echo "$GREETING from $(pwd)"`), Env: map[string]string{"GREETING": "hi"}, Workdir: ptr("/tmp")}, "hi from /tmp\n", "", 0},
		{"missing program is 127", &appv1.ExecRequest{Argv: []string{"/no/such/tool"}}, "", "", 127},
		{"missing program under sh is 127", &appv1.ExecRequest{Command: ptr("no-such-tool")}, "", "", 127},
		{"image file runs", &appv1.ExecRequest{Argv: []string{"/opt/tool/run.sh"}}, "tool ran\n", "", 0},
		{"killed by a signal is 128+n", &appv1.ExecRequest{Command: ptr("kill -TERM $$")}, "", "", 143},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.req.SessionId = id
			res := s.exec(t, tc.req)
			if res.execID == "" || res.exit == nil {
				t.Fatalf("no started or exit: %+v", res)
			}
			if res.stdout != tc.stdout || (tc.stderr != "" && res.stderr != tc.stderr) || res.exit.GetExitStatus() != tc.status {
				t.Fatalf("got stdout %q stderr %q status %d, want %q %q %d", res.stdout, res.stderr, res.exit.GetExitStatus(), tc.stdout, tc.stderr, tc.status)
			}
		})
	}
	t.Run("rusage is reported", func(t *testing.T) {
		res := s.exec(t, &appv1.ExecRequest{SessionId: id, Command: ptr("i=0; while [ $i -lt 20000 ]; do i=$((i+1)); done; sleep 0.1")})
		ru := res.exit.GetRusage()
		if ru.GetWallMs() < 100 || ru.GetPeakRssKb() == 0 || ru.GetUserCpuMs()+ru.GetSysCpuMs() == 0 {
			t.Fatalf("rusage %v", ru)
		}
	})
	t.Run("timeout kills the process group", func(t *testing.T) {
		res := s.exec(t, &appv1.ExecRequest{SessionId: id, Command: ptr("sleep 30 & sleep 30; echo never"), TimeoutSecs: ptr[uint64](1)})
		if !res.exit.GetTimedOut() || res.exit.GetExitStatus() != 137 || strings.Contains(res.stdout, "never") {
			t.Fatalf("timed-out exec = %+v", res)
		}
		if out := s.sh(t, id, "ps -o comm | grep -c '^sleep' || true"); strings.TrimSpace(out) != "0" {
			t.Fatalf("%s sleeps survived the timeout", strings.TrimSpace(out))
		}
	})
	t.Run("bad requests are refused", func(t *testing.T) {
		for _, req := range []*appv1.ExecRequest{
			{SessionId: id},
			{SessionId: id, Command: ptr("true"), Argv: []string{"true"}},
			{SessionId: id, Command: ptr("true"), TimeoutSecs: ptr[uint64](1 << 40)},
			{SessionId: id, Command: ptr("true"), Workdir: ptr("relative")},
			{SessionId: id, Command: ptr("true"), Workdir: ptr("/no/such/dir")},
			{SessionId: id, Command: ptr("true"), Env: map[string]string{"NOT VALID": "x"}},
		} {
			_, err := collectExec(context.Background(), s.svc, req)
			testenv.WantCode(t, err, connect.CodeInvalidArgument)
		}
	})
}

func TestExecReattachesByOffsetWithNothingLostOrDoubled(t *testing.T) {
	s := newSandboxStack(t, 1, nil)
	id := s.create(t, nil)
	script := "i=0; while [ $i -lt 300 ]; do i=$((i+1)); echo out $i; echo err $i >&2; sleep 0.005; done"
	ctx, cancel := context.WithCancel(context.Background())
	stream, err := s.svc.Exec(ctx, connect.NewRequest(&appv1.ExecRequest{SessionId: id, Command: &script, ExecId: ptr("long-1")}))
	if err != nil {
		t.Fatal(err)
	}
	var out, errb bytes.Buffer
	for stream.Receive() && out.Len() < 200 {
		out.Write(stream.Msg().GetStdout())
		errb.Write(stream.Msg().GetStderr())
	}
	cancel() // the client drops mid-stream; the command keeps running
	stream.Close()

	res := s.exec(t, &appv1.ExecRequest{
		SessionId: id, ExecId: ptr("long-1"),
		StdoutOffset: ptr(uint64(out.Len())), StderrOffset: ptr(uint64(errb.Len())),
	})
	var wantOut, wantErr strings.Builder
	for i := 1; i <= 300; i++ {
		wantOut.WriteString("out " + strconv.Itoa(i) + "\n")
		wantErr.WriteString("err " + strconv.Itoa(i) + "\n")
	}
	if got := out.String() + res.stdout; got != wantOut.String() {
		t.Fatalf("stdout after re-attach differs: got %d bytes, want %d", len(got), wantOut.Len())
	}
	if got := errb.String() + res.stderr; got != wantErr.String() {
		t.Fatalf("stderr after re-attach differs: got %d bytes, want %d", len(got), wantErr.Len())
	}
	if res.exit.GetExitStatus() != 0 {
		t.Fatalf("exit %v", res.exit)
	}
	// The same exec_id without offsets replays everything from the start.
	if replay := s.exec(t, &appv1.ExecRequest{SessionId: id, ExecId: ptr("long-1")}); replay.stdout != wantOut.String() {
		t.Fatalf("replay from 0 has %d bytes, want %d", len(replay.stdout), wantOut.Len())
	}
}

func TestCancelExecKillsIt(t *testing.T) {
	s := newSandboxStack(t, 1, nil)
	id := s.create(t, nil)
	done := make(chan execResult, 1)
	go func() {
		res, _ := collectExec(context.Background(), s.svc, &appv1.ExecRequest{SessionId: id, Command: ptr("echo ready; sleep 60"), ExecId: ptr("to-cancel")})
		done <- res
	}()
	testkit.Eventually(t, 10*time.Second, "cancelling the exec", func() (bool, string) {
		_, err := s.svc.CancelExec(context.Background(), connect.NewRequest(&appv1.CancelExecRequest{SessionId: id, ExecId: "to-cancel"}))
		if err != nil && connect.CodeOf(err) != connect.CodeNotFound {
			t.Fatalf("cancel: %v", err)
		}
		return err == nil, fmt.Sprint(err)
	})
	select {
	case res := <-done:
		if !res.exit.GetCanceled() || res.exit.GetExitStatus() != 137 {
			t.Fatalf("canceled exec = %+v", res)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("exec did not end after CancelExec")
	}
	_, err := s.svc.CancelExec(context.Background(), connect.NewRequest(&appv1.CancelExecRequest{SessionId: id, ExecId: "never-ran"}))
	testenv.WantCode(t, err, connect.CodeNotFound)
}

func TestFilesRoundTripWithTheirHashes(t *testing.T) {
	s := newSandboxStack(t, 1, nil)
	id := s.create(t, nil)
	big := make([]byte, 50<<20)
	if _, err := rand.Read(big); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		body []byte
	}{{"empty", nil}, {"one byte", []byte{'x'}}, {"50 MiB", big}} {
		t.Run(tc.name, func(t *testing.T) {
			path := "/work/files/" + strings.ReplaceAll(tc.name, " ", "-")
			w := s.write(t, id, path, tc.body, nil)
			if w.GetSha256() != sum(tc.body) || w.GetSizeBytes() != uint64(len(tc.body)) {
				t.Fatalf("write answered %v", w)
			}
			got, meta := s.read(t, id, path)
			if !bytes.Equal(got, tc.body) || meta.GetSha256() != sum(tc.body) || meta.GetSizeBytes() != uint64(len(tc.body)) {
				t.Fatalf("read back %d bytes (meta %v), want %d", len(got), meta, len(tc.body))
			}
			if inside := strings.Fields(s.sh(t, id, "sha256sum "+path))[0]; inside != sum(tc.body) {
				t.Fatalf("sandbox sees sha256 %s", inside)
			}
		})
	}
	t.Run("mode is kept", func(t *testing.T) {
		s.write(t, id, "/work/run.sh", []byte("#!/bin/sh\necho ran\n"), ptr[uint32](0o750))
		if got := s.sh(t, id, "stat -c %a /work/run.sh && /work/run.sh"); got != "750\nran\n" {
			t.Fatalf("got %q", got)
		}
	})
	t.Run("a wrong hash leaves the old file", func(t *testing.T) {
		s.write(t, id, "/work/keep", []byte("old"), nil)
		up := s.svc.WriteFile(context.Background())
		_ = up.Send(&appv1.WriteFileRequest{Frame: &appv1.WriteFileRequest_Metadata{Metadata: &appv1.WriteFileMetadata{
			SessionId: id, Path: "/work/keep", SizeBytes: 3, Sha256: sum([]byte("new")),
		}}})
		_ = up.Send(&appv1.WriteFileRequest{Frame: &appv1.WriteFileRequest_Chunk{Chunk: []byte("bad")}})
		_, err := up.CloseAndReceive()
		testenv.WantCode(t, err, connect.CodeInvalidArgument)
		if got, _ := s.read(t, id, "/work/keep"); string(got) != "old" {
			t.Fatalf("file is %q after a failed write", got)
		}
	})
	t.Run("copy between sessions", func(t *testing.T) {
		other := s.create(t, nil)
		resp, err := s.svc.CopyFiles(context.Background(), connect.NewRequest(&appv1.CopyFilesRequest{
			SourceSessionId: id, TargetSessionId: other, Paths: []string{"/work/files/50-MiB", "/work/run.sh"},
		}))
		if err != nil {
			t.Fatal(err)
		}
		if len(resp.Msg.GetFiles()) != 2 || resp.Msg.GetFiles()[0].GetSha256() != sum(big) {
			t.Fatalf("copy answered %v", resp.Msg)
		}
		if got := s.sh(t, other, "sha256sum /work/files/50-MiB | cut -d' ' -f1"); strings.TrimSpace(got) != sum(big) {
			t.Fatalf("copied file hashes to %s", got)
		}
	})
}

func TestFilePathsCannotLeaveTheSandbox(t *testing.T) {
	s := newSandboxStack(t, 1, func(sb *testenv.Sandboxes) { sb.Config.Limits.MaxFileBytes = 1 << 20 })
	id := s.create(t, nil)
	secret, err := os.CreateTemp("", "host-secret-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.Remove(secret.Name())
	secret.WriteString("host only")
	secret.Close()
	s.sh(t, id, "mkdir -p /work && ln -s "+secret.Name()+" /work/abs-link && ln -s ../../../../../../.. /work/up && ln -s /proc/self/root /work/magic")

	ctx := context.Background()
	for _, tc := range []struct {
		path string
		code connect.Code
	}{
		{"relative/path", connect.CodeInvalidArgument},
		{"/work/../etc/passwd", connect.CodeInvalidArgument},
		{"/../../../../" + strings.TrimPrefix(secret.Name(), "/"), connect.CodeInvalidArgument},
		{"", connect.CodeInvalidArgument},
		{"/work/abs-link", connect.CodeNotFound},           // resolves inside the sandbox, where it points at nothing
		{"/work/up" + secret.Name(), connect.CodeNotFound}, // climbs to the sandbox's root, no further
		// The sandbox's /proc is its own mount, absent from the host's view of its root, so
		// magic links name nothing there (sandboxfs's tests show they are refused where /proc is).
		{"/work/magic/etc/hostname", connect.CodeNotFound},
		{"/proc/1/root" + secret.Name(), connect.CodeNotFound},
		{"/work", connect.CodeInvalidArgument}, // a directory is not a file
	} {
		body, _, err := readFile(ctx, s.svc, id, tc.path)
		if bytes.Contains(body, []byte("host only")) {
			t.Fatalf("read %s leaked the host's file", tc.path)
		}
		if connect.CodeOf(err) != tc.code {
			t.Errorf("read %q: %v, want %v", tc.path, err, tc.code)
		}
	}
	for _, p := range []string{"/work/abs-link", "/work/up" + secret.Name()} {
		if _, err := writeFile(ctx, s.svc, id, p, []byte("overwritten"), nil); err != nil && connect.CodeOf(err) != connect.CodePermissionDenied {
			t.Errorf("write %s: %v", p, err)
		}
		if b, _ := os.ReadFile(secret.Name()); string(b) != "host only" {
			t.Fatalf("write through %s changed the host's file", p)
		}
	}
	_, err = writeFile(ctx, s.svc, id, "/work/too-big", make([]byte, 1<<20+1), nil)
	testenv.WantCode(t, err, connect.CodeResourceExhausted)
	s.sh(t, id, "dd if=/dev/zero of=/work/big bs=1024 count=1100 2>/dev/null")
	_, _, err = readFile(ctx, s.svc, id, "/work/big")
	testenv.WantCode(t, err, connect.CodeResourceExhausted)
}

func TestArtifactsOutliveTheSandbox(t *testing.T) {
	s := newSandboxStack(t, 1, nil)
	id := s.create(t, nil)
	s.sh(t, id, `mkdir -p /out && printf '{"ok":true}' > /out/result.json && printf '\x89PNG\r\n\x1a\n0000' > /out/plot`)
	ctx := context.Background()
	for _, tc := range []struct{ path, media string }{{"/out/result.json", "application/json"}, {"/out/plot", "image/png"}} {
		resp, err := s.svc.CreateArtifactFromPath(ctx, connect.NewRequest(&appv1.CreateArtifactFromPathRequest{SessionId: id, Path: tc.path, Caption: ptr("result")}))
		if err != nil {
			t.Fatal(err)
		}
		if resp.Msg.GetMediaType() != tc.media {
			t.Fatalf("%s sniffed as %s, want %s", tc.path, resp.Msg.GetMediaType(), tc.media)
		}
		want, _ := s.read(t, id, tc.path)
		stream, err := s.svc.GetArtifact(ctx, connect.NewRequest(&appv1.GetArtifactRequest{SessionId: id, ArtifactId: resp.Msg.GetArtifactId()}))
		if err != nil {
			t.Fatal(err)
		}
		var meta *appv1.ArtifactMetadata
		var got bytes.Buffer
		for stream.Receive() {
			if m := stream.Msg().GetMetadata(); m != nil {
				meta = m
			}
			got.Write(stream.Msg().GetChunk())
		}
		if err := stream.Err(); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got.Bytes(), want) || meta.GetMediaType() != tc.media || meta.GetFileName() != tc.path[strings.LastIndex(tc.path, "/")+1:] {
			t.Fatalf("artifact %v %q", meta, got.Bytes())
		}
	}
	_, err := s.svc.CreateArtifactFromPath(ctx, connect.NewRequest(&appv1.CreateArtifactFromPathRequest{SessionId: id, Path: "/out"}))
	testenv.WantCode(t, err, connect.CodeInvalidArgument)
	events := s.listEvents(t, id, "artifact.created")
	if len(events) != 2 {
		t.Fatalf("%d artifact.created events, want 2", len(events))
	}
}

func TestDiscoverProfileReposLooksInsideTheImage(t *testing.T) {
	s := newSandboxStack(t, 1, nil)
	ctx := context.Background()
	img, err := images.Busybox(map[string]images.File{
		"/src/app/.git/config": {Content: []byte("[core]\n\tbare = false\n[remote \"origin\"]\n\turl = git@github.com:acme/app.git\n[remote \"upstream\"]\n\turl = https://gitlab.com/group/sub/app\n")},
		"/src/app/.git/HEAD":   {Content: []byte("ref: refs/heads/main\n")},
	})
	if err != nil {
		t.Fatal(err)
	}
	ref := imagestest.Push(t, s.sb.Registry, "test/with-repo", img)
	profiles := appv1connect.NewProfileServiceClient(httpClient, s.rpcURL(), auth.WithKey(s.admin))
	p, err := profiles.CreateProfile(ctx, connect.NewRequest(&appv1.CreateProfileRequest{
		Name: "with repo", ImageId: ref,
		Repos: []*appv1.ProfileRepo{{Path: "/work/api", RemoteUrl: "https://github.com/acme/api"}},
	}))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := profiles.DiscoverProfileRepos(ctx, connect.NewRequest(&appv1.DiscoverProfileReposRequest{ProfileId: p.Msg.GetProfile().GetId()}))
	if err != nil {
		t.Fatal(err)
	}
	repos := resp.Msg.GetRepos()
	if len(repos) != 2 || repos[0].GetPath() != "/work/api" || repos[1].GetPath() != "/src/app" {
		t.Fatalf("repos %v", repos)
	}
	remotes := repos[1].GetRemotes()
	if len(remotes) != 2 || remotes[0].GetName() != "origin" || remotes[0].GetParsed().GetOwner() != "acme" || remotes[0].GetParsed().GetName() != "app" ||
		remotes[1].GetName() != "upstream" || remotes[1].GetParsed().GetOwner() != "group/sub" {
		t.Fatalf("remotes of /src/app: %v", remotes)
	}

	broken, err := profiles.CreateProfile(ctx, connect.NewRequest(&appv1.CreateProfileRequest{Name: "broken image", ImageId: s.sb.Registry + "/no/such:image"}))
	if err != nil {
		t.Fatal(err)
	}
	_, err = profiles.DiscoverProfileRepos(ctx, connect.NewRequest(&appv1.DiscoverProfileReposRequest{ProfileId: broken.Msg.GetProfile().GetId()}))
	testenv.WantCode(t, err, connect.CodeFailedPrecondition)
}

// A task's session gets the profile's image_id as its image_uri; when that image cannot be used
// the error names image_id, the field the caller set, not image_uri, which it never sent.
func TestTaskOfAProfileWithAnUnusableImageNamesImageID(t *testing.T) {
	s := newSandboxStack(t, 1, nil)
	ctx := context.Background()
	profiles := appv1connect.NewProfileServiceClient(httpClient, s.rpcURL(), auth.WithKey(s.admin))
	broken, err := profiles.CreateProfile(ctx, connect.NewRequest(&appv1.CreateProfileRequest{Name: "broken image", ImageId: s.sb.Registry + "/no/such:image"}))
	if err != nil {
		t.Fatal(err)
	}
	tasks := appv1connect.NewTaskServiceClient(httpClient, s.rpcURL(), auth.WithKey(s.admin))
	prompt := "hi"
	_, err = tasks.CreateTask(ctx, connect.NewRequest(&appv1.CreateTaskRequest{Type: "agent", ProfileId: broken.Msg.GetProfile().GetId(), Prompt: &prompt}))
	testenv.WantCode(t, err, connect.CodeFailedPrecondition)
	if msg := err.Error(); !strings.Contains(msg, "image_id") || strings.Contains(msg, "image_uri") {
		t.Fatalf("error %q: want it to name image_id and not image_uri", msg)
	}
}

func TestAFullHostRefusesNewSandboxes(t *testing.T) {
	s := newSandboxStack(t, 1, func(sb *testenv.Sandboxes) { sb.Config.Host.MaxSandboxes = 1 })
	ctx := context.Background()
	s.create(t, nil)
	// The fleet still counts the host as having room until its next heartbeat; the host knows.
	_, err := s.svc.CreateSession(ctx, connect.NewRequest(&appv1.CreateSessionRequest{RequestedSessionId: ptr("one-too-many")}))
	if c := connect.CodeOf(err); c != connect.CodeResourceExhausted && c != connect.CodeUnavailable {
		t.Fatalf("second session on a full host: %v, want resource_exhausted (or unavailable once the fleet knows)", err)
	}
	if c := connect.CodeOf(err); c == connect.CodeResourceExhausted && s.status(t, "one-too-many") != "failed" {
		t.Fatalf("the refused session is %s, want failed", s.status(t, "one-too-many"))
	}
}

func TestSandboxLimitsComeFromTheImageAndIsolationHolds(t *testing.T) {
	s := newSandboxStack(t, 1, nil)
	base, err := images.Busybox(nil)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := base.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	cfg = cfg.DeepCopy()
	cfg.Config.Labels = map[string]string{images.LabelCPUs: "0.5", images.LabelMemoryMB: "96", images.LabelPids: "50"}
	img, err := mutate.ConfigFile(base, cfg)
	if err != nil {
		t.Fatal(err)
	}
	ref := imagestest.Push(t, s.sb.Registry, "test/limited", img)
	id := s.create(t, &appv1.CreateSessionRequest{ImageUri: ref})
	// The same limits read from cgroup v2 or, on machines such as this one, cgroup v1.
	got := s.sh(t, id, `cd /sys/fs/cgroup; if [ -f memory.max ]; then cat memory.max pids.max cpu.max;
		else cat memory/memory.limit_in_bytes pids/pids.max; echo $(cat cpu/cpu.cfs_quota_us cpu/cpu.cfs_period_us); fi`)
	if got != "100663296\n50\n50000 100000\n" {
		t.Fatalf("cgroup limits inside the sandbox:\n%s", got)
	}
	for _, tc := range []struct{ name, command, want string }{
		{"only loopback", "ls /sys/class/net", "lo\n"},
		{"its own pid namespace", "echo $(cat /proc/1/cmdline | tr '\\0' ' ')", "/.hangar/bin/supervisor --listen-fd 3\n"},
		{"no mounting", "mount -t tmpfs none /mnt 2>/dev/null && echo mounted || echo refused", "refused\n"},
		{"supervisor is read-only", "echo x > /.hangar/bin/supervisor 2>/dev/null && echo wrote || echo refused", "refused\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := s.sh(t, id, tc.command); got != tc.want {
				t.Fatalf("%s: got %q, want %q", tc.command, got, tc.want)
			}
		})
	}
}

func TestHostAPIRefusesCallsWithoutTheHostToken(t *testing.T) {
	s := newSandboxStack(t, 1, nil)
	f := fleet.New(s.sb.DB, time.Now, time.Minute)
	h, err := f.Get(context.Background(), "host-a")
	if err != nil {
		t.Fatal(err)
	}
	for _, token := range []string{"", "not-the-token"} {
		c := hostclient.New(f, token).Client(h.Address)
		_, err := c.CreateSandbox(context.Background(), connect.NewRequest(&hostv1.CreateSandboxRequest{SessionId: "x", ImageUri: s.sb.Image}))
		testenv.WantCode(t, err, connect.CodeUnauthenticated)
		stream, err := c.Exec(context.Background(), connect.NewRequest(&appv1.ExecRequest{SessionId: "x", Command: ptr("true")}))
		if err == nil {
			for stream.Receive() {
			}
			err = stream.Err()
		}
		testenv.WantCode(t, err, connect.CodeUnauthenticated)
	}
}

func TestCopyFilesBetweenSessionsOnDifferentHosts(t *testing.T) {
	// The loop below may create many sessions before placement reaches the other host.
	s := newSandboxStack(t, 2, func(sb *testenv.Sandboxes) { sb.Config.Limits.MaxSessionsPerUser = 100 })
	ctx := context.Background()
	hostOf := func(id string) string {
		got, err := s.svc.GetSession(ctx, connect.NewRequest(&appv1.GetSessionRequest{SessionId: id}))
		if err != nil {
			t.Fatal(err)
		}
		return got.Msg.GetSession().GetHostId()
	}
	src := s.create(t, nil)
	// Placement follows heartbeats, so keep creating until a session lands on the other host.
	dst := ""
	for deadline := time.Now().Add(20 * time.Second); dst == "" && time.Now().Before(deadline); {
		if id := s.create(t, nil); hostOf(id) != hostOf(src) {
			dst = id
		}
	}
	if dst == "" {
		t.Fatal("every session landed on one host")
	}
	body := bytes.Repeat([]byte("cross-host "), 300_000)
	s.write(t, src, "/data/big.txt", body, ptr[uint32](0o640))
	resp, err := s.svc.CopyFiles(ctx, connect.NewRequest(&appv1.CopyFilesRequest{SourceSessionId: src, TargetSessionId: dst, Paths: []string{"/data/big.txt"}}))
	if err != nil {
		t.Fatal(err)
	}
	if f := resp.Msg.GetFiles(); len(f) != 1 || f[0].GetSha256() != sum(body) {
		t.Fatalf("copy answered %v", resp.Msg)
	}
	if got, _ := s.read(t, dst, "/data/big.txt"); !bytes.Equal(got, body) {
		t.Fatalf("the copy on %s holds %d bytes, want %d", hostOf(dst), len(got), len(body))
	}
	_, err = s.svc.CopyFiles(ctx, connect.NewRequest(&appv1.CopyFilesRequest{SourceSessionId: src, TargetSessionId: dst, Paths: []string{"/data/missing"}}))
	testenv.WantCode(t, err, connect.CodeNotFound)
}
