package supervisor

import (
	"context"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hangar-dev/hangar/internal/testkit"
)

// openShell starts busybox sh on a terminal of 24x80 and collects its output.
type shellUnderTest struct {
	*Terminal
	out  testkit.SyncBuffer
	exit chan ptyEnd
}

type ptyEnd struct {
	exit Exit
	err  error
}

func openShell(t *testing.T, sv *supervisorProc) *shellUnderTest {
	t.Helper()
	return openShellAs(t, sv, nil)
}

// openShellAs is openShell as user (nil: root).
func openShellAs(t *testing.T, sv *supervisorProc, user *User) *shellUnderTest {
	t.Helper()
	term, err := sv.OpenPTY(context.Background(), PTYRequest{Argv: []string{busybox, "sh"}, Env: []string{"PS1=$ "}, Size: WindowSize{Rows: 24, Cols: 80}, User: user})
	if err != nil {
		t.Fatal(err)
	}
	s := &shellUnderTest{Terminal: term, exit: make(chan ptyEnd, 1)}
	go func() {
		exit, err := term.Output(func(b []byte) error { _, _ = s.out.Write(b); return nil })
		s.exit <- ptyEnd{exit, err}
	}()
	t.Cleanup(term.Close)
	return s
}

// waitFor waits until the output holds want, failing after a generous bound so a hang is a
// failure rather than a stuck test.
func (s *shellUnderTest) waitFor(t *testing.T, want string) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !strings.Contains(s.out.String(), want) {
		if time.Now().After(deadline) {
			t.Fatalf("terminal output never held %q; it is:\n%q", want, s.out.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func (s *shellUnderTest) waitExit(t *testing.T) Exit {
	t.Helper()
	select {
	case e := <-s.exit:
		if e.err != nil {
			t.Fatalf("terminal output: %v", e.err)
		}
		return e.exit
	case <-time.After(20 * time.Second):
		t.Fatalf("the terminal program never exited; output:\n%q", s.out.String())
	}
	return Exit{}
}

func (s *shellUnderTest) typeLine(t *testing.T, line string) {
	t.Helper()
	if _, err := s.Write([]byte(line + "\n")); err != nil {
		t.Fatal(err)
	}
}

func TestPTYShell(t *testing.T) {
	sv := startSupervisor(t, startConfig{})
	tests := []struct {
		name string
		run  func(t *testing.T, s *shellUnderTest)
	}{
		{"input echoes and output comes back", func(t *testing.T, s *shellUnderTest) {
			s.typeLine(t, "echo round-$((40+2))-trip")
			s.waitFor(t, "round-42-trip")
		}},
		{"the program is on a terminal", func(t *testing.T, s *shellUnderTest) {
			s.typeLine(t, "[ -t 0 ] && [ -t 1 ] && echo on-a-tty-$((1+1)); echo TERM=$TERM")
			s.waitFor(t, "on-a-tty-2")
			s.waitFor(t, "TERM="+defaultTerm)
		}},
		{"resize reaches stty", func(t *testing.T, s *shellUnderTest) {
			s.typeLine(t, "stty size")
			s.waitFor(t, "24 80")
			if err := s.Resize(WindowSize{Rows: 41, Cols: 123}); err != nil {
				t.Fatal(err)
			}
			s.typeLine(t, "stty size")
			s.waitFor(t, "41 123")
		}},
		{"Ctrl-C interrupts the foreground job and the shell lives on", func(t *testing.T, s *shellUnderTest) {
			s.typeLine(t, "sleep 1000")
			time.Sleep(100 * time.Millisecond) // let sleep start; the assertion does not depend on it
			if _, err := s.Write([]byte{3}); err != nil {
				t.Fatal(err)
			}
			s.typeLine(t, "echo still-here-$?")
			s.waitFor(t, "still-here-130")
		}},
		{"a signal frame reaches the foreground job", func(t *testing.T, s *shellUnderTest) {
			// The terminal echoes what is typed, so each awaited text is one only the shell's
			// output can hold: waiting for the typed words let the signal arrive before the
			// trap was set, its default action ended the shell, and the next line's write
			// failed with a broken pipe.
			s.typeLine(t, "trap 'echo got-usr-$((0+1))' USR1; echo trap-$((2+3))-set")
			s.waitFor(t, "trap-5-set")
			if err := s.Signal(syscall.SIGUSR1); err != nil {
				t.Fatal(err)
			}
			s.typeLine(t, "echo after-signal")
			s.waitFor(t, "got-usr-1")
		}},
		{"exit ends the call with its status", func(t *testing.T, s *shellUnderTest) {
			s.typeLine(t, "exit 7")
			if e := s.waitExit(t); e.ExitStatus != 7 {
				t.Errorf("exit = %+v, want status 7", e)
			}
		}},
		{"hang-up ends the program and still reports its exit", func(t *testing.T, s *shellUnderTest) {
			s.typeLine(t, "echo ready")
			s.waitFor(t, "ready")
			if err := s.Hangup(); err != nil {
				t.Fatal(err)
			}
			if e := s.waitExit(t); e.Signal != int(syscall.SIGHUP) && e.Signal != int(syscall.SIGKILL) {
				t.Errorf("exit = %+v, want killed by SIGHUP (or SIGKILL after the grace)", e)
			}
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { tc.run(t, openShell(t, sv)) })
	}
}

func TestPTYShellRunsAsTheRequestedUserAndOwnsItsTerminal(t *testing.T) {
	sv := startSupervisor(t, startConfig{})
	for _, tc := range []struct {
		name string
		user *User
		want string
	}{
		{"a user", &User{UID: 4242, GID: 4343}, "ids=4242:4343:1 tty=4242:4343"},
		{"root when none is asked", nil, "ids=0:0:"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := openShellAs(t, sv, tc.user)
			// id -G lists the groups: only the primary one (1), none of root's kept.
			s.typeLine(t, `echo "ids=$(id -u):$(id -g):$(id -G | wc -w) tty=$(stat -c %u:%g "$(tty)")"`)
			s.waitFor(t, tc.want)
		})
	}
}

func TestPTYShellsRunAtOnceAndAreCounted(t *testing.T) {
	sv := startSupervisor(t, startConfig{})
	a, b := openShell(t, sv), openShell(t, sv)
	a.typeLine(t, "echo from-a")
	b.typeLine(t, "echo from-b")
	a.waitFor(t, "from-a")
	b.waitFor(t, "from-b")
	if strings.Contains(a.out.String(), "from-b") || strings.Contains(b.out.String(), "from-a") {
		t.Errorf("output crossed between terminals:\na: %q\nb: %q", a.out.String(), b.out.String())
	}
	h, err := sv.Ping(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if h.Terminals != 2 {
		t.Errorf("ping counts %d terminals, want 2", h.Terminals)
	}
	a.Close()
	b.typeLine(t, "exit")
	b.waitExit(t)
	deadline := time.Now().Add(20 * time.Second)
	for h.Terminals != 0 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
		if h, err = sv.Ping(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	if h.Terminals != 0 {
		t.Errorf("ping counts %d terminals after both closed, want 0 (a closed connection must end its program)", h.Terminals)
	}
}

func TestPTYSpawnFailureIsAnErrorFrame(t *testing.T) {
	sv := startSupervisor(t, startConfig{})
	_, err := sv.OpenPTY(context.Background(), PTYRequest{Argv: []string{"/no/such/shell"}})
	if fe, ok := err.(*Error); !ok || fe.Code != CodeSpawnFailed || fe.Spawn != SpawnNotFound {
		t.Fatalf("err = %v, want a spawn_failed not_found error frame", err)
	}
}
