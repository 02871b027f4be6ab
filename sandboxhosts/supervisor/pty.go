package supervisor

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"sync"
	"syscall"
	"time"

	"github.com/creack/pty"
	"golang.org/x/sys/unix"
)

// A "pty" call runs one interactive program on a new pseudo-terminal for as long as its
// connection lasts. Unlike exec, the connection is two-way after the request line: the client
// sends frames of the same format (see the package doc), the server answers with started,
// output (all of it as stdout: a terminal merges the streams) and exit. Nothing is kept for
// re-attach: a shell belongs to its connection.
//
// Client frames:
//
//	'i' input   the bytes, written to the terminal (Ctrl-C is byte 3, as from a keyboard)
//	'r' resize  JSON [WindowSize]
//	'g' signal  JSON [SignalRequest]: sent to the terminal's foreground process group
//
// EOF from the client hangs the terminal up: the program's process group gets SIGHUP and, if it
// is still there after [HangupGrace], SIGKILL; the exit frame follows once it is reaped.
const (
	frameInput  = 'i'
	frameResize = 'r'
	frameSignal = 'g'
)

// HangupGrace is how long a program may take to exit after a hang-up before it is killed.
const HangupGrace = 2 * time.Second

// WindowSize is a terminal's size in character cells.
type WindowSize struct {
	Rows uint16 `json:"rows"`
	Cols uint16 `json:"cols"`
}

// SignalRequest names a signal by number.
type SignalRequest struct {
	Signal int `json:"signal"`
}

// terminalSignals are the signals a terminal's client may send by name (without SIG).
var terminalSignals = map[string]syscall.Signal{
	"INT": unix.SIGINT, "TERM": unix.SIGTERM, "HUP": unix.SIGHUP, "QUIT": unix.SIGQUIT, "KILL": unix.SIGKILL,
	"USR1": unix.SIGUSR1, "USR2": unix.SIGUSR2, "WINCH": unix.SIGWINCH, "TSTP": unix.SIGTSTP, "CONT": unix.SIGCONT,
}

// TerminalSignalNames lists the names TerminalSignal takes, for error messages.
const TerminalSignalNames = "INT, TERM, HUP, QUIT, KILL, USR1, USR2, WINCH, TSTP, CONT"

// TerminalSignal is the signal a terminal's client may send by name, or false.
func TerminalSignal(name string) (syscall.Signal, bool) {
	sig, ok := terminalSignals[name]
	return sig, ok
}

// defaultTerm is the TERM a pty program gets when neither the sandbox nor the request sets one.
const defaultTerm = "xterm-256color"

// ptyProc is one program on a pseudo-terminal.
type ptyProc struct {
	id      string
	pid     int
	master  *os.File
	started time.Time

	mu     sync.Mutex
	reaped bool
	exit   Exit
	// done is closed once the process is reaped.
	done chan struct{}
}

// signalGroupLocked sends sig to the program's process group unless it was reaped (its pid may
// then be someone else's). Callers hold p.mu.
func (p *ptyProc) signalGroupLocked(sig unix.Signal) {
	if !p.reaped {
		_ = unix.Kill(-p.pid, sig)
	}
}

// hangup asks the program to end the way a closed terminal does, and kills it if it has not
// after HangupGrace.
func (p *ptyProc) hangup() {
	p.mu.Lock()
	p.signalGroupLocked(unix.SIGHUP)
	p.signalGroupLocked(unix.SIGCONT) // a stopped job must run to see the hang-up
	p.mu.Unlock()
	go func() {
		select {
		case <-p.done:
		case <-time.After(HangupGrace):
			p.mu.Lock()
			p.signalGroupLocked(unix.SIGKILL)
			p.mu.Unlock()
		}
	}()
}

// servePTY serves a "pty" call until its program has exited and its output is sent.
func (s *server) servePTY(br *bufio.Reader, fw frameWriter, req Request) {
	p, err := s.spawnPTY(req)
	if err != nil {
		var se *spawnError
		if errors.As(err, &se) {
			_ = fw.json(frameError, &Error{Code: CodeSpawnFailed, Spawn: se.reason, Message: se.Error()})
			return
		}
		_ = fw.json(frameError, &Error{Code: CodeBadRequest, Message: err.Error()})
		return
	}
	defer p.master.Close()
	if err := fw.json(frameStarted, Started{ExecID: p.id, PID: p.pid}); err != nil || fw.w.Flush() != nil {
		p.hangup()
		<-p.done
		return
	}
	inputDone := make(chan struct{})
	go func() {
		defer close(inputDone)
		// ptyInput ends only with an error: EOF or a closed connection is the client leaving.
		if err := s.ptyInput(br, p); !errors.Is(err, io.EOF) && !errors.Is(err, net.ErrClosed) {
			s.opts.ErrorLog.Printf("supervisor: pty %s input: %v", p.id, err)
		}
		p.hangup()
	}()

	// The master reads EIO once every holder of the terminal has closed it, or times out
	// OutputGrace after the program was reaped when a process it left behind still holds it.
	buf := make([]byte, maxChunk)
	var offset int64
	clientGone := false
	for {
		n, rerr := p.master.Read(buf)
		if n > 0 && !clientGone {
			if fw.output(frameStdout, offset, buf[:n]) != nil || fw.w.Flush() != nil {
				clientGone = true
				p.hangup()
			}
			offset += int64(n)
		}
		if rerr != nil {
			break
		}
	}
	select {
	case <-p.done:
	case <-inputDone:
		<-p.done
	}
	if !clientGone {
		p.mu.Lock()
		exit := p.exit
		p.mu.Unlock()
		exit.StdoutEnd = offset
		_ = fw.json(frameExit, exit)
	}
}

