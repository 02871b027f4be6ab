package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/hangar-dev/hangar/functions/sessions"
	"github.com/hangar-dev/hangar/internal/testenv"
	"github.com/hangar-dev/hangar/internal/testkit"
	"github.com/hangar-dev/hangar/platform/auth"
	"github.com/hangar-dev/hangar/records/eventlog"
)

// wsShell is a shell WebSocket as a client sees it.
type wsShell struct {
	conn *websocket.Conn
	mu   sync.Mutex
	out  bytes.Buffer
	msgs []sessions.ShellMessage
	done chan error
}

// shellURL is the shell route of session with query.
func (s *stack) shellURL(session string, query url.Values) string {
	return s.url + strings.Replace(sessions.ShellPath, "{id}", url.PathEscape(session), 1) + "?" + query.Encode()
}

// dialShell opens a shell; a refusal is returned with its HTTP status.
func dialShell(ctx context.Context, rawURL, key string, h http.Header) (*wsShell, int, error) {
	if h == nil {
		h = http.Header{}
	}
	if key != "" {
		h.Set(auth.HeaderName, key)
	}
	conn, resp, err := websocket.Dial(ctx, rawURL, &websocket.DialOptions{HTTPHeader: h})
	if err != nil {
		status := 0
		if resp != nil {
			status = resp.StatusCode
		}
		return nil, status, err
	}
	sh := &wsShell{conn: conn, done: make(chan error, 1)}
	go func() {
		for {
			typ, b, err := conn.Read(context.Background())
			if err != nil {
				sh.done <- err
				return
			}
			sh.mu.Lock()
			if typ == websocket.MessageBinary {
				sh.out.Write(b)
			} else {
				var m sessions.ShellMessage
				_ = json.Unmarshal(b, &m)
				sh.msgs = append(sh.msgs, m)
			}
			sh.mu.Unlock()
		}
	}()
	return sh, http.StatusSwitchingProtocols, nil
}

func (s *sandboxStack) openShell(t *testing.T, session string, query url.Values) *wsShell {
	t.Helper()
	sh, status, err := dialShell(t.Context(), s.shellURL(session, query), s.admin, nil)
	if err != nil {
		t.Fatalf("open shell: %d %v", status, err)
	}
	t.Cleanup(func() { _ = sh.conn.CloseNow() })
	return sh
}

func (sh *wsShell) output() string {
	sh.mu.Lock()
	defer sh.mu.Unlock()
	return sh.out.String()
}

func (sh *wsShell) message(typ string) (sessions.ShellMessage, bool) {
	sh.mu.Lock()
	defer sh.mu.Unlock()
	for _, m := range sh.msgs {
		if m.Type == typ {
			return m, true
		}
	}
	return sessions.ShellMessage{}, false
}

func (sh *wsShell) waitFor(t *testing.T, want string) {
	t.Helper()
	testkit.Eventually(t, 20*time.Second, "shell output holding "+want, func() (bool, string) {
		got := sh.output()
		return strings.Contains(got, want), got
	})
}

func (sh *wsShell) send(t *testing.T, typ websocket.MessageType, b []byte) {
	t.Helper()
	if err := sh.conn.Write(t.Context(), typ, b); err != nil {
		t.Fatal(err)
	}
}

func (sh *wsShell) typeLine(t *testing.T, line string) {
	t.Helper()
	sh.send(t, websocket.MessageBinary, []byte(line+"\n"))
}

func (sh *wsShell) control(t *testing.T, m sessions.ShellMessage) {
	t.Helper()
	b, _ := json.Marshal(m)
	sh.send(t, websocket.MessageText, b)
}

// waitClosed waits for the server to close the socket and returns how.
func (sh *wsShell) waitClosed(t *testing.T) websocket.StatusCode {
	t.Helper()
	select {
	case err := <-sh.done:
		return websocket.CloseStatus(err)
	case <-time.After(30 * time.Second):
		t.Fatalf("the shell socket never closed; output:\n%s", sh.output())
	}
	return 0
}

