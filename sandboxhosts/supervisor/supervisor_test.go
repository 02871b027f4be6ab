package supervisor

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/hangar-dev/hangar/internal/testkit"
)

func TestExecReportsOutputExitAndUsage(t *testing.T) {
	sv := startSupervisor(t, startConfig{})
	workdir := t.TempDir()
	tests := []struct {
		name       string
		req        ExecRequest
		wantStdout string
		wantStderr string
		wantStatus int
		wantSignal int
	}{
		{name: "stdout and exit 0", req: ExecRequest{Argv: sh("echo hello")}, wantStdout: "hello\n"},
		{name: "nonzero exit status", req: ExecRequest{Argv: sh("echo partial; exit 3")}, wantStdout: "partial\n", wantStatus: 3},
		{name: "stdout and stderr stay separate", req: ExecRequest{Argv: sh("echo out; echo err >&2; echo out2")}, wantStdout: "out\nout2\n", wantStderr: "err\n"},
		{name: "killed by a signal reports the signal", req: ExecRequest{Argv: sh("kill -TERM $$")}, wantStatus: -1, wantSignal: int(syscall.SIGTERM)},
		{name: "argv runs directly without a shell", req: ExecRequest{Argv: []string{busybox, "echo", "$HOME", "a  b"}}, wantStdout: "$HOME a  b\n"},
		{name: "bare name is found on the default PATH", req: ExecRequest{Argv: []string{"busybox", "echo", "found"}}, wantStdout: "found\n"},
		{name: "default PATH when none is set", req: ExecRequest{Argv: sh("echo $PATH")}, wantStdout: DefaultPath + "\n"},
		{name: "request env adds to the sandbox env", req: ExecRequest{Argv: sh("echo $FOO $SUPERVISOR_TEST_BASE"), Env: []string{"FOO=bar"}}, wantStdout: "bar base\n"},
		{name: "request env overrides the sandbox env", req: ExecRequest{Argv: sh("echo $SUPERVISOR_TEST_BASE"), Env: []string{"SUPERVISOR_TEST_BASE=over"}}, wantStdout: "over\n"},
		{name: "request PATH is used for lookup", req: ExecRequest{Argv: []string{"busybox", "echo", "x"}, Env: []string{"PATH=/nonexistent:/bin"}}, wantStdout: "x\n"},
		{name: "workdir", req: ExecRequest{Argv: sh("pwd"), Workdir: workdir}, wantStdout: workdir + "\n"},
		{name: "stdin is /dev/null", req: ExecRequest{Argv: sh("cat; echo eof")}, wantStdout: "eof\n"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := run(t, sv.Client, tc.req)
			if got := r.stdout.String(); got != tc.wantStdout {
				t.Errorf("stdout = %q, want %q", got, tc.wantStdout)
			}
			if got := r.stderr.String(); got != tc.wantStderr {
				t.Errorf("stderr = %q, want %q", got, tc.wantStderr)
			}
			e := r.exit
			if e.ExitStatus != tc.wantStatus || e.Signal != tc.wantSignal {
				t.Errorf("exit status %d signal %d, want %d and %d", e.ExitStatus, e.Signal, tc.wantStatus, tc.wantSignal)
			}
			if e.TimedOut || e.Canceled {
				t.Errorf("exit says timed_out=%v canceled=%v for a plain exit", e.TimedOut, e.Canceled)
			}
			if e.ExecID == "" || e.ExecID != r.started.ExecID || e.PID <= 0 || e.PID != r.started.PID {
				t.Errorf("exit %s/%d does not match started %+v", e.ExecID, e.PID, r.started)
			}
			if e.StdoutEnd != int64(r.stdout.Len()) || e.StderrEnd != int64(r.stderr.Len()) {
				t.Errorf("exit ends %d/%d, streamed %d/%d bytes", e.StdoutEnd, e.StderrEnd, r.stdout.Len(), r.stderr.Len())
			}
			if e.PeakRSSKB <= 0 || e.WallMS < 0 || e.UserCPUMS < 0 || e.SysCPUMS < 0 {
				t.Errorf("usage not reported: %+v", e)
			}
		})
	}
}

func TestExecUsageCountsCPUAndMemory(t *testing.T) {
	sv := startSupervisor(t, startConfig{})
	// A busy loop in the shell burns user CPU; a 64 MiB read into memory raises peak RSS.
	r := run(t, sv.Client, ExecRequest{Argv: sh(`i=0; while [ $i -lt 200000 ]; do i=$((i+1)); done; x=$(busybox head -c 67108864 /dev/zero | busybox tr '\0' a); echo ${#x}`)})
	if got := strings.TrimSpace(r.stdout.String()); got != "67108864" {
		t.Fatalf("stdout %q, stderr %q", got, r.stderr.String())
	}
	if r.exit.UserCPUMS+r.exit.SysCPUMS <= 0 {
		t.Errorf("cpu time not counted: %+v", r.exit)
	}
	if r.exit.PeakRSSKB < 64<<10 {
		t.Errorf("peak rss %d KiB, want at least 64 MiB", r.exit.PeakRSSKB)
	}
	if r.exit.WallMS <= 0 {
		t.Errorf("wall time not counted: %+v", r.exit)
	}
}

