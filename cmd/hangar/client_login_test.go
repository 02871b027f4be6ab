package main

import (
	"bytes"
	"encoding/json"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"cloud.google.com/go/firestore"

	"github.com/hangar-dev/hangar/composition"
	"github.com/hangar-dev/hangar/internal/testenv"
	"github.com/hangar-dev/hangar/internal/testkit"
	"github.com/hangar-dev/hangar/platform/config"
)

// TestMain keeps every test of the package away from the user's own stored login: the config
// dir is a fresh one.
func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "hangar-config-")
	if err != nil {
		panic(err)
	}
	os.Setenv("XDG_CONFIG_HOME", dir)
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

var shownCode = regexp.MustCompile(`enter the code\n\n +([A-Z]{4}-[A-Z]{4})\n`)
var csrfInput = regexp.MustCompile(`name="csrf" value="([0-9a-f]+)"`)

// serveDevSignIn serves the API on a free loopback port until t ends, signing in as `hangar
// dev` does (the dev route, device codes polled every second), and returns its URL.
func serveDevSignIn(t *testing.T, db *firestore.Client) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	base := "http://" + ln.Addr().String()
	cfg := config.Default()
	devSignIn(&cfg, base)
	cfg.SignIn.DeviceInterval = time.Second
	srv := composition.NewServer(composition.New(composition.Deps{DB: db, Config: cfg}).Handler())
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return base
}

// A real server composed as `hangar dev` composes it: the browser signs the local admin in
// through the dev route, `hangar login` gets a code approved on the device page and stores the
// key, client commands use it, whoami names it, and logout revokes it.
func TestLoginWhoamiLogoutAgainstADevServer(t *testing.T) {
	db, _ := testenv.Firestore(t)
	t.Setenv("XDG_CONFIG_HOME", t.TempDir())
	t.Setenv("HANGAR_URL", "")
	t.Setenv("HANGAR_API_KEY", "")
	base := serveDevSignIn(t, db)

	if r := runHangar(t, "", "whoami", "--url", base); r.code != exitUnauthenticated || !strings.Contains(r.msg(), "hangar login") {
		t.Fatalf("whoami before login: exit %d %q", r.code, r.msg())
	}

	jar, _ := cookiejar.New(nil)
	browser := testkit.NoRedirects(jar)
	post := func(path string, v url.Values) *http.Response {
		req, _ := http.NewRequest(http.MethodPost, base+path, strings.NewReader(v.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("Origin", base)
		resp, err := browser.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp
	}
	if resp := post("/api/auth/dev", nil); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("dev sign-in: %s", resp.Status)
	}

	out := &testkit.SyncBuffer{}
	done := make(chan error, 1)
	go func() {
		root := newRootCmd()
		root.SetOut(out)
		root.SetErr(out)
		root.SetArgs([]string{"login", "--url", base, "--no-browser"})
		done <- root.Execute()
	}()
	var code string
	testkit.Eventually(t, 30*time.Second, "hangar login shows a code", func() (bool, string) {
		m := shownCode.FindStringSubmatch(out.String())
		if m != nil {
			code = m[1]
		}
		return m != nil, out.String()
	})
	resp, err := browser.Get(base + "/api/auth/device?user_code=" + code)
	if err != nil {
		t.Fatal(err)
	}
	var page bytes.Buffer
	_, _ = page.ReadFrom(resp.Body)
	resp.Body.Close()
	m := csrfInput.FindStringSubmatch(page.String())
	if m == nil {
		t.Fatalf("approval page: %s %s", resp.Status, page.String())
	}
	if resp := post("/api/auth/device", url.Values{"user_code": {code}, "action": {"approve"}, "csrf": {m[1]}}); resp.StatusCode != http.StatusOK {
		t.Fatalf("approve: %s", resp.Status)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("hangar login: %v\n%s", err, out.String())
		}
	case <-time.After(time.Minute):
		t.Fatalf("hangar login never finished:\n%s", out.String())
	}
	host, _ := os.Hostname()
	assertContains(t, out.String(), "Signed in to "+base+" as admin@hangar.local", `"hangar login on `+host+`"`)

	path, err := loginPath()
	if err != nil {
		t.Fatal(err)
	}
	for p, want := range map[string]os.FileMode{path: 0o600, filepath.Dir(path): 0o700} {
		if st, err := os.Stat(p); err != nil || st.Mode().Perm() != want {
			t.Errorf("%s: %v, %v; want mode %v", p, st.Mode(), err, want)
		}
	}
	stored, err := loadLogin()
	if err != nil || stored == nil {
		t.Fatalf("stored login: %v", err)
	}

	r := runHangar(t, "", "whoami")
	if r.err != nil {
		t.Fatalf("whoami: %v", r.err)
	}
	assertContains(t, r.out, "user: admin@hangar.local", "admin)", "key: hgr_"+stored.KeyID, "key from: "+path, "server: "+base)
	r = runHangar(t, "", "whoami", "--json")
	var w whoami
	if r.err != nil || json.Unmarshal([]byte(r.out), &w) != nil || w.Email != "admin@hangar.local" || !w.Admin || w.KeyID != stored.KeyID || w.Kind != "personal" {
		t.Errorf("whoami --json: %v %+v\n%s", r.err, w, r.out)
	}
	if r := runHangar(t, "", "keys", "list"); r.err != nil || !strings.Contains(r.out, "hangar login on "+host) {
		t.Fatalf("a client command with the stored login: %v\n%s", r.err, r.out)
	}

	if r := runHangar(t, "", "logout"); r.err != nil || !strings.Contains(r.out, "Revoked the key hgr_"+stored.KeyID) {
		t.Fatalf("logout: %v %s", r.err, r.out)
	}
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Errorf("the login file is still there: %v", err)
	}
	if r := runHangar(t, "", "whoami", "--url", base, "--api-key", stored.APIKey); r.code != exitUnauthenticated {
		t.Errorf("the revoked key's whoami: exit %d %q", r.code, r.msg())
	}
	if r := runHangar(t, "", "logout"); r.code != exitUnauthenticated {
		t.Errorf("logout without a login: exit %d %q", r.code, r.msg())
	}
}

func TestDevSignsBrowsersInOnLoopbackWhenListeningEverywhere(t *testing.T) {
	for in, want := range map[string]string{"0.0.0.0:8080": "127.0.0.1:8080", "[::]:8080": "127.0.0.1:8080", "127.0.0.1:9000": "127.0.0.1:9000"} {
		a, err := net.ResolveTCPAddr("tcp", in)
		if err != nil {
			t.Fatal(err)
		}
		if got := browserAddr(a); got != want {
			t.Errorf("browserAddr(%s) = %s, want %s", in, got, want)
		}
	}
}
