package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/emptypb"

	appv1 "github.com/hangar-dev/hangar/gen/svc/app/v1"
	"github.com/hangar-dev/hangar/gen/svc/app/v1/appv1connect"
)

func TestSessionsUnaryCommands(t *testing.T) {
	for _, tc := range []struct {
		name      string
		args      []string
		procedure string
		want      proto.Message
		wantOut   []string
	}{
		{"create with defaults", []string{"create"}, appv1connect.SessionServiceCreateSessionProcedure,
			&appv1.CreateSessionRequest{}, []string{"session_id: s1\nstatus: starting\n"}},
		{"create with every flag", []string{"create", "--image", "ghcr.io/a/b:1", "--mode", "sandbox", "--secret", "TOKEN=t0p",
			"--secret", "PW=a=b", "--env", "DEBUG=1", "--id", "mine"}, appv1connect.SessionServiceCreateSessionProcedure,
			&appv1.CreateSessionRequest{ImageUri: "ghcr.io/a/b:1", Mode: "sandbox", Secrets: map[string]string{"TOKEN": "t0p", "PW": "a=b"},
				HarnessEnv: map[string]string{"DEBUG": "1"}, RequestedSessionId: proto.String("mine")},
			[]string{"session_id: s1\n"}},
		{"list", []string{"list"}, appv1connect.SessionServiceListSessionsProcedure, &emptypb.Empty{},
			[]string{"ID STATUS IMAGE OWNER CREATED LAST ACTIVE\n", "s1 running busybox ada@example.com 2026-01-02T03:04:05Z 2026-01-02T04:00:00Z\n",
				"s2 stopped busybox - 2026-01-03T00:00:00Z -\n"}},
		{"get", []string{"get", "s1"}, appv1connect.SessionServiceGetSessionProcedure, &appv1.GetSessionRequest{SessionId: "s1"},
			[]string{"id: s1\n", "status: running\n", "host_id: h1\n"}},
		{"delete", []string{"delete", "s1"}, appv1connect.SessionServiceDeleteSessionProcedure, &appv1.DeleteSessionRequest{SessionId: "s1"},
			[]string{"deleted session s1\n"}},
		{"events", []string{"events", "s1", "--after", "0", "--before", "9", "--limit", "2", "--kind", "tool", "--kind", "text", "--tool", "bash"},
			appv1connect.SessionServiceListSessionEventsProcedure,
			&appv1.ListSessionEventsRequest{SessionId: "s1", AfterIdx: proto.Int64(0), BeforeIdx: proto.Int64(9), Limit: proto.Int64(2),
				Kinds: []string{"tool", "text"}, ToolNames: []string{"bash"}},
			[]string{"IDX KIND PAYLOAD\n", `4 tool {"name":"bash"}` + "\n", "- status {}\n", "next_after_idx: 4\n"}},
		{"events with defaults", []string{"events", "s1"}, appv1connect.SessionServiceListSessionEventsProcedure,
			&appv1.ListSessionEventsRequest{SessionId: "s1"}, []string{"next_after_idx: 4\n"}},
		{"log", []string{"log", "s1", "--kind", "user", "--limit", "5", "--tail"}, appv1connect.SessionServiceGetLogProcedure,
			&appv1.GetLogRequest{SessionId: "s1", Kind: proto.String("user"), Limit: proto.Int64(5), Tail: proto.Bool(true)},
			[]string{"IDX KIND AT PAYLOAD\n", `7 user 2026-01-02T03:04:05Z {"text":"hi"}` + "\n"}},
		{"snapshot", []string{"snapshot", "s1"}, appv1connect.SessionServiceSnapshotProcedure, &appv1.SnapshotRequest{SessionId: "s1"},
			[]string{"snapshot_id: snap1\n", "size_bytes: 4096\n"}},
		{"resume", []string{"resume", "s1"}, appv1connect.SessionServiceResumeProcedure, &appv1.ResumeRequest{SessionId: "s1"},
			[]string{"snapshot_id: snap1\n", "note: resumed\n"}},
		{"checkpoints", []string{"checkpoints", "s1"}, appv1connect.SessionServiceListCheckpointsProcedure,
			&appv1.ListCheckpointsRequest{SessionId: "s1"},
			[]string{"SNAPSHOT CREATED SIZE EVENTS CURSOR LATEST\n", "snap1 2026-01-02T03:04:05Z 4096 12 no\n", "snap2 2026-01-03T00:00:00Z 10 - yes\n"}},
		{"evict", []string{"evict", "s1"}, appv1connect.SessionServiceEvictLocalProcedure, &appv1.EvictLocalRequest{SessionId: "s1"},
			[]string{"evicted session s1\n"}},
		{"cow", []string{"cow", "s1"}, appv1connect.SessionServiceGetCowStateProcedure, &appv1.GetCowStateRequest{SessionId: "s1"},
			[]string{"sandbox_id: sb1\n", "dirty_chunks: 3\n"}},
		{"copy between sessions", []string{"cp", "s1:/work/a.txt", "s2:/work/a.txt"}, appv1connect.SessionServiceCopyFilesProcedure,
			&appv1.CopyFilesRequest{SourceSessionId: "s1", TargetSessionId: "s2", Paths: []string{"/work/a.txt"}},
			[]string{"PATH SIZE SHA256\n", "/work/a.txt 3 abc\n"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeAPI(t)
			replyWithSessions(f)
			out := f.mustRun(t, append([]string{"sessions"}, tc.args...)...)
			f.assertRequest(t, tc.procedure, tc.want)
			assertContains(t, out, tc.wantOut...)
		})
	}
}

