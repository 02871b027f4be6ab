package host

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/emptypb"

	appv1 "github.com/hangar-dev/hangar/gen/svc/app/v1"
	"github.com/hangar-dev/hangar/platform/apierr"
	"github.com/hangar-dev/hangar/platform/ids"
	"github.com/hangar-dev/hangar/records/eventlog"
	"github.com/hangar-dev/hangar/sandboxhosts/supervisor"
)

// The kernel's limits on what execve takes: one argument or environment string at most
// MAX_ARG_STRLEN (32 pages) with its NUL, and all of them with their pointers at most a quarter
// of the stack limit (ARG_MAX: 2 MiB under the usual 8 MiB stack). Past them execve fails with
// E2BIG inside the sandbox; checked here, the caller hears which field is too big. The total is
// kept at half of ARG_MAX, for what the image's environment and the shell add.
const (
	maxArgStrlen = 32 * 4096
	maxArgsBytes = 1 << 20
)

var (
	envName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
	// clientID is an id a client chooses to make a call idempotent: an exec_id or a prompt_id.
	clientID = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$`)
)

// Exec runs a command through the sandbox's supervisor and streams started, output and exit.
// With an exec_id that exists it re-attaches instead, replaying from the given offsets.
func (h *Host) Exec(ctx context.Context, req *connect.Request[appv1.ExecRequest], out *connect.ServerStream[appv1.ExecOutput]) error {
	m := req.Msg
	b, err := h.live(m.GetSessionId())
	if err != nil {
		return err
	}
	if m.ExecId != nil && !clientID.MatchString(m.GetExecId()) {
		return apierr.InvalidArgument("exec_id", "must be 1 to 128 letters, digits, '_', '.' or '-', starting with a letter or digit")
	}
	attach := m.StdoutOffset != nil || m.StderrOffset != nil || (m.ExecId != nil && m.Command == nil && len(m.Argv) == 0)
	h.touch(ctx, b)
	defer h.touch(context.WithoutCancel(ctx), b)

	// seen is how far this call streamed, so that an exec whose client left can still be
	// followed to its exit and logged once.
	var seen supervisor.AttachRequest
	ev := supervisor.Events{
		Started: func(s supervisor.Started) error {
			seen.ExecID = s.ExecID
			if !s.Attached {
				b.emit(eventlog.KindExecStarted, map[string]any{"exec_id": s.ExecID, "pid": s.PID, "argv": m.GetArgv(), "command": m.GetCommand(), "workdir": m.GetWorkdir()})
			}
			return out.Send(&appv1.ExecOutput{Event: &appv1.ExecOutput_Started{Started: &appv1.ExecStarted{ExecId: s.ExecID}}})
		},
		Output: func(o supervisor.Output) error {
			end := o.Offset + int64(len(o.Data))
			if o.Stream == supervisor.Stderr {
				seen.StderrOffset = end
				return out.Send(&appv1.ExecOutput{Event: &appv1.ExecOutput_Stderr{Stderr: o.Data}})
			}
			seen.StdoutOffset = end
			return out.Send(&appv1.ExecOutput{Event: &appv1.ExecOutput_Stdout{Stdout: o.Data}})
		},
	}
	var exit supervisor.Exit
	id := m.GetExecId()
	if attach {
		if m.ExecId == nil {
			return apierr.InvalidArgument("exec_id", "is required to re-attach with stdout_offset / stderr_offset")
		}
		exit, err = b.sup.Attach(ctx, supervisor.AttachRequest{
			ExecID: m.GetExecId(), StdoutOffset: int64(m.GetStdoutOffset()), StderrOffset: int64(m.GetStderrOffset()),
		}, ev)
	} else {
		var sreq supervisor.ExecRequest
		if sreq, err = h.execRequest(m, b.env); err != nil {
			return err
		}
		sreq.User = b.user.identity()
		id = sreq.ExecID
		exit, err = b.sup.Exec(ctx, sreq, ev)
	}
	var se *supervisor.Error
	if errors.As(err, &se) {
		return h.execFailure(b, id, se, out)
	}
	if err != nil {
		if ctx.Err() != nil {
			if !attach && seen.ExecID != "" {
				go h.awaitExit(b, seen)
			}
			return connect.NewError(connect.CodeCanceled, errors.New("the client went away; the command keeps running and can be re-attached by exec_id"))
		}
		return b.diedUnder(fmt.Errorf("exec in %s: %w", b.session, err))
	}
	if !attach {
		b.emit(eventlog.KindExecExited, exitPayload(exit))
	}
	return out.Send(&appv1.ExecOutput{Event: &appv1.ExecOutput_Exit{Exit: exitProto(exit)}})
}

// awaitExit follows an exec its caller left, from where the caller stopped reading, and logs its
// exit. Re-attaching callers log nothing, so each exec's exit is logged once.
func (h *Host) awaitExit(b *box, from supervisor.AttachRequest) {
	exit, err := b.sup.Attach(b.ctx, from, supervisor.Events{})
	if err != nil {
		if b.ctx.Err() == nil {
			h.log.Warn("follow exec to its exit", "session", b.session, "exec", from.ExecID, "err", err)
		}
		return
	}
	b.emit(eventlog.KindExecExited, exitPayload(exit))
}

// execRequest validates a new command and turns it into the supervisor's request, its
// environment the session's (base) and then the request's.
func (h *Host) execRequest(m *appv1.ExecRequest, base []string) (supervisor.ExecRequest, error) {
	var v apierr.Violations
	var argv []string
	switch {
	case m.Command != nil && len(m.Argv) > 0:
		v.Add("command", "give command or argv, not both")
	case m.Command != nil:
		if m.GetCommand() == "" {
			v.Add("command", "is empty")
		}
		argv = []string{"/bin/sh", "-c", m.GetCommand()}
	case len(m.Argv) > 0:
		if m.Argv[0] == "" {
			v.Add("argv", "argv[0] is empty")
		}
		argv = m.Argv
	default:
		v.Add("command", "give command (run by sh -c) or argv")
	}
	if slices.ContainsFunc(argv, containsNUL) {
		v.Add("argv", "arguments cannot contain NUL")
	}
	limits := h.opts.Limits.ExecTimeout
	timeout := limits.Default
	if m.TimeoutSecs != nil {
		timeout = time.Duration(m.GetTimeoutSecs()) * time.Second
		if m.GetTimeoutSecs() == 0 || timeout > limits.Max || m.GetTimeoutSecs() > uint64(limits.Max/time.Second) {
			v.Addf("timeout_secs", "must be between 1 and %d", int64(limits.Max/time.Second))
		}
	}
	env := make([]string, 0, len(m.GetEnv()))
	for k, val := range m.GetEnv() {
		if !envName.MatchString(k) {
			v.Addf("env", "%q is not an environment variable name", k)
		}
		if containsNUL(val) {
			v.Addf("env", "%s holds a NUL byte", k)
		}
		env = append(env, k+"="+val)
	}
	slices.Sort(env)
	env = append(slices.Clone(base), env...)
	argvField := "argv"
	if m.Command != nil {
		argvField = "command"
	}
	checkArgSizes(&v, argvField, argv, env)
	if m.Workdir != nil && (len(m.GetWorkdir()) == 0 || m.GetWorkdir()[0] != '/') {
		v.Add("workdir", "must be an absolute path in the sandbox")
	}
	if err := v.Err(); err != nil {
		return supervisor.ExecRequest{}, err
	}
	id := m.GetExecId()
	if id == "" {
		id = ids.New("exec")
	}
	return supervisor.ExecRequest{ExecID: id, Argv: argv, Env: env, Workdir: m.GetWorkdir(), Timeout: timeout}, nil
}

// checkArgSizes reports argv and env strings execve would refuse as too big (E2BIG); argvField
// is the request field argv came from.
func checkArgSizes(v *apierr.Violations, argvField string, argv, env []string) {
	total := 0
	for _, f := range []struct {
		name    string
		strings []string
	}{{argvField, argv}, {"env", env}} {
		for i, s := range f.strings {
			if len(s)+1 > maxArgStrlen {
				v.Addf(f.name, "item %d is %d bytes; the kernel takes at most %d per argument or variable", i, len(s), maxArgStrlen-1)
			}
			total += len(s) + 1 + 8 // the string, its NUL and its pointer
		}
	}
	if total > maxArgsBytes {
		v.Addf(argvField, "arguments and environment take %d bytes; at most %d", total, maxArgsBytes)
	}
}

// execFailure turns a supervisor error into the caller's answer. A command that cannot be
// spawned ends like it would in a shell — started, a note on stderr, exit 127 or 126 — so
// scripts see the same thing whether the shell or the supervisor found the problem.
func (h *Host) execFailure(b *box, id string, se *supervisor.Error, out *connect.ServerStream[appv1.ExecOutput]) error {
	switch se.Code {
	case supervisor.CodeNotFound:
		return apierr.NotFound("exec", id)
	case supervisor.CodeOffsetDropped:
		return apierr.InvalidArgument(string(se.Stream)+"_offset", fmt.Sprintf("output before offset %d is no longer kept", se.RetainedStart))
	case supervisor.CodeBadRequest:
		return apierr.InvalidArgument("command", se.Message)
	case supervisor.CodeSpawnFailed:
		if se.Spawn == supervisor.SpawnBadWorkdir {
			return apierr.InvalidArgument("workdir", se.Message)
		}
		status := se.Spawn.ShellExitStatus()
		if status < 0 {
			return fmt.Errorf("spawn in %s: %s", b.session, se.Message)
		}
		b.emit(eventlog.KindExecExited, map[string]any{"exec_id": id, "exit_status": status, "error": se.Message})
		code := int32(status)
		for _, msg := range []*appv1.ExecOutput{
			{Event: &appv1.ExecOutput_Started{Started: &appv1.ExecStarted{ExecId: id}}},
			{Event: &appv1.ExecOutput_Stderr{Stderr: []byte("hangar: " + se.Message + "\n")}},
			{Event: &appv1.ExecOutput_Exit{Exit: &appv1.ExecExit{ExitStatus: &code, Rusage: &appv1.ExecRusage{}}}},
		} {
			if err := out.Send(msg); err != nil {
				return err
			}
		}
		return nil
	}
	return fmt.Errorf("exec in %s: %w", b.session, se)
}

func exitProto(e supervisor.Exit) *appv1.ExecExit {
	status := int32(e.ShellExitStatus())
	rss, user, sys := uint64(e.PeakRSSKB), uint64(e.UserCPUMS), uint64(e.SysCPUMS)
	x := &appv1.ExecExit{
		ExitStatus: &status,
		Rusage:     &appv1.ExecRusage{WallMs: uint64(e.WallMS), PeakRssKb: &rss, UserCpuMs: &user, SysCpuMs: &sys},
		TimedOut:   e.TimedOut,
		Canceled:   e.Canceled,
	}
	if e.Signal != 0 {
		sig := int32(e.Signal)
		x.Signal = &sig
	}
	return x
}

func exitPayload(e supervisor.Exit) map[string]any {
	p := map[string]any{
		"exec_id": e.ExecID, "exit_status": e.ShellExitStatus(), "wall_ms": e.WallMS, "peak_rss_kb": e.PeakRSSKB,
		"user_cpu_ms": e.UserCPUMS, "sys_cpu_ms": e.SysCPUMS, "stdout_bytes": e.StdoutEnd, "stderr_bytes": e.StderrEnd,
	}
	if e.Signal != 0 {
		p["signal"] = e.Signal
	}
	if e.TimedOut {
		p["timed_out"] = true
	}
	if e.Canceled {
		p["canceled"] = true
	}
	return p
}

// CancelExec kills a running exec's process group.
func (h *Host) CancelExec(ctx context.Context, req *connect.Request[appv1.CancelExecRequest]) (*connect.Response[emptypb.Empty], error) {
	b, err := h.live(req.Msg.GetSessionId())
	if err != nil {
		return nil, err
	}
	if req.Msg.GetExecId() == "" {
		return nil, apierr.InvalidArgument("exec_id", "is required")
	}
	err = b.sup.Cancel(ctx, req.Msg.GetExecId())
	var se *supervisor.Error
	if errors.As(err, &se) && se.Code == supervisor.CodeNotFound {
		return nil, apierr.NotFound("exec", req.Msg.GetExecId())
	}
	if err != nil {
		return nil, fmt.Errorf("cancel exec %s: %w", req.Msg.GetExecId(), err)
	}
	return connect.NewResponse(&emptypb.Empty{}), nil
}

func containsNUL(s string) bool { return strings.IndexByte(s, 0) >= 0 }