func TestSpawnFailuresAreErrorFrames(t *testing.T) {
	sv := startSupervisor(t, startConfig{})
	dir := t.TempDir()
	notExecutable := filepath.Join(dir, "script")
	if err := os.WriteFile(notExecutable, []byte("#!/bin/sh\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	badInterpreter := filepath.Join(dir, "bad-interpreter")
	if err := os.WriteFile(badInterpreter, []byte("#!/nonexistent/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name       string
		req        ExecRequest
		wantReason SpawnFailure
		wantShell  int
	}{
		{"absolute path that does not exist", ExecRequest{Argv: []string{"/nonexistent/cmd"}}, SpawnNotFound, 127},
		{"bare name not on PATH", ExecRequest{Argv: []string{"no-such-command-hangar"}}, SpawnNotFound, 127},
		{"missing interpreter", ExecRequest{Argv: []string{badInterpreter}}, SpawnNotFound, 127},
		{"file without execute permission", ExecRequest{Argv: []string{notExecutable}}, SpawnNotExecutable, 126},
		{"directory", ExecRequest{Argv: []string{dir}}, SpawnNotExecutable, 126},
		{"workdir that does not exist", ExecRequest{Argv: []string{busybox, "true"}, Workdir: filepath.Join(dir, "missing")}, SpawnBadWorkdir, -1},
		{"workdir that is a file", ExecRequest{Argv: []string{busybox, "true"}, Workdir: notExecutable}, SpawnBadWorkdir, -1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := sv.Exec(context.Background(), tc.req, Events{})
			fe := asError(t, err)
			if fe.Code != CodeSpawnFailed || fe.Spawn != tc.wantReason {
				t.Fatalf("got %s/%s (%s), want spawn_failed/%s", fe.Code, fe.Spawn, fe.Message, tc.wantReason)
			}
			if got := fe.Spawn.ShellExitStatus(); got != tc.wantShell {
				t.Errorf("shell exit status %d, want %d", got, tc.wantShell)
			}
		})
	}
	h, err := sv.Ping(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if h.Running != 0 || h.Finished != 0 {
		t.Errorf("failed spawns left execs behind: %+v", h)
	}
}

// startWithGrandchild starts req, whose script must print a background grandchild's pid as its
// first line, and returns that pid as soon as it is printed, with a func that waits for the exit.
func startWithGrandchild(t *testing.T, c *Client, req ExecRequest) (grandchild int, wait func() (Exit, error)) {
	t.Helper()
	pidCh := make(chan int, 1)
	done := make(chan struct{})
	var exit Exit
	var err error
	go func() {
		defer close(done)
		var stdout strings.Builder
		sent := false
		exit, err = c.Exec(context.Background(), req, Events{Output: func(o Output) error {
			if o.Stream != Stdout || sent {
				return nil
			}
			stdout.Write(o.Data)
			if first, _, ok := strings.Cut(stdout.String(), "\n"); ok {
				pid, convErr := strconv.Atoi(first)
				if convErr != nil {
					return fmt.Errorf("first line %q is not a pid: %w", first, convErr)
				}
				pidCh <- pid
				sent = true
			}
			return nil
		}})
	}()
	select {
	case pid := <-pidCh:
		return pid, func() (Exit, error) { <-done; return exit, err }
	case <-done:
		t.Fatalf("exec ended before printing the grandchild's pid: exit %+v err %v", exit, err)
	}
	return 0, nil
}

// requireDead waits until pid is gone from /proc or, when a zombie is acceptable because
// reaping it is not the supervisor's job, until it is a zombie.
func requireDead(t *testing.T, pid int, zombieIsDead bool) {
	t.Helper()
	testkit.Eventually(t, 20*time.Second, fmt.Sprintf("process %d killed and reaped", pid), func() (bool, string) {
		info, err := readProc(pid)
		if errors.Is(err, os.ErrNotExist) || (zombieIsDead && info.state == "Z") {
			return true, ""
		}
		return false, fmt.Sprintf("still there: %+v", info)
	})
}

func TestTimeoutKillsTheWholeProcessGroup(t *testing.T) {
	sv := startSupervisor(t, startConfig{})
	grandchild, wait := startWithGrandchild(t, sv.Client, ExecRequest{
		Argv:    sh("busybox sleep 600 & echo $!; busybox sleep 600"),
		Timeout: 300 * time.Millisecond,
	})
	exit, err := wait()
	if err != nil {
		t.Fatal(err)
	}
	if !exit.TimedOut || exit.Canceled || exit.Signal != int(syscall.SIGKILL) || exit.ExitStatus != -1 {
		t.Errorf("exit %+v, want timed out by SIGKILL", exit)
	}
	requireDead(t, grandchild, false)
}

func TestLeftoverProcessHoldingOutputDoesNotHoldTheExit(t *testing.T) {
	sv := startSupervisor(t, startConfig{args: []string{"--output-grace", "50ms"}})
	// The background sleep inherits stdout and would keep the pipe open for 600 s.
	leftover, wait := startWithGrandchild(t, sv.Client, ExecRequest{Argv: sh("busybox sleep 600 & echo $!; echo more >&2")})
	t.Cleanup(func() { _ = syscall.Kill(leftover, syscall.SIGKILL) })
	exit, err := wait()
	if err != nil {
		t.Fatal(err)
	}
	if exit.ExitStatus != 0 || exit.StderrEnd != int64(len("more\n")) {
		t.Errorf("exit %+v, want status 0 with all stderr read before the pipes were closed", exit)
	}
}

func TestCancel(t *testing.T) {
	sv := startSupervisor(t, startConfig{})
	ctx := context.Background()
	// Whatever the exec started dies with it: a tool's command in a session of its own (as
	// Claude Code's Bash tool and Codex run theirs), and a background job the shell that
	// started it left behind.
	for _, tc := range []struct{ name, script string }{
		{"kills the whole process group and says canceled", "busybox sleep 600 & echo $!; busybox sleep 600"},
		{"kills a descendant in a session of its own", "busybox setsid busybox sleep 600 & echo $!; busybox sleep 600"},
		{"kills an orphan whose parent exited", "busybox setsid busybox sh -c 'busybox sleep 600 & echo $!'; busybox sleep 600"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			id := "to-cancel-" + strings.ReplaceAll(tc.name, " ", "-")
			grandchild, wait := startWithGrandchild(t, sv.Client, ExecRequest{ExecID: id, Argv: sh(tc.script)})
			if err := sv.Cancel(ctx, id); err != nil {
				t.Fatal(err)
			}
			exit, err := wait()
			if err != nil {
				t.Fatal(err)
			}
			if !exit.Canceled || exit.TimedOut || exit.Signal != int(syscall.SIGKILL) {
				t.Errorf("exit %+v, want canceled by SIGKILL", exit)
			}
			requireDead(t, grandchild, false)
		})
	}
	t.Run("a finished exec is left as it was", func(t *testing.T) {
		r := run(t, sv.Client, ExecRequest{ExecID: "finished", Argv: sh("exit 4")})
		if err := sv.Cancel(ctx, "finished"); err != nil {
			t.Fatal(err)
		}
		exit, err := sv.Attach(ctx, AttachRequest{ExecID: "finished"}, Events{})
		if err != nil {
			t.Fatal(err)
		}
		if exit != r.exit {
			t.Errorf("exit after cancel %+v, want unchanged %+v", exit, r.exit)
		}
	})
	t.Run("an unknown exec is not found", func(t *testing.T) {
		if fe := asError(t, sv.Cancel(ctx, "never-started")); fe.Code != CodeNotFound {
			t.Errorf("code %s, want not_found", fe.Code)
		}
	})
}

func TestReattachAfterDisconnectReplaysExactly(t *testing.T) {
	sv := startSupervisor(t, startConfig{})
	// ~5 MiB in two bursts on stdout, a marker on stderr, and a pause so part of the output is
	// produced while no client is attached.
	const n = 750000
	want := seqOutput(1, n)
	script := fmt.Sprintf("busybox seq 1 400000; echo mid >&2; busybox sleep 0.2; busybox seq 400001 %d; echo end >&2", n)

	first := &result{}
	errDisconnect := errors.New("disconnect on purpose")
	ev := first.collect(t, 0, 0)
	collectOutput := ev.Output
	ev.Output = func(o Output) error {
		if err := collectOutput(o); err != nil {
			return err
		}
		if first.stdout.Len() >= 1<<20 {
			return errDisconnect
		}
		return nil
	}
	_, err := sv.Exec(context.Background(), ExecRequest{ExecID: "big", Argv: sh(script)}, ev)
	if !errors.Is(err, errDisconnect) {
		t.Fatalf("first part ended with %v, want the deliberate disconnect", err)
	}

	stdoutOff, stderrOff := int64(first.stdout.Len()), int64(first.stderr.Len())
	rest := &result{}
	exit, err := sv.Attach(context.Background(), AttachRequest{ExecID: "big", StdoutOffset: stdoutOff, StderrOffset: stderrOff}, rest.collect(t, stdoutOff, stderrOff))
	if err != nil {
		t.Fatal(err)
	}
	if !rest.started.Attached || rest.started.ExecID != "big" {
		t.Errorf("attach started %+v", rest.started)
	}
	gotStdout := first.stdout.String() + rest.stdout.String()
	if len(gotStdout) != len(want) || gotStdout != want {
		t.Errorf("stdout part + replay is %d bytes, want %d, equal=%v", len(gotStdout), len(want), gotStdout == want)
	}
	if got := first.stderr.String() + rest.stderr.String(); got != "mid\nend\n" {
		t.Errorf("stderr part + replay = %q", got)
	}
	if exit.ExitStatus != 0 || exit.StdoutEnd != int64(len(want)) {
		t.Errorf("exit %+v, want status 0 and stdout end %d", exit, len(want))
	}
}

func TestAttachFromDroppedOffsetSaysSo(t *testing.T) {
	const streamCap = 4096
	sv := startSupervisor(t, startConfig{args: []string{"--stream-cap", strconv.Itoa(streamCap)}})
	ctx := context.Background()
	want := seqOutput(1, 5000)
	// Leave at once: a live follower could itself fall behind the small cap.
	errLeave := errors.New("leave")
	_, err := sv.Exec(ctx, ExecRequest{ExecID: "chatty", Argv: []string{busybox, "seq", "1", "5000"}}, Events{
		Started: func(Started) error { return errLeave },
	})
	if !errors.Is(err, errLeave) {
		t.Fatal(err)
	}
	// The exec's process may be reaped before its last output is read from the pipe, so wait
	// for the whole stream, not for the exec's end: the retained start then stops moving.
	retained := int64(len(want) - streamCap)
	testkit.Eventually(t, 20*time.Second, "attach from 0 refused as offset_dropped on stdout", func() (bool, string) {
		_, err := sv.Attach(ctx, AttachRequest{ExecID: "chatty"}, Events{})
		var fe *Error
		ok := errors.As(err, &fe) && fe.Code == CodeOffsetDropped && fe.Stream == Stdout && fe.RetainedStart == retained
		return ok, fmt.Sprintf("got %v, want retaining from %d", err, retained)
	})

	tail := &result{}
	exit, err := sv.Attach(ctx, AttachRequest{ExecID: "chatty", StdoutOffset: retained}, tail.collect(t, retained, 0))
	if err != nil {
		t.Fatal(err)
	}
	if exit.StdoutEnd != int64(len(want)) {
		t.Errorf("stdout end %d, want %d", exit.StdoutEnd, len(want))
	}
	if tail.stdout.String() != want[retained:] {
		t.Errorf("replay from the retained start is not the stream's last %d bytes", streamCap)
	}

	if fe := asError(t, func() error { _, err := sv.Exec(ctx, ExecRequest{ExecID: "chatty"}, Events{}); return err }()); fe.Code != CodeOffsetDropped {
		t.Errorf("retried exec of a capped stream got %s, want offset_dropped", fe.Code)
	}
}

func TestExecIDIsIdempotent(t *testing.T) {
	sv := startSupervisor(t, startConfig{})
	ctx := context.Background()
	marker := filepath.Join(t.TempDir(), "runs")
	req := ExecRequest{ExecID: "once", Argv: sh("echo ran >> " + marker + "; echo out")}

	first := run(t, sv.Client, req)
	second := run(t, sv.Client, req)
	if first.started.Attached || !second.started.Attached {
		t.Errorf("attached flags %v then %v, want false then true", first.started.Attached, second.started.Attached)
	}
	if second.stdout.String() != "out\n" || second.exit != first.exit {
		t.Errorf("retry streamed %q exit %+v, want the first run's %q exit %+v", second.stdout.String(), second.exit, first.stdout.String(), first.exit)
	}
	if runs, _ := os.ReadFile(marker); string(runs) != "ran\n" {
		t.Errorf("command ran %q times, want once", runs)
	}

	t.Run("while running, a retry joins the same process", func(t *testing.T) {
		started := make(chan Started, 1)
		go func() {
			_, _ = sv.Exec(ctx, ExecRequest{ExecID: "running", Argv: []string{busybox, "sleep", "600"}}, Events{Started: func(s Started) error {
				started <- s
				return nil
			}})
		}()
		original := <-started
		retry := &result{}
		retryCtx, cancel := context.WithCancel(ctx)
		defer cancel()
		ev := retry.collect(t, 0, 0)
		ev.Started = func(s Started) error { retry.started = s; cancel(); return nil }
		_, _ = sv.Exec(retryCtx, ExecRequest{ExecID: "running", Argv: []string{busybox, "false"}}, ev)
		if retry.started.PID != original.PID || !retry.started.Attached {
			t.Errorf("retry started %+v, want attached to pid %d", retry.started, original.PID)
		}
		if err := sv.Cancel(ctx, "running"); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("empty exec ids get distinct assigned ids", func(t *testing.T) {
		a := run(t, sv.Client, ExecRequest{Argv: []string{busybox, "true"}})
		b := run(t, sv.Client, ExecRequest{Argv: []string{busybox, "true"}})
		if a.started.ExecID == "" || a.started.ExecID == b.started.ExecID {
			t.Errorf("assigned ids %q and %q", a.started.ExecID, b.started.ExecID)
		}
	})
}

func TestExecStdin(t *testing.T) {
	sv := startSupervisor(t, startConfig{})
	ctx := context.Background()
	allBytes := make([]byte, 256)
	for i := range allBytes {
		allBytes[i] = byte(i)
	}
	// Larger than a pipe's buffer, so the supervisor is still writing when a reader stops.
	large := make([]byte, 512<<10)
	if _, err := rand.Read(large); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name       string
		argv       []string
		stdin      []byte
		wantStdout string
	}{
		{"cat echoes every byte value", []string{busybox, "cat"}, allBytes, string(allBytes)},
		{"cat echoes 512 KiB exactly", []string{busybox, "cat"}, large, string(large)},
		{"read gets a line", sh(`read x; echo "$x"`), []byte("hi\n"), "hi\n"},
		{"a reader that stops early leaves the rest unread", []string{busybox, "head", "-c", "1"}, large, string(large[:1])},
		{"a command that closes stdin and keeps running", sh("busybox head -c 1; exec 0</dev/null; busybox sleep 0.2; echo ok"), large, string(large[:1]) + "ok\n"},
		{"a command that never reads stdin", sh("busybox sleep 0.2; echo ok"), large, "ok\n"},
		{"empty stdin is /dev/null", sh("cat; echo eof"), []byte{}, "eof\n"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := run(t, sv.Client, ExecRequest{Argv: tc.argv, Stdin: tc.stdin})
			if got := r.stdout.String(); got != tc.wantStdout {
				t.Errorf("stdout is %d bytes, want %d; they differ (stdout %.40q, want %.40q)", len(got), len(tc.wantStdout), got, tc.wantStdout)
			}
			if r.exit.ExitStatus != 0 || r.stderr.Len() != 0 {
				t.Errorf("exit %+v stderr %q, want a clean exit", r.exit, r.stderr.String())
			}
			// Stdin the process left unread must not cost the supervisor (SIGPIPE, a stuck write).
			if h, err := sv.Ping(ctx); err != nil || h.Running != 0 {
				t.Fatalf("ping %+v %v after the exec, want a healthy supervisor with nothing running", h, err)
			}
			if next := run(t, sv.Client, ExecRequest{Argv: []string{busybox, "echo", "next"}}); next.stdout.String() != "next\n" {
				t.Errorf("the next exec printed %q", next.stdout.String())
			}
		})
	}

	t.Run("a retry with the same exec id ignores its stdin", func(t *testing.T) {
		first := run(t, sv.Client, ExecRequest{ExecID: "stdin-once", Argv: []string{busybox, "cat"}, Stdin: []byte("first")})
		retry := run(t, sv.Client, ExecRequest{ExecID: "stdin-once", Argv: []string{busybox, "cat"}, Stdin: []byte("second")})
		if first.stdout.String() != "first" || retry.stdout.String() != "first" || !retry.started.Attached {
			t.Errorf("first run printed %q, the attached retry %q (attached %v); want the first stdin both times", first.stdout.String(), retry.stdout.String(), retry.started.Attached)
		}
	})

	t.Run("stdin too large for a request fails before sending", func(t *testing.T) {
		before, err := sv.Ping(ctx)
		if err != nil {
			t.Fatal(err)
		}
		// 800 KiB is under the 1 MiB limit raw, over it as base64.
		_, err = sv.Exec(ctx, ExecRequest{Argv: []string{busybox, "cat"}, Stdin: make([]byte, 800<<10)}, Events{})
		fe := asError(t, err)
		if fe.Code != CodeBadRequest || !strings.Contains(fe.Message, "stdin") {
			t.Errorf("error %+v, want bad_request naming stdin", fe)
		}
		after, err := sv.Ping(ctx)
		if err != nil || after.Finished != before.Finished || after.Running != 0 {
			t.Errorf("ping %+v %v after a refused exec, before it %+v: something ran", after, err, before)
		}
	})
}

// startKeepingStdin starts req with KeepStdin and returns once it runs, with a wait for its result.
func startKeepingStdin(t *testing.T, c *Client, req ExecRequest) (wait func() *result) {
	t.Helper()
	req.KeepStdin = true
	r := &result{}
	started := make(chan struct{})
	done := make(chan error, 1)
	ev := r.collect(t, 0, 0)
	ev.Started = func(s Started) error { r.started = s; close(started); return nil }
	go func() {
		var err error
		r.exit, err = c.Exec(context.Background(), req, ev)
		done <- err
	}()
	select {
	case <-started:
	case err := <-done:
		t.Fatalf("exec %q ended before it started: %v", req.Argv, err)
	}
	return func() *result {
		if err := <-done; err != nil {
			t.Fatalf("exec %q: %v", req.Argv, err)
		}
		return r
	}
}

func TestKeepStdin(t *testing.T) {
	sv := startSupervisor(t, startConfig{})
	ctx := context.Background()
	t.Run("writes follow the exec's own stdin in order, and close ends it", func(t *testing.T) {
		wait := startKeepingStdin(t, sv.Client, ExecRequest{ExecID: "reader", Argv: sh(`while read l; do echo "got $l"; done; echo eof`), Stdin: []byte("a\n")})
		for _, w := range []StdinRequest{{ExecID: "reader", Data: []byte("b\n")}, {ExecID: "reader", Data: []byte("c\n"), Close: true}} {
			if err := sv.WriteStdin(ctx, w); err != nil {
				t.Fatal(err)
			}
		}
		if r := wait(); r.stdout.String() != "got a\ngot b\ngot c\neof\n" || r.exit.ExitStatus != 0 {
			t.Fatalf("stdout %q exit %+v", r.stdout.String(), r.exit)
		}
		err := sv.WriteStdin(ctx, StdinRequest{ExecID: "reader", Data: []byte("late\n")})
		if fe := asError(t, err); fe.Code != CodeStdinClosed {
			t.Fatalf("a write after close: %v, want stdin_closed", err)
		}
	})
	t.Run("without initial bytes stdin is a pipe, not /dev/null", func(t *testing.T) {
		wait := startKeepingStdin(t, sv.Client, ExecRequest{ExecID: "cat", Argv: []string{busybox, "cat"}})
		if err := sv.WriteStdin(ctx, StdinRequest{ExecID: "cat", Data: []byte("later"), Close: true}); err != nil {
			t.Fatal(err)
		}
		if r := wait(); r.stdout.String() != "later" {
			t.Fatalf("stdout %q", r.stdout.String())
		}
	})
	t.Run("a process that exited takes no more", func(t *testing.T) {
		r := run(t, sv.Client, ExecRequest{ExecID: "gone", Argv: []string{busybox, "true"}, KeepStdin: true})
		err := sv.WriteStdin(ctx, StdinRequest{ExecID: "gone", Data: []byte("x")})
		if fe := asError(t, err); fe.Code != CodeStdinClosed || r.exit.ExitStatus != 0 {
			t.Fatalf("a write after the exit: %v (exit %+v), want stdin_closed", err, r.exit)
		}
	})
	t.Run("an exec started without keep_stdin refuses writes", func(t *testing.T) {
		started := make(chan struct{})
		go func() {
			_, _ = sv.Exec(ctx, ExecRequest{ExecID: "plain", Argv: []string{busybox, "sleep", "600"}}, Events{Started: func(Started) error { close(started); return nil }})
		}()
		<-started
		defer sv.Cancel(ctx, "plain")
		err := sv.WriteStdin(ctx, StdinRequest{ExecID: "plain", Data: []byte("x")})
		if fe := asError(t, err); fe.Code != CodeStdinClosed || !strings.Contains(fe.Message, "keep_stdin") {
			t.Fatalf("write: %v, want stdin_closed naming keep_stdin", err)
		}
	})
	t.Run("an unknown exec is not found", func(t *testing.T) {
		if fe := asError(t, sv.WriteStdin(ctx, StdinRequest{ExecID: "never-started"})); fe.Code != CodeNotFound {
			t.Fatalf("code %s, want not_found", fe.Code)
		}
	})
	t.Run("data too large for a request fails before sending", func(t *testing.T) {
		err := sv.WriteStdin(ctx, StdinRequest{ExecID: "reader", Data: make([]byte, 800<<10)})
		if fe := asError(t, err); fe.Code != CodeBadRequest || !strings.Contains(fe.Message, "stdin") {
			t.Fatalf("write: %v, want bad_request naming stdin", err)
		}
	})
}

func TestContextCancelLeavesTheExecRunning(t *testing.T) {
	sv := startSupervisor(t, startConfig{})
	ctx, cancel := context.WithCancel(context.Background())
	_, err := sv.Exec(ctx, ExecRequest{ExecID: "survivor", Argv: sh("busybox sleep 0.2; echo done")}, Events{
		Started: func(Started) error { cancel(); return nil },
	})
	if err == nil {
		t.Fatal("exec returned no error after its context was canceled")
	}
	r := &result{}
	exit, err := sv.Attach(context.Background(), AttachRequest{ExecID: "survivor"}, r.collect(t, 0, 0))
	if err != nil {
		t.Fatal(err)
	}
	if r.stdout.String() != "done\n" || exit.ExitStatus != 0 || exit.Canceled {
		t.Errorf("after the client left: stdout %q exit %+v, want the exec to finish normally", r.stdout.String(), exit)
	}
}

func TestFinishedExecsAreForgotten(t *testing.T) {
	ctx := context.Background()
	t.Run("beyond max-finished, oldest first", func(t *testing.T) {
		sv := startSupervisor(t, startConfig{args: []string{"--max-finished", "2"}})
		for _, id := range []string{"a", "b", "c"} {
			run(t, sv.Client, ExecRequest{ExecID: id, Argv: []string{busybox, "true"}})
		}
		if _, err := sv.Attach(ctx, AttachRequest{ExecID: "a"}, Events{}); asError(t, err).Code != CodeNotFound {
			t.Errorf("oldest exec still attachable: %v", err)
		}
		for _, id := range []string{"b", "c"} {
			if _, err := sv.Attach(ctx, AttachRequest{ExecID: id}, Events{}); err != nil {
				t.Errorf("attach %s: %v", id, err)
			}
		}
	})
	t.Run("after the retention period", func(t *testing.T) {
		sv := startSupervisor(t, startConfig{args: []string{"--retention", "50ms"}})
		run(t, sv.Client, ExecRequest{ExecID: "old", Argv: []string{busybox, "true"}})
		testkit.Eventually(t, 20*time.Second, "exec forgotten after retention", func() (bool, string) {
			_, err := sv.Attach(ctx, AttachRequest{ExecID: "old"}, Events{})
			var fe *Error
			return errors.As(err, &fe) && fe.Code == CodeNotFound, fmt.Sprint(err)
		})
		if h, err := sv.Ping(ctx); err != nil || h.Finished != 0 {
			t.Errorf("ping %+v %v, want no finished execs kept", h, err)
		}
	})
}

func TestPingReportsCountsAndActivity(t *testing.T) {
	sv := startSupervisor(t, startConfig{})
	ctx := context.Background()
	before, err := sv.Ping(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if before.PID != sv.cmd.Process.Pid || before.Running != 0 || before.Finished != 0 {
		t.Errorf("fresh ping %+v", before)
	}

	running := make(chan Health, 1)
	exit, err := sv.Exec(ctx, ExecRequest{ExecID: "probe", Argv: []string{busybox, "sleep", "600"}}, Events{Started: func(Started) error {
		h, err := sv.Ping(ctx)
		if err != nil {
			return err
		}
		running <- h
		return sv.Cancel(ctx, "probe")
	}})
	if err != nil || !exit.Canceled {
		t.Fatalf("exec %+v %v", exit, err)
	}
	if h := <-running; h.Running != 1 {
		t.Errorf("ping during an exec says %d running", h.Running)
	}
	after, err := sv.Ping(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if after.Running != 0 || after.Finished != 1 {
		t.Errorf("ping after the exec %+v, want 0 running 1 finished", after)
	}
	t0, err0 := time.Parse(time.RFC3339Nano, before.LastActivity)
	t1, err1 := time.Parse(time.RFC3339Nano, after.LastActivity)
	if err0 != nil || err1 != nil || !t1.After(t0) {
		t.Errorf("last activity %q then %q, want it to advance", before.LastActivity, after.LastActivity)
	}
}

func TestManyConcurrentExecs(t *testing.T) {
	sv := startSupervisor(t, startConfig{})
	const n = 64
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Go(func() {
			var out strings.Builder
			exit, err := sv.Exec(context.Background(), ExecRequest{Argv: sh(fmt.Sprintf("busybox seq 1 %d; echo %d >&2", 1000+i, i))}, Events{Output: func(o Output) error {
				if o.Stream == Stdout {
					out.Write(o.Data)
				}
				return nil
			}})
			switch {
			case err != nil:
				errs <- fmt.Errorf("exec %d: %w", i, err)
			case out.String() != seqOutput(1, 1000+i) || exit.StderrEnd != int64(len(strconv.Itoa(i))+1):
				errs <- fmt.Errorf("exec %d: wrong output (%d bytes) or stderr end %d", i, out.Len(), exit.StderrEnd)
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if h, err := sv.Ping(context.Background()); err != nil || h.Running != 0 || h.Finished != n {
		t.Errorf("ping %+v %v, want 0 running %d finished", h, err, n)
	}
}

func TestMalformedRequestsGetErrorFrames(t *testing.T) {
	sv := startSupervisor(t, startConfig{})
	run(t, sv.Client, ExecRequest{ExecID: "done", Argv: sh("echo 12345")})
	tests := []struct {
		name     string
		send     string
		wantCode ErrorCode
	}{
		{"not json", "hello\n", CodeBadRequest},
		{"json that is not an object", "[1,2]\n", CodeBadRequest},
		{"unknown op", `{"op":"explode"}` + "\n", CodeBadRequest},
		{"exec without argv", `{"op":"exec"}` + "\n", CodeBadRequest},
		{"exec with empty argv[0]", `{"op":"exec","argv":[""]}` + "\n", CodeBadRequest},
		{"exec with a negative timeout", `{"op":"exec","argv":["/bin/busybox","true"],"timeout_ms":-1}` + "\n", CodeBadRequest},
		{"env entry without =", `{"op":"exec","argv":["/bin/busybox","true"],"env":["NOEQUALS"]}` + "\n", CodeBadRequest},
		{"argv with a NUL byte", `{"op":"exec","argv":["/bin/busybox\u0000x"]}` + "\n", CodeSpawnFailed},
		{"attach to an unknown exec", `{"op":"attach","exec_id":"nope"}` + "\n", CodeNotFound},
		{"attach past the end of a stream", `{"op":"attach","exec_id":"done","stdout_offset":7}` + "\n", CodeBadRequest},
		{"attach at a negative offset", `{"op":"attach","exec_id":"done","stderr_offset":-1}` + "\n", CodeBadRequest},
		{"request line over 1 MiB", `{"op":"ping","exec_id":"` + strings.Repeat("x", maxRequestLine) + "\"}\n", CodeBadRequest},
		{"exec stdin over the request limit", `{"op":"exec","argv":["/bin/busybox","cat"],"stdin":"` + strings.Repeat("A", maxRequestLine) + "\"}\n", CodeBadRequest},
		{"exec stdin that is not base64", `{"op":"exec","argv":["/bin/busybox","cat"],"stdin":"not base64!"}` + "\n", CodeBadRequest},
		{"connection closed before the newline", `{"op":"ping"`, CodeBadRequest},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			conn, err := net.Dial("unix", sv.socket)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			// Write concurrently: the server may answer before reading all of an oversized line.
			go func() {
				_, _ = conn.Write([]byte(tc.send))
				_ = conn.(*net.UnixConn).CloseWrite()
			}()
			r := bufio.NewReader(conn)
			kind, payload, err := readFrame(r, nil)
			if err != nil {
				t.Fatalf("read answer: %v", err)
			}
			if kind != frameError {
				t.Fatalf("frame %q %s, want an error frame", kind, payload)
			}
			var fe Error
			if err := json.Unmarshal(payload, &fe); err != nil {
				t.Fatal(err)
			}
			if fe.Code != tc.wantCode || fe.Message == "" {
				t.Errorf("error %+v, want code %s with a message", fe, tc.wantCode)
			}
			if _, _, err := readFrame(r, nil); err == nil {
				t.Error("the server sent more after the error frame")
			}
		})
	}
	if _, err := sv.Ping(context.Background()); err != nil {
		t.Fatalf("supervisor unhealthy after malformed requests: %v", err)
	}
}

// TestOrphansAreReaped proves a process orphaned by an exec is reparented to the supervisor and
// reaped when it exits, both as a subreaper and as PID 1 of a pid namespace (as in a container).
func TestOrphansAreReaped(t *testing.T) {
	tests := []struct {
		name string
		cfg  startConfig
	}{
		{"child subreaper outside a container", startConfig{}},
		{"PID 1 of a new pid namespace", startConfig{newPIDNamespace: true}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if tc.cfg.newPIDNamespace {
				testkit.RequireRoot(t, "a new pid namespace")
			}
			sv := startSupervisor(t, tc.cfg)
			svPID := sv.cmd.Process.Pid
			ctx := context.Background()
			if h, err := sv.Ping(ctx); err != nil || (tc.cfg.newPIDNamespace && h.PID != 1) {
				t.Fatalf("ping %+v %v, want the supervisor to be PID 1 in its namespace", h, err)
			}

			// The orphan blocks opening a fifo until the test opens the other end, so it is
			// alive for exactly as long as the test needs.
			fifo := filepath.Join(t.TempDir(), "fifo")
			if err := syscall.Mkfifo(fifo, 0o600); err != nil {
				t.Fatal(err)
			}
			r := run(t, sv.Client, ExecRequest{Argv: sh("busybox cat " + fifo + " >/dev/null 2>&1 & echo $!")})
			orphanNSPID, err := strconv.Atoi(strings.TrimSpace(r.stdout.String()))
			if err != nil || r.exit.ExitStatus != 0 {
				t.Fatalf("exec printed %q exit %+v", r.stdout.String(), r.exit)
			}
			kids := childrenOf(t, svPID)
			if len(kids) != 1 || kids[0].nsPID != orphanNSPID || kids[0].state == "Z" {
				t.Fatalf("supervisor's children %+v, want only the live orphan %d", kids, orphanNSPID)
			}

			w, err := os.OpenFile(fifo, os.O_WRONLY, 0)
			if err != nil {
				t.Fatal(err)
			}
			w.Close()
			testkit.Eventually(t, 20*time.Second, "orphan reaped", func() (bool, string) {
				kids := childrenOf(t, svPID)
				return len(kids) == 0, fmt.Sprintf("children left: %+v", kids)
			})

			// The supervisor still works after reaping a pid it did not start.
			if r := run(t, sv.Client, ExecRequest{Argv: sh("echo $$")}); r.exit.ExitStatus != 0 || r.stdout.Len() == 0 {
				t.Errorf("exec after reaping an orphan: %+v %q", r.exit, r.stdout.String())
			}
		})
	}
}

func TestSIGTERMKillsRunningExecsAndExits(t *testing.T) {
	sv := startSupervisor(t, startConfig{})
	grandchild, wait := startWithGrandchild(t, sv.Client, ExecRequest{Argv: sh("busybox sleep 600 & echo $!; busybox sleep 600")})
	if err := sv.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := <-sv.done; err != nil {
		t.Errorf("supervisor exit: %v", err)
	}
	sv.done <- nil // for the cleanup, which signals and waits again
	if _, err := wait(); err == nil {
		t.Error("exec stream ended cleanly although the supervisor went away")
	}
	// With the supervisor gone, reaping the killed grandchild falls to the machine's init.
	requireDead(t, grandchild, true)
}

func BenchmarkSupervisorExecTrue(b *testing.B) {
	sv := startSupervisor(b, startConfig{})
	ctx := context.Background()
	req := ExecRequest{Argv: []string{"/bin/true"}}
	for b.Loop() {
		exit, err := sv.Exec(ctx, req, Events{})
		if err != nil || exit.ExitStatus != 0 {
			b.Fatalf("exec /bin/true: %+v %v", exit, err)
		}
	}
}

func BenchmarkForkExecTrue(b *testing.B) {
	for b.Loop() {
		if err := exec.Command("/bin/true").Run(); err != nil {
			b.Fatal(err)
		}
	}
}