// replyWithSessions sets the fake's replies to the session service's unary methods.
func replyWithSessions(f *fakeAPI) {
	reply(f, appv1connect.SessionServiceCreateSessionProcedure, &appv1.CreateSessionResponse{SessionId: "s1", Status: "starting", Kind: "sandbox"})
	reply(f, appv1connect.SessionServiceListSessionsProcedure, &appv1.ListSessionsResponse{Sessions: []*appv1.SessionListItem{
		{Session: &appv1.Session{Id: "s1", Status: "running", Image: "busybox", CreatedAt: "2026-01-02T03:04:05Z", LastActiveAt: "2026-01-02T04:00:00Z"},
			OwnerEmail: proto.String("ada@example.com")},
		{Session: &appv1.Session{Id: "s2", Status: "stopped", Image: "busybox", CreatedAt: "2026-01-03T00:00:00Z"}},
	}})
	reply(f, appv1connect.SessionServiceGetSessionProcedure, &appv1.GetSessionResponse{Session: &appv1.Session{Id: "s1", Status: "running", HostId: proto.String("h1")}})
	reply(f, appv1connect.SessionServiceListSessionEventsProcedure, &appv1.ListSessionEventsResponse{NextAfterIdx: 4, Events: []*appv1.SessionEvent{
		{Idx: proto.Int64(4), Kind: "tool", PayloadJson: `{"name":"bash"}`}, {Kind: "status", PayloadJson: "{}"},
	}})
	reply(f, appv1connect.SessionServiceGetLogProcedure, &appv1.GetLogResponse{SessionId: "s1", Events: []*appv1.ConversationEntry{
		{Idx: 7, Kind: "user", At: "2026-01-02T03:04:05Z", PayloadJson: `{"text":"hi"}`},
	}})
	reply(f, appv1connect.SessionServiceSnapshotProcedure, &appv1.SnapshotResponse{SessionId: "s1", SnapshotId: proto.String("snap1"), SizeBytes: proto.Uint64(4096)})
	reply(f, appv1connect.SessionServiceResumeProcedure, &appv1.ResumeResponse{SessionId: "s1", SnapshotId: proto.String("snap1"), Note: "resumed"})
	reply(f, appv1connect.SessionServiceListCheckpointsProcedure, &appv1.ListCheckpointsResponse{SessionId: "s1", Checkpoints: []*appv1.CheckpointSummary{
		{SnapshotId: "snap1", CreatedAt: "2026-01-02T03:04:05Z", SizeBytes: 4096, EventsCursor: proto.Int64(12)},
		{SnapshotId: "snap2", CreatedAt: "2026-01-03T00:00:00Z", SizeBytes: 10, IsLatest: true},
	}})
	reply(f, appv1connect.SessionServiceGetCowStateProcedure, &appv1.GetCowStateResponse{SessionId: "s1", State: &appv1.CowStateView{SandboxId: "sb1", DirtyChunks: 3}})
	reply(f, appv1connect.SessionServiceCopyFilesProcedure, &appv1.CopyFilesResponse{Files: []*appv1.CopyFileResult{{Path: "/work/a.txt", SizeBytes: 3, Sha256: "abc"}}})
}

// scriptedExec is a command's run as the fake Exec serves it: its output from the offsets the
// request asks for, in frames of at most 4 bytes alternating stdout and stderr, then its exit.
// Call i of the exec breaks, as brk says, after breakAfter[i] output frames; the last call
// breaks after the exit frame if breakAtEnd.
type scriptedExec struct {
	stdout, stderr string
	exit           *appv1.ExecExit
	breakAfter     []int
	brk            func() error
	breakAtEnd     bool
}

