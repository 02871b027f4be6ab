package emulators

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"syscall"
)

// Exec runs name with args inside an emulator set: it starts the set, runs the command with
// the set's variables added to the environment and the standard streams passed through,
// forwards SIGINT and SIGTERM to it, and stops the set afterwards whatever happens.
//
// Exec always reuses emulators already named in the environment (opts.ReuseFromEnv is forced
// on), so a nested run shares the outer pair instead of starting another.
//
// exitCode is the command's exit status, 128+N if signal N ended it, and -1 if it did not run.
// err reports failures to start the set or the command, or to stop the set; a command that
// exits non-zero is not an error.
func Exec(ctx context.Context, opts Options, name string, args ...string) (exitCode int, err error) {
	// Catch signals from the start: dying during Start would orphan the emulators, which
	// live in process groups of their own.
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(sigs)

	startCtx, cancelStart := context.WithCancelCause(ctx)
	defer cancelStart(nil)
	procs := make(chan *os.Process, 1)
	done := make(chan struct{})
	defer close(done)
	go forwardSignals(sigs, procs, done, cancelStart)

	opts.ReuseFromEnv = true
	set, err := Start(startCtx, opts)
	if err != nil {
		return -1, err
	}
	defer func() {
		if stopErr := set.Stop(); stopErr != nil {
			err = errors.Join(err, stopErr)
		}
	}()

	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Env = append(os.Environ(), set.Env()...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	if err := cmd.Start(); err != nil {
		return -1, fmt.Errorf("run %s: %w", name, err)
	}
	procs <- cmd.Process

	err = cmd.Wait()
	var exitErr *exec.ExitError
	switch {
	case err == nil:
		return 0, nil
	case errors.As(err, &exitErr):
		if ws, ok := exitErr.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return 128 + int(ws.Signal()), nil
		}
		return exitErr.ExitCode(), nil
	default:
		return -1, fmt.Errorf("run %s: %w", name, err)
	}
}

// forwardSignals cancels the start while there is no command yet and remembers the signal,
// so one that arrives just as the command starts still reaches it.
func forwardSignals(sigs <-chan os.Signal, procs <-chan *os.Process, done <-chan struct{}, cancelStart context.CancelCauseFunc) {
	var proc *os.Process
	var pending []os.Signal
	for {
		select {
		case sig := <-sigs:
			if proc == nil {
				cancelStart(fmt.Errorf("received %v", sig))
				pending = append(pending, sig)
				continue
			}
			_ = proc.Signal(sig)
		case proc = <-procs:
			for _, sig := range pending {
				_ = proc.Signal(sig)
			}
			pending = nil
		case <-done:
			return
		}
	}
}
