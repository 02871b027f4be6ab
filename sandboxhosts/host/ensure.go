package host

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"connectrpc.com/connect"

	appv1 "github.com/hangar-dev/hangar/gen/svc/app/v1"
	"github.com/hangar-dev/hangar/platform/apierr"
	"github.com/hangar-dev/hangar/records/eventlog"
	"github.com/hangar-dev/hangar/sandboxhosts/supervisor"
)

// A server program a session may start on demand, listening on the sandbox's loopback only.
type serverProgram struct {
	// what names it for the user: "an IDE server".
	what string
	port int
	// programs are tried in order; args are their flags for listening on 127.0.0.1:port.
	programs []serverCandidate
}

type serverCandidate struct {
	name string
	args func(port string) []string
}

// The ports match the API's built-in apps (functions/sessions: IDEPort, BrowserPort).
var (
	ideServer = serverProgram{what: "an IDE server", port: 13337, programs: []serverCandidate{
		{"openvscode-server", func(p string) []string {
			return []string{"--host", "127.0.0.1", "--port", p, "--without-connection-token", "--telemetry-level", "off"}
		}},
		{"code-server", func(p string) []string {
			return []string{"--bind-addr", "127.0.0.1:" + p, "--auth", "none", "--disable-telemetry"}
		}},
	}}
	browserServer = serverProgram{what: "a headless Chromium", port: 9222, programs: func() []serverCandidate {
		args := func(p string) []string {
			return []string{"--headless=new", "--no-sandbox", "--disable-gpu", "--remote-debugging-address=127.0.0.1",
				"--remote-debugging-port=" + p, "--user-data-dir=/tmp/hangar-browser", "about:blank"}
		}
		var c []serverCandidate
		for _, n := range []string{"chromium", "chromium-browser", "google-chrome", "headless_shell"} {
			c = append(c, serverCandidate{n, args})
		}
		return c
	}()}
)

// serverStartTimeout bounds how long a started server may take to accept connections.
const serverStartTimeout = 60 * time.Second

// EnsureIde starts the image's IDE server unless it runs already.
func (h *Host) EnsureIde(ctx context.Context, req *connect.Request[appv1.EnsureIdeRequest]) (*connect.Response[appv1.EnsureIdeResponse], error) {
	port, err := h.ensureServer(ctx, req.Msg.GetSessionId(), ideServer)
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(&appv1.EnsureIdeResponse{Port: port}), nil
}

// EnsureBrowser starts the image's headless Chromium, its DevTools on the port, unless it runs.
func (h *Host) EnsureBrowser(ctx context.Context, req *connect.Request[appv1.EnsureBrowserRequest]) (*connect.Response[appv1.EnsureBrowserResponse], error) {
	port, err := h.ensureServer(ctx, req.Msg.GetSessionId(), browserServer)
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(&appv1.EnsureBrowserResponse{Port: port}), nil
}

// errDetach ends an exec call once the process has started; the process keeps running.
var errDetach = errors.New("detach")

func (h *Host) ensureServer(ctx context.Context, session string, sp serverProgram) (uint32, error) {
	b, err := h.live(session)
	if err != nil {
		return 0, err
	}
	h.touch(ctx, b)
	if h.accepts(ctx, b, sp.port) {
		return uint32(sp.port), nil
	}
	path, err := h.findProgram(ctx, b, sp)
	if err != nil {
		return 0, err
	}
	var c serverCandidate
	for _, cand := range sp.programs {
		if strings.HasSuffix(path, "/"+cand.name) {
			c = cand
		}
	}
	argv := append([]string{path}, c.args(strconv.Itoa(sp.port))...)
	var started supervisor.Started
	_, err = b.sup.Exec(ctx, supervisor.ExecRequest{Argv: argv, Env: b.env, User: b.user.identity()}, supervisor.Events{
		Started: func(s supervisor.Started) error { started = s; return errDetach },
	})
	if se, ok := errors.AsType[*supervisor.Error](err); ok {
		return 0, apierr.FailedPrecondition("%s (%s) could not start: %s", sp.what, path, se.Message)
	}
	if err != nil && !errors.Is(err, errDetach) {
		return 0, b.diedUnder(fmt.Errorf("start %s in %s: %w", path, b.session, err))
	}
	b.emit(eventlog.KindExecStarted, map[string]any{"exec_id": started.ExecID, "pid": started.PID, "argv": argv})
	deadline := time.Now().Add(serverStartTimeout)
	for !h.accepts(ctx, b, sp.port) {
		if time.Now().After(deadline) || ctx.Err() != nil {
			return 0, apierr.FailedPrecondition("%s (%s, exec %s) started but accepts no connections on port %d; its output is in the exec's log",
				sp.what, path, started.ExecID, sp.port)
		}
		time.Sleep(100 * time.Millisecond)
	}
	return uint32(sp.port), nil
}

// accepts reports whether something in the sandbox accepts connections on port.
func (h *Host) accepts(ctx context.Context, b *box, port int) bool {
	c, err := b.sup.DialApp(ctx, port)
	if err != nil {
		return false
	}
	c.Close()
	return true
}

// findProgram returns the path of the first of sp's programs on the sandbox's PATH, or
// failed_precondition naming what the image lacks.
func (h *Host) findProgram(ctx context.Context, b *box, sp serverProgram) (string, error) {
	names := make([]string, len(sp.programs))
	for i, c := range sp.programs {
		names[i] = c.name
	}
	var out strings.Builder
	script := `for p in "$@"; do command -v "$p" && exit 0; done; exit 1`
	exit, err := b.sup.Exec(ctx, supervisor.ExecRequest{Argv: append([]string{"/bin/sh", "-c", script, "sh"}, names...), Env: b.env, User: b.user.identity(), Timeout: 10 * time.Second},
		supervisor.Events{Output: func(o supervisor.Output) error {
			if o.Stream == supervisor.Stdout {
				out.Write(o.Data)
			}
			return nil
		}})
	lacks := apierr.FailedPrecondition("the session's image has no %s: none of %s is on its PATH", sp.what, strings.Join(names, ", "))
	if _, ok := errors.AsType[*supervisor.Error](err); ok {
		return "", lacks // not even a /bin/sh to look with
	}
	if err != nil {
		return "", b.diedUnder(fmt.Errorf("look for %s in %s: %w", sp.what, b.session, err))
	}
	path := strings.TrimSpace(out.String())
	if exit.ShellExitStatus() != 0 || !strings.HasPrefix(path, "/") {
		return "", lacks
	}
	return path, nil
}