func (s scriptedExec) serve(f *fakeAPI) {
	var calls atomic.Int32
	serveStream(f, appv1connect.SessionServiceExecProcedure, func(_ context.Context, req *appv1.ExecRequest, send func(*appv1.ExecOutput) error) error {
		call := int(calls.Add(1)) - 1
		breaks := call < len(s.breakAfter)
		if err := send(&appv1.ExecOutput{Event: &appv1.ExecOutput_Started{Started: &appv1.ExecStarted{ExecId: req.GetExecId()}}}); err != nil {
			return err
		}
		out, errOut := []byte(s.stdout[req.GetStdoutOffset():]), []byte(s.stderr[req.GetStderrOffset():])
		for frames := 0; len(out)+len(errOut) > 0; frames++ {
			if breaks && frames == s.breakAfter[call] {
				return s.brk()
			}
			var frame *appv1.ExecOutput
			if len(out) > 0 && (frames%2 == 0 || len(errOut) == 0) {
				n := min(4, len(out))
				frame, out = &appv1.ExecOutput{Event: &appv1.ExecOutput_Stdout{Stdout: out[:n]}}, out[n:]
			} else {
				n := min(4, len(errOut))
				frame, errOut = &appv1.ExecOutput{Event: &appv1.ExecOutput_Stderr{Stderr: errOut[:n]}}, errOut[n:]
			}
			if err := send(frame); err != nil {
				return err
			}
		}
		if breaks {
			return s.brk()
		}
		if err := send(&appv1.ExecOutput{Event: &appv1.ExecOutput_Exit{Exit: s.exit}}); err != nil || !s.breakAtEnd {
			return err
		}
		return s.brk()
	})
}

func TestSessionsExecMirrorsExitStatus(t *testing.T) {
	for _, tc := range []struct {
		name     string
		exit     *appv1.ExecExit
		wantCode int
		wantNote string
	}{
		{"success", &appv1.ExecExit{ExitStatus: proto.Int32(0)}, 0, ""},
		{"failure", &appv1.ExecExit{ExitStatus: proto.Int32(3)}, 3, ""},
		{"command not found", &appv1.ExecExit{ExitStatus: proto.Int32(127)}, 127, ""},
		{"timed out", &appv1.ExecExit{ExitStatus: proto.Int32(137), TimedOut: true, Signal: proto.Int32(9)}, 124,
			"hangar: the command timed out after 2s (signal 9)\n"},
		{"killed by signal 9", &appv1.ExecExit{ExitStatus: proto.Int32(137), Signal: proto.Int32(9)}, 137, ""},
		{"canceled", &appv1.ExecExit{ExitStatus: proto.Int32(143), Canceled: true, Signal: proto.Int32(15)}, 143,
			"hangar: the command was canceled (signal 15)\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeAPI(t)
			scriptedExec{stdout: "hello, world\n", stderr: "warning: x\n", exit: tc.exit}.serve(f)
			r := f.run(t, "sessions", "exec", "s1", "--timeout", "1500ms", "--", "sh", "-c", "echo hi")
			if r.code != tc.wantCode || (tc.wantCode != 0) != (r.err != nil) {
				t.Fatalf("exit %d (%v), want %d", r.code, r.err, tc.wantCode)
			}
			if r.msg() != "" {
				t.Errorf("printed error %q: the command's exit status needs no message", r.msg())
			}
			if r.out != "hello, world\n" || r.errOut != "warning: x\n"+tc.wantNote {
				t.Errorf("stdout %q, stderr %q; want %q and %q", r.out, r.errOut, "hello, world\n", "warning: x\n"+tc.wantNote)
			}
		})
	}
}

func TestSessionsExecRequest(t *testing.T) {
	exit := &appv1.ExecExit{ExitStatus: proto.Int32(0)}
	for _, tc := range []struct {
		name string
		args []string
		want *appv1.ExecRequest
	}{
		{"argv after --", []string{"s1", "--exec-id", "x1", "--", "ls", "-la", "/"},
			&appv1.ExecRequest{SessionId: "s1", Argv: []string{"ls", "-la", "/"}, ExecId: proto.String("x1")}},
		{"shell command", []string{"s1", "-c", "echo $HOME | wc", "--exec-id", "x1"},
			&appv1.ExecRequest{SessionId: "s1", Command: proto.String("echo $HOME | wc"), ExecId: proto.String("x1")}},
		{"every flag", []string{"s1", "--workdir", "/work", "--env", "A=1", "--env", "B=x=y", "--timeout", "90s", "--exec-id", "x1", "--wake", "--", "make"},
			&appv1.ExecRequest{SessionId: "s1", Argv: []string{"make"}, Workdir: proto.String("/work"), Env: map[string]string{"A": "1", "B": "x=y"},
				TimeoutSecs: proto.Uint64(90), ExecId: proto.String("x1"), Wake: proto.Bool(true)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeAPI(t)
			scriptedExec{exit: exit}.serve(f)
			f.mustRun(t, append([]string{"sessions", "exec"}, tc.args...)...)
			f.assertRequest(t, appv1connect.SessionServiceExecProcedure, tc.want)
			if got := f.request(t, appv1connect.SessionServiceExecProcedure).header.Get("x-api-key"); got != testKey {
				t.Errorf("x-api-key on the stream = %q, want %q", got, testKey)
			}
		})
	}

	t.Run("made-up exec IDs differ", func(t *testing.T) {
		f := newFakeAPI(t)
		scriptedExec{exit: exit}.serve(f)
		f.mustRun(t, "sessions", "exec", "s1", "--", "true")
		f.mustRun(t, "sessions", "exec", "s1", "--", "true")
		reqs := f.requests(appv1connect.SessionServiceExecProcedure)
		a, b := reqs[0].msg.(*appv1.ExecRequest).GetExecId(), reqs[1].msg.(*appv1.ExecRequest).GetExecId()
		if a == "" || a == b {
			t.Errorf("exec IDs %q and %q: want two different non-empty ones", a, b)
		}
	})
}

