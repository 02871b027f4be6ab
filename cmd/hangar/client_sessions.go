package main

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"connectrpc.com/connect"
	"github.com/spf13/cobra"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/emptypb"

	appv1 "github.com/hangar-dev/hangar/gen/svc/app/v1"
)

func newSessionsCmd() *cobra.Command {
	return newClientGroup("sessions", "Create sessions, run commands and copy files in them, read their events, snapshot and resume them",
		newSessionsCreateCmd, newSessionsListCmd, newSessionsGetCmd, newSessionsDeleteCmd,
		newSessionsExecCmd, newSessionsCpCmd, newSessionsEventsCmd, newSessionsLogCmd,
		newSessionsSnapshotCmd, newSessionsResumeCmd, newSessionsCheckpointsCmd, newSessionsEvictCmd, newSessionsCowCmd,
		newSessionsPromptCmd, newSessionsInterruptCmd, newSessionsCompleteToolCmd, newSessionsShellCmd, newSessionsNetUsageCmd)
}

func newSessionsCreateCmd(f *clientFlags) *cobra.Command {
	req := &appv1.CreateSessionRequest{}
	cmd := clientCmd(f, "create [--image URI] [--mode sandbox|agent] [flags]", "Create a session", cobra.NoArgs,
		func(c *apiClient, cmd *cobra.Command, _ []string) error {
			if err := checkOneOf(cmd, "mode", "sandbox", "agent"); err != nil {
				return err
			}
			var err error
			if req.Secrets, err = keyValueMap(cmd, "secret"); err != nil {
				return err
			}
			if req.HarnessEnv, err = keyValueMap(cmd, "env"); err != nil {
				return err
			}
			req.RequestedSessionId = optString(cmd, "id")
			req.Harness, req.HarnessMode = optString(cmd, "harness"), optString(cmd, "harness-mode")
			req.Prompt, req.PromptId = optString(cmd, "prompt"), optString(cmd, "prompt-id")
			return send(c, c.sessions.CreateSession, req, func(w io.Writer, resp *appv1.CreateSessionResponse) {
				fmt.Fprintf(w, "session_id:\t%s\nstatus:\t%s\n", resp.GetSessionId(), resp.GetStatus())
			})
		})
	fl := cmd.Flags()
	fl.StringVar(&req.ImageUri, "image", "", "the image `URI` the session starts from (default: the server's)")
	fl.StringVar(&req.Mode, "mode", "", "sandbox or agent (default: the server's)")
	fl.StringArray("secret", nil, "secret `K=V` given to the session (repeatable)")
	fl.StringArray("env", nil, "environment variable `K=V` of the harness (repeatable)")
	fl.String("id", "", "ask for this session `ID`; creating it again is safe")
	fl.String("harness", "", "run prompts with this `HARNESS` (an agent session; see hangar harnesses list)")
	fl.String("harness-mode", "", "the harness's `MODE`")
	fl.String("prompt", "", "the first `PROMPT` (an agent session, bash harness unless --harness)")
	fl.String("prompt-id", "", "the first prompt's `ID`")
	return cmd
}

func newSessionsPromptCmd(f *clientFlags) *cobra.Command {
	var id string
	cmd := clientCmd(f, "prompt SESSION TEXT [--id PROMPT_ID]", "Queue a prompt on an agent session (follow it with events --follow)",
		cobra.ExactArgs(2), func(c *apiClient, cmd *cobra.Command, args []string) error {
			req := &appv1.SendPromptRequest{SessionId: args[0], Text: args[1], PromptId: id, HarnessMode: optString(cmd, "harness-mode")}
			return send(c, c.sessions.SendPrompt, req, func(w io.Writer, resp *appv1.SendPromptResponse) {
				fmt.Fprintln(w, resp.GetNote())
			})
		})
	cmd.Flags().StringVar(&id, "id", "", "the prompt's `ID`; sending it again is safe")
	cmd.Flags().String("harness-mode", "", "the harness `MODE` for this prompt")
	return cmd
}

func newSessionsInterruptCmd(f *clientFlags) *cobra.Command {
	var source string
	cmd := idCmd(f, "interrupt SESSION", "Stop an agent session's running turn", func(c *apiClient, _ *cobra.Command, id string) error {
		return send(c, c.sessions.Interrupt, &appv1.InterruptRequest{SessionId: id, Source: source}, func(w io.Writer, resp *appv1.InterruptResponse) {
			fmt.Fprintln(w, resp.GetNote())
		})
	})
	cmd.Flags().StringVar(&source, "source", "cli", "who interrupts, as the event records it")
	return cmd
}

