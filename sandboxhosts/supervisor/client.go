package supervisor

import (
	"bufio"
	"context"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"time"
)

// Client talks to one supervisor over its unix socket. It holds no connection: each call dials
// its own, so a Client is cheap, safe for concurrent use, and survives supervisor restarts.
type Client struct {
	socketPath string
	dialer     net.Dialer
}

// Dial returns a client for the supervisor listening on socketPath. It does not connect.
func Dial(socketPath string) *Client {
	return &Client{socketPath: socketPath}
}

// ExecRequest starts a command in the sandbox.
type ExecRequest struct {
	// ExecID makes the call idempotent: if an exec with this id exists, the call attaches to it
	// from offset 0 instead of starting another process. Empty: the supervisor assigns one.
	ExecID string
	// Argv runs directly; Argv[0] without a slash is looked up on the exec's PATH.
	Argv []string
	// Env entries ("KEY=value") override the sandbox's process environment.
	Env []string
	// Workdir defaults to the supervisor's working directory.
	Workdir string
	// Timeout SIGKILLs the exec's process group; zero means none. Millisecond precision.
	Timeout time.Duration
	// Stdin is written to the exec's stdin, which is then closed (EOF) unless KeepStdin; empty
	// (without KeepStdin) means /dev/null. It travels base64-encoded inside the request, whose
	// 1 MiB limit it counts toward. An exec that already exists under ExecID ignores it.
	Stdin []byte
	// KeepStdin leaves stdin open after Stdin, for WriteStdin; it closes when the process exits.
	KeepStdin bool
	// User runs the process as another user than root; nil runs it as root.
	User *User
}

// StdinRequest writes to the stdin of a running exec started with KeepStdin.
type StdinRequest struct {
	ExecID string
	// Data goes after everything written before; like an exec's Stdin it counts toward the
	// request's 1 MiB limit base64-encoded.
	Data []byte
	// Close closes stdin after Data (EOF for the process).
	Close bool
}

// AttachRequest re-attaches to an exec from absolute offsets of its two streams.
type AttachRequest struct {
	ExecID       string
	StdoutOffset int64
	StderrOffset int64
}

// Events receives what an exec or attach streams before its exit. Either field may be nil.
// Returning an error ends the call (the exec keeps running) and Exec/Attach return it.
type Events struct {
	Started func(Started) error
	// Output's Data is valid only until Output returns.
	Output func(Output) error
}

// Exec starts req (or attaches to the exec with its ExecID) and streams it to ev until it exits.
// A spawn failure is a *Error with Code CodeSpawnFailed; a request too large for the protocol
// (usually because of Stdin) is a *Error with Code CodeBadRequest, returned without sending it.
// Canceling ctx closes the connection and leaves the exec running.
func (c *Client) Exec(ctx context.Context, req ExecRequest, ev Events) (Exit, error) {
	return c.stream(ctx, Request{
		Op:        OpExec,
		ExecID:    req.ExecID,
		Argv:      req.Argv,
		Env:       req.Env,
		Workdir:   req.Workdir,
		TimeoutMS: req.Timeout.Milliseconds(),
		Stdin:     req.Stdin,
		KeepStdin: req.KeepStdin,
		User:      req.User,
	}, ev)
}

// Attach replays an exec's output from the given offsets, follows it live, and returns its exit.
// Offsets older than what the supervisor kept give a *Error with Code CodeOffsetDropped.
func (c *Client) Attach(ctx context.Context, req AttachRequest, ev Events) (Exit, error) {
	return c.stream(ctx, Request{
		Op:           OpAttach,
		ExecID:       req.ExecID,
		StdoutOffset: req.StdoutOffset,
		StderrOffset: req.StderrOffset,
	}, ev)
}

// Cancel SIGKILLs an exec's process group; its exit will say Canceled. Canceling a finished exec
// does nothing; an unknown one is a *Error with Code CodeNotFound.
func (c *Client) Cancel(ctx context.Context, execID string) error {
	return c.unary(ctx, Request{Op: OpCancel, ExecID: execID}, frameOK, nil)
}

// WriteStdin writes to a running exec's stdin (see StdinRequest) and returns once the bytes are
// in its pipe. An unknown exec is a *Error with Code CodeNotFound; one not started with
// KeepStdin, or whose stdin is closed (its process exited included), CodeStdinClosed.
func (c *Client) WriteStdin(ctx context.Context, req StdinRequest) error {
	return c.unary(ctx, Request{Op: OpStdin, ExecID: req.ExecID, Stdin: req.Data, CloseStdin: req.Close}, frameOK, nil)
}

// Ping returns the supervisor's health and counts.
func (c *Client) Ping(ctx context.Context) (Health, error) {
	var h Health
	err := c.unary(ctx, Request{Op: OpPing}, framePong, &h)
	return h, err
}

// readyPollInterval is short because WaitReady sits on the sandbox start path.
const readyPollInterval = time.Millisecond