func TestSessionsExecReattachesWhereTheStreamBroke(t *testing.T) {
	const stdout = "the quick brown fox jumps over the lazy dog\n"
	const stderr = "compiling... 1 warning\n"
	unavailable := func() error { return connect.NewError(connect.CodeUnavailable, errors.New("host restarting")) }
	dropConnection := func() error { panic(http.ErrAbortHandler) } // net/http cuts the connection mid-body
	for _, tc := range []struct {
		name       string
		breakAfter []int
		brk        func() error
	}{
		{"server error mid-stream", []int{5}, unavailable},
		{"dropped connection mid-stream", []int{7}, dropConnection},
		{"broken several times", []int{2, 3, 0, 4}, unavailable},
		{"broken before the exit frame", []int{1000}, dropConnection},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeAPI(t)
			scriptedExec{stdout: stdout, stderr: stderr, exit: &appv1.ExecExit{ExitStatus: proto.Int32(3)}, breakAfter: tc.breakAfter, brk: tc.brk}.serve(f)
			r := f.run(t, "sessions", "exec", "s1", "--", "make")
			if r.code != 3 {
				t.Fatalf("exit %d (%v), want the command's 3", r.code, r.err)
			}
			if r.out != stdout || r.errOut != stderr {
				t.Errorf("stdout %q, stderr %q; want each stream exactly once: %q and %q", r.out, r.errOut, stdout, stderr)
			}
			reqs := f.requests(appv1connect.SessionServiceExecProcedure)
			if len(reqs) != len(tc.breakAfter)+1 {
				t.Fatalf("%d Exec calls, want %d", len(reqs), len(tc.breakAfter)+1)
			}
			first := reqs[0].msg.(*appv1.ExecRequest)
			if first.StdoutOffset != nil || first.StderrOffset != nil {
				t.Errorf("the first call asks for offsets: %v", first)
			}
			var outSent, errSent uint64
			for i, c := range reqs[1:] {
				// What call i sent before it broke, by the fake's alternation of 4-byte frames.
				for frame := 0; frame < tc.breakAfter[i] && outSent+errSent < uint64(len(stdout)+len(stderr)); frame++ {
					if outSent < uint64(len(stdout)) && (frame%2 == 0 || errSent == uint64(len(stderr))) {
						outSent = min(outSent+4, uint64(len(stdout)))
					} else {
						errSent = min(errSent+4, uint64(len(stderr)))
					}
				}
				want := proto.Clone(first).(*appv1.ExecRequest)
				want.StdoutOffset, want.StderrOffset = proto.Uint64(outSent), proto.Uint64(errSent)
				if got := c.msg.(*appv1.ExecRequest); !proto.Equal(got, want) {
					t.Errorf("re-attach %d:\n got %v\nwant %v", i+1, got, want)
				}
			}
		})
	}
}

func TestSessionsExecDoesNotReattachAfterTheExit(t *testing.T) {
	f := newFakeAPI(t)
	scriptedExec{stdout: "done\n", exit: &appv1.ExecExit{ExitStatus: proto.Int32(0)}, breakAtEnd: true,
		brk: func() error { return connect.NewError(connect.CodeUnavailable, errors.New("host restarting")) }}.serve(f)
	if r := f.run(t, "sessions", "exec", "s1", "--", "true"); r.err != nil || r.out != "done\n" {
		t.Fatalf("exit %d (%v), printed %q; want success and the output", r.code, r.err, r.out)
	}
	f.request(t, appv1connect.SessionServiceExecProcedure)
}

