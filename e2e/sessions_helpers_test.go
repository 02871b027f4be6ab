package e2e

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"net/url"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/hangar-dev/hangar/composition"
	appv1 "github.com/hangar-dev/hangar/gen/svc/app/v1"
	"github.com/hangar-dev/hangar/gen/svc/app/v1/appv1connect"
	"github.com/hangar-dev/hangar/internal/testenv"
	"github.com/hangar-dev/hangar/internal/testkit"
	"github.com/hangar-dev/hangar/platform/auth"
)

// sandboxStack is the whole API with sandbox hosts behind it.
type sandboxStack struct {
	*stack
	sb    *testenv.Sandboxes
	hosts []*testenv.TestHost
	svc   appv1connect.SessionServiceClient
}

// newSandboxStack serves the API over nHosts sandbox hosts; tune adjusts the config first.
func newSandboxStack(t testing.TB, nHosts int, tune func(*testenv.Sandboxes)) *sandboxStack {
	t.Helper()
	return newSandboxStackWith(t, nHosts, tune, nil)
}

// newSandboxStackWith is newSandboxStack with tuneAPI adjusting the API's deps too.
func newSandboxStackWith(t testing.TB, nHosts int, tune func(*testenv.Sandboxes), tuneAPI func(*composition.Deps)) *sandboxStack {
	t.Helper()
	db, _ := testenv.Firestore(t)
	sb := testenv.NewSandboxes(t, db)
	if tune != nil {
		tune(sb)
	}
	s := &sandboxStack{sb: sb}
	for i := range nHosts {
		s.hosts = append(s.hosts, sb.StartHost(t, "host-"+string(rune('a'+i))))
	}
	deps := composition.Deps{DB: sb.DB, Config: sb.Config, Bucket: sb.Bucket, Sealer: sb.Sealer, DefaultImage: sb.Image}
	if tuneAPI != nil {
		tuneAPI(&deps)
	}
	s.stack = serve(t, composition.New(deps))
	s.svc = s.sessions(s.admin)
	return s
}

// sessions is a SessionService client with key.
func (s *sandboxStack) sessions(key string) appv1connect.SessionServiceClient {
	return appv1connect.NewSessionServiceClient(httpClient, s.rpcURL(), auth.WithKey(key))
}

// create makes a session of the test image and returns its id.
func (s *sandboxStack) create(t testing.TB, req *appv1.CreateSessionRequest) string {
	t.Helper()
	if req == nil {
		req = &appv1.CreateSessionRequest{}
	}
	resp, err := s.svc.CreateSession(context.Background(), connect.NewRequest(req))
	if err != nil {
		t.Fatalf("create session: %v", err)
	}
	if resp.Msg.GetStatus() != "running" {
		t.Fatalf("new session is %q, want running", resp.Msg.GetStatus())
	}
	return resp.Msg.GetSessionId()
}

// execResult is everything an exec streamed.
type execResult struct {
	execID         string
	stdout, stderr string
	exit           *appv1.ExecExit
}

// exec runs req to its end.
func (s *sandboxStack) exec(t testing.TB, req *appv1.ExecRequest) execResult {
	t.Helper()
	res, err := collectExec(context.Background(), s.svc, req)
	if err != nil {
		t.Fatalf("exec %v: %v", req, err)
	}
	return res
}

func collectExec(ctx context.Context, svc appv1connect.SessionServiceClient, req *appv1.ExecRequest) (execResult, error) {
	stream, err := svc.Exec(ctx, connect.NewRequest(req))
	if err != nil {
		return execResult{}, err
	}
	defer stream.Close()
	var res execResult
	var out, errb bytes.Buffer
	for stream.Receive() {
		switch ev := stream.Msg().GetEvent().(type) {
		case *appv1.ExecOutput_Started:
			res.execID = ev.Started.GetExecId()
		case *appv1.ExecOutput_Stdout:
			out.Write(ev.Stdout)
		case *appv1.ExecOutput_Stderr:
			errb.Write(ev.Stderr)
		case *appv1.ExecOutput_Exit:
			res.exit = ev.Exit
		}
	}
	res.stdout, res.stderr = out.String(), errb.String()
	return res, stream.Err()
}

// sh runs a shell command in the session and returns its stdout, failing on a non-zero exit.
func (s *sandboxStack) sh(t testing.TB, session, command string) string {
	t.Helper()
	res := s.exec(t, &appv1.ExecRequest{SessionId: session, Command: &command})
	if res.exit.GetExitStatus() != 0 {
		t.Fatalf("%q exited %d: %s", command, res.exit.GetExitStatus(), res.stderr)
	}
	return res.stdout
}

// write puts body at path in the session.
func (s *sandboxStack) write(t testing.TB, session, path string, body []byte, mode *uint32) *appv1.WriteFileResponse {
	t.Helper()
	resp, err := writeFile(context.Background(), s.svc, session, path, body, mode)
	if err != nil {
		t.Fatalf("write %s: %v", path, err)
	}
	return resp
}

func writeFile(ctx context.Context, svc appv1connect.SessionServiceClient, session, path string, body []byte, mode *uint32) (*appv1.WriteFileResponse, error) {
	return upload(ctx, svc, session, path, body, sum(body), mode)
}

