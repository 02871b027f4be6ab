package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"

	"connectrpc.com/connect"
	"github.com/coder/websocket"
	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/hangar-dev/hangar/platform/httpapi"
)

func newSessionsShellCmd(f *clientFlags) *cobra.Command {
	var wake bool
	cmd := clientCmd(f, "shell SESSION [-- PROGRAM ARGS...]", "Open an interactive shell in the session (exits with the shell's status)",
		cobra.MinimumNArgs(1), func(c *apiClient, cmd *cobra.Command, args []string) error {
			return c.withoutDeadline().shell(cmd, args[0], args[1:], wake)
		})
	cmd.Flags().BoolVar(&wake, "wake", false, "resume an evicted session first")
	return cmd
}

// shell relays the terminal to a shell in the session: raw mode while it runs when standard
// input is a terminal (restored however the shell ends), its size sent at the start and on
// every SIGWINCH. It returns the shell's exit status as the command's.
func (c *apiClient) shell(cmd *cobra.Command, session string, argv []string, wake bool) error {
	stdin, stdout := cmd.InOrStdin(), cmd.OutOrStdout()
	inFile, _ := stdin.(*os.File)
	isTerm := inFile != nil && term.IsTerminal(int(inFile.Fd()))

	q := url.Values{"argv": argv}
	if t := os.Getenv("TERM"); t != "" {
		q.Set("term", t)
	}
	if wake {
		q.Set("wake", "true")
	}
	if isTerm {
		if cols, rows, err := term.GetSize(int(inFile.Fd())); err == nil {
			q.Set("rows", strconv.Itoa(rows))
			q.Set("cols", strconv.Itoa(cols))
		}
	}
	target := c.url + strings.Replace(httpapi.ShellPath, "{id}", url.PathEscape(session), 1) + "?" + q.Encode()
	ctx, cancel := context.WithCancel(c.ctx)
	defer cancel()
	conn, resp, err := websocket.Dial(ctx, target, &websocket.DialOptions{HTTPHeader: http.Header{httpapi.APIKeyHeader: {c.key}}})
	if err != nil {
		return routeError(resp, err)
	}
	defer conn.CloseNow()
	conn.SetReadLimit(1 << 20)

	if isTerm {
		old, err := term.MakeRaw(int(inFile.Fd()))
		if err != nil {
			return fmt.Errorf("raw mode: %w", err)
		}
		defer func() { _ = term.Restore(int(inFile.Fd()), old) }()
		winch := make(chan os.Signal, 1)
		signal.Notify(winch, syscall.SIGWINCH)
		defer signal.Stop(winch)
		go func() {
			for {
				select {
				case <-ctx.Done():
					return
				case <-winch:
					if cols, rows, err := term.GetSize(int(inFile.Fd())); err == nil {
						_ = writeControl(ctx, conn, httpapi.ShellMessage{Type: httpapi.ShellResize, Rows: uint32(rows), Cols: uint32(cols)})
					}
				}
			}
		}()
	}
	go func() {
		// Keystrokes go as they come. The end of a piped input is typed as Ctrl-D, as a
		// terminal's user would end it, so the shell reads everything before it first.
		buf := make([]byte, 32<<10)
		for {
			n, err := stdin.Read(buf)
			if n > 0 {
				if conn.Write(ctx, websocket.MessageBinary, buf[:n]) != nil {
					return
				}
			}
			if err != nil {
				if !isTerm {
					_ = conn.Write(ctx, websocket.MessageBinary, []byte{4})
				}
				return
			}
		}
	}()
	for {
		typ, msg, err := conn.Read(ctx)
		if err != nil {
			if websocket.CloseStatus(err) == websocket.StatusNormalClosure {
				return errors.New("the shell closed without an exit status")
			}
			return fmt.Errorf("shell: %w", err)
		}
		if typ == websocket.MessageBinary {
			if _, err := stdout.Write(msg); err != nil {
				return err
			}
			continue
		}
		var m httpapi.ShellMessage
		if json.Unmarshal(msg, &m) != nil {
			continue
		}
		if m.Type == httpapi.ShellError && m.Code != "" {
			// The shell could not start or ended: the server closes the socket after this.
			return shellError(m)
		}
		if m.Type != httpapi.ShellExit {
			continue
		}
		_ = conn.Close(websocket.StatusNormalClosure, "")
		status := int(m.GetExitStatus())
		if status == 0 {
			return nil
		}
		return &exitStatus{code: status, err: errSilent}
	}
}

func writeControl(ctx context.Context, conn *websocket.Conn, m httpapi.ShellMessage) error {
	b, err := json.Marshal(m)
	if err != nil {
		return err
	}
	return conn.Write(ctx, websocket.MessageText, b)
}

// shellError is the Connect error of a shell's fatal "error" message, so that the CLI reports
// it and exits as it does for the RPCs.
func shellError(m httpapi.ShellMessage) error {
	var code connect.Code
	if code.UnmarshalText([]byte(m.Code)) != nil {
		return fmt.Errorf("shell: %s: %s", m.Code, m.Message)
	}
	return connect.NewError(code, errors.New(m.Message))
}

// routeError turns a refused plain HTTP route into the Connect error its JSON body describes,
// so that the CLI reports it and exits as it does for the RPCs.
func routeError(resp *http.Response, err error) error {
	if resp == nil || resp.Body == nil {
		return err
	}
	body, _ := io.ReadAll(resp.Body)
	var e struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	}
	var code connect.Code
	if json.Unmarshal(body, &e) != nil || code.UnmarshalText([]byte(e.Code)) != nil {
		return fmt.Errorf("%s: %s", resp.Status, strings.TrimSpace(string(body)))
	}
	return connect.NewError(code, errors.New(e.Message))
}