func TestSessionsExecGivesUp(t *testing.T) {
	old := reattachBackoff
	reattachBackoff = time.Millisecond
	t.Cleanup(func() { reattachBackoff = old })

	t.Run("after attempts that get nothing", func(t *testing.T) {
		f := newFakeAPI(t)
		serveStream(f, appv1connect.SessionServiceExecProcedure, func(context.Context, *appv1.ExecRequest, func(*appv1.ExecOutput) error) error {
			return connect.NewError(connect.CodeUnavailable, errors.New("host lost"))
		})
		r := f.run(t, "sessions", "exec", "s1", "--", "true")
		if r.code != 1 || !strings.Contains(r.msg(), "host lost") || !strings.Contains(r.msg(), "gave up after 5 attempts to re-attach") {
			t.Errorf("exit %d, %q; want 1 and a message that it gave up", r.code, r.msg())
		}
		if n := len(f.requests(appv1connect.SessionServiceExecProcedure)); n != 1+reattachLimit {
			t.Errorf("%d Exec calls, want the first and %d re-attaches", n, reattachLimit)
		}
	})

	t.Run("at once on an error of the request", func(t *testing.T) {
		f := newFakeAPI(t)
		scriptedExec{exit: &appv1.ExecExit{ExitStatus: proto.Int32(0)}}.serve(f)
		f.errs[appv1connect.SessionServiceExecProcedure] = connect.NewError(connect.CodeNotFound, errors.New(`session "s9" not found`))
		r := f.run(t, "sessions", "exec", "s9", "--", "true")
		if r.code != 5 || r.msg() != `not_found: session "s9" not found` {
			t.Errorf("exit %d, %q; want 5 and not_found", r.code, r.msg())
		}
	})

	t.Run("at once when nothing listens", func(t *testing.T) {
		r := runHangar(t, "", "sessions", "exec", "s1", "--url", "http://127.0.0.1:1", "--api-key", "k", "--", "true")
		if r.code != 1 || !strings.HasPrefix(r.msg(), "unavailable: ") || strings.Contains(r.msg(), "re-attach") {
			t.Errorf("exit %d, %q; want 1 and unavailable without re-attaching", r.code, r.msg())
		}
	})
}

func TestSessionsExecJSON(t *testing.T) {
	f := newFakeAPI(t)
	scriptedExec{stdout: "abcdef", stderr: "xy", exit: &appv1.ExecExit{ExitStatus: proto.Int32(2)},
		breakAfter: []int{1}, brk: func() error { return connect.NewError(connect.CodeUnavailable, errors.New("blip")) }}.serve(f)
	r := f.run(t, "sessions", "exec", "s1", "--json", "--exec-id", "x1", "--", "cat")
	if r.code != 2 {
		t.Fatalf("exit %d (%v), want 2", r.code, r.err)
	}
	var frames []string
	var stdout, stderr []byte
	for _, line := range strings.Split(strings.TrimSuffix(r.out, "\n"), "\n") {
		out := &appv1.ExecOutput{}
		if err := protojson.Unmarshal([]byte(line), out); err != nil {
			t.Fatalf("line %q is not an ExecOutput: %v", line, err)
		}
		switch ev := out.GetEvent().(type) {
		case *appv1.ExecOutput_Started:
			frames = append(frames, "started "+ev.Started.GetExecId())
		case *appv1.ExecOutput_Stdout:
			stdout = append(stdout, ev.Stdout...)
			frames = append(frames, "stdout")
		case *appv1.ExecOutput_Stderr:
			stderr = append(stderr, ev.Stderr...)
			frames = append(frames, "stderr")
		case *appv1.ExecOutput_Exit:
			frames = append(frames, "exit")
		}
	}
	want := "started x1,stdout,stdout,stderr,exit" // the second stdout frame after the re-attach
	if strings.Join(frames, ",") != want || string(stdout) != "abcdef" || string(stderr) != "xy" || r.errOut != "" {
		t.Errorf("frames %v, stdout %q, stderr %q, printed on stderr %q; want %s, abcdef, xy and nothing", frames, stdout, stderr, r.errOut, want)
	}
}

func TestSessionsCpUpload(t *testing.T) {
	big := make([]byte, 2*cpChunkSize+1000)
	_, _ = rand.Read(big)
	local := filepath.Join(t.TempDir(), "data.bin")
	if err := os.WriteFile(local, big, 0o640); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name       string
		stdin      string
		src        string
		content    []byte
		wantMode   *uint32
		wantChunks []int
	}{
		{"local file", "", local, big, proto.Uint32(0o640), []int{cpChunkSize, cpChunkSize, 1000}},
		{"standard input", "from stdin", "-", []byte("from stdin"), nil, []int{10}},
		{"empty standard input", "", "-", nil, nil, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeAPI(t)
			f.serve(appv1connect.SessionServiceWriteFileProcedure, storeUpload)
			r := f.runWithInput(t, tc.stdin, "sessions", "cp", tc.src, "s1:/work/data.bin")
			if r.err != nil {
				t.Fatalf("exit %d: %v", r.code, r.err)
			}
			sum := sha256.Sum256(tc.content)
			frames := f.requests(appv1connect.SessionServiceWriteFileProcedure)
			wantMeta := &appv1.WriteFileMetadata{SessionId: "s1", Path: "/work/data.bin", SizeBytes: uint64(len(tc.content)),
				Sha256: hex.EncodeToString(sum[:]), Mode: tc.wantMode}
			if got := frames[0].msg.(*appv1.WriteFileRequest).GetMetadata(); !proto.Equal(got, wantMeta) {
				t.Errorf("metadata frame %v, want %v", got, wantMeta)
			}
			var got []byte
			var sizes []int
			for _, fr := range frames[1:] {
				chunk := fr.msg.(*appv1.WriteFileRequest).GetChunk()
				got, sizes = append(got, chunk...), append(sizes, len(chunk))
			}
			if !bytes.Equal(got, tc.content) || !slices.Equal(sizes, tc.wantChunks) {
				t.Errorf("sent %d bytes in chunks %v; want the %d bytes in chunks %v", len(got), sizes, len(tc.content), tc.wantChunks)
			}
			assertContains(t, r.out, "path: /work/data.bin\n", "sha256: "+hex.EncodeToString(sum[:])+"\n")
		})
	}
}