// WaitReady pings until the supervisor answers or ctx ends, for use right after the container
// starts (the socket may not exist yet).
func (c *Client) WaitReady(ctx context.Context) (Health, error) {
	for {
		h, err := c.Ping(ctx)
		if err == nil {
			return h, nil
		}
		select {
		case <-ctx.Done():
			return Health{}, fmt.Errorf("supervisor at %s not ready: %w (last: %v)", c.socketPath, ctx.Err(), err)
		case <-time.After(readyPollInterval):
		}
	}
}

// call is one connection carrying one request.
type call struct {
	conn net.Conn
	r    *bufio.Reader
	stop func() bool
}

func (c *Client) open(ctx context.Context, req Request) (*call, error) {
	line, err := json.Marshal(req)
	if err != nil {
		return nil, fmt.Errorf("encode %s request: %w", req.Op, err)
	}
	line = append(line, '\n')
	// The supervisor would stop reading at the limit and answer bad_request, but the rest of the
	// write would then fail first and hide its answer.
	if len(line) > maxRequestLine {
		return nil, requestTooLarge(req, len(line))
	}
	conn, err := c.dialer.DialContext(ctx, "unix", c.socketPath)
	if err != nil {
		return nil, fmt.Errorf("dial supervisor: %w", err)
	}
	if _, err := conn.Write(line); err != nil {
		conn.Close()
		return nil, fmt.Errorf("send %s request: %w", req.Op, err)
	}
	return &call{
		conn: conn,
		r:    bufio.NewReaderSize(conn, frameHeaderLen+maxFramePayload),
		stop: context.AfterFunc(ctx, func() { conn.Close() }),
	}, nil
}

func requestTooLarge(req Request, n int) *Error {
	msg := fmt.Sprintf("%s request is %d bytes encoded, over the %d-byte limit", req.Op, n, maxRequestLine)
	if len(req.Stdin) > 0 {
		msg += fmt.Sprintf("; its %d bytes of stdin take %d as base64", len(req.Stdin), base64.StdEncoding.EncodedLen(len(req.Stdin)))
	}
	return &Error{Code: CodeBadRequest, Message: msg}
}

func (cl *call) close() {
	cl.stop()
	cl.conn.Close()
}

// fail prefers the context's error: a read on a connection closed by cancellation says less.
func fail(ctx context.Context, op string, err error) error {
	if ctx.Err() != nil {
		return fmt.Errorf("supervisor %s: %w", op, ctx.Err())
	}
	var fe *Error
	if errors.As(err, &fe) {
		return err
	}
	return fmt.Errorf("supervisor %s: %w", op, err)
}

func (c *Client) unary(ctx context.Context, req Request, want byte, out any) error {
	cl, err := c.open(ctx, req)
	if err != nil {
		return fail(ctx, req.Op, err)
	}
	defer cl.close()
	kind, payload, err := readFrame(cl.r, nil)
	if err != nil {
		return fail(ctx, req.Op, err)
	}
	if err := decodeTerminal(kind, payload, want, out); err != nil {
		return fail(ctx, req.Op, err)
	}
	return nil
}

// decodeTerminal decodes a frame that must be want or an error frame.
func decodeTerminal(kind byte, payload []byte, want byte, out any) error {
	switch kind {
	case want:
		if out == nil {
			return nil
		}
		if err := json.Unmarshal(payload, out); err != nil {
			return fmt.Errorf("decode frame %q: %w", kind, err)
		}
		return nil
	case frameError:
		fe := &Error{}
		if err := json.Unmarshal(payload, fe); err != nil {
			return fmt.Errorf("decode error frame: %w", err)
		}
		return fe
	}
	return fmt.Errorf("unexpected frame %q, want %q", kind, want)
}

func (c *Client) stream(ctx context.Context, req Request, ev Events) (Exit, error) {
	cl, err := c.open(ctx, req)
	if err != nil {
		return Exit{}, fail(ctx, req.Op, err)
	}
	defer cl.close()

	kind, buf, err := readFrame(cl.r, make([]byte, maxFramePayload))
	if err != nil {
		return Exit{}, fail(ctx, req.Op, err)
	}
	var started Started
	if err := decodeTerminal(kind, buf, frameStarted, &started); err != nil {
		return Exit{}, fail(ctx, req.Op, err)
	}
	if ev.Started != nil {
		if err := ev.Started(started); err != nil {
			return Exit{}, err
		}
	}
	for {
		kind, buf, err = readFrame(cl.r, buf)
		if err != nil {
			return Exit{}, fail(ctx, req.Op, fmt.Errorf("exec %s: %w", started.ExecID, noEOF(err)))
		}
		if kind != frameStdout && kind != frameStderr {
			var exit Exit
			if err := decodeTerminal(kind, buf, frameExit, &exit); err != nil {
				return Exit{}, fail(ctx, req.Op, err)
			}
			return exit, nil
		}
		if len(buf) < 8 {
			return Exit{}, fail(ctx, req.Op, fmt.Errorf("output frame of %d bytes has no offset", len(buf)))
		}
		if ev.Output == nil {
			continue
		}
		out := Output{Stream: Stdout, Offset: int64(binary.BigEndian.Uint64(buf)), Data: buf[8:]}
		if kind == frameStderr {
			out.Stream = Stderr
		}
		if err := ev.Output(out); err != nil {
			return Exit{}, err
		}
	}
}
