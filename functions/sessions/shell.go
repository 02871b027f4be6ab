package sessions

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"

	"connectrpc.com/connect"
	"github.com/coder/websocket"

	hostv1 "github.com/hangar-dev/hangar/gen/host/v1"
	"github.com/hangar-dev/hangar/platform/apierr"
	"github.com/hangar-dev/hangar/platform/auth"
	"github.com/hangar-dev/hangar/platform/httpapi"
	"github.com/hangar-dev/hangar/sandboxhosts/supervisor"
)

// maxShellMessage bounds one WebSocket message from a shell client: a paste, not a file upload.
const maxShellMessage = 1 << 20

// Shell serves GET httpapi.ShellPath. Query: rows and cols (the terminal's size), term (TERM), argv
// (repeated: the program; default the image's login shell) and wake (wake an evicted session
// first). Closing the socket hangs the shell up; the program's exit closes the socket with
// 1000 after an "exit" message.
//
// argv is a command, and a browser sends the dashboard's cookie on any navigation to this URL
// that any site starts. So nothing happens for a request that is not a WebSocket upgrade
// (426, before it is even authenticated), whose upgrade a page of another origin made
// (auth.WebSocket: its Origin must be Hangar's own when the cookie signs it in), or before
// websocket.Accept has answered 101: only the WebSocket API of Hangar's own pages, or a client
// holding an API key, can send argv and wake to the start. Refusals until the upgrade are
// plain HTTP errors with the RPCs' JSON body (unauthenticated, not_found, invalid_argument,
// failed_precondition of a session not running without wake); the host's refusal to start the
// shell comes after it, as an "error" message with its code and a close frame.
func (s *Service) Shell(authn *auth.Authenticator) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := auth.IsWebSocketUpgrade(r.Method, r.Header); err != nil {
			w.Header().Set("Connection", "Upgrade")
			w.Header().Set("Upgrade", "websocket")
			w.Header().Set("Sec-WebSocket-Version", "13")
			writeStatus(w, http.StatusUpgradeRequired, err)
			return
		}
		start, wake, err := shellStart(r)
		if err != nil {
			writeErr(w, r, err)
			return
		}
		ctx, rec, ok := s.routeSession(authn, w, r, auth.WebSocket)
		if !ok {
			return
		}
		client, err := s.host(ctx, rec, wake)
		if err != nil {
			writeErr(w, r, err)
			return
		}
		// Allow has decided the Origin (a cookie's must be Hangar's own; a key holder's page
		// may be anywhere), so Accept's own Host comparison is not asked for again.
		ws, err := websocket.Accept(w, r, &websocket.AcceptOptions{InsecureSkipVerify: true})
		if err != nil {
			return // Accept has answered the client
		}
		ws.SetReadLimit(maxShellMessage)
		start.SessionId = rec.ID
		// The shell lives as long as the socket: its context is the request's, which net/http
		// cancels when the connection closes.
		ctx, cancel := context.WithCancel(ctx)
		defer cancel()
		stream := client.Shell(ctx)
		defer stream.CloseResponse()
		if err := stream.Send(&hostv1.ShellInput{Frame: &hostv1.ShellInput_Start{Start: start}}); err != nil {
			_, rerr := stream.Receive()
			closeShell(ctx, ws, errors.Join(rerr, err))
			return
		}
		first, err := stream.Receive()
		if err != nil {
			closeShell(ctx, ws, err)
			return
		}
		started := first.GetStarted()
		if started == nil {
			closeShell(ctx, ws, fmt.Errorf("host answered the shell's start with %T", first.GetFrame()))
			return
		}
		relayShell(ctx, ws, stream, started.GetShellId())
	})
}

// writeStatus answers err, a Connect error, with the RPCs' JSON body but HTTP status.
func writeStatus(w http.ResponseWriter, status int, err error) {
	ce, _ := errors.AsType[*connect.Error](err)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]string{"code": ce.Code().String(), "message": ce.Message()})
}

// closeShell ends an upgraded shell socket that failed: an "error" message with err's code and
// message, then a close frame with the same words (truncated to what a close reason holds).
// An error that is not a Connect error says no more than "internal error".
func closeShell(ctx context.Context, ws *websocket.Conn, err error) {
	ce, ok := errors.AsType[*connect.Error](err)
	if !ok {
		ce = connect.NewError(connect.CodeInternal, errors.New("internal error"))
	}
	reason := ce.Code().String() + ": " + ce.Message()
	_ = writeShellMessage(ctx, ws, httpapi.ShellMessage{Type: httpapi.ShellError, Code: ce.Code().String(), Message: ce.Message()})
	status := websocket.StatusInternalError
	switch ce.Code() {
	case connect.CodeResourceExhausted, connect.CodeUnavailable:
		status = websocket.StatusTryAgainLater
	case connect.CodeInvalidArgument, connect.CodeFailedPrecondition, connect.CodePermissionDenied, connect.CodeNotFound, connect.CodeUnauthenticated:
		status = websocket.StatusPolicyViolation
	}
	_ = ws.Close(status, truncate(reason, 120))
}

