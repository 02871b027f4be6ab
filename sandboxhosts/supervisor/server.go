package supervisor

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Options tune Serve. Zero values take the defaults.
type Options struct {
	// StreamCap is how many of the newest bytes each stream of each exec keeps. Default 16 MiB.
	StreamCap int
	// Retention is how long a finished exec stays attachable. Default 10 minutes.
	Retention time.Duration
	// MaxFinished is how many finished execs are kept at most; the oldest go first. Default 256.
	MaxFinished int
	// OutputGrace is how long output is still read after the main process exited, for pipes a
	// leftover process holds open. Default 200 ms.
	OutputGrace time.Duration
	// ErrorLog receives what cannot be reported to a client. Default: log.Default().
	ErrorLog *log.Logger
}

// Defaults for Options.
const (
	DefaultStreamCap   = 16 << 20
	DefaultRetention   = 10 * time.Minute
	DefaultMaxFinished = 256
	DefaultOutputGrace = 200 * time.Millisecond
)

func (o Options) withDefaults() Options {
	if o.StreamCap <= 0 {
		o.StreamCap = DefaultStreamCap
	}
	if o.Retention <= 0 {
		o.Retention = DefaultRetention
	}
	if o.MaxFinished <= 0 {
		o.MaxFinished = DefaultMaxFinished
	}
	if o.OutputGrace <= 0 {
		o.OutputGrace = DefaultOutputGrace
	}
	if o.ErrorLog == nil {
		o.ErrorLog = log.Default()
	}
	return o
}

// requestReadTimeout bounds how long a connection may take to send its request line.
const requestReadTimeout = 10 * time.Second

type finishedExec struct {
	e  *execution
	at time.Time
}

type server struct {
	opts    Options
	devNull *os.File
	baseEnv []string

	mu           sync.Mutex
	execs        map[string]*execution
	byPID        map[int]*execution // running: spawned and not reaped yet
	ptys         map[int]*ptyProc   // pty programs not reaped yet
	running      int                // not finished: includes reaped execs still draining output
	finished     []finishedExec     // in finish order, oldest first
	lastActivity time.Time
}

// Serve runs the supervisor on ln until ctx is done, then SIGKILLs every running exec's process
// group and returns. It reaps every child of this process — wait4(-1) — so a process may run
// only one Serve, and nothing else in it may wait for children. When this process is not PID 1
// it makes itself a child subreaper so orphans of its execs are still reparented to it.
func Serve(ctx context.Context, ln net.Listener, opts Options) error {
	opts = opts.withDefaults()
	if os.Getpid() != 1 {
		if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
			return fmt.Errorf("become child subreaper: %w", err)
		}
	}
	devNull, err := os.Open(os.DevNull)
	if err != nil {
		return fmt.Errorf("open stdin for execs: %w", err)
	}
	defer devNull.Close()

	s := &server{
		opts:         opts,
		devNull:      devNull,
		baseEnv:      os.Environ(),
		execs:        make(map[string]*execution),
		byPID:        make(map[int]*execution),
		ptys:         make(map[int]*ptyProc),
		lastActivity: time.Now(),
	}
	// SIGCHLD must be caught before the first spawn, or an early exit goes unnoticed.
	sigchld := make(chan os.Signal, 1)
	signal.Notify(sigchld, syscall.SIGCHLD)
	defer signal.Stop(sigchld)
	reaperDone := make(chan struct{})
	defer func() { <-reaperDone }()
	reaperCtx, stopReaper := context.WithCancel(ctx)
	defer stopReaper()
	go func() {
		defer close(reaperDone)
		for {
			s.reapAll()
			select {
			case <-sigchld:
			case <-reaperCtx.Done():
				return
			}
		}
	}()

	stop := context.AfterFunc(ctx, func() { ln.Close() })
	defer stop()
	defer s.killAll()
	for {
		c, err := ln.Accept()
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			if errors.Is(err, net.ErrClosed) {
				return fmt.Errorf("accept: %w", err)
			}
			// Out of file descriptors and the like: the supervisor must outlive it.
			opts.ErrorLog.Printf("supervisor: accept: %v", err)
			time.Sleep(10 * time.Millisecond)
			continue
		}
		go s.handle(c)
	}
}