func newSessionsCompleteToolCmd(f *clientFlags) *cobra.Command {
	return clientCmd(f, "complete-tool SESSION TOOL_CALL_ID RESULT_JSON", "Answer a client-side tool call the session's harness waits on",
		cobra.ExactArgs(3), func(c *apiClient, _ *cobra.Command, args []string) error {
			req := &appv1.CompleteToolCallRequest{SessionId: args[0], ToolCallId: args[1], ResultJson: args[2]}
			return send(c, c.sessions.CompleteToolCall, req, func(w io.Writer, resp *appv1.CompleteToolCallResponse) {
				fmt.Fprintln(w, resp.GetNote())
			})
		})
}

func newSessionsListCmd(f *clientFlags) *cobra.Command {
	return clientCmd(f, "list", "List sessions", cobra.NoArgs, func(c *apiClient, _ *cobra.Command, _ []string) error {
		return send(c, c.sessions.ListSessions, &emptypb.Empty{}, func(w io.Writer, resp *appv1.ListSessionsResponse) {
			header := []string{"ID", "STATUS", "IMAGE", "OWNER", "CREATED", "LAST ACTIVE"}
			table(w, header, resp.GetSessions(), func(it *appv1.SessionListItem) []string {
				s := it.GetSession()
				return []string{s.GetId(), s.GetStatus(), s.GetImage(), it.GetOwnerEmail(), s.GetCreatedAt(), s.GetLastActiveAt()}
			})
		})
	})
}

func newSessionsGetCmd(f *clientFlags) *cobra.Command {
	return idCmd(f, "get ID", "Show a session", func(c *apiClient, _ *cobra.Command, id string) error {
		return send(c, c.sessions.GetSession, &appv1.GetSessionRequest{SessionId: id}, nil)
	})
}

func newSessionsDeleteCmd(f *clientFlags) *cobra.Command {
	return idCmd(f, "delete ID", "Delete a session and its sandbox", func(c *apiClient, _ *cobra.Command, id string) error {
		return send(c, c.sessions.DeleteSession, &appv1.DeleteSessionRequest{SessionId: id}, func(w io.Writer, _ *emptypb.Empty) {
			fmt.Fprintf(w, "deleted session %s\n", id)
		})
	})
}

func newSessionsExecCmd(f *clientFlags) *cobra.Command {
	req := &appv1.ExecRequest{}
	var command string
	var timeout time.Duration
	var wake bool
	cmd := clientCmd(f, "exec ID [flags] -- ARGV... | exec ID -c COMMAND", "Run a command in a session and exit with its exit status",
		execArgs, func(c *apiClient, cmd *cobra.Command, args []string) error {
			req.SessionId, req.Argv = args[0], args[1:]
			fl := cmd.Flags()
			if fl.Changed("command") {
				req.Command = &command
			}
			var err error
			if req.Env, err = keyValueMap(cmd, "env"); err != nil {
				return err
			}
			req.Workdir = optString(cmd, "workdir")
			if fl.Changed("timeout") {
				if timeout <= 0 {
					return usageError("--timeout must be positive, not %s", timeout)
				}
				req.TimeoutSecs = proto.Uint64(uint64(math.Ceil(timeout.Seconds())))
			}
			if wake {
				req.Wake = proto.Bool(true)
			}
			// An exec ID chosen here makes the exec re-attachable even if the stream breaks
			// before the server's started frame names it.
			req.ExecId = optString(cmd, "exec-id")
			if req.ExecId == nil {
				req.ExecId = proto.String("exec-" + strings.ToLower(rand.Text()))
			}
			run := &execRun{c: c.withoutDeadline(), req: req, stdout: cmd.OutOrStdout(), stderr: cmd.ErrOrStderr()}
			return run.run()
		})
	cmd.Long = `exec runs ARGV (or, with -c, COMMAND in the session's shell) in the session, prints its
standard output and error as they arrive, and exits with the command's exit status: 124 when
it timed out (as timeout(1) does), 128+N when a signal N killed it. With --json it prints each
output frame as one JSON line instead.

If the connection breaks, exec re-attaches to the running command and carries on from the
last byte received, so nothing is lost or printed twice. A command is identified by its exec
ID (--exec-id, or one made up here): running exec again with the same ID re-attaches to it.

--timeout here is the command's own time limit, not the wait for the server.`
	fl := cmd.Flags()
	fl.StringVarP(&command, "command", "c", "", "run `COMMAND` with the session's shell instead of ARGV")
	fl.String("workdir", "", "run in `DIR`")
	fl.StringArray("env", nil, "environment variable `K=V` (repeatable)")
	fl.DurationVar(&timeout, "timeout", 0, "kill the command after `DURATION` (whole seconds, rounded up; default: the server's)")
	fl.String("exec-id", "", "the exec's `ID`, to re-attach to it later (default: a random one)")
	fl.BoolVar(&wake, "wake", false, "wake the session if it sleeps")
	return cmd
}

