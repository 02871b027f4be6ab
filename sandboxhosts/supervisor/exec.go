package supervisor

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// DefaultPath is the PATH an exec gets when neither the supervisor's environment nor the
// request sets one.
const DefaultPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// execution is one exec: its process, its kept output and, once finished, its exit.
type execution struct {
	id      string
	pid     int
	started time.Time
	timer   *time.Timer
	stdinW  *os.File // written and closed under stdinMu; nil when stdin is /dev/null
	stdoutR *os.File // owned by the stdout pump
	stderrR *os.File // owned by the stderr pump
	// keepStdin is whether stdin takes "stdin" requests after the exec's own Stdin.
	keepStdin bool

	// stdinMu serializes writes to stdinW, the initial Stdin first, and its close.
	stdinMu     sync.Mutex
	stdinClosed bool

	mu         sync.Mutex
	stdout     ring
	stderr     ring
	stdoutOpen bool
	stderrOpen bool
	reaped     bool
	finished   bool
	finishedAt time.Time
	timedOut   bool
	canceled   bool
	exit       Exit
	// changed is closed and replaced whenever output, state or exit changes, waking followers.
	changed chan struct{}
}

// notifyLocked wakes every follower. Callers hold e.mu.
func (e *execution) notifyLocked() {
	close(e.changed)
	e.changed = make(chan struct{})
}

func (e *execution) pipe(s Stream) *os.File {
	if s == Stdout {
		return e.stdoutR
	}
	return e.stderrR
}

func (e *execution) ring(s Stream) *ring {
	if s == Stdout {
		return &e.stdout
	}
	return &e.stderr
}

var followOrder = [2]struct {
	stream Stream
	kind   byte
}{{Stdout, frameStdout}, {Stderr, frameStderr}}

// checkOffsets rejects attach offsets that are negative, past what was written, or older than
// what is retained.
func (e *execution) checkOffsets(offsets [2]int64) *Error {
	e.mu.Lock()
	defer e.mu.Unlock()
	for i, f := range followOrder {
		r := e.ring(f.stream)
		if offsets[i] < 0 || offsets[i] > r.end {
			return &Error{Code: CodeBadRequest, Message: fmt.Sprintf("%s offset %d is outside [0, %d]", f.stream, offsets[i], r.end)}
		}
		if offsets[i] < r.start() {
			return droppedError(f.stream, r, offsets[i])
		}
	}
	return nil
}

func droppedError(stream Stream, r *ring, asked int64) *Error {
	start := r.start()
	return &Error{
		Code:          CodeOffsetDropped,
		Message:       fmt.Sprintf("%s bytes before offset %d were dropped (stream cap %d bytes); asked for %d", stream, start, r.max, asked),
		Stream:        stream,
		RetainedStart: start,
	}
}

// followStep is what a follower does next: send n bytes of output, report dropped output, send
// the exit, or wait for a change.
type followStep struct {
	kind    byte
	offset  int64
	n       int
	dropped *Error
	exit    *Exit
	wait    <-chan struct{}
}

// next copies the next chunk of output after offsets into buf, taking the streams in turns so a
// busy stdout cannot starve stderr, and advances offsets and turn.
func (e *execution) next(buf []byte, offsets *[2]int64, turn *int) followStep {
	e.mu.Lock()
	defer e.mu.Unlock()
	for i := range followOrder {
		k := (*turn + i) % len(followOrder)
		f := followOrder[k]
		r := e.ring(f.stream)
		if offsets[k] < r.start() {
			return followStep{dropped: droppedError(f.stream, r, offsets[k])}
		}
		if n := r.readAt(buf, offsets[k]); n > 0 {
			st := followStep{kind: f.kind, offset: offsets[k], n: n}
			offsets[k] += int64(n)
			*turn = k + 1
			return st
		}
	}
	if e.finished {
		exit := e.exit
		return followStep{exit: &exit}
	}
	return followStep{wait: e.changed}
}

// writeStdinLocked writes data to the exec's stdin and closes it when close is set (or the
// write failed). Callers hold e.stdinMu.
func (e *execution) writeStdinLocked(data []byte, close bool) error {
	var err error
	if len(data) > 0 {
		_, err = e.stdinW.Write(data)
	}
	if close || err != nil {
		e.closeStdinLocked()
	}
	return err
}

// closeStdinLocked closes stdin once. Callers hold e.stdinMu.
func (e *execution) closeStdinLocked() {
	if e.stdinW != nil && !e.stdinClosed {
		e.stdinW.Close()
		e.stdinClosed = true
	}
}

// killTreeLocked SIGKILLs the exec's process tree (tree.go) unless its main process was already
// reaped (the pid, and so the group id, may then belong to someone else). Callers hold e.mu.
func (e *execution) killTreeLocked() bool {
	if e.reaped {
		return false
	}
	killTree(e.pid)
	return true
}