// storeUpload is a WriteFile that keeps nothing and answers with the size and SHA-256 of what
// it received.
func storeUpload(_ context.Context, conn connect.StreamingHandlerConn) error {
	h := sha256.New()
	var path string
	var n int
	for {
		req := &appv1.WriteFileRequest{}
		if err := conn.Receive(req); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			return err
		}
		if m := req.GetMetadata(); m != nil {
			path = m.GetPath()
		}
		n += len(req.GetChunk())
		h.Write(req.GetChunk())
	}
	return conn.Send(&appv1.WriteFileResponse{Path: path, SizeBytes: uint64(n), Sha256: hex.EncodeToString(h.Sum(nil))})
}

func TestSessionsCpUploadRejectedByServer(t *testing.T) {
	f := newFakeAPI(t)
	f.serve(appv1connect.SessionServiceWriteFileProcedure, func(_ context.Context, conn connect.StreamingHandlerConn) error {
		return connect.NewError(connect.CodePermissionDenied, errors.New("read-only path"))
	})
	r := f.run(t, "sessions", "cp", writeTemp(t, "a.txt", strings.Repeat("x", 3*cpChunkSize)), "s1:/etc/a.txt")
	if r.code != 4 || r.msg() != "permission_denied: read-only path" {
		t.Errorf("exit %d, %q; want 4 and the server's error", r.code, r.msg())
	}
}

// serveFile makes the fake's ReadFile send content in 3-byte chunks after a metadata frame
// that announces size and sum.
func serveFile(f *fakeAPI, content string, size uint64, sum string) {
	serveStream(f, appv1connect.SessionServiceReadFileProcedure, func(_ context.Context, req *appv1.ReadFileRequest, send func(*appv1.ReadFileResponse) error) error {
		meta := &appv1.ReadFileMetadata{Path: req.GetPath(), SizeBytes: size, Sha256: sum, FileName: filepath.Base(req.GetPath())}
		if err := send(&appv1.ReadFileResponse{Frame: &appv1.ReadFileResponse_Metadata{Metadata: meta}}); err != nil {
			return err
		}
		for c := range slices.Chunk([]byte(content), 3) {
			if err := send(&appv1.ReadFileResponse{Frame: &appv1.ReadFileResponse_Chunk{Chunk: c}}); err != nil {
				return err
			}
		}
		return nil
	})
}