// execArgs checks that exec has a session ID, then exactly one of ARGV and -c COMMAND.
func execArgs(cmd *cobra.Command, args []string) error {
	withC := cmd.Flags().Changed("command")
	switch {
	case len(args) == 0:
		return errors.New("give the session ID, then the command: ID -- ARGV... or ID -c COMMAND")
	case withC && len(args) > 1:
		return errors.New("give the command as -- ARGV... or as -c COMMAND, not both")
	case !withC && len(args) == 1:
		return errors.New("give the command to run: ID -- ARGV... or ID -c COMMAND")
	}
	return nil
}

// execRun is one exec followed to its exit across re-attaches.
type execRun struct {
	c              *apiClient
	req            *appv1.ExecRequest
	stdout, stderr io.Writer
	offsets        [2]uint64 // bytes received of stdout and stderr: where a re-attach starts
	attempts       int
	started        bool
	exit           *appv1.ExecExit
}

// run streams the exec's output and returns the exit status to exit with (silently: the
// command has said what it had to).
func (r *execRun) run() error {
	if err := reattach(r.c.ctx, r.attempt); err != nil {
		return err
	}
	code, note := execExitCode(r.exit, r.req.GetTimeoutSecs())
	if note != "" {
		fmt.Fprintln(r.stderr, "hangar:", note)
	}
	if code == 0 {
		return nil
	}
	return &exitStatus{code: code, err: errSilent}
}

// attempt calls Exec once: the first time to start the command, later to re-attach from the
// bytes already received of each stream.
func (r *execRun) attempt() (received bool, err error) {
	if r.attempts++; r.attempts > 1 {
		r.req.StdoutOffset, r.req.StderrOffset = proto.Uint64(r.offsets[0]), proto.Uint64(r.offsets[1])
	}
	stream, err := r.c.sessions.Exec(r.c.ctx, connect.NewRequest(r.req))
	if err != nil {
		return false, err
	}
	received, err = drain(stream, r.handle)
	var broken *brokenStream
	switch {
	case r.exit != nil && errors.As(err, &broken):
		return received, nil // it broke after the exit: nothing is missing
	case err == nil && r.exit == nil:
		return received, &brokenStream{errors.New("the stream ended before the command's exit")}
	}
	return received, err
}

func (r *execRun) handle(out *appv1.ExecOutput) error {
	if r.exit != nil {
		return nil
	}
	switch ev := out.GetEvent().(type) {
	case *appv1.ExecOutput_Started:
		if r.started { // said again on each re-attach
			return nil
		}
		r.started = true
		if id := ev.Started.GetExecId(); id != "" {
			r.req.ExecId = &id
		}
	case *appv1.ExecOutput_Stdout:
		r.offsets[0] += uint64(len(ev.Stdout))
	case *appv1.ExecOutput_Stderr:
		r.offsets[1] += uint64(len(ev.Stderr))
	case *appv1.ExecOutput_Exit:
		r.exit = ev.Exit
	}
	if r.c.json {
		return r.c.printLine(out)
	}
	var err error
	switch {
	case out.GetStdout() != nil:
		_, err = r.stdout.Write(out.GetStdout())
	case out.GetStderr() != nil:
		_, err = r.stderr.Write(out.GetStderr())
	}
	return err
}

