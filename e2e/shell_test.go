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

	"github.com/hangar-dev/hangar/internal/testenv"
	"github.com/hangar-dev/hangar/internal/testkit"
	"github.com/hangar-dev/hangar/platform/httpapi"
	"github.com/hangar-dev/hangar/records/eventlog"
)

// wsShell is a shell WebSocket as a client sees it.
type wsShell struct {
	conn *websocket.Conn
	mu   sync.Mutex
	out  bytes.Buffer
	msgs []httpapi.ShellMessage
	done chan error
}

// shellURL is the shell route of session with query.
func (s *stack) shellURL(session string, query url.Values) string {
	return s.url + strings.Replace(httpapi.ShellPath, "{id}", url.PathEscape(session), 1) + "?" + query.Encode()
}

// dialShell opens a shell; a refusal is returned with its HTTP status.
func dialShell(ctx context.Context, rawURL, key string, h http.Header) (*wsShell, int, error) {
	if h == nil {
		h = http.Header{}
	}
	if key != "" {
		h.Set(httpapi.APIKeyHeader, key)
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
				var m httpapi.ShellMessage
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

func (sh *wsShell) message(typ string) (httpapi.ShellMessage, bool) {
	sh.mu.Lock()
	defer sh.mu.Unlock()
	for _, m := range sh.msgs {
		if m.Type == typ {
			return m, true
		}
	}
	return httpapi.ShellMessage{}, false
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

func (sh *wsShell) control(t *testing.T, m httpapi.ShellMessage) {
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
		if m, ok := sh.message(httpapi.ShellStarted); !ok || m.ShellID == "" {
			t.Errorf("no started message with a shell id: %+v", m)
		}
	})
	t.Run("size from the query, then a resize", func(t *testing.T) {
		sh := s.openShell(t, id, size)
		sh.typeLine(t, "stty size")
		sh.waitFor(t, "30 100")
		sh.control(t, httpapi.ShellMessage{Type: httpapi.ShellResize, Rows: 50, Cols: 132})
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
		sh.control(t, httpapi.ShellMessage{Type: httpapi.ShellSignal, Signal: "INT"})
		sh.typeLine(t, "echo after-signal-$?")
		sh.waitFor(t, "after-signal-130")
	})
	t.Run("a bad control message is answered and the shell goes on", func(t *testing.T) {
		sh := s.openShell(t, id, size)
		sh.control(t, httpapi.ShellMessage{Type: httpapi.ShellSignal, Signal: "SEGV"})
		sh.send(t, websocket.MessageText, []byte("not json"))
		testkit.Eventually(t, 20*time.Second, "an error message", func() (bool, string) {
			m, ok := sh.message(httpapi.ShellError)
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
		m, ok := sh.message(httpapi.ShellExit)
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
		// The shell starts only once the WebSocket is open, so the host's refusal comes as an
		// "error" message with its code, then a close frame.
		c := s.openShell(t, id, size)
		if code := c.waitClosed(t); code != websocket.StatusTryAgainLater {
			t.Errorf("a third shell closed with %v, want try again later", code)
		}
		if m, ok := c.message(httpapi.ShellError); !ok || m.Code != "resource_exhausted" || m.Message == "" {
			t.Fatalf("a third shell's error message %+v, want code resource_exhausted", m)
		}
		// The client going away hangs its shell up and frees its place.
		_ = a.conn.Close(websocket.StatusNormalClosure, "bye")
		testkit.Eventually(t, 20*time.Second, "a place for a new shell", func() (bool, string) {
			c, _, err := dialShell(t.Context(), s.shellURL(id, size), s.admin, nil)
			if err != nil {
				return false, err.Error()
			}
			defer c.conn.CloseNow()
			for {
				if _, ok := c.message(httpapi.ShellStarted); ok {
					return true, ""
				}
				if m, ok := c.message(httpapi.ShellError); ok {
					return false, m.Message
				}
				select {
				case err := <-c.done:
					return false, err.Error()
				case <-time.After(10 * time.Millisecond):
				}
			}
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
	// A page of another origin using the dashboard's cookie:
	// TestSecurityCrossSiteRequestsCannotRunShellCommands.
	t.Run("anything but a WebSocket upgrade is 426 before the key is even checked", func(t *testing.T) {
		for _, key := range []string{"", s.admin} {
			req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, s.shellURL(id, url.Values{"argv": {"true"}}), nil)
			req.Header.Set(httpapi.APIKeyHeader, key)
			resp, err := httpClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusUpgradeRequired || resp.Header.Get("Upgrade") != "websocket" {
				t.Errorf("key %t: %d Upgrade %q, want 426 websocket", key != "", resp.StatusCode, resp.Header.Get("Upgrade"))
			}
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
