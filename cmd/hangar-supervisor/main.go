// Command hangar-supervisor is PID 1 of every Hangar sandbox: it serves the supervisor protocol
// (package sandboxhosts/supervisor) on a unix socket the host can reach, runs execs, keeps their
// output and reaps every process. Build it static:
//
//	CGO_ENABLED=0 go build -trimpath -ldflags=-s -o hangar-supervisor ./cmd/hangar-supervisor
//
// In a sandbox it serves a listening socket the host bound and passed as a file descriptor
// (--listen-fd), so it never makes a socket in a directory the sandbox can write; --socket, which
// binds a path itself, is for running it outside a sandbox.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"log"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/hangar-dev/hangar/sandboxhosts/supervisor"
)

func main() {
	// Started as an exec's shim, it runs the exec's command instead (and never returns).
	supervisor.RunShimIfAsked()
	log.SetFlags(0)
	log.SetPrefix("hangar-supervisor: ")
	if err := run(); err != nil {
		log.Fatal(err)
	}
}

func run() error {
	var opts supervisor.Options
	socket := flag.String("socket", "", "unix socket path to bind and serve on")
	listenFD := flag.Int("listen-fd", 0, "inherited descriptor of a listening unix socket to serve on (3 or more)")
	flag.IntVar(&opts.StreamCap, "stream-cap", supervisor.DefaultStreamCap, "bytes of each exec stream kept for re-attach")
	flag.DurationVar(&opts.Retention, "retention", supervisor.DefaultRetention, "how long finished execs stay attachable")
	flag.IntVar(&opts.MaxFinished, "max-finished", supervisor.DefaultMaxFinished, "finished execs kept at most")
	flag.DurationVar(&opts.OutputGrace, "output-grace", supervisor.DefaultOutputGrace, "how long output is read after an exec's main process exits")
	flag.Parse()
	if flag.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", flag.Args())
	}
	if (*socket == "") == (*listenFD == 0) {
		return errors.New("give exactly one of --socket and --listen-fd")
	}

	// Nothing in the sandbox may reach into PID 1: not dumpable, its /proc/1/{fd,mem,environ,root}
	// and ptrace, process_vm_*, pidfd_getfd and kcmp on it need CAP_SYS_PTRACE, which sandboxes do
	// not hold. (execve makes its children dumpable again.)
	if err := unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0); err != nil {
		return fmt.Errorf("make the supervisor undumpable: %w", err)
	}
	ctx, stop := stopContext()
	defer stop()

	ln, err := listen(*socket, *listenFD)
	if err != nil {
		return err
	}
	return supervisor.Serve(ctx, ln, opts)
}

// stopContext ends on SIGTERM or SIGINT only when the supervisor is not PID 1 of its pid
// namespace (run by hand or by tests). As PID 1 of a sandbox it must not stop on any signal a
// process inside can send: the kernel drops signals PID 1 has no handler for when they come
// from inside, but the Go runtime installs handlers, and by default exits on SIGHUP, SIGINT and
// SIGTERM and crashes on a SIGQUIT, SIGABRT or (sent, not faulted) SIGSEGV. So every such signal
// is caught and dropped; the host stops a sandbox with SIGKILL from the parent namespace (runc
// kill), which no handler can refuse. Notify rather than Ignore: an ignored disposition would be
// inherited by every exec, and `kill <pid>` would stop working on them.
func stopContext() (context.Context, context.CancelFunc) {
	if os.Getpid() != 1 {
		return signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	}
	// Not logged: a loop of kills would fill the host's log file.
	drop := make(chan os.Signal, 1)
	signal.Notify(drop, droppedSignals...)
	go func() {
		for range drop {
		}
	}()
	return context.WithCancel(context.Background())
}

// droppedSignals are every signal a process may send whose Go default would end or crash the
// supervisor, and the harmless ones beside them. Left alone: SIGCHLD (the reaper's), SIGURG (the
// runtime's preemption), SIGPROF (the profiler's), and SIGKILL and SIGSTOP, which cannot be
// caught and which the kernel drops for PID 1 when they come from inside its namespace.
var droppedSignals = []os.Signal{
	unix.SIGHUP, unix.SIGINT, unix.SIGQUIT, unix.SIGILL, unix.SIGTRAP, unix.SIGABRT, unix.SIGBUS,
	unix.SIGFPE, unix.SIGUSR1, unix.SIGSEGV, unix.SIGUSR2, unix.SIGPIPE, unix.SIGALRM, unix.SIGTERM,
	unix.SIGSTKFLT, unix.SIGTSTP, unix.SIGTTIN, unix.SIGTTOU, unix.SIGXCPU, unix.SIGXFSZ,
	unix.SIGVTALRM, unix.SIGIO, unix.SIGPWR, unix.SIGSYS,
}

// listen returns the listener to serve: the inherited one, or a socket bound at path.
func listen(path string, fd int) (net.Listener, error) {
	if fd != 0 {
		f := os.NewFile(uintptr(fd), "supervisor-listener")
		defer f.Close() // FileListener dups it
		ln, err := net.FileListener(f)
		if err != nil {
			return nil, fmt.Errorf("--listen-fd %d: %w", fd, err)
		}
		return ln, nil
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, fmt.Errorf("create socket directory: %w", err)
	}
	// A socket left by an earlier run would make Listen fail.
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("remove stale socket: %w", err)
	}
	ln, err := net.Listen("unix", path)
	if err != nil {
		return nil, fmt.Errorf("listen: %w", err)
	}
	return ln, nil
}