// reapAll reaps every exited child, ours or orphaned, until none is left to reap.
func (s *server) reapAll() {
	for {
		var ws unix.WaitStatus
		var ru unix.Rusage
		pid, err := unix.Wait4(-1, &ws, unix.WNOHANG, &ru)
		if err == unix.EINTR {
			continue
		}
		if err != nil || pid <= 0 {
			return
		}
		now := time.Now()
		s.mu.Lock()
		e := s.byPID[pid]
		delete(s.byPID, pid)
		p := s.ptys[pid]
		delete(s.ptys, pid)
		s.mu.Unlock()
		if p != nil {
			s.onPTYReaped(p, ws, &ru, now)
			continue
		}
		if e == nil {
			continue // an orphan reparented to us, or a child whose exec failed to start
		}
		s.onReaped(e, ws, &ru, now)
	}
}

func (s *server) onReaped(e *execution, ws unix.WaitStatus, ru *unix.Rusage, now time.Time) {
	if e.timer != nil {
		e.timer.Stop()
	}
	e.mu.Lock()
	e.reaped = true
	exitFromStatus(&e.exit, ws)
	usageFrom(&e.exit, ru, now.Sub(e.started))
	// Deadlines, not Close: the pumps own the files and see a timeout as the end of the stream.
	_ = e.stdoutR.SetReadDeadline(now.Add(s.opts.OutputGrace))
	_ = e.stderrR.SetReadDeadline(now.Add(s.opts.OutputGrace))
	if e.stdinW != nil {
		// A process the exec left behind may hold stdin open without reading it.
		_ = e.stdinW.SetWriteDeadline(now)
	}
	done := e.finishIfDoneLocked(now)
	e.mu.Unlock()
	if e.stdinW != nil {
		// After the write in progress, if any, which the deadline ends.
		go func() {
			e.stdinMu.Lock()
			defer e.stdinMu.Unlock()
			e.closeStdinLocked()
		}()
	}
	if done {
		s.onFinished(e, now)
	}
}

func (s *server) onFinished(e *execution, now time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.running--
	s.finished = append(s.finished, finishedExec{e: e, at: now})
	s.lastActivity = now
	s.forgetOldLocked(now)
}

// forgetOldLocked drops finished execs past the retention period or beyond MaxFinished.
// Callers hold s.mu.
func (s *server) forgetOldLocked(now time.Time) {
	drop := 0
	for drop < len(s.finished) {
		f := s.finished[drop]
		if len(s.finished)-drop <= s.opts.MaxFinished && now.Sub(f.at) < s.opts.Retention {
			break
		}
		delete(s.execs, f.e.id)
		drop++
	}
	if drop > 0 {
		s.finished = append(s.finished[:0], s.finished[drop:]...)
	}
}

func (s *server) killAll() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, e := range s.byPID {
		e.mu.Lock()
		e.killTreeLocked()
		e.mu.Unlock()
	}
	for _, p := range s.ptys {
		p.mu.Lock()
		p.signalGroupLocked(unix.SIGKILL)
		p.mu.Unlock()
	}
}