// finishIfDoneLocked records the exit once the process is reaped and both streams are closed,
// and reports whether this call did it. Callers hold e.mu.
func (e *execution) finishIfDoneLocked(now time.Time) bool {
	if e.finished || !e.reaped || e.stdoutOpen || e.stderrOpen {
		return false
	}
	e.finished = true
	e.finishedAt = now
	e.exit.TimedOut = e.timedOut
	e.exit.Canceled = e.canceled
	e.exit.StdoutEnd = e.stdout.end
	e.exit.StderrEnd = e.stderr.end
	e.notifyLocked()
	return true
}

// spawnError is a failure to start the process, reported as a spawn_failed error frame.
type spawnError struct {
	reason SpawnFailure
	err    error
}

func (e *spawnError) Error() string { return e.err.Error() }

// buildEnv overlays the request's KEY=value entries on base and adds DefaultPath when no PATH
// is set, keeping one entry per key.
func buildEnv(base, overlay []string) ([]string, error) {
	index := make(map[string]int, len(base)+len(overlay))
	env := make([]string, 0, len(base)+len(overlay)+1)
	add := func(kv string) {
		k, _, _ := strings.Cut(kv, "=")
		if i, ok := index[k]; ok {
			env[i] = kv
			return
		}
		index[k] = len(env)
		env = append(env, kv)
	}
	for _, kv := range base {
		add(kv)
	}
	for _, kv := range overlay {
		if k, _, ok := strings.Cut(kv, "="); !ok || k == "" {
			return nil, fmt.Errorf("env entry %q is not KEY=value", kv)
		}
		add(kv)
	}
	if _, ok := index["PATH"]; !ok {
		env = append(env, "PATH="+DefaultPath)
	}
	return env, nil
}

func envValue(env []string, key string) string {
	for _, kv := range env {
		if k, v, _ := strings.Cut(kv, "="); k == key {
			return v
		}
	}
	return ""
}

// lookPath resolves a bare command name against the exec's own PATH (exec.LookPath would use the
// supervisor's). Names with a slash are left to execve, relative to the workdir.
func lookPath(name, path, workdir string) (string, error) {
	if strings.Contains(name, "/") {
		return name, nil
	}
	sawNonExecutable := false
	for _, dir := range filepath.SplitList(path) {
		if dir == "" {
			dir = "."
		}
		candidate := filepath.Join(dir, name)
		statPath := candidate
		if !filepath.IsAbs(statPath) {
			statPath = filepath.Join(workdir, statPath)
		}
		info, err := os.Stat(statPath)
		if err != nil || info.IsDir() {
			continue
		}
		if info.Mode()&0o111 == 0 {
			sawNonExecutable = true
			continue
		}
		if !strings.HasPrefix(candidate, "/") && !strings.HasPrefix(candidate, ".") {
			candidate = "./" + candidate
		}
		return candidate, nil
	}
	if sawNonExecutable {
		return "", &spawnError{SpawnNotExecutable, fmt.Errorf("%s: found on PATH but not executable", name)}
	}
	return "", &spawnError{SpawnNotFound, fmt.Errorf("%s: command not found (PATH=%s)", name, path)}
}

// classifyExecErrno maps execve's errno to a spawn failure reason.
func classifyExecErrno(err error) SpawnFailure {
	var errno syscall.Errno
	if !errors.As(err, &errno) {
		return SpawnOther
	}
	switch errno {
	case syscall.ENOENT:
		return SpawnNotFound
	case syscall.EACCES, syscall.EPERM, syscall.ENOEXEC, syscall.EISDIR:
		return SpawnNotExecutable
	}
	return SpawnOther
}

func checkWorkdir(dir string) error {
	info, err := os.Stat(dir)
	if err != nil {
		return &spawnError{SpawnBadWorkdir, fmt.Errorf("workdir %s: %w", dir, err)}
	}
	if !info.IsDir() {
		return &spawnError{SpawnBadWorkdir, fmt.Errorf("workdir %s: %w", dir, &fs.PathError{Op: "chdir", Path: dir, Err: syscall.ENOTDIR})}
	}
	return nil
}

// usageFrom converts the kernel's rusage into the Exit's fields; ru_maxrss is in KiB on Linux.
func usageFrom(exit *Exit, ru *unix.Rusage, wall time.Duration) {
	exit.WallMS = wall.Milliseconds()
	exit.PeakRSSKB = ru.Maxrss
	exit.UserCPUMS = ru.Utime.Sec*1000 + int64(ru.Utime.Usec)/1000
	exit.SysCPUMS = ru.Stime.Sec*1000 + int64(ru.Stime.Usec)/1000
}

// exitFromStatus fills the exit status or terminating signal.
func exitFromStatus(exit *Exit, ws unix.WaitStatus) {
	if ws.Signaled() {
		exit.ExitStatus = -1
		exit.Signal = int(ws.Signal())
		return
	}
	exit.ExitStatus = ws.ExitStatus()
}
