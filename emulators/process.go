package emulators

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

const (
	pollInterval     = 100 * time.Millisecond
	stopPollInterval = 20 * time.Millisecond
	// Long enough for the JVMs to shut down cleanly (about 1-2 s here).
	gracePeriod = 10 * time.Second
	killPeriod  = 5 * time.Second
	tailSize    = 4096
)

const installHint = "install the Google Cloud CLI and its emulators, e.g. on Debian/Ubuntu from Google's apt repository " +
	"(https://cloud.google.com/sdk/docs/install#deb): " +
	"apt-get install google-cloud-cli google-cloud-cli-firestore-emulator google-cloud-cli-pubsub-emulator"

var components = map[Kind]struct{ dir, pkg string }{
	Firestore: {"cloud-firestore-emulator", "google-cloud-cli-firestore-emulator"},
	PubSub:    {"pubsub-emulator", "google-cloud-cli-pubsub-emulator"},
}

type emulator struct {
	kind Kind
	host string
	cmd  *exec.Cmd // nil when reused from the environment
	// watchdog ends cmd's process group if this process dies without stopping it.
	watchdog *watchdog

	done    chan struct{} // closed once cmd.Wait returns
	waitErr error
	tail    *tailBuffer
}

func (e *emulator) hostOrEmpty() string {
	if e == nil {
		return ""
	}
	return e.host
}

// launch runs gcloud with args on a fresh loopback port and waits until the emulator answers.
func launch(ctx context.Context, k Kind, args []string, logw io.Writer) (*emulator, error) {
	gcloud, err := exec.LookPath("gcloud")
	if err != nil {
		return nil, fmt.Errorf("gcloud %w on PATH: %s", ErrNotInstalled, installHint)
	}
	if err := checkComponent(gcloud, k); err != nil {
		return nil, err
	}
	// A free port is free only when it is asked for: another process (a parallel test
	// package's emulator) may bind it before the emulator does. That start is retried on a new
	// port; any other failure is the answer.
	for attempt := 1; ; attempt++ {
		e, err := launchOnFreePort(ctx, k, gcloud, args, logw)
		if err == nil || attempt == 3 || !strings.Contains(err.Error(), "Address already in use") {
			return e, err
		}
	}
}

func launchOnFreePort(ctx context.Context, k Kind, gcloud string, args []string, logw io.Writer) (*emulator, error) {
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	host := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))

	e := &emulator{kind: k, host: host, done: make(chan struct{}), tail: &tailBuffer{}}
	// Not CommandContext: the emulator must outlive the context that bounds its start.
	cmd := exec.Command(gcloud, append(args, "--host-port="+host)...)
	// The same writer for both streams makes os/exec use one pipe, keeping lines in order.
	cmd.Stdout = io.MultiWriter(logw, e.tail)
	cmd.Stderr = cmd.Stdout
	// Its own process group: the Java child survives a signal to the gcloud process alone.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	e.cmd = cmd
	go func() {
		e.waitErr = cmd.Wait()
		close(e.done)
	}()
	if e.watchdog, err = watch(cmd.Process.Pid); err != nil {
		return nil, errors.Join(err, e.stop())
	}
	if err := e.waitReady(ctx); err != nil {
		return nil, errors.Join(err, e.stop())
	}
	return e, nil
}

// checkComponent catches a missing emulator before gcloud would prompt to install it. It
// only judges SDK layouts it recognises (bin/gcloud beside platform/) and otherwise leaves the
// verdict to gcloud's own output.
func checkComponent(gcloud string, k Kind) error {
	real, err := filepath.EvalSymlinks(gcloud)
	if err != nil {
		return nil
	}
	platform := filepath.Join(filepath.Dir(filepath.Dir(real)), "platform")
	if _, err := os.Stat(platform); err != nil {
		return nil
	}
	c := components[k]
	if _, err := os.Stat(filepath.Join(platform, c.dir)); err == nil {
		return nil
	}
	return fmt.Errorf("the %s emulator component of the Google Cloud CLI is %w (no %s): "+
		"install it with `apt-get install %s` from Google's apt repository, or `gcloud components install %s`",
		k, ErrNotInstalled, filepath.Join(platform, c.dir), c.pkg, c.dir)
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("pick a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// waitReady polls the emulator's root, which both emulators answer with 200 "Ok" once they
// serve requests.
func (e *emulator) waitReady(ctx context.Context) error {
	client := &http.Client{Timeout: time.Second}
	tick := time.NewTicker(pollInterval)
	defer tick.Stop()
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+e.host+"/", nil)
		if err != nil {
			return err
		}
		if resp, err := client.Do(req); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-e.done: // nil for reused emulators: never ready
			return fmt.Errorf("exited before it was ready (%v); last output:\n%s", e.waitErr, e.tail)
		case <-ctx.Done():
			if e.tail == nil {
				return fmt.Errorf("%s not answering: %w", e.host, context.Cause(ctx))
			}
			return fmt.Errorf("%s not answering: %w; last output:\n%s", e.host, context.Cause(ctx), e.tail)
		case <-tick.C:
		}
	}
}