// shellStart reads the start of a shell from the route's query.
func shellStart(r *http.Request) (*hostv1.ShellStart, bool, error) {
	q := r.URL.Query()
	var v apierr.Violations
	size := func(field string) uint32 {
		raw := q.Get(field)
		if raw == "" {
			return 0
		}
		n, err := strconv.ParseUint(raw, 10, 16)
		if err != nil {
			v.Add(field, "must be a number of character cells, 0 to 65535")
		}
		return uint32(n)
	}
	start := &hostv1.ShellStart{
		Argv: q["argv"], Term: q.Get("term"),
		Size: &hostv1.WindowSize{Rows: size("rows"), Cols: size("cols")},
	}
	wake := false
	if raw := q.Get("wake"); raw != "" {
		var err error
		if wake, err = strconv.ParseBool(raw); err != nil {
			v.Add("wake", "must be true or false")
		}
	}
	return start, wake, v.Err()
}

// relayShell carries the shell both ways until the program exits or either side goes.
func relayShell(ctx context.Context, ws *websocket.Conn, stream *connect.BidiStreamForClient[hostv1.ShellInput, hostv1.ShellOutput], id string) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	if err := writeShellMessage(ctx, ws, httpapi.ShellMessage{Type: httpapi.ShellStarted, ShellID: id}); err != nil {
		return
	}
	go func() {
		// The client's side: closing it (or a bad message) hangs the shell up, whose exit
		// then comes back through the other direction.
		defer func() { _ = stream.CloseRequest() }()
		for {
			typ, msg, err := ws.Read(ctx)
			if err != nil {
				return
			}
			in, err := shellInput(typ, msg)
			if err != nil {
				// The shell stays: a bad control message is answered, not fatal.
				if writeShellMessage(ctx, ws, httpapi.ShellMessage{Type: httpapi.ShellError, Message: err.Error()}) != nil {
					return
				}
				continue
			}
			if err := stream.Send(in); err != nil {
				return
			}
		}
	}()
	for {
		out, err := stream.Receive()
		if err != nil {
			if _, ok := errors.AsType[*connect.Error](err); !ok {
				err = connect.NewError(connect.CodeUnavailable, errors.New("the shell ended without an exit"))
			}
			closeShell(ctx, ws, err)
			return
		}
		switch f := out.GetFrame().(type) {
		case *hostv1.ShellOutput_Data:
			err = ws.Write(ctx, websocket.MessageBinary, f.Data)
		case *hostv1.ShellOutput_Exit:
			m := httpapi.ShellMessage{Type: httpapi.ShellExit, ExitStatus: f.Exit.ExitStatus, ExitSignal: f.Exit.GetSignal()}
			if err := writeShellMessage(ctx, ws, m); err == nil {
				_ = ws.Close(websocket.StatusNormalClosure, "")
			}
			return
		}
		if err != nil {
			return
		}
	}
}

// shellInput turns a client's WebSocket message into the host's frame.
func shellInput(typ websocket.MessageType, msg []byte) (*hostv1.ShellInput, error) {
	if typ == websocket.MessageBinary {
		return &hostv1.ShellInput{Frame: &hostv1.ShellInput_Data{Data: msg}}, nil
	}
	var m httpapi.ShellMessage
	if err := json.Unmarshal(msg, &m); err != nil {
		return nil, fmt.Errorf("text messages are JSON: %v", err)
	}
	switch m.Type {
	case httpapi.ShellResize:
		if m.Rows > 65535 || m.Cols > 65535 {
			return nil, errors.New("rows and cols are at most 65535")
		}
		return &hostv1.ShellInput{Frame: &hostv1.ShellInput_Resize{Resize: &hostv1.WindowSize{Rows: m.Rows, Cols: m.Cols}}}, nil
	case httpapi.ShellSignal:
		if _, ok := supervisor.TerminalSignal(m.Signal); !ok {
			return nil, fmt.Errorf("signal %q: send one of %s", m.Signal, supervisor.TerminalSignalNames)
		}
		return &hostv1.ShellInput{Frame: &hostv1.ShellInput_Signal{Signal: m.Signal}}, nil
	}
	return nil, fmt.Errorf("unknown message type %q: send resize or signal", m.Type)
}

func writeShellMessage(ctx context.Context, ws *websocket.Conn, m httpapi.ShellMessage) error {
	b, err := json.Marshal(m)
	if err != nil {
		return err
	}
	return ws.Write(ctx, websocket.MessageText, b)
}

// truncate keeps a WebSocket close reason within the 123 bytes the protocol allows.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n]
}