// handle serves one connection: one request, its frames, then close. A panic here is a bug
// that must cost one call, not the sandbox.
func (s *server) handle(c net.Conn) {
	defer c.Close()
	fw := frameWriter{w: bufio.NewWriterSize(c, frameHeaderLen+maxFramePayload)}
	defer func() {
		if r := recover(); r != nil {
			s.opts.ErrorLog.Printf("supervisor: panic serving a request: %v", r)
			_ = fw.json(frameError, &Error{Code: CodeInternal, Message: fmt.Sprint(r)})
		}
		_ = fw.w.Flush()
	}()

	_ = c.SetReadDeadline(time.Now().Add(requestReadTimeout))
	br := bufio.NewReader(c)
	req, err := readRequest(br)
	if err != nil {
		_ = fw.json(frameError, &Error{Code: CodeBadRequest, Message: err.Error()})
		return
	}
	_ = c.SetReadDeadline(time.Time{})

	s.mu.Lock()
	s.forgetOldLocked(time.Now())
	s.mu.Unlock()

	switch req.Op {
	case OpPing:
		_ = fw.json(framePong, s.health())
	case OpCancel:
		if err := s.cancel(req.ExecID); err != nil {
			_ = fw.json(frameError, err)
			return
		}
		_ = fw.json(frameOK, struct{}{})
	case OpStdin:
		if err := s.writeStdin(req); err != nil {
			_ = fw.json(frameError, err)
			return
		}
		_ = fw.json(frameOK, struct{}{})
	case OpExec, OpAttach:
		e, started, errFrame := s.startOrFind(req)
		if errFrame != nil {
			_ = fw.json(frameError, errFrame)
			return
		}
		offsets := [2]int64{req.StdoutOffset, req.StderrOffset}
		if req.Op == OpExec {
			offsets = [2]int64{}
		}
		if errFrame := e.checkOffsets(offsets); errFrame != nil {
			_ = fw.json(frameError, errFrame)
			return
		}
		if err := fw.json(frameStarted, started); err != nil {
			return
		}
		// The client sends nothing after its request, so a read returning means it is gone.
		gone := make(chan struct{})
		go func() {
			_, _ = io.Copy(io.Discard, br)
			close(gone)
		}()
		_ = s.follow(fw, e, offsets, gone)
	case OpPTY:
		s.servePTY(br, fw, req)
	case OpDial:
		_ = c.SetDeadline(time.Time{})
		s.serveDial(c, br, fw, req)
	default:
		_ = fw.json(frameError, &Error{Code: CodeBadRequest, Message: fmt.Sprintf("unknown op %q", req.Op)})
	}
}

func readRequest(br *bufio.Reader) (Request, error) {
	var line []byte
	for {
		chunk, err := br.ReadSlice('\n')
		line = append(line, chunk...)
		if len(line) > maxRequestLine {
			return Request{}, fmt.Errorf("request line longer than %d bytes (an exec's stdin counts toward it, base64-encoded)", maxRequestLine)
		}
		if err == nil {
			break
		}
		if !errors.Is(err, bufio.ErrBufferFull) {
			return Request{}, fmt.Errorf("read request line: %w", err)
		}
	}
	var req Request
	if err := json.Unmarshal(bytes.TrimSpace(line), &req); err != nil {
		return Request{}, fmt.Errorf("decode request: %w", err)
	}
	return req, nil
}

func (s *server) health() Health {
	s.mu.Lock()
	defer s.mu.Unlock()
	return Health{
		PID:          os.Getpid(),
		Running:      s.running,
		Finished:     len(s.finished),
		Terminals:    len(s.ptys),
		LastActivity: s.lastActivity.UTC().Format(time.RFC3339Nano),
	}
}