func TestSessionsCpDownload(t *testing.T) {
	const content = "line one\nline two\n"
	sum := sha256.Sum256([]byte(content))
	good := hex.EncodeToString(sum[:])
	for _, tc := range []struct {
		name     string
		dst      string // under a fresh directory; "-" is standard output; "" is the directory itself
		existing string // content the destination has before
		size     uint64
		sum      string
		wantFile string // the file that must hold content
		wantErr  string
	}{
		{name: "to a file", dst: "out.txt", size: uint64(len(content)), sum: good, wantFile: "out.txt"},
		{name: "into a directory", dst: "", size: uint64(len(content)), sum: good, wantFile: "notes.txt"},
		{name: "over an existing file", dst: "out.txt", existing: "old", size: uint64(len(content)), sum: good, wantFile: "out.txt"},
		{name: "to standard output", dst: "-", size: uint64(len(content)), sum: good},
		{name: "wrong sha256", dst: "out.txt", size: uint64(len(content)), sum: strings.Repeat("0", 64),
			wantErr: "the content has sha256 " + good + ", the server announced 0000"},
		{name: "wrong sha256 over an existing file", dst: "out.txt", existing: "old", size: uint64(len(content)), sum: strings.Repeat("0", 64),
			wantErr: "the server announced 0000"},
		{name: "fewer bytes than announced", dst: "out.txt", size: uint64(len(content)) + 1, sum: good, wantErr: "got 18 bytes, the server announced 19"},
		{name: "more bytes than announced", dst: "out.txt", size: 4, sum: good, wantErr: "more than the 4 bytes it announced"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			dst := filepath.Join(dir, tc.dst)
			if tc.dst == "-" {
				dst = "-"
			}
			if tc.existing != "" {
				if err := os.WriteFile(dst, []byte(tc.existing), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			f := newFakeAPI(t)
			serveFile(f, content, tc.size, tc.sum)
			r := f.run(t, "sessions", "cp", "s1:/work/notes.txt", dst)
			f.assertRequest(t, appv1connect.SessionServiceReadFileProcedure, &appv1.ReadFileRequest{SessionId: "s1", Path: "/work/notes.txt"})

			entries, _ := os.ReadDir(dir)
			var names []string
			for _, e := range entries {
				names = append(names, e.Name())
			}
			if tc.wantErr != "" {
				if r.code != 1 || !strings.Contains(r.msg(), tc.wantErr) {
					t.Errorf("exit %d, %q; want 1 and %q", r.code, r.msg(), tc.wantErr)
				}
				wantNames := "[]"
				if tc.existing != "" {
					wantNames = "[out.txt]"
				}
				if got := "[" + strings.Join(names, " ") + "]"; got != wantNames {
					t.Errorf("the directory holds %s after a failed download, want %s", got, wantNames)
				}
				if tc.existing != "" {
					if b, _ := os.ReadFile(dst); string(b) != tc.existing {
						t.Errorf("the existing file now holds %q, want it untouched", b)
					}
				}
				return
			}
			if r.err != nil {
				t.Fatalf("exit %d: %v", r.code, r.err)
			}
			if tc.dst == "-" {
				if r.out != content || len(names) != 0 {
					t.Errorf("printed %q and left %v; want the content only", r.out, names)
				}
				return
			}
			if b, err := os.ReadFile(filepath.Join(dir, tc.wantFile)); err != nil || string(b) != content || len(names) != 1 {
				t.Errorf("%s holds %q (%v), directory %v; want the content alone", tc.wantFile, b, err, names)
			}
			assertContains(t, r.out, "path: /work/notes.txt\n", "sha256: "+good+"\n")
		})
	}
}

// TestSessionsStreamsOutliveTimeout checks that --timeout, meant for unary calls, does not cut
// a download that takes longer.
func TestSessionsStreamsOutliveTimeout(t *testing.T) {
	f := newFakeAPI(t)
	serveStream(f, appv1connect.SessionServiceReadFileProcedure, func(ctx context.Context, _ *appv1.ReadFileRequest, send func(*appv1.ReadFileResponse) error) error {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(300 * time.Millisecond):
		}
		sum := sha256.Sum256(nil)
		meta := &appv1.ReadFileMetadata{Sha256: hex.EncodeToString(sum[:])}
		return send(&appv1.ReadFileResponse{Frame: &appv1.ReadFileResponse_Metadata{Metadata: meta}})
	})
	if r := f.run(t, "sessions", "cp", "s1:/empty", filepath.Join(t.TempDir(), "empty"), "--timeout", "50ms"); r.err != nil {
		t.Fatalf("exit %d: %v", r.code, r.err)
	}
}

func TestSessionsEventsFollowReconnects(t *testing.T) {
	old := reattachBackoff
	reattachBackoff = time.Millisecond
	t.Cleanup(func() { reattachBackoff = old })

	ev := func(idx int64, kind string) *appv1.SessionEvent {
		return &appv1.SessionEvent{Idx: proto.Int64(idx), Kind: kind, PayloadJson: `{"n":` + string(rune('0'+idx)) + `}`}
	}
	// Each call ends its own way: an error mid-stream, a clean end (a server's request time
	// limit), then the session's deletion, which ends the follow.
	script := []func(send func(*appv1.SessionEvent) error) error{
		func(send func(*appv1.SessionEvent) error) error {
			_ = send(ev(1, "text"))
			_ = send(ev(2, "tool"))
			return connect.NewError(connect.CodeUnavailable, errors.New("connection reset"))
		},
		func(send func(*appv1.SessionEvent) error) error {
			_ = send(ev(2, "tool")) // a server resending what was printed: skipped
			_ = send(&appv1.SessionEvent{Kind: "typing", PayloadJson: "{}"})
			return send(ev(3, "text"))
		},
		func(func(*appv1.SessionEvent) error) error {
			return connect.NewError(connect.CodeNotFound, errors.New("session deleted"))
		},
	}
	var calls atomic.Int32
	f := newFakeAPI(t)
	serveStream(f, appv1connect.SessionServiceStreamEventsProcedure, func(_ context.Context, _ *appv1.StreamEventsRequest, send func(*appv1.SessionEvent) error) error {
		return script[min(int(calls.Add(1))-1, len(script)-1)](send)
	})
	r := f.run(t, "sessions", "events", "s1", "--follow", "--since", "0", "--durable-only")
	if r.code != 5 || r.msg() != "not_found: session deleted" {
		t.Errorf("exit %d, %q; want 5 when the session goes", r.code, r.msg())
	}
	want := "1 text {\"n\":1}\n2 tool {\"n\":2}\n- typing {}\n3 text {\"n\":3}\n"
	if r.out != want {
		t.Errorf("printed\n%s\nwant\n%s", r.out, want)
	}
	var since []int64
	for _, c := range f.requests(appv1connect.SessionServiceStreamEventsProcedure) {
		req := c.msg.(*appv1.StreamEventsRequest)
		if req.GetSessionId() != "s1" || !req.GetDurableOnly() {
			t.Errorf("request %v: want session s1, durable only", req)
		}
		since = append(since, req.GetSince())
	}
	if len(since) != 3 || since[0] != 0 || since[1] != 2 || since[2] != 3 {
		t.Errorf("since of each call: %v, want [0 2 3]", since)
	}
}