// execExitCode is the exit code that mirrors exit, and a note to print when the command did not
// end on its own.
func execExitCode(exit *appv1.ExecExit, timeoutSecs uint64) (code int, note string) {
	signal := ""
	if exit.Signal != nil {
		signal = fmt.Sprintf(" (signal %d)", exit.GetSignal())
	}
	switch {
	case exit.GetTimedOut():
		limit := ""
		if timeoutSecs > 0 {
			limit = fmt.Sprintf(" after %ds", timeoutSecs)
		}
		return 124, "the command timed out" + limit + signal
	case exit.GetCanceled() && exit.Signal != nil:
		return 128 + int(exit.GetSignal()), "the command was canceled" + signal
	case exit.GetCanceled():
		return int(exit.GetExitStatus()), "the command was canceled"
	case exit.Signal != nil:
		return 128 + int(exit.GetSignal()), ""
	case exit.ExitStatus == nil:
		return 1, "the command ended without an exit status"
	}
	return int(exit.GetExitStatus()), ""
}

// reattachLimit is how many times in a row a broken stream is called again without receiving
// anything before giving up; reattachBackoff is the pause before the second of those calls,
// doubled for each next one (the first is at once: a dropped connection is usually back).
var (
	reattachLimit   = 5
	reattachBackoff = 250 * time.Millisecond
)

// brokenStream is a stream that broke after the server answered: calling again can pick up
// where it broke.
type brokenStream struct{ err error }

func (b *brokenStream) Error() string { return b.err.Error() }
func (b *brokenStream) Unwrap() error { return b.err }

// reattach calls attempt until it returns anything but a *brokenStream, or until reattachLimit
// calls in a row broke without receiving anything.
func reattach(ctx context.Context, attempt func() (received bool, err error)) error {
	for fruitless, delay := 0, time.Duration(0); ; {
		received, err := attempt()
		var broken *brokenStream
		if !errors.As(err, &broken) {
			return err
		}
		if received {
			fruitless, delay = 0, 0
		}
		if fruitless++; fruitless > reattachLimit {
			return fmt.Errorf("%w (gave up after %d attempts to re-attach)", broken.err, reattachLimit)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(delay):
		}
		delay = max(2*delay, reattachBackoff)
	}
}

// drain passes each message of stream to handle until the stream ends, and says whether any
// arrived and why the stream ended: nil at its end, a *brokenStream if it broke in a way worth
// calling again for (after the server answered, on a transport or server failure), else the
// error of the stream or of handle.
func drain[Res any](stream *connect.ServerStreamForClient[Res], handle func(*Res) error) (received bool, err error) {
	defer stream.Close()
	for stream.Receive() {
		received = true
		if err := handle(stream.Msg()); err != nil {
			return true, err
		}
	}
	err = stream.Err()
	var ce *connect.Error
	if errors.As(err, &ce) && len(stream.ResponseHeader()) > 0 {
		switch ce.Code() {
		case connect.CodeUnavailable, connect.CodeUnknown, connect.CodeInternal, connect.CodeAborted, connect.CodeDeadlineExceeded:
			return received, &brokenStream{err}
		}
	}
	return received, err
}

// jsonLine prints one message a line, for streams (exec --json, events --follow --json).
var jsonLine = protojson.MarshalOptions{UseProtoNames: true}

func (c *apiClient) printLine(m proto.Message) error {
	b, err := jsonLine.Marshal(m)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(c.out, "%s\n", b)
	return err
}

// cpChunkSize is the size of the chunks an upload sends.
const cpChunkSize = 256 << 10

func newSessionsCpCmd(f *clientFlags) *cobra.Command {
	cmd := clientCmd(f, "cp SRC DST", "Copy a file into, out of, or between sessions", cobra.ExactArgs(2),
		func(c *apiClient, cmd *cobra.Command, args []string) error {
			src, err := parseSessionPath(args[0])
			if err != nil {
				return err
			}
			dst, err := parseSessionPath(args[1])
			if err != nil {
				return err
			}
			c = c.withoutDeadline()
			switch {
			case src == nil && dst == nil:
				return usageError("one of SRC and DST must be in a session: ID:/path")
			case src != nil && dst != nil:
				return copyBetween(c, *src, *dst)
			case dst != nil:
				return upload(c, cmd.InOrStdin(), args[0], *dst)
			}
			return download(c, *src, args[1])
		})
	cmd.Long = `cp copies one file. A path in a session is ID:/absolute/path; any other argument is a
local path (write ./a:b for a local file whose name has a colon), and - is standard input or
standard output.

  cp LOCAL ID:/path          upload (the file keeps its permission bits)
  cp ID:/path LOCAL          download, checked against the size and SHA-256 the server sends
  cp ID1:/path ID2:/path     copy between sessions, to the same path`
	return cmd
}

