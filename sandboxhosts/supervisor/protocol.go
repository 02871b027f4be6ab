package supervisor

import (
	"bufio"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
)

// Operations a Request can name.
const (
	OpExec   = "exec"
	OpAttach = "attach"
	OpCancel = "cancel"
	OpPing   = "ping"
	OpStdin  = "stdin"
	OpPTY    = "pty"
	OpDial   = "dial"
)

// Request is the one JSON line a client sends per connection.
type Request struct {
	Op     string `json:"op"`
	ExecID string `json:"exec_id,omitempty"`
	// Exec only.
	Argv      []string `json:"argv,omitempty"`
	Env       []string `json:"env,omitempty"` // "KEY=value"
	Workdir   string   `json:"workdir,omitempty"`
	TimeoutMS int64    `json:"timeout_ms,omitempty"` // 0: no timeout
	// Stdin is written to the exec's stdin, which is then closed unless KeepStdin; empty (and no
	// KeepStdin) means /dev/null. It is base64 in the JSON, so it counts 4/3 of its size toward
	// the request line's limit. For OpStdin, it is the bytes to write.
	Stdin []byte `json:"stdin,omitempty"`
	// KeepStdin (exec only) leaves stdin open after Stdin for OpStdin requests to write to.
	KeepStdin bool `json:"keep_stdin,omitempty"`
	// User (exec and pty) runs the process as that uid and gid, with no supplementary groups;
	// nil runs it as the supervisor (root).
	User *User `json:"user,omitempty"`
	// CloseStdin (OpStdin only) closes stdin after its bytes are written.
	CloseStdin bool `json:"close_stdin,omitempty"`
	// Rows and Cols (pty only) size the terminal; zero leaves the kernel's default.
	Rows uint16 `json:"rows,omitempty"`
	Cols uint16 `json:"cols,omitempty"`
	// Port (dial only) is the TCP port on the sandbox's loopback to connect to.
	Port int `json:"port,omitempty"`
	// Attach only.
	StdoutOffset int64 `json:"stdout_offset,omitempty"`
	StderrOffset int64 `json:"stderr_offset,omitempty"`
}

// User is the identity an exec or a pty program runs as.
type User struct {
	UID uint32 `json:"uid"`
	GID uint32 `json:"gid"`
}

// Stream names one of an exec's two output streams.
type Stream string

// The output streams.
const (
	Stdout Stream = "stdout"
	Stderr Stream = "stderr"
)

// Started is the first frame of an exec or attach.
type Started struct {
	ExecID string `json:"exec_id"`
	PID    int    `json:"pid"`
	// Attached is true when the exec already existed (an attach, or an exec retried with the
	// same ExecID) rather than being started by this call.
	Attached bool `json:"attached,omitempty"`
}

// Output is a chunk of an exec's stdout or stderr at an absolute byte offset of that stream.
type Output struct {
	Stream Stream
	Offset int64
	Data   []byte
}

// Exit is how an exec ended. Exactly one of ExitStatus >= 0 and Signal != 0 holds.
type Exit struct {
	ExecID     string `json:"exec_id"`
	PID        int    `json:"pid"`
	ExitStatus int    `json:"exit_status"` // -1 when killed by a signal
	Signal     int    `json:"signal,omitempty"`
	TimedOut   bool   `json:"timed_out,omitempty"`
	Canceled   bool   `json:"canceled,omitempty"`
	WallMS     int64  `json:"wall_ms"`
	PeakRSSKB  int64  `json:"peak_rss_kb"`
	UserCPUMS  int64  `json:"user_cpu_ms"`
	SysCPUMS   int64  `json:"sys_cpu_ms"`
	// StdoutEnd and StderrEnd are the streams' total lengths: the offsets after their last byte.
	StdoutEnd int64 `json:"stdout_end"`
	StderrEnd int64 `json:"stderr_end"`
}

// ShellExitStatus is the status a shell would report: ExitStatus, or 128+Signal when killed.
func (e Exit) ShellExitStatus() int {
	if e.Signal != 0 {
		return 128 + e.Signal
	}
	return e.ExitStatus
}

// Health is the answer to ping.
type Health struct {
	PID int `json:"pid"`
	// Running counts execs not finished yet; Finished counts those still retained.
	Running  int `json:"running"`
	Finished int `json:"finished"`
	// Terminals counts the pty programs running.
	Terminals int `json:"terminals"`
	// LastActivity is the last exec start, exit or attach (RFC 3339, UTC), or the supervisor's
	// start when there was none.
	LastActivity string `json:"last_activity"`
}

// ErrorCode classifies an error frame.
type ErrorCode string

