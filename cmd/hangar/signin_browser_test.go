package main

import (
	"context"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hangar-dev/hangar/composition"
	"github.com/hangar-dev/hangar/internal/oidctest"
	"github.com/hangar-dev/hangar/internal/testenv"
	"github.com/hangar-dev/hangar/internal/testkit"
	"github.com/hangar-dev/hangar/platform/config"
	"github.com/hangar-dev/hangar/platform/egress"
	"github.com/hangar-dev/hangar/records/secrets"
)

// The sign-in pages of /api/auth in Debian's Chromium (web/e2e/devicelogin.e2e.ts and
// web/e2e/returnto.e2e.ts), against a server composed in the test: the pages are served by
// Hangar itself, so these tests need no sandbox, only the browser and its driver.

// shownLogin is what `hangar login` prints: the address to open and the code to enter there.
var shownLogin = regexp.MustCompile(`Open (\S+) and enter the code\n\n +([A-Z]{4}-[A-Z]{4})\n`)

// TestSecurityDeviceLoginCompletesFromARealBrowser runs a real `hangar login` (this command,
// built) against a server composed as `hangar dev` composes it, and has Chromium, not signed
// in, open the address the CLI printed: it is sent through the standalone dev sign-in page,
// clicks its button, enters the code and clicks Approve, and each form post must carry Hangar's
// origin. The CLI must then finish and `hangar whoami` work with the key it stored. Under the
// pages' former Referrer-Policy no-referrer, Chromium posted those forms with "Origin: null",
// the CSRF check refused the approval, and the CLI polled on.
func TestSecurityDeviceLoginCompletesFromARealBrowser(t *testing.T) {
	web, npm := browserDriver(t, "npm")
	db, _ := testenv.Firestore(t)
	base := serveDevSignIn(t, db)

	bin := filepath.Join(t.TempDir(), "hangar")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	// The CLI's own environment: a config dir of its own (where login stores the key), and no
	// URL or key from the test run's.
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "HANGAR_URL=") && !strings.HasPrefix(kv, "HANGAR_API_KEY=") && !strings.HasPrefix(kv, "XDG_CONFIG_HOME=") {
			env = append(env, kv)
		}
	}
	env = append(env, "XDG_CONFIG_HOME="+t.TempDir())

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	out := &testkit.SyncBuffer{}
	login := exec.CommandContext(ctx, bin, "login", "--url", base, "--no-browser")
	login.Env, login.Stdout, login.Stderr = env, out, out
	if err := login.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- login.Wait() }()
	t.Cleanup(func() {
		cancel() // ends a login still polling when the test fails
		<-done
	})
	var shown []string
	testkit.Eventually(t, time.Minute, "hangar login shows where to approve it", func() (bool, string) {
		shown = shownLogin.FindStringSubmatch(out.String())
		return shown != nil, out.String()
	})
	if want := base + "/api/auth/device"; shown[1] != want {
		t.Fatalf("hangar login sends the browser to %s, want %s", shown[1], want)
	}

	if b, err := runDriver(ctx, npm, web, "e2e/devicelogin.e2e.ts", "HANGAR_URL="+base, "HANGAR_DEVICE_URL="+shown[1], "HANGAR_USER_CODE="+shown[2]); err != nil {
		t.Fatalf("browser tests e2e/devicelogin.e2e.ts failed: %v\n%s\n--- hangar login's output:\n%s", err, b, out.String())
	}
	select {
	case err := <-done:
		done <- err // for the cleanup
		if err != nil {
			t.Fatalf("hangar login: %v\n%s", err, out.String())
		}
	case <-ctx.Done():
		t.Fatalf("hangar login never finished after the browser's approval:\n%s", out.String())
	}
	assertContains(t, out.String(), "Signed in to "+base+" as admin@hangar.local")

	whoami := exec.CommandContext(ctx, bin, "whoami")
	whoami.Env = env
	b, err := whoami.CombinedOutput()
	if err != nil {
		t.Fatalf("hangar whoami with the stored login: %v\n%s", err, b)
	}
	assertContains(t, string(b), "user: admin@hangar.local", "admin)", "key: hgr_", "(personal)", "server: "+base)
}

// TestSecuritySignInReturnsTheBrowserOnlyToHangar signs Chromium in through the OIDC callback
// (internal/oidctest's provider) with return_to values that browsers read as another host
// (a tab, a backslash, two slashes, an absolute URL) and with good ones: after the provider's
// sign-in and the callback, a bad one leaves the browser on Hangar's "/", a good one on its
// path, and no request leaves the machine's loopback.
func TestSecuritySignInReturnsTheBrowserOnlyToHangar(t *testing.T) {
	web, npm := browserDriver(t, "npm")
	db, _ := testenv.Firestore(t)
	_, sealer := testenv.Keyset(t)
	const clientID, clientSecret, email = "hangar-browser", "browser-client-secret", "ada@example.com"
	idp := oidctest.New(t, clientID, clientSecret)
	idp.SignIn(oidctest.Person{Email: email, EmailVerified: true, Name: "Ada"})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	base := "http://" + ln.Addr().String()
	cfg := config.Default()
	cfg.SignIn.PublicURL, cfg.SignIn.OIDCIssuer, cfg.SignIn.OIDCClientID = base, idp.Issuer, clientID
	cfg.SignIn.AllowedDomains = []string{"example.com"}
	cfg.Egress = egress.MustParse("127.0.0.1")
	store := secrets.New(db, sealer, time.Now, secrets.Limits{MaxValueBytes: 1024, MaxSecrets: 10})
	if _, _, err := store.Put(t.Context(), secrets.Put{Name: cfg.SignIn.OIDCClientSecret, Value: clientSecret}); err != nil {
		t.Fatal(err)
	}
	api := composition.New(composition.Deps{DB: db, Config: cfg, Sealer: sealer, LoopbackProviders: true})
	srv := composition.NewServer(api.Handler())
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if b, err := runDriver(ctx, npm, web, "e2e/returnto.e2e.ts", "HANGAR_URL="+base, "HANGAR_IDP_URL="+idp.Issuer, "HANGAR_EMAIL="+email); err != nil {
		t.Fatalf("browser tests e2e/returnto.e2e.ts failed: %v\n%s", err, b)
	}
}

// runDriver runs one web/e2e file with env and returns its output. It runs in a process group
// of its own, killed whole when ctx ends, so that a stuck browser does not outlive the test.
func runDriver(ctx context.Context, npm, web, file string, env ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, npm, "--prefix", web, "run", "e2e", "--", file)
	cmd.Env = append(append(os.Environ(), "NO_COLOR=1"), env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 10 * time.Second
	return cmd.CombinedOutput()
}