// ptyInput copies the client's frames to the terminal until the client closes its side, and
// returns why it stopped.
func (s *server) ptyInput(br *bufio.Reader, p *ptyProc) error {
	var buf []byte
	for {
		kind, payload, err := readFrame(br, buf)
		buf = payload
		if err != nil {
			return err
		}
		switch kind {
		case frameInput:
			if _, err := p.master.Write(payload); err != nil {
				return fmt.Errorf("write to the terminal: %w", err)
			}
		case frameResize:
			var ws WindowSize
			if err := json.Unmarshal(payload, &ws); err != nil {
				return fmt.Errorf("decode resize: %w", err)
			}
			if err := pty.Setsize(p.master, &pty.Winsize{Rows: ws.Rows, Cols: ws.Cols}); err != nil {
				return fmt.Errorf("resize the terminal: %w", err)
			}
		case frameSignal:
			var sr SignalRequest
			if err := json.Unmarshal(payload, &sr); err != nil {
				return fmt.Errorf("decode signal: %w", err)
			}
			p.signalForeground(unix.Signal(sr.Signal))
		default:
			return fmt.Errorf("unexpected client frame %q", kind)
		}
	}
}

// signalForeground sends sig to the terminal's foreground process group (the job in front,
// as a keyboard's Ctrl-C does), or the program's own group when there is none.
func (p *ptyProc) signalForeground(sig unix.Signal) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.reaped {
		return
	}
	var pgrp int
	rc, err := p.master.SyscallConn()
	if err == nil {
		_ = rc.Control(func(fd uintptr) { pgrp, err = unix.IoctlGetInt(int(fd), unix.TIOCGPGRP) })
	}
	if err != nil || pgrp <= 0 {
		pgrp = p.pid
	}
	_ = unix.Kill(-pgrp, sig)
}

// spawnPTY starts req's program as the leader of a new session whose controlling terminal is a
// new pseudo-terminal, and registers it for the reaper under s.mu from fork on.
func (s *server) spawnPTY(req Request) (*ptyProc, error) {
	if len(req.Argv) == 0 || req.Argv[0] == "" {
		return nil, errors.New("argv is empty")
	}
	env, err := buildEnv(s.baseEnv, req.Env)
	if err != nil {
		return nil, err
	}
	if envValue(env, "TERM") == "" {
		env = append(env, "TERM="+defaultTerm)
	}
	if req.Workdir != "" {
		if err := checkWorkdir(req.Workdir); err != nil {
			return nil, err
		}
	}
	argv0, err := lookPath(req.Argv[0], envValue(env, "PATH"), req.Workdir)
	if err != nil {
		return nil, err
	}
	master, tty, err := pty.Open()
	if err != nil {
		return nil, fmt.Errorf("open a pseudo-terminal: %w", err)
	}
	defer tty.Close()
	if req.Rows > 0 && req.Cols > 0 {
		if err := pty.Setsize(master, &pty.Winsize{Rows: req.Rows, Cols: req.Cols}); err != nil {
			master.Close()
			return nil, fmt.Errorf("size the pseudo-terminal: %w", err)
		}
	}
	if req.User != nil {
		// The terminal belongs to whoever is logged in on it, as login(1) leaves it: its
		// programs may then change its modes and tools that check a tty's owner accept it.
		if err := tty.Chown(int(req.User.UID), int(req.User.GID)); err != nil {
			master.Close()
			return nil, fmt.Errorf("give the pseudo-terminal to uid %d: %w", req.User.UID, err)
		}
	}
	ttyFD := tty.Fd()

	s.mu.Lock()
	defer s.mu.Unlock()
	started := time.Now()
	pid, err := syscall.ForkExec(argv0, req.Argv, &syscall.ProcAttr{
		Dir:   req.Workdir,
		Env:   env,
		Files: []uintptr{ttyFD, ttyFD, ttyFD},
		Sys:   &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0, Credential: req.User.credential()},
	})
	if err != nil {
		master.Close()
		return nil, &spawnError{classifyExecErrno(err), fmt.Errorf("start %s: %w", req.Argv[0], err)}
	}
	id := newExecID()
	p := &ptyProc{id: id, pid: pid, master: master, started: started, done: make(chan struct{}), exit: Exit{ExecID: id, PID: pid}}
	s.ptys[pid] = p
	s.lastActivity = started
	return p, nil
}