// sessionPath is a file in a session, written ID:/path.
type sessionPath struct{ session, path string }

func (p sessionPath) String() string { return p.session + ":" + p.path }

// parseSessionPath reads arg as ID:/path, or says it is a local path (nil).
func parseSessionPath(arg string) (*sessionPath, error) {
	id, p, ok := strings.Cut(arg, ":")
	if !ok || id == "" || strings.Contains(id, "/") {
		return nil, nil
	}
	if !strings.HasPrefix(p, "/") {
		return nil, usageError("%s: a path in a session must be absolute, as in %s:/%s (a local file: ./%s)", arg, id, p, arg)
	}
	return &sessionPath{id, p}, nil
}

func copyBetween(c *apiClient, src, dst sessionPath) error {
	if src.path != dst.path {
		return usageError("a copy between sessions keeps the path: %s cannot go to %s (copy it to %s:%s, then move it there with exec)",
			src, dst, dst.session, src.path)
	}
	req := &appv1.CopyFilesRequest{SourceSessionId: src.session, TargetSessionId: dst.session, Paths: []string{src.path}}
	return send(c, c.sessions.CopyFiles, req, func(w io.Writer, resp *appv1.CopyFilesResponse) {
		table(w, []string{"PATH", "SIZE", "SHA256"}, resp.GetFiles(), func(f *appv1.CopyFileResult) []string {
			return []string{f.GetPath(), strconv.FormatUint(f.GetSizeBytes(), 10), f.GetSha256()}
		})
	})
}

// upload sends the local file (or standard input, for "-") to dst with WriteFile.
func upload(c *apiClient, stdin io.Reader, local string, dst sessionPath) error {
	file, mode, err := openUpload(stdin, local)
	if err != nil {
		return err
	}
	defer file.Close()
	h := sha256.New()
	size, err := io.Copy(h, file)
	if err != nil {
		return fmt.Errorf("read %s: %w", local, err)
	}
	sum := hex.EncodeToString(h.Sum(nil))
	if _, err := file.Seek(0, io.SeekStart); err != nil {
		return fmt.Errorf("read %s: %w", local, err)
	}

	stream := c.sessions.WriteFile(c.ctx)
	send := func(m *appv1.WriteFileRequest) error {
		if err := stream.Send(m); err != nil {
			// Send fails with io.EOF when the server has ended the call: its error says why.
			if _, rerr := stream.CloseAndReceive(); rerr != nil {
				return rerr
			}
			return err
		}
		return nil
	}
	meta := &appv1.WriteFileMetadata{SessionId: dst.session, Path: dst.path, SizeBytes: uint64(size), Sha256: sum, Mode: mode}
	if err := send(&appv1.WriteFileRequest{Frame: &appv1.WriteFileRequest_Metadata{Metadata: meta}}); err != nil {
		return err
	}
	buf := make([]byte, cpChunkSize)
	for {
		n, err := io.ReadFull(file, buf)
		if n > 0 {
			chunk := &appv1.WriteFileRequest{Frame: &appv1.WriteFileRequest_Chunk{Chunk: buf[:n]}}
			if err := send(chunk); err != nil {
				return err
			}
		}
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			break
		}
		if err != nil {
			return fmt.Errorf("read %s: %w", local, err)
		}
	}
	resp, err := stream.CloseAndReceive()
	if err != nil {
		return err
	}
	if resp.Msg.GetSizeBytes() != uint64(size) || resp.Msg.GetSha256() != sum {
		return fmt.Errorf("upload to %s: the server stored %d bytes with sha256 %s, but sent were %d bytes with sha256 %s",
			dst, resp.Msg.GetSizeBytes(), resp.Msg.GetSha256(), size, sum)
	}
	return c.show(resp.Msg, func(w io.Writer) { record(w, resp.Msg) })
}