func TestShellOverWebSocket(t *testing.T) {
	s := newSandboxStack(t, 1, func(sb *testenv.Sandboxes) { sb.Config.Limits.MaxShellsPerSession = 2 })
	id := s.create(t, nil)
	size := url.Values{"rows": {"30"}, "cols": {"100"}}

	t.Run("echo round trip and the started message", func(t *testing.T) {
		sh := s.openShell(t, id, size)
		sh.typeLine(t, "echo round-$((6*7))-trip")
		sh.waitFor(t, "round-42-trip")
		if m, ok := sh.message(sessions.ShellStarted); !ok || m.ShellID == "" {
			t.Errorf("no started message with a shell id: %+v", m)
		}
	})
	t.Run("size from the query, then a resize", func(t *testing.T) {
		sh := s.openShell(t, id, size)
		sh.typeLine(t, "stty size")
		sh.waitFor(t, "30 100")
		sh.control(t, sessions.ShellMessage{Type: sessions.ShellResize, Rows: 50, Cols: 132})
		sh.typeLine(t, "stty size")
		sh.waitFor(t, "50 132")
	})
	t.Run("Ctrl-C interrupts the foreground command, and a signal message too", func(t *testing.T) {
		sh := s.openShell(t, id, size)
		sh.typeLine(t, "sleep 1000")
		time.Sleep(200 * time.Millisecond) // let sleep start; nothing asserts on the delay
		sh.send(t, websocket.MessageBinary, []byte{3})
		sh.typeLine(t, "echo after-ctrl-c-$?")
		sh.waitFor(t, "after-ctrl-c-130")
		sh.typeLine(t, "sleep 1000")
		time.Sleep(200 * time.Millisecond)
		sh.control(t, sessions.ShellMessage{Type: sessions.ShellSignal, Signal: "INT"})
		sh.typeLine(t, "echo after-signal-$?")
		sh.waitFor(t, "after-signal-130")
	})
	t.Run("a bad control message is answered and the shell goes on", func(t *testing.T) {
		sh := s.openShell(t, id, size)
		sh.control(t, sessions.ShellMessage{Type: sessions.ShellSignal, Signal: "SEGV"})
		sh.send(t, websocket.MessageText, []byte("not json"))
		testkit.Eventually(t, 20*time.Second, "an error message", func() (bool, string) {
			m, ok := sh.message(sessions.ShellError)
			return ok && strings.Contains(m.Message, "SEGV"), m.Message
		})
		sh.typeLine(t, "echo still-$((1+1))")
		sh.waitFor(t, "still-2")
	})
	t.Run("exit sends the status and closes normally", func(t *testing.T) {
		sh := s.openShell(t, id, size)
		sh.typeLine(t, "exit 5")
		if code := sh.waitClosed(t); code != websocket.StatusNormalClosure {
			t.Errorf("closed with %v, want normal closure", code)
		}
		m, ok := sh.message(sessions.ShellExit)
		if !ok || m.ExitStatus == nil || *m.ExitStatus != 5 {
			t.Errorf("exit message %+v, want exit_status 5", m)
		}
	})
	t.Run("two shells at once, a third refused, a closed one frees its place", func(t *testing.T) {
		a, b := s.openShell(t, id, size), s.openShell(t, id, size)
		a.typeLine(t, "echo from-a")
		b.typeLine(t, "echo from-b")
		a.waitFor(t, "from-a")
		b.waitFor(t, "from-b")
		if strings.Contains(a.output(), "from-b") || strings.Contains(b.output(), "from-a") {
			t.Errorf("output crossed between shells:\na: %q\nb: %q", a.output(), b.output())
		}
		_, status, err := dialShell(t.Context(), s.shellURL(id, size), s.admin, nil)
		if status != http.StatusTooManyRequests {
			t.Fatalf("a third shell: %d %v, want 429 resource_exhausted", status, err)
		}
		// The client going away hangs its shell up and frees its place.
		_ = a.conn.Close(websocket.StatusNormalClosure, "bye")
		testkit.Eventually(t, 20*time.Second, "a place for a new shell", func() (bool, string) {
			c, status, err := dialShell(t.Context(), s.shellURL(id, size), s.admin, nil)
			if err != nil {
				return false, err.Error()
			}
			_ = c.conn.CloseNow()
			return status == http.StatusSwitchingProtocols, ""
		})
	})
	t.Run("bad query is invalid_argument before any upgrade", func(t *testing.T) {
		_, status, _ := dialShell(t.Context(), s.shellURL(id, url.Values{"rows": {"lots"}}), s.admin, nil)
		if status != http.StatusBadRequest {
			t.Errorf("status %d, want 400", status)
		}
	})
	t.Run("opening and closing are logged", func(t *testing.T) {
		testkit.Eventually(t, 20*time.Second, "shell.closed events", func() (bool, string) {
			closed := s.listEvents(t, id, eventlog.KindShellClosed)
			opened := s.listEvents(t, id, eventlog.KindShellOpened)
			return len(opened) >= 5 && len(closed) >= 1, ""
		})
	})
}

func TestSecurityShellRefusesStrangers(t *testing.T) {
	s := newSandboxStack(t, 1, nil)
	id := s.create(t, nil)
	bob := s.mintKey(t, "bob@example.com", false)
	for _, tc := range []struct {
		name string
		key  string
		want int
	}{
		{"no key", "", http.StatusUnauthorized},
		{"a wrong key", "hk_not-a-key", http.StatusUnauthorized},
		{"another user's key", bob, http.StatusNotFound},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sh, status, _ := dialShell(t.Context(), s.shellURL(id, nil), tc.key, nil)
			if sh != nil {
				_ = sh.conn.CloseNow()
			}
			if status != tc.want {
				t.Errorf("status %d, want %d", status, tc.want)
			}
		})
	}
	t.Run("a page of another origin cannot open one with the user's credentials", func(t *testing.T) {
		sh, status, _ := dialShell(t.Context(), s.shellURL(id, nil), s.admin, http.Header{"Origin": {"https://evil.example"}})
		if sh != nil {
			_ = sh.conn.CloseNow()
		}
		if status != http.StatusForbidden {
			t.Errorf("status %d, want 403", status)
		}
	})
}

func TestAnOpenShellKeepsItsSessionAwake(t *testing.T) {
	s := newSandboxStack(t, 1, func(sb *testenv.Sandboxes) {
		sb.Config.Host.IdleAfter = 300 * time.Millisecond
		sb.Config.Host.EvictIdleAfter = 900 * time.Millisecond
	})
	id := s.create(t, nil)
	sh := s.openShell(t, id, nil)
	sh.typeLine(t, "echo opened")
	sh.waitFor(t, "opened")
	// Several idle sweeps (every heartbeat, 200 ms here) pass with the shell open and silent.
	time.Sleep(3 * time.Second)
	if got := s.status(t, id); got != "running" {
		t.Fatalf("with a shell open the session is %s, want running", got)
	}
	sh.typeLine(t, "echo still-open")
	sh.waitFor(t, "still-open")
	_ = sh.conn.Close(websocket.StatusNormalClosure, "")
	s.waitStatus(t, id, "evicted", 20*time.Second)
}