// onPTYReaped records how a pty program ended, and gives whatever it left holding the terminal
// OutputGrace to finish writing.
func (s *server) onPTYReaped(p *ptyProc, ws unix.WaitStatus, ru *unix.Rusage, now time.Time) {
	p.mu.Lock()
	p.reaped = true
	exitFromStatus(&p.exit, ws)
	usageFrom(&p.exit, ru, now.Sub(p.started))
	p.mu.Unlock()
	_ = p.master.SetReadDeadline(now.Add(s.opts.OutputGrace))
	close(p.done)
	s.mu.Lock()
	s.lastActivity = now
	s.mu.Unlock()
}

// PTYRequest starts an interactive program on a new pseudo-terminal.
type PTYRequest struct {
	// Argv runs directly; Argv[0] without a slash is looked up on PATH.
	Argv []string
	// Env entries ("KEY=value") override the sandbox's process environment; TERM defaults to
	// xterm-256color.
	Env []string
	// Workdir defaults to the supervisor's working directory.
	Workdir string
	Size    WindowSize
	// User runs the program as that uid and gid; nil runs it as root.
	User *User
}

// Terminal is a program running on a pseudo-terminal in the sandbox, for as long as the
// connection lasts. Its input methods are safe for concurrent use with each other and with
// Output.
type Terminal struct {
	Started Started
	cl      *call

	wmu sync.Mutex
	fw  frameWriter
}

// OpenPTY starts req's program and returns once it runs. A spawn failure is a *Error with
// Code CodeSpawnFailed. Canceling ctx closes the connection, which hangs the terminal up.
func (c *Client) OpenPTY(ctx context.Context, req PTYRequest) (*Terminal, error) {
	cl, err := c.open(ctx, Request{Op: OpPTY, Argv: req.Argv, Env: req.Env, Workdir: req.Workdir, Rows: req.Size.Rows, Cols: req.Size.Cols, User: req.User})
	if err != nil {
		return nil, fail(ctx, OpPTY, err)
	}
	kind, payload, err := readFrame(cl.r, nil)
	if err == nil {
		var started Started
		if err = decodeTerminal(kind, payload, frameStarted, &started); err == nil {
			return &Terminal{Started: started, cl: cl, fw: frameWriter{w: bufio.NewWriter(cl.conn)}}, nil
		}
	}
	cl.close()
	return nil, fail(ctx, OpPTY, err)
}

func (t *Terminal) send(kind byte, payload []byte) error {
	t.wmu.Lock()
	defer t.wmu.Unlock()
	if err := t.fw.header(kind, len(payload)); err != nil {
		return err
	}
	if _, err := t.fw.w.Write(payload); err != nil {
		return err
	}
	return t.fw.w.Flush()
}

// Write sends keyboard input to the terminal.
func (t *Terminal) Write(b []byte) (int, error) {
	for sent := 0; sent < len(b); {
		n := min(len(b)-sent, maxChunk)
		if err := t.send(frameInput, b[sent:sent+n]); err != nil {
			return sent, fmt.Errorf("terminal input: %w", err)
		}
		sent += n
	}
	return len(b), nil
}

// Resize sets the terminal's size; the program gets SIGWINCH.
func (t *Terminal) Resize(size WindowSize) error {
	b, _ := json.Marshal(size) // a struct of two integers always encodes
	return t.send(frameResize, b)
}

// Signal sends sig to the terminal's foreground process group.
func (t *Terminal) Signal(sig syscall.Signal) error {
	b, _ := json.Marshal(SignalRequest{Signal: int(sig)})
	return t.send(frameSignal, b)
}

// Hangup closes the input side: the program gets SIGHUP (and SIGKILL after HangupGrace), and
// Output still returns its exit.
func (t *Terminal) Hangup() error {
	t.wmu.Lock()
	defer t.wmu.Unlock()
	if uc, ok := t.cl.conn.(*net.UnixConn); ok {
		return uc.CloseWrite()
	}
	return t.cl.conn.Close()
}

// Output calls out with the terminal's output, in order, until the program has exited, and
// returns its exit. out's argument is valid only until it returns; an error from it ends the
// call.
func (t *Terminal) Output(out func([]byte) error) (Exit, error) {
	buf := make([]byte, maxFramePayload)
	for {
		kind, payload, err := readFrame(t.cl.r, buf)
		if err != nil {
			return Exit{}, fmt.Errorf("terminal %s: %w", t.Started.ExecID, noEOF(err))
		}
		buf = payload
		if kind != frameStdout {
			var exit Exit
			if err := decodeTerminal(kind, payload, frameExit, &exit); err != nil {
				return Exit{}, fmt.Errorf("terminal %s: %w", t.Started.ExecID, err)
			}
			return exit, nil
		}
		if len(payload) < 8 {
			return Exit{}, fmt.Errorf("terminal %s: output frame of %d bytes has no offset", t.Started.ExecID, len(payload))
		}
		if err := out(payload[8:]); err != nil {
			return Exit{}, err
		}
	}
}

// Close ends the call: the supervisor hangs the terminal up.
func (t *Terminal) Close() { t.cl.close() }