func TestSessionsEventsFollowJSON(t *testing.T) {
	f := newFakeAPI(t)
	serveStream(f, appv1connect.SessionServiceStreamEventsProcedure, func(_ context.Context, _ *appv1.StreamEventsRequest, send func(*appv1.SessionEvent) error) error {
		_ = send(&appv1.SessionEvent{Idx: proto.Int64(1), Kind: "text", PayloadJson: `{"a":1}`})
		return connect.NewError(connect.CodePermissionDenied, errors.New("not yours"))
	})
	r := f.run(t, "sessions", "events", "s1", "--follow", "--json")
	got := &appv1.SessionEvent{}
	if err := protojson.Unmarshal([]byte(r.out), got); err != nil || got.GetIdx() != 1 || got.GetKind() != "text" || strings.Count(r.out, "\n") != 1 {
		t.Errorf("printed %q (%v); want one JSON line of the event", r.out, err)
	}
	if r.code != 4 {
		t.Errorf("exit %d, want 4", r.code)
	}
	if req := f.request(t, appv1connect.SessionServiceStreamEventsProcedure).msg.(*appv1.StreamEventsRequest); req.Since != nil {
		t.Errorf("since = %d without --since, want it unset", req.GetSince())
	}
}

func TestSessionsUsageErrors(t *testing.T) {
	for _, tc := range []struct {
		name    string
		args    []string
		wantMsg string
	}{
		{"exec without a command", []string{"exec", "s1"}, "give the command to run: ID -- ARGV... or ID -c COMMAND"},
		{"exec without a session", []string{"exec"}, "give the session ID, then the command"},
		{"exec with argv and -c", []string{"exec", "s1", "-c", "ls", "--", "ls"}, "give the command as -- ARGV... or as -c COMMAND, not both"},
		{"exec with a bad timeout", []string{"exec", "s1", "--timeout", "-5s", "--", "ls"}, "--timeout must be positive, not -5s"},
		{"exec with a bad env", []string{"exec", "s1", "--env", "NOPE", "--", "ls"}, `--env "NOPE": want K=V`},
		{"create with a bad mode", []string{"create", "--mode", "vm"}, `--mode must be one of sandbox, agent, not "vm"`},
		{"create with a bad secret", []string{"create", "--secret", "=x"}, `--secret "=x": want K=V`},
		{"cp between local files", []string{"cp", "a", "b"}, "one of SRC and DST must be in a session: ID:/path"},
		{"cp with a relative session path", []string{"cp", "s1:notes.txt", "b"}, "s1:notes.txt: a path in a session must be absolute, as in s1:/notes.txt"},
		{"cp between different paths", []string{"cp", "s1:/a", "s2:/b"}, "a copy between sessions keeps the path: s1:/a cannot go to s2:/b"},
		{"cp of a missing file", []string{"cp", "/nonexistent/x", "s1:/x"}, "/nonexistent/x: no such file"},
		{"cp of a directory", []string{"cp", os.TempDir(), "s1:/x"}, "is not a regular file"},
		{"cp with one argument", []string{"cp", "s1:/a"}, "accepts 2 arg(s), received 1"},
		{"events --since without --follow", []string{"events", "s1", "--since", "3"}, "--since needs --follow"},
		{"events --follow with --limit", []string{"events", "s1", "--follow", "--limit", "3"}, "--limit lists events: it does not go with --follow"},
		{"events with a bad index", []string{"events", "s1", "--after", "x"}, `invalid argument "x"`},
		{"get without an ID", []string{"get"}, "accepts 1 arg(s), received 0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeAPI(t)
			r := f.run(t, append([]string{"sessions"}, tc.args...)...)
			if r.code != 2 || !strings.Contains(r.msg(), tc.wantMsg) {
				t.Errorf("exit %d, %q; want 2 and %q", r.code, r.msg(), tc.wantMsg)
			}
			if len(f.calls) != 0 {
				t.Errorf("sent %d requests for a bad command line", len(f.calls))
			}
		})
	}
}
