// Package testkit holds the habits every test shares that need nothing but the standard
// library, so that any test — in-package ones of the lowest layers included — can use them
// without an import cycle: what a test does when a part of the machine is missing (Missing and
// the Require helpers), waiting for something that happens on its own (Eventually), and a
// loopback TLS server under a real host name (TLSServer, tls.go).
package testkit

import (
	"fmt"
	"os"
	"os/exec"
	"testing"
	"time"
)

// Missing stops tb because the machine lacks what it needs, said in why (what is missing and
// how to get it). Under CI=true it fails: there a skipped test would turn the suite silently
// green. Elsewhere it skips, so a laptop without runc or gcloud still runs the rest.
func Missing(tb testing.TB, why string) {
	tb.Helper()
	if os.Getenv("CI") == "true" {
		tb.Fatal("CI=true, so this test must run: " + why)
	}
	tb.Skip(why)
}

// RequireRoot stops tb (see Missing) unless the test runs as root; why says what needs it.
func RequireRoot(tb testing.TB, why string) {
	tb.Helper()
	if os.Geteuid() != 0 {
		Missing(tb, why+" needs root")
	}
}

// RequireFile stops tb (see Missing) unless path exists; install says how to get it.
func RequireFile(tb testing.TB, path, install string) {
	tb.Helper()
	if _, err := os.Stat(path); err != nil {
		Missing(tb, fmt.Sprintf("%s is needed (%s): %v", path, install, err))
	}
}

// RequireTool stops tb (see Missing) unless name is on PATH, and returns its path; install says
// how to get it.
func RequireTool(tb testing.TB, name, install string) string {
	tb.Helper()
	path, err := exec.LookPath(name)
	if err != nil {
		Missing(tb, fmt.Sprintf("%s is needed on PATH (%s)", name, install))
	}
	return path
}

// Eventually calls cond until it reports done, and fails tb with what and cond's last word if
// that has not happened within timeout. It polls quickly at first and then every 100 ms, since
// what it waits for happens on its own and says nothing; timeout is a generous bound on a
// broken run, never a measure. cond may call tb.Fatal.
func Eventually(tb testing.TB, timeout time.Duration, what string, cond func() (done bool, saw string)) {
	tb.Helper()
	deadline := time.Now().Add(timeout)
	for pause := 5 * time.Millisecond; ; pause = min(2*pause, 100*time.Millisecond) {
		done, saw := cond()
		if done {
			return
		}
		if time.Now().After(deadline) {
			tb.Fatalf("%s did not happen within %s: %s", what, timeout, saw)
		}
		time.Sleep(pause)
	}
}
