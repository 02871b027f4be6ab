// Command hangar-supervisor is PID 1 of every Hangar sandbox: it serves the supervisor protocol
// (package sandboxhosts/supervisor) on a unix socket the host can reach, runs execs, keeps their
// output and reaps every process. Build it static:
//
//	CGO_ENABLED=0 go build -trimpath -ldflags=-s -o hangar-supervisor ./cmd/hangar-supervisor
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

	"github.com/hangar-dev/hangar/sandboxhosts/supervisor"
)

func main() {
	log.SetFlags(0)
	log.SetPrefix("hangar-supervisor: ")
	if err := run(); err != nil {
		log.Fatal(err)
	}
}

func run() error {
	var opts supervisor.Options
	socket := flag.String("socket", "/.hangar/run/supervisor.sock", "unix socket to serve on")
	flag.IntVar(&opts.StreamCap, "stream-cap", supervisor.DefaultStreamCap, "bytes of each exec stream kept for re-attach")
	flag.DurationVar(&opts.Retention, "retention", supervisor.DefaultRetention, "how long finished execs stay attachable")
	flag.IntVar(&opts.MaxFinished, "max-finished", supervisor.DefaultMaxFinished, "finished execs kept at most")
	flag.DurationVar(&opts.OutputGrace, "output-grace", supervisor.DefaultOutputGrace, "how long output is read after an exec's main process exits")
	flag.Parse()
	if flag.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", flag.Args())
	}

	if err := os.MkdirAll(filepath.Dir(*socket), 0o755); err != nil {
		return fmt.Errorf("create socket directory: %w", err)
	}
	// A socket left by an earlier run of this sandbox would make Listen fail.
	if err := os.Remove(*socket); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("remove stale socket: %w", err)
	}
	ln, err := net.Listen("unix", *socket)
	if err != nil {
		return fmt.Errorf("listen: %w", err)
	}

	// As PID 1 every signal without a handler is ignored, so SIGTERM must be caught to stop.
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	return supervisor.Serve(ctx, ln, opts)
}