// stop interrupts the process group, which lets the JVMs shut down cleanly, kills it if that
// takes too long, and returns once no process of the group is left.
func (e *emulator) stop() error {
	pgid := e.cmd.Process.Pid // Setpgid made the gcloud process the group leader
	// Dismissed first: once the group is gone its id may be reused.
	e.watchdog.dismiss()
	if err := signalGroup(pgid, syscall.SIGINT); err != nil {
		return err
	}
	if e.waitGone(pgid, gracePeriod) {
		return nil
	}
	if err := signalGroup(pgid, syscall.SIGKILL); err != nil {
		return err
	}
	if e.waitGone(pgid, killPeriod) {
		return nil
	}
	return fmt.Errorf("process group %d still running %s after SIGKILL", pgid, killPeriod)
}

// waitGone waits for gcloud to be reaped and for the rest of its group, which gcloud does not
// wait for, to exit.
func (e *emulator) waitGone(pgid int, d time.Duration) bool {
	deadline := time.NewTimer(d)
	defer deadline.Stop()
	tick := time.NewTicker(stopPollInterval)
	defer tick.Stop()
	for {
		select {
		case <-e.done:
			if !GroupAlive(pgid) {
				return true
			}
		default:
		}
		select {
		case <-deadline.C:
			return false
		case <-tick.C:
		}
	}
}

// watchdogScript waits for its standard input to close, then interrupts process group $1 and
// kills it if it lingers. Its input is a pipe whose write end only this process holds, so the
// kernel closes it when this process ends, however it ends: kill -9 included. A child with
// Pdeathsig would not do: it ends gcloud alone, and gcloud's Java child lives on.
//
// It is POSIX sh (Debian's is dash, whose kill takes no "--": a negative id after the signal
// names a group).
const watchdogScript = `read -r _
kill -INT "-$1" 2>/dev/null || exit 0
for _ in 1 2 3 4 5 6 7 8 9 10; do sleep 1; kill -0 "-$1" 2>/dev/null || exit 0; done
kill -KILL "-$1" 2>/dev/null`

// watchdog is a shell running watchdogScript for one process group.
type watchdog struct {
	cmd  *exec.Cmd
	pipe *os.File // the write end; closing it fires the watchdog
}

// watch starts a watchdog for process group pgid, in a group of its own so that a terminal's
// Ctrl-C to this process's group does not end it before it is needed.
func watch(pgid int) (*watchdog, error) {
	r, w, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("watchdog pipe: %w", err)
	}
	defer r.Close()
	cmd := exec.Command("/bin/sh", "-c", watchdogScript, "emulator-watchdog", strconv.Itoa(pgid))
	cmd.Stdin = r
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		w.Close()
		return nil, fmt.Errorf("start the emulator watchdog: %w", err)
	}
	return &watchdog{cmd: cmd, pipe: w}, nil
}

// dismiss ends the watchdog without letting it fire. A nil watchdog is fine.
func (d *watchdog) dismiss() {
	if d == nil {
		return
	}
	_ = d.cmd.Process.Kill()
	_ = d.cmd.Wait()
	_ = d.pipe.Close()
}

func signalGroup(pgid int, sig syscall.Signal) error {
	if err := syscall.Kill(-pgid, sig); err != nil && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("signal process group %d: %w", pgid, err)
	}
	return nil
}

// tailBuffer keeps the last tailSize bytes written, for error messages.
type tailBuffer struct {
	mu  sync.Mutex
	buf []byte
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, p...)
	if over := len(t.buf) - tailSize; over > 0 {
		t.buf = append(t.buf[:0], t.buf[over:]...)
	}
	return len(p), nil
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.buf)
}

// lockedWriter serialises the emulators' output and swallows write errors: an error would
// stop os/exec from draining the pipe and the emulator would block on its next log line.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	_, _ = l.w.Write(p)
	return len(p), nil
}
