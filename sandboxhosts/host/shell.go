package host

import (
	"context"
	"errors"
	"fmt"
	"io"
	"regexp"
	"slices"

	"connectrpc.com/connect"

	hostv1 "github.com/hangar-dev/hangar/gen/host/v1"
	"github.com/hangar-dev/hangar/platform/apierr"
	"github.com/hangar-dev/hangar/records/eventlog"
	"github.com/hangar-dev/hangar/sandboxhosts/supervisor"
)

// loginShell is what a shell opened without argv runs: the image's bash when it has one, else
// its POSIX sh, as a login shell so that the image's profile sets the prompt and PATH.
var loginShell = []string{"/bin/sh", "-c", "if [ -x /bin/bash ]; then exec /bin/bash -l; fi; exec /bin/sh -l"}

// termName is a TERM value: a terminfo name, nothing a shell could read as more.
var termName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._+-]{0,63}$`)

// maxTerminalCells bounds a window size: the kernel takes 16 bits, and no screen is wider.
const maxTerminalCells = 10000

// Shell runs an interactive program on a pseudo-terminal that the sandbox's supervisor
// allocates, for as long as the stream lasts. At most Limits.MaxShellsPerSession run at once
// per session; each is logged as shell.opened and shell.closed.
func (h *Host) Shell(ctx context.Context, stream *connect.BidiStream[hostv1.ShellInput, hostv1.ShellOutput]) error {
	first, err := stream.Receive()
	if err != nil {
		if errors.Is(err, io.EOF) {
			return apierr.InvalidArgument("start", "the stream ended before the frame that starts the shell")
		}
		return err
	}
	start := first.GetStart()
	if start == nil {
		return apierr.InvalidArgument("start", "the first frame must start the shell")
	}
	req, err := shellRequest(start)
	if err != nil {
		return err
	}
	b, err := h.live(start.GetSessionId())
	if err != nil {
		return err
	}
	limit := int32(h.opts.Limits.MaxShellsPerSession)
	if n := b.shells.Add(1); n > limit {
		b.shells.Add(-1)
		return apierr.ResourceExhausted("session %s has %d shells open, the most allowed at once; close one first", b.session, limit)
	}
	defer b.shells.Add(-1)
	h.touch(ctx, b)
	defer h.touch(context.WithoutCancel(ctx), b)

	req.Env = append(slices.Clone(b.env), req.Env...)
	req.User = b.user.identity() // the image's user, as for commands; root only when it names none
	term, err := b.sup.OpenPTY(ctx, req)
	if se, ok := errors.AsType[*supervisor.Error](err); ok && se.Code == supervisor.CodeSpawnFailed {
		return apierr.FailedPrecondition("the shell could not start in session %s: %s", b.session, se.Message)
	}
	if err != nil {
		if ctx.Err() != nil {
			return connect.NewError(connect.CodeCanceled, ctx.Err())
		}
		return b.diedUnder(fmt.Errorf("open a shell in %s: %w", b.session, err))
	}
	defer term.Close()
	id := term.Started.ExecID
	b.emit(eventlog.KindShellOpened, map[string]any{"shell_id": id, "pid": term.Started.PID, "argv": req.Argv})
	if err := stream.Send(&hostv1.ShellOutput{Frame: &hostv1.ShellOutput_Started{Started: &hostv1.ShellStarted{ShellId: id}}}); err != nil {
		return err
	}

	// The input ends with the client's side of the stream, or with the request once this
	// handler has returned; a bad frame ends it like a closed one: the terminal hangs up and the
	// exit still reaches the client.
	go func() {
		if err := shellInput(stream, term, func() { h.touch(ctx, b) }); err != nil && !errors.Is(err, io.EOF) && ctx.Err() == nil {
			h.log.Info("shell input ended", "session", b.session, "shell", term.Started.ExecID, "err", err)
		}
		_ = term.Hangup()
	}()
	exit, err := term.Output(func(p []byte) error {
		return stream.Send(&hostv1.ShellOutput{Frame: &hostv1.ShellOutput_Data{Data: p}})
	})
	if err != nil {
		b.emit(eventlog.KindShellClosed, map[string]any{"shell_id": id, "error": err.Error()})
		if ctx.Err() != nil {
			return connect.NewError(connect.CodeCanceled, errors.New("the client went away; the shell was hung up"))
		}
		return fmt.Errorf("shell %s in %s: %w", id, b.session, err)
	}
	b.emit(eventlog.KindShellClosed, map[string]any{"shell_id": id, "exit_status": exit.ShellExitStatus()})
	return stream.Send(&hostv1.ShellOutput{Frame: &hostv1.ShellOutput_Exit{Exit: exitProto(exit)}})
}

// shellRequest validates the start frame.
func shellRequest(start *hostv1.ShellStart) (supervisor.PTYRequest, error) {
	var v apierr.Violations
	argv := start.GetArgv()
	if len(argv) == 0 {
		argv = loginShell
	} else if argv[0] == "" {
		v.Add("argv", "argv[0] is empty")
	}
	total := 0
	for _, a := range argv {
		total += len(a) + 1
	}
	if total > maxArgStrlen {
		v.Addf("argv", "at most %d bytes in all", maxArgStrlen)
	}
	term := start.GetTerm()
	if term == "" {
		term = "xterm-256color"
	} else if !termName.MatchString(term) {
		v.Add("term", "must be a terminfo name: letters, digits, '.', '_', '+' or '-', at most 64")
	}
	size, err := windowSize(start.GetSize())
	if err != nil {
		v.Add("size", err.Error())
	}
	if err := v.Err(); err != nil {
		return supervisor.PTYRequest{}, err
	}
	return supervisor.PTYRequest{Argv: argv, Env: []string{"TERM=" + term}, Size: size}, nil
}

func windowSize(ws *hostv1.WindowSize) (supervisor.WindowSize, error) {
	if ws.GetRows() > maxTerminalCells || ws.GetCols() > maxTerminalCells {
		return supervisor.WindowSize{}, fmt.Errorf("rows and cols must be at most %d", maxTerminalCells)
	}
	return supervisor.WindowSize{Rows: uint16(ws.GetRows()), Cols: uint16(ws.GetCols())}, nil
}

// shellInput relays the client's frames to the terminal until the client closes its side.
func shellInput(stream *connect.BidiStream[hostv1.ShellInput, hostv1.ShellOutput], term *supervisor.Terminal, active func()) error {
	for {
		in, err := stream.Receive()
		if err != nil {
			return err
		}
		active()
		switch f := in.GetFrame().(type) {
		case *hostv1.ShellInput_Data:
			_, err = term.Write(f.Data)
		case *hostv1.ShellInput_Resize:
			var size supervisor.WindowSize
			if size, err = windowSize(f.Resize); err != nil {
				return apierr.InvalidArgument("resize", err.Error())
			}
			err = term.Resize(size)
		case *hostv1.ShellInput_Signal:
			sig, ok := supervisor.TerminalSignal(f.Signal)
			if !ok {
				return apierr.InvalidArgument("signal", "must be one of "+supervisor.TerminalSignalNames)
			}
			err = term.Signal(sig)
		default:
			return apierr.InvalidArgument("frame", "after start, send data, resize or signal")
		}
		if err != nil {
			return err
		}
	}
}
