package main

import (
	"bytes"
	"encoding/json"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/creack/pty"
	"golang.org/x/term"

	"github.com/hangar-dev/hangar/composition"
	"github.com/hangar-dev/hangar/internal/testenv"
	"github.com/hangar-dev/hangar/internal/testkit"
)

// TestSessionsShell runs `hangar sessions shell` against the whole stack, once with piped
// input and once on a real terminal: raw mode while it runs, restored after, resizes followed.
func TestSessionsShell(t *testing.T) {
	db, _ := testenv.Firestore(t)
	sb := testenv.NewSandboxes(t, db)
	sb.StartHost(t, "cli-shell-host")
	serveCLI(t, composition.Deps{DB: db, Config: sb.Config, Bucket: sb.Bucket, Sealer: sb.Sealer, DefaultImage: sb.Image}, "shell@example.com")
	var created struct {
		SessionID string `json:"session_id"`
	}
	r := runHangar(t, "", "sessions", "create", "--json")
	if err := json.Unmarshal([]byte(r.out), &created); err != nil {
		t.Fatalf("create: %v %s", err, r.errOut)
	}
	id := created.SessionID

	t.Run("piped input runs and the shell's status is the exit code", func(t *testing.T) {
		r := runHangar(t, "echo from-$((40+2))\nexit 3\n", "sessions", "shell", id)
		if r.code != 3 || !strings.Contains(r.out, "from-42") {
			t.Fatalf("exit %d out %q err %q, want 3 and from-42", r.code, r.out, r.errOut)
		}
	})
	t.Run("a program after --", func(t *testing.T) {
		r := runHangar(t, "", "sessions", "shell", id, "--", "/bin/sh", "-c", "echo on-a-tty-$(tty | cut -c1-8)")
		if r.code != 0 || !strings.Contains(r.out, "on-a-tty-/dev/pts") {
			t.Fatalf("exit %d out %q err %q", r.code, r.out, r.errOut)
		}
	})
	t.Run("another user's session is not found", func(t *testing.T) {
		r := runHangar(t, "", "sessions", "shell", "sess_someone_else")
		if r.code != exitNotFound {
			t.Fatalf("exit %d err %q, want %d", r.code, r.errOut, exitNotFound)
		}
	})
	t.Run("a real terminal goes raw, follows resizes and is restored", func(t *testing.T) {
		master, tty, err := pty.Open()
		if err != nil {
			t.Fatal(err)
		}
		defer master.Close()
		defer tty.Close()
		if err := pty.Setsize(master, &pty.Winsize{Rows: 33, Cols: 99}); err != nil {
			t.Fatal(err)
		}
		before, err := term.GetState(int(tty.Fd()))
		if err != nil {
			t.Fatal(err)
		}
		var screen testkit.SyncBuffer
		done := make(chan result, 1)
		go func() {
			root := newRootCmd()
			var errOut bytes.Buffer
			root.SetIn(tty)
			root.SetOut(&screen)
			root.SetErr(&errOut)
			root.SetArgs([]string{"sessions", "shell", id})
			err := root.Execute()
			r := result{err: err, errOut: errOut.String()}
			if err != nil {
				r.code = exitCode(err)
			}
			done <- r
		}()
		waitScreen := func(want string) {
			t.Helper()
			testkit.Eventually(t, 20*time.Second, "the screen showing "+want, func() (bool, string) {
				s := screen.String()
				return strings.Contains(s, want), s
			})
		}
		typeIn := func(s string) {
			t.Helper()
			if _, err := master.Write([]byte(s)); err != nil {
				t.Fatal(err)
			}
		}
		typeIn("stty size\r")
		waitScreen("33 99")
		testkit.Eventually(t, 10*time.Second, "the local terminal in raw mode", func() (bool, string) {
			st, err := term.GetState(int(tty.Fd()))
			return err == nil && *st != *before, "still cooked"
		})
		if err := pty.Setsize(master, &pty.Winsize{Rows: 44, Cols: 111}); err != nil {
			t.Fatal(err)
		}
		if err := syscall.Kill(os.Getpid(), syscall.SIGWINCH); err != nil {
			t.Fatal(err)
		}
		testkit.Eventually(t, 20*time.Second, "the resize reaching the shell", func() (bool, string) {
			typeIn("stty size\r")
			time.Sleep(100 * time.Millisecond)
			s := screen.String()
			return strings.Contains(s, "44 111"), s
		})
		typeIn("exit 4\r")
		select {
		case r := <-done:
			if r.code != 4 {
				t.Errorf("exit %d (%v %s), want 4", r.code, r.err, r.errOut)
			}
		case <-time.After(30 * time.Second):
			t.Fatal("hangar sessions shell never returned")
		}
		after, err := term.GetState(int(tty.Fd()))
		if err != nil {
			t.Fatal(err)
		}
		if *after != *before {
			t.Error("the terminal was left in raw mode")
		}
	})
}