func (s *server) cancel(execID string) *Error {
	s.mu.Lock()
	e := s.execs[execID]
	s.mu.Unlock()
	if e == nil {
		return &Error{Code: CodeNotFound, Message: fmt.Sprintf("no exec %q", execID)}
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if !e.reaped {
		e.canceled = true
		e.killTreeLocked()
	}
	return nil
}

// writeStdin serves a "stdin" request.
func (s *server) writeStdin(req Request) *Error {
	s.mu.Lock()
	e := s.execs[req.ExecID]
	s.mu.Unlock()
	if e == nil {
		return &Error{Code: CodeNotFound, Message: fmt.Sprintf("no exec %q", req.ExecID)}
	}
	if !e.keepStdin {
		return &Error{Code: CodeStdinClosed, Message: fmt.Sprintf("exec %q was not started with keep_stdin: its stdin took only the exec's own bytes", req.ExecID)}
	}
	e.stdinMu.Lock()
	defer e.stdinMu.Unlock()
	if e.stdinClosed {
		return &Error{Code: CodeStdinClosed, Message: fmt.Sprintf("the stdin of exec %q is closed (by a client, or its process exited)", req.ExecID)}
	}
	if err := e.writeStdinLocked(req.Stdin, req.CloseStdin); err != nil {
		return &Error{Code: CodeStdinClosed, Message: fmt.Sprintf("write to the stdin of exec %q: %v (its process no longer reads it)", req.ExecID, err)}
	}
	return nil
}

// startOrFind returns the exec a request streams from: an existing one for attach (or for an
// exec retried with the same id), or a newly started process.
func (s *server) startOrFind(req Request) (*execution, Started, *Error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if e := s.execs[req.ExecID]; e != nil && req.ExecID != "" {
		s.lastActivity = time.Now()
		return e, Started{ExecID: e.id, PID: e.pid, Attached: true}, nil
	}
	if req.Op == OpAttach {
		return nil, Started{}, &Error{Code: CodeNotFound, Message: fmt.Sprintf("no exec %q (never started, or forgotten after retention)", req.ExecID)}
	}
	e, err := s.spawnLocked(req)
	if err != nil {
		var se *spawnError
		if errors.As(err, &se) {
			return nil, Started{}, &Error{Code: CodeSpawnFailed, Spawn: se.reason, Message: se.Error()}
		}
		return nil, Started{}, &Error{Code: CodeBadRequest, Message: err.Error()}
	}
	return e, Started{ExecID: e.id, PID: e.pid}, nil
}

// spawnLocked starts req's process. Callers hold s.mu from fork to registration, so the reaper,
// which looks pids up under s.mu, cannot miss an exec that exits at once.
func (s *server) spawnLocked(req Request) (*execution, error) {
	if len(req.Argv) == 0 || req.Argv[0] == "" {
		return nil, errors.New("argv is empty")
	}
	if req.TimeoutMS < 0 {
		return nil, fmt.Errorf("timeout_ms %d is negative", req.TimeoutMS)
	}
	env, err := buildEnv(s.baseEnv, req.Env)
	if err != nil {
		return nil, err
	}
	workdir := req.Workdir
	if workdir != "" {
		if err := checkWorkdir(workdir); err != nil {
			return nil, err
		}
	}
	argv0, err := lookPath(req.Argv[0], envValue(env, "PATH"), workdir)
	if err != nil {
		return nil, err
	}
	id := req.ExecID
	if id == "" {
		id = newExecID()
	}

	stdin, stdinW, err := s.stdinFor(req.Stdin, req.KeepStdin)
	if err != nil {
		return nil, err
	}
	stdoutR, stdoutW, err := os.Pipe()
	if err != nil {
		closeStdin(stdin, stdinW)
		return nil, fmt.Errorf("stdout pipe: %w", err)
	}
	stderrR, stderrW, err := os.Pipe()
	if err != nil {
		closeStdin(stdin, stdinW)
		stdoutR.Close()
		stdoutW.Close()
		return nil, fmt.Errorf("stderr pipe: %w", err)
	}
	shimR, shimW, err := os.Pipe()
	if err != nil {
		closeStdin(stdin, stdinW)
		stdoutR.Close()
		stdoutW.Close()
		stderrR.Close()
		stderrW.Close()
		return nil, fmt.Errorf("shim pipe: %w", err)
	}
	started := time.Now()
	// The shim (tree.go) makes the process a subreaper, then execs argv0 in place: same pid.
	pid, err := syscall.ForkExec("/proc/self/exe", append([]string{shimArg0, argv0}, req.Argv...), &syscall.ProcAttr{
		Dir:   workdir,
		Env:   env,
		Files: []uintptr{stdin.Fd(), stdoutW.Fd(), stderrW.Fd(), shimW.Fd()},
		Sys:   sysProcAttr(req.User),
	})
	stdoutW.Close()
	stderrW.Close()
	shimW.Close()
	if err == nil {
		// A shim that failed exits at once; the reaper finds no exec of its pid.
		err = shimFailure(shimR)
	}
	shimR.Close()
	if err != nil {
		closeStdin(stdin, stdinW)
		stdoutR.Close()
		stderrR.Close()
		return nil, &spawnError{classifyExecErrno(err), fmt.Errorf("start %s: %w", req.Argv[0], err)}
	}
	if stdinW != nil {
		// Only the child may hold the read end, so its exit (or close) breaks the pipe.
		stdin.Close()
	}

	e := &execution{
		id:         id,
		pid:        pid,
		started:    started,
		stdinW:     stdinW,
		keepStdin:  req.KeepStdin,
		stdoutR:    stdoutR,
		stderrR:    stderrR,
		stdout:     newRing(s.opts.StreamCap),
		stderr:     newRing(s.opts.StreamCap),
		stdoutOpen: true,
		stderrOpen: true,
		changed:    make(chan struct{}),
		exit:       Exit{ExecID: id, PID: pid},
	}
	if req.TimeoutMS > 0 {
		e.timer = time.AfterFunc(time.Duration(req.TimeoutMS)*time.Millisecond, func() {
			e.mu.Lock()
			defer e.mu.Unlock()
			if e.killTreeLocked() {
				e.timedOut = true
			}
		})
	}
	s.execs[id] = e
	s.byPID[pid] = e
	s.running++
	s.lastActivity = started
	go s.pump(e, Stdout)
	go s.pump(e, Stderr)
	if stdinW != nil {
		// Locked before the exec can be found, so that its own Stdin goes before any request's.
		e.stdinMu.Lock()
		go feedStdin(e, req.Stdin)
	}
	return e, nil
}

// stdinFor returns the file an exec gets as stdin and, when data is not empty or keep is set,
// the write end of the pipe it reads from.
func (s *server) stdinFor(data []byte, keep bool) (stdin, w *os.File, err error) {
	if len(data) == 0 && !keep {
		return s.devNull, nil, nil
	}
	r, w, err := os.Pipe()
	if err != nil {
		return nil, nil, fmt.Errorf("stdin pipe: %w", err)
	}
	return r, w, nil
}

// closeStdin closes what stdinFor opened; the shared /dev/null stays open.
func closeStdin(stdin, w *os.File) {
	if w != nil {
		stdin.Close()
		w.Close()
	}
}

// feedStdin writes the exec's own Stdin and closes it unless the exec keeps stdin open, on its
// own goroutine because the process may read slowly or never, and then releases e.stdinMu,
// which spawnLocked took. The write ends early with EPIPE once no process holds the read end
// (Go turns SIGPIPE on a descriptor other than 1 and 2 into that error), or when the deadline
// set at reaping passes; either way the rest is dropped.
func feedStdin(e *execution, data []byte) {
	defer e.stdinMu.Unlock()
	_ = e.writeStdinLocked(data, !e.keepStdin)
}

func newExecID() string {
	var b [12]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails on Linux
	return "x" + hex.EncodeToString(b[:])
}

// pump copies one of the exec's pipes into its ring until EOF, or until the grace deadline set
// at reaping passes.
func (s *server) pump(e *execution, stream Stream) {
	f := e.pipe(stream)
	buf := make([]byte, 32<<10)
	for {
		n, err := f.Read(buf)
		if n > 0 {
			e.mu.Lock()
			e.ring(stream).write(buf[:n])
			e.notifyLocked()
			e.mu.Unlock()
		}
		if err != nil {
			break
		}
	}
	f.Close()
	now := time.Now()
	e.mu.Lock()
	if stream == Stdout {
		e.stdoutOpen = false
	} else {
		e.stderrOpen = false
	}
	done := e.finishIfDoneLocked(now)
	e.mu.Unlock()
	if done {
		s.onFinished(e, now)
	}
}

var errClientGone = errors.New("client disconnected")

// follow streams e's output from checked offsets, then its exit. Frames are written without holding
// e.mu, so a slow client never stalls the pumps.
func (s *server) follow(fw frameWriter, e *execution, offsets [2]int64, gone <-chan struct{}) error {
	buf := make([]byte, maxChunk)
	turn := 0
	for {
		st := e.next(buf, &offsets, &turn)
		switch {
		case st.dropped != nil:
			return fw.json(frameError, st.dropped)
		case st.n > 0:
			if err := fw.output(st.kind, st.offset, buf[:st.n]); err != nil {
				return err
			}
		case st.exit != nil:
			return fw.json(frameExit, st.exit)
		default:
			if err := fw.w.Flush(); err != nil {
				return err
			}
			select {
			case <-st.wait:
			case <-gone:
				return errClientGone
			}
		}
	}
}

// sysProcAttr puts an exec in its own process group, as user when one is given.
func sysProcAttr(user *User) *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Credential: user.credential()}
}

// credential is the identity a process is started with: nil (the supervisor's, root) for no
// user, else the uid and gid with setgroups to none, so that root's groups are not kept.
func (u *User) credential() *syscall.Credential {
	if u == nil {
		return nil
	}
	return &syscall.Credential{Uid: u.UID, Gid: u.GID, Groups: []uint32{}}
}
