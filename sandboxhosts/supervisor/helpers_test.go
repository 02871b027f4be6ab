package supervisor

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hangar-dev/hangar/internal/testkit"
	"github.com/hangar-dev/hangar/sandboxhosts/supervisor/supervisortest"
)

const busybox = "/bin/busybox"

// baseEnvEntry is the supervisor's own environment in tests, standing in for the container's
// process env that execs inherit.
const baseEnvEntry = "SUPERVISOR_TEST_BASE=base"

// requireTool skips, or fails under CI, when a host tool the tests run is missing.
func requireTool(t testing.TB, path string) {
	t.Helper()
	testkit.RequireFile(t, path, "apt-get install busybox-static")
}

// supervisorProc is a running hangar-supervisor binary and a client for it.
type supervisorProc struct {
	*Client
	socket string
	cmd    *exec.Cmd
	done   chan error
}

type startConfig struct {
	args []string
	// newPIDNamespace runs the supervisor as PID 1 of a new pid namespace.
	newPIDNamespace bool
}

// startSupervisor runs the real binary outside a container with a temp socket and waits until it
// answers. Cleanup stops it with SIGTERM and checks that it exits cleanly (SIGKILL as PID 1).
func startSupervisor(t testing.TB, cfg startConfig) *supervisorProc {
	t.Helper()
	requireTool(t, busybox)
	bin := supervisortest.Binary(t)
	// Not t.TempDir: unix socket paths must stay under 108 bytes.
	dir, err := os.MkdirTemp("", "sv")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	socket := filepath.Join(dir, "s.sock")

	cmd := exec.Command(bin, append([]string{"--socket", socket}, cfg.args...)...)
	cmd.Env = []string{baseEnvEntry}
	stderr := &testkit.SyncBuffer{}
	cmd.Stderr = stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if cfg.newPIDNamespace {
		cmd.SysProcAttr.Cloneflags = syscall.CLONE_NEWPID
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start supervisor: %v", err)
	}
	p := &supervisorProc{Client: Dial(socket), socket: socket, cmd: cmd, done: make(chan error, 1)}
	go func() { p.done <- cmd.Wait() }()
	t.Cleanup(func() {
		if cfg.newPIDNamespace {
			// As PID 1 it ignores SIGTERM by design; the host stops it with SIGKILL.
			_ = cmd.Process.Kill()
			<-p.done
			return
		}
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case err := <-p.done:
			if err != nil {
				t.Errorf("supervisor exited with %v; its stderr:\n%s", err, stderr)
			}
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-p.done
			t.Errorf("supervisor ignored SIGTERM; its stderr:\n%s", stderr)
		}
	})

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := p.WaitReady(ctx); err != nil {
		t.Fatalf("%v; supervisor stderr:\n%s", err, stderr)
	}
	return p
}

// result is everything an exec streamed.
type result struct {
	started Started
	stdout  bytes.Buffer
	stderr  bytes.Buffer
	exit    Exit
}

// collect returns Events that append output to r and check offsets are contiguous from
// the given starting offsets.
func (r *result) collect(t testing.TB, stdoutFrom, stderrFrom int64) Events {
	return Events{
		Started: func(s Started) error { r.started = s; return nil },
		Output: func(o Output) error {
			buf, from := &r.stdout, stdoutFrom
			if o.Stream == Stderr {
				buf, from = &r.stderr, stderrFrom
			}
			if want := from + int64(buf.Len()); o.Offset != want {
				t.Errorf("%s chunk at offset %d, want %d (a gap or a doubled byte)", o.Stream, o.Offset, want)
			}
			buf.Write(o.Data)
			return nil
		},
	}
}

func run(t testing.TB, c *Client, req ExecRequest) *result {
	t.Helper()
	r := &result{}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	exit, err := c.Exec(ctx, req, r.collect(t, 0, 0))
	if err != nil {
		t.Fatalf("exec %q: %v", req.Argv, err)
	}
	r.exit = exit
	return r
}

func sh(script string) []string { return []string{busybox, "sh", "-c", script} }

// seqOutput is what `seq 1 n` prints.
func seqOutput(from, to int) string {
	var b strings.Builder
	for i := from; i <= to; i++ {
		b.WriteString(strconv.Itoa(i))
		b.WriteByte('\n')
	}
	return b.String()
}

type procInfo struct {
	pid   int
	state string
	ppid  int
	nsPID int // the pid as seen in its own (innermost) pid namespace
}

// readProc reads a process's state, parent and innermost-namespace pid from /proc.
func readProc(pid int) (procInfo, error) {
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return procInfo{}, err
	}
	info := procInfo{pid: pid}
	for line := range strings.SplitSeq(string(status), "\n") {
		key, value, _ := strings.Cut(line, ":")
		fields := strings.Fields(value)
		if len(fields) == 0 {
			continue
		}
		switch key {
		case "State":
			info.state = fields[0]
		case "PPid":
			info.ppid, _ = strconv.Atoi(fields[0])
		case "NSpid":
			info.nsPID, _ = strconv.Atoi(fields[len(fields)-1])
		}
	}
	return info, nil
}

// childrenOf lists the processes whose parent is pid.
func childrenOf(t testing.TB, pid int) []procInfo {
	t.Helper()
	entries, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	var kids []procInfo
	for _, e := range entries {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		info, err := readProc(p)
		if err != nil {
			continue // exited while we looked
		}
		if info.ppid == pid {
			kids = append(kids, info)
		}
	}
	return kids
}

func asError(t testing.TB, err error) *Error {
	t.Helper()
	var fe *Error
	if !errors.As(err, &fe) {
		t.Fatalf("got error %v (%T), want a *supervisor.Error", err, err)
	}
	return fe
}