// openUpload opens the file to upload and says its permission bits. Standard input is first
// copied to a temporary file (removed on Close), since the metadata sent first needs the size
// and the SHA-256 of the whole content.
func openUpload(stdin io.Reader, local string) (*os.File, *uint32, error) {
	if local == "-" {
		tmp, err := os.CreateTemp("", "hangar-cp-*")
		if err != nil {
			return nil, nil, fmt.Errorf("buffer standard input: %w", err)
		}
		// Unlinked at once: the open file lives until Close.
		if err := os.Remove(tmp.Name()); err != nil {
			tmp.Close()
			return nil, nil, fmt.Errorf("buffer standard input: %w", err)
		}
		if _, err := io.Copy(tmp, stdin); err != nil {
			tmp.Close()
			return nil, nil, fmt.Errorf("buffer standard input: %w", err)
		}
		if _, err := tmp.Seek(0, io.SeekStart); err != nil {
			tmp.Close()
			return nil, nil, fmt.Errorf("buffer standard input: %w", err)
		}
		return tmp, nil, nil
	}
	file, err := os.Open(local)
	if err != nil {
		return nil, nil, usageError("%v", err)
	}
	fi, err := file.Stat()
	if err != nil {
		file.Close()
		return nil, nil, fmt.Errorf("stat %s: %w", local, err)
	}
	if !fi.Mode().IsRegular() {
		file.Close()
		return nil, nil, usageError("%s is not a regular file", local)
	}
	return file, proto.Uint32(uint32(fi.Mode().Perm())), nil
}