// upload is writeFile with the sha256 given, so that a benchmark hashes its body once.
func upload(ctx context.Context, svc appv1connect.SessionServiceClient, session, path string, body []byte, digest string, mode *uint32) (*appv1.WriteFileResponse, error) {
	up := svc.WriteFile(ctx)
	err := up.Send(&appv1.WriteFileRequest{Frame: &appv1.WriteFileRequest_Metadata{Metadata: &appv1.WriteFileMetadata{
		SessionId: session, Path: path, SizeBytes: uint64(len(body)), Sha256: digest, Mode: mode,
	}}})
	for off := 0; err == nil && off < len(body); off += 1 << 20 {
		err = up.Send(&appv1.WriteFileRequest{Frame: &appv1.WriteFileRequest_Chunk{Chunk: body[off:min(off+1<<20, len(body))]}})
	}
	resp, cerr := up.CloseAndReceive()
	if cerr != nil {
		return nil, cerr
	}
	return resp.Msg, err
}

// read returns the file at path in the session and its metadata.
func (s *sandboxStack) read(t testing.TB, session, path string) ([]byte, *appv1.ReadFileMetadata) {
	t.Helper()
	body, meta, err := readFile(context.Background(), s.svc, session, path)
	if err != nil {
		t.Fatalf("read %s: %v", path, err)
	}
	return body, meta
}

func readFile(ctx context.Context, svc appv1connect.SessionServiceClient, session, path string) ([]byte, *appv1.ReadFileMetadata, error) {
	stream, err := svc.ReadFile(ctx, connect.NewRequest(&appv1.ReadFileRequest{SessionId: session, Path: path}))
	if err != nil {
		return nil, nil, err
	}
	defer stream.Close()
	var meta *appv1.ReadFileMetadata
	var body bytes.Buffer
	for stream.Receive() {
		if m := stream.Msg().GetMetadata(); m != nil {
			meta = m
		}
		body.Write(stream.Msg().GetChunk())
	}
	return body.Bytes(), meta, stream.Err()
}

func sum(b []byte) string {
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:])
}

// status reads the session's state.
func (s *sandboxStack) status(t testing.TB, session string) string {
	t.Helper()
	resp, err := s.svc.GetSession(context.Background(), connect.NewRequest(&appv1.GetSessionRequest{SessionId: session}))
	if err != nil {
		t.Fatalf("get session: %v", err)
	}
	return resp.Msg.GetSession().GetStatus()
}

// waitStatus polls until the session reaches want.
// killHostOf kills the host session runs on, as a crash would, waits until the session is lost
// with it, and returns that host's id.
func (s *sandboxStack) killHostOf(t testing.TB, session string) string {
	t.Helper()
	got, err := s.svc.GetSession(t.Context(), connect.NewRequest(&appv1.GetSessionRequest{SessionId: session}))
	if err != nil {
		t.Fatal(err)
	}
	dead := got.Msg.GetSession().GetHostId()
	for _, h := range s.hosts {
		if h.ID() == dead {
			h.Kill(t)
		}
	}
	s.waitStatus(t, session, "lost", 3*s.sb.Config.Host.HostTimeout)
	return dead
}

func (s *sandboxStack) waitStatus(t testing.TB, session, want string, within time.Duration) {
	t.Helper()
	testkit.Eventually(t, within, "session "+session+" "+want, func() (bool, string) {
		got := s.status(t, session)
		return got == want, "it is " + got
	})
}

// fileSums lists "sha256  path" of every regular file under dirs in the session, sorted, with
// each entry's mode and symlink targets, so two listings are equal when the trees are.
func (s *sandboxStack) fileSums(t testing.TB, session string, dirs ...string) string {
	t.Helper()
	d := strings.Join(dirs, " ")
	return s.sh(t, session, "find "+d+" -type f | sort | xargs -r sha256sum; find "+d+" | sort | xargs -r stat -c '%n %a %F'; find "+d+" -type l | sort | xargs -r readlink")
}

func ptr[T any](v T) *T { return &v }

// listEvents returns the session's events of kind, oldest first.
// eventsUntil lists the session's events of kinds until done says they hold what the test
// waits for: the event log batches its writes, so an event emitted before a command returned
// may be stored a moment later. It fails the test after a minute.
func (s *sandboxStack) eventsUntil(t testing.TB, session string, done func([]*appv1.SessionEvent) bool, kinds ...string) []*appv1.SessionEvent {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		events := s.listEvents(t, session, kinds...)
		if done(events) {
			return events
		}
		if time.Now().After(deadline) {
			t.Fatalf("the session's %v events never held what was awaited: %d events", kinds, len(events))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func (s *sandboxStack) listEvents(t testing.TB, session string, kinds ...string) []*appv1.SessionEvent {
	t.Helper()
	var out []*appv1.SessionEvent
	after := int64(0)
	for {
		resp, err := s.svc.ListSessionEvents(context.Background(), connect.NewRequest(&appv1.ListSessionEventsRequest{
			SessionId: session, AfterIdx: &after, Kinds: kinds, Limit: ptr[int64](1000),
		}))
		if err != nil {
			t.Fatalf("list events: %v", err)
		}
		out = append(out, resp.Msg.GetEvents()...)
		if len(resp.Msg.GetEvents()) == 0 {
			return out
		}
		after = resp.Msg.GetNextAfterIdx()
	}
}

// routerModel puts model into router's catalog as a refresh would have (available) with the
// admin policy given: sessions may use only the models the policy enables.
func (s *sandboxStack) routerModel(t testing.TB, router, model string, enabled, userEnabled bool) {
	t.Helper()
	doc := s.sb.DB.Collection("model_routers").Doc(router).Collection("models").Doc(url.PathEscape(model))
	if _, err := doc.Set(context.Background(), map[string]any{"router_id": router, "id": model, "available": true,
		"enabled": enabled, "user_enabled": userEnabled, "updated_at": time.Now()}); err != nil {
		t.Fatal(err)
	}
}