// Error codes the supervisor sends.
const (
	CodeBadRequest    ErrorCode = "bad_request"
	CodeNotFound      ErrorCode = "not_found"
	CodeOffsetDropped ErrorCode = "offset_dropped"
	CodeSpawnFailed   ErrorCode = "spawn_failed"
	// CodeStdinClosed: a stdin write to an exec not started with KeepStdin, or whose stdin
	// was closed (by a client, or because its process exited).
	CodeStdinClosed ErrorCode = "stdin_closed"
	CodeInternal    ErrorCode = "internal"
)

// SpawnFailure says why an exec's process could not be started.
type SpawnFailure string

// Spawn failure reasons.
const (
	SpawnNotFound      SpawnFailure = "not_found"      // no such file, or not on PATH
	SpawnNotExecutable SpawnFailure = "not_executable" // permission denied, not an executable format
	SpawnBadWorkdir    SpawnFailure = "bad_workdir"    // workdir missing or not a directory
	SpawnOther         SpawnFailure = "other"
)

// ShellExitStatus is the status a shell reports for this failure (127 command not found,
// 126 not executable), or -1 when a shell would not have run a command at all.
func (f SpawnFailure) ShellExitStatus() int {
	switch f {
	case SpawnNotFound:
		return 127
	case SpawnNotExecutable:
		return 126
	}
	return -1
}

// Error is an error frame; the client returns it as a *Error.
type Error struct {
	Code    ErrorCode `json:"code"`
	Message string    `json:"message"`
	// Spawn is set with CodeSpawnFailed.
	Spawn SpawnFailure `json:"spawn,omitempty"`
	// Stream and RetainedStart are set with CodeOffsetDropped: the oldest offset still held.
	Stream        Stream `json:"stream,omitempty"`
	RetainedStart int64  `json:"retained_start,omitempty"`
}

func (e *Error) Error() string {
	return fmt.Sprintf("supervisor: %s: %s", e.Code, e.Message)
}

// Frame kinds; see the package doc.
const (
	frameStarted = 's'
	frameStdout  = 'o'
	frameStderr  = 'e'
	frameExit    = 'x'
	framePong    = 'p'
	frameOK      = 'k'
	frameError   = '!'
)

const (
	frameHeaderLen = 5
	// maxChunk bounds an output frame's data so a reader needs one fixed buffer.
	maxChunk = 64 << 10
	// maxFramePayload bounds every frame; JSON frames are far smaller than an output frame.
	maxFramePayload = 8 + maxChunk
	// maxRequestLine bounds a request line, newline included.
	maxRequestLine = 1 << 20
)

var errFrameTooLarge = errors.New("frame larger than the protocol allows")

// frameWriter writes frames through a buffer; callers flush before they block.
type frameWriter struct {
	w *bufio.Writer
}

func (fw frameWriter) header(kind byte, n int) error {
	var h [frameHeaderLen]byte
	h[0] = kind
	binary.BigEndian.PutUint32(h[1:], uint32(n))
	_, err := fw.w.Write(h[:])
	return err
}

func (fw frameWriter) json(kind byte, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("encode frame %q: %w", kind, err)
	}
	if err := fw.header(kind, len(b)); err != nil {
		return err
	}
	_, err = fw.w.Write(b)
	return err
}

func (fw frameWriter) output(kind byte, offset int64, data []byte) error {
	if err := fw.header(kind, 8+len(data)); err != nil {
		return err
	}
	var off [8]byte
	binary.BigEndian.PutUint64(off[:], uint64(offset))
	if _, err := fw.w.Write(off[:]); err != nil {
		return err
	}
	_, err := fw.w.Write(data)
	return err
}

// readFrame reads one frame into buf (grown as needed) and returns its kind and payload.
func readFrame(r *bufio.Reader, buf []byte) (byte, []byte, error) {
	var h [frameHeaderLen]byte
	if _, err := io.ReadFull(r, h[:]); err != nil {
		return 0, buf, err
	}
	n := int(binary.BigEndian.Uint32(h[1:]))
	if n > maxFramePayload {
		return 0, buf, fmt.Errorf("frame %q of %d bytes: %w", h[0], n, errFrameTooLarge)
	}
	if cap(buf) < n {
		buf = make([]byte, n)
	}
	buf = buf[:n]
	if _, err := io.ReadFull(r, buf); err != nil {
		return 0, buf, fmt.Errorf("read frame %q: %w", h[0], noEOF(err))
	}
	return h[0], buf, nil
}

// noEOF turns a clean EOF inside a frame into the truncation it is.
func noEOF(err error) error {
	if err == io.EOF {
		return io.ErrUnexpectedEOF
	}
	return err
}