// download reads src with ReadFile into the local file (or into a directory, under the file's
// name; "-" is standard output). A file appears only whole and checked: it is written to a
// temporary file beside it, renamed into place once its size and SHA-256 match the metadata.
func download(c *apiClient, src sessionPath, local string) error {
	stream, err := c.sessions.ReadFile(c.ctx, connect.NewRequest(&appv1.ReadFileRequest{SessionId: src.session, Path: src.path}))
	if err != nil {
		return err
	}
	defer stream.Close()
	if local == "-" {
		_, err := receiveFile(stream, c.out, src)
		return err
	}
	target := local
	if fi, err := os.Stat(local); err == nil && fi.IsDir() {
		target = filepath.Join(local, path.Base(src.path))
	}
	mode := os.FileMode(0o644)
	if fi, err := os.Stat(target); err == nil {
		mode = fi.Mode().Perm()
	}
	tmp, err := os.CreateTemp(filepath.Dir(target), "."+filepath.Base(target)+".hangar-*")
	if err != nil {
		return usageError("%v", err)
	}
	defer os.Remove(tmp.Name()) // fails harmlessly once renamed
	meta, err := receiveFile(stream, tmp, src)
	if err == nil {
		err = tmp.Chmod(mode)
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	if err := os.Rename(tmp.Name(), target); err != nil {
		return fmt.Errorf("download %s: %w", src, err)
	}
	return c.show(meta, func(w io.Writer) { record(w, meta) })
}

// receiveFile writes the content ReadFile streams to w, and checks it against the metadata
// frame that comes first.
func receiveFile(stream *connect.ServerStreamForClient[appv1.ReadFileResponse], w io.Writer, src sessionPath) (*appv1.ReadFileMetadata, error) {
	var meta *appv1.ReadFileMetadata
	h := sha256.New()
	var n uint64
	for stream.Receive() {
		switch fr := stream.Msg().GetFrame().(type) {
		case *appv1.ReadFileResponse_Metadata:
			if meta != nil {
				return nil, fmt.Errorf("download %s: the server sent the metadata twice", src)
			}
			meta = fr.Metadata
		case *appv1.ReadFileResponse_Chunk:
			if meta == nil {
				return nil, fmt.Errorf("download %s: the server sent content before the metadata", src)
			}
			if n += uint64(len(fr.Chunk)); n > meta.GetSizeBytes() {
				return nil, fmt.Errorf("download %s: the server sent more than the %d bytes it announced", src, meta.GetSizeBytes())
			}
			h.Write(fr.Chunk)
			if _, err := w.Write(fr.Chunk); err != nil {
				return nil, fmt.Errorf("download %s: %w", src, err)
			}
		}
	}
	if err := stream.Err(); err != nil {
		return nil, err
	}
	if meta == nil {
		return nil, fmt.Errorf("download %s: the server sent no metadata", src)
	}
	if n != meta.GetSizeBytes() {
		return nil, fmt.Errorf("download %s: got %d bytes, the server announced %d", src, n, meta.GetSizeBytes())
	}
	if sum := hex.EncodeToString(h.Sum(nil)); !strings.EqualFold(sum, meta.GetSha256()) {
		return nil, fmt.Errorf("download %s: the content has sha256 %s, the server announced %s", src, sum, meta.GetSha256())
	}
	return meta, nil
}

func newSessionsEventsCmd(f *clientFlags) *cobra.Command {
	var follow, durableOnly bool
	cmd := idCmd(f, "events ID [flags]", "List a session's events, or follow them as they happen",
		func(c *apiClient, cmd *cobra.Command, id string) error {
			fl := cmd.Flags()
			listOnly := []string{"after", "before", "limit", "kind", "tool"}
			if follow {
				for _, name := range listOnly {
					if fl.Changed(name) {
						return usageError("--%s lists events: it does not go with --follow (which starts after --since)", name)
					}
				}
				req := &appv1.StreamEventsRequest{SessionId: id, Since: optInt64(cmd, "since"), DurableOnly: durableOnly}
				return followEvents(c.withoutDeadline(), req)
			}
			for _, name := range []string{"since", "durable-only"} {
				if fl.Changed(name) {
					return usageError("--%s needs --follow", name)
				}
			}
			req := &appv1.ListSessionEventsRequest{
				SessionId: id, AfterIdx: optInt64(cmd, "after"), BeforeIdx: optInt64(cmd, "before"), Limit: optInt64(cmd, "limit"),
				Kinds: nonEmpty(cmd, "kind"), ToolNames: nonEmpty(cmd, "tool"),
			}
			return send(c, c.sessions.ListSessionEvents, req, func(w io.Writer, resp *appv1.ListSessionEventsResponse) {
				table(w, []string{"IDX", "KIND", "PAYLOAD"}, resp.GetEvents(), func(e *appv1.SessionEvent) []string {
					return []string{eventIdx(e), e.GetKind(), truncate(e.GetPayloadJson(), 80)}
				})
				fmt.Fprintf(w, "next_after_idx: %d\n", resp.GetNextAfterIdx())
			})
		})
	cmd.Long = `events lists a page of the session's event log (--after, --before, --limit, --kind,
--tool), or with --follow prints each event as it happens, one "IDX KIND PAYLOAD" line each
(a JSON line each with --json), until interrupted. A follow that loses its connection
reconnects after the last event printed.`
	fl := cmd.Flags()
	fl.Int64("after", 0, "list the events after index `N`")
	fl.Int64("before", 0, "list the events before index `N`")
	fl.Int64("limit", 0, "list at most `N` events (default: the server's)")
	fl.StringArray("kind", nil, "list only events of kind `K` (repeatable)")
	fl.StringArray("tool", nil, "list only events of tool `T` (repeatable)")
	fl.BoolVar(&follow, "follow", false, "print events as they happen, until interrupted")
	fl.Int64("since", 0, "with --follow, start after index `N` (default: from the start)")
	fl.BoolVar(&durableOnly, "durable-only", false, "with --follow, only the events kept in the log")
	return cmd
}

// followEvents prints the events StreamEvents sends until the user stops it, reconnecting
// after the last event printed when the stream breaks or ends.
func followEvents(c *apiClient, req *appv1.StreamEventsRequest) error {
	printEvent := func(e *appv1.SessionEvent) error {
		if e.Idx != nil {
			if req.Since != nil && e.GetIdx() <= req.GetSince() {
				return nil // already printed before a reconnect
			}
			req.Since = e.Idx
		}
		if c.json {
			return c.printLine(e)
		}
		_, err := fmt.Fprintf(c.out, "%s %s %s\n", eventIdx(e), e.GetKind(), e.GetPayloadJson())
		return err
	}
	return reattach(c.ctx, func() (bool, error) {
		stream, err := c.sessions.StreamEvents(c.ctx, connect.NewRequest(req))
		if err != nil {
			return false, err
		}
		received, err := drain(stream, printEvent)
		if err == nil {
			// A server ends long streams (a deploy, a request time limit): carry on.
			return received, &brokenStream{errors.New("the server ended the event stream")}
		}
		return received, err
	})
}

// eventIdx is an event's index, or "-" for an event not kept in the log.
func eventIdx(e *appv1.SessionEvent) string {
	if e.Idx == nil {
		return "-"
	}
	return strconv.FormatInt(e.GetIdx(), 10)
}

func newSessionsLogCmd(f *clientFlags) *cobra.Command {
	var tail bool
	cmd := idCmd(f, "log ID [--kind K] [--limit N] [--tail]", "Show a session's conversation log",
		func(c *apiClient, cmd *cobra.Command, id string) error {
			req := &appv1.GetLogRequest{SessionId: id, Kind: optString(cmd, "kind"), Limit: optInt64(cmd, "limit")}
			if tail {
				req.Tail = proto.Bool(true)
			}
			return send(c, c.sessions.GetLog, req, func(w io.Writer, resp *appv1.GetLogResponse) {
				table(w, []string{"IDX", "KIND", "AT", "PAYLOAD"}, resp.GetEvents(), func(e *appv1.ConversationEntry) []string {
					return []string{strconv.FormatInt(e.GetIdx(), 10), e.GetKind(), e.GetAt(), truncate(e.GetPayloadJson(), 80)}
				})
			})
		})
	fl := cmd.Flags()
	fl.String("kind", "", "only entries of kind `K`")
	fl.Int64("limit", 0, "at most `N` entries (default: the server's)")
	fl.BoolVar(&tail, "tail", false, "the last entries instead of the first")
	return cmd
}

func newSessionsSnapshotCmd(f *clientFlags) *cobra.Command {
	return idCmd(f, "snapshot ID", "Snapshot a session's sandbox now", func(c *apiClient, _ *cobra.Command, id string) error {
		return send(c, c.sessions.Snapshot, &appv1.SnapshotRequest{SessionId: id}, nil)
	})
}

func newSessionsResumeCmd(f *clientFlags) *cobra.Command {
	return idCmd(f, "resume ID", "Resume a session from its latest checkpoint", func(c *apiClient, _ *cobra.Command, id string) error {
		return send(c, c.sessions.Resume, &appv1.ResumeRequest{SessionId: id}, nil)
	})
}

func newSessionsCheckpointsCmd(f *clientFlags) *cobra.Command {
	return idCmd(f, "checkpoints ID", "List a session's checkpoints", func(c *apiClient, _ *cobra.Command, id string) error {
		req := &appv1.ListCheckpointsRequest{SessionId: id}
		return send(c, c.sessions.ListCheckpoints, req, func(w io.Writer, resp *appv1.ListCheckpointsResponse) {
			header := []string{"SNAPSHOT", "CREATED", "SIZE", "EVENTS CURSOR", "LATEST"}
			table(w, header, resp.GetCheckpoints(), func(cp *appv1.CheckpointSummary) []string {
				cursor := ""
				if cp.EventsCursor != nil {
					cursor = strconv.FormatInt(cp.GetEventsCursor(), 10)
				}
				return []string{cp.GetSnapshotId(), cp.GetCreatedAt(), strconv.FormatUint(cp.GetSizeBytes(), 10), cursor, yesNo(cp.GetIsLatest())}
			})
		})
	})
}

func newSessionsEvictCmd(f *clientFlags) *cobra.Command {
	short := "Drop a session's sandbox from its host, keeping its checkpoints"
	return idCmd(f, "evict ID", short, func(c *apiClient, _ *cobra.Command, id string) error {
		return send(c, c.sessions.EvictLocal, &appv1.EvictLocalRequest{SessionId: id}, func(w io.Writer, _ *emptypb.Empty) {
			fmt.Fprintf(w, "evicted session %s\n", id)
		})
	})
}

func newSessionsCowCmd(f *clientFlags) *cobra.Command {
	short := "Show the copy-on-write disk state of a session's sandbox"
	return idCmd(f, "cow ID", short, func(c *apiClient, _ *cobra.Command, id string) error {
		return send(c, c.sessions.GetCowState, &appv1.GetCowStateRequest{SessionId: id}, func(w io.Writer, resp *appv1.GetCowStateResponse) {
			if resp.GetState() == nil {
				fmt.Fprintf(w, "session %s has no copy-on-write state\n", id)
				return
			}
			record(w, resp.GetState())
		})
	})
}

// keyValueMap is the K=V values of the string-array flag name as a map (see keyValues), nil
// when there are none.
func keyValueMap(cmd *cobra.Command, name string) (map[string]string, error) {
	pairs, err := keyValues(cmd, name)
	if err != nil || len(pairs) == 0 {
		return nil, err
	}
	m := make(map[string]string, len(pairs))
	for _, kv := range pairs {
		m[kv[0]] = kv[1]
	}
	return m, nil
}

// optInt64 is the value of the int64 flag name as an optional field: nil unless the user set it.
func optInt64(cmd *cobra.Command, name string) *int64 {
	if !cmd.Flags().Changed(name) {
		return nil
	}
	v, _ := cmd.Flags().GetInt64(name)
	return &v
}
