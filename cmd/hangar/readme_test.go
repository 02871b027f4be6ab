package main

import (
	"bytes"
	"context"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hangar-dev/hangar/internal/testenv"
	"github.com/hangar-dev/hangar/sandboxhosts/supervisor/supervisortest"
)

// quickStartScript is the README's shell blocks but the set-up one (make dev and make test,
// marked not run), as one script.
func quickStartScript(t *testing.T) string {
	t.Helper()
	blocks := shellBlocks(t, "README.md")
	if len(blocks) < 2 || !strings.Contains(blocks[0].text, "make dev") || blocks[0].notRun == "" {
		t.Fatalf("the README has %d shell blocks; want make dev's first, marked not run, then the commands to try", len(blocks))
	}
	var script strings.Builder
	for _, b := range blocks {
		if b.notRun == "" {
			script.WriteString(b.text)
		}
	}
	return script.String()
}

// TestReadmeQuickStart runs the README's quick start commands, as written, against `hangar dev`
// (what make dev runs) in a fresh directory, so a stale example fails here rather than for a
// new user. Only the address differs: the test serves on a free port instead of 8080.
func TestReadmeQuickStart(t *testing.T) {
	testenv.RequireEmulators(t)
	testenv.RequireSandboxes(t)
	testenv.RequirePlugins(t)
	for _, tool := range []string{"bash", "curl"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("the quick start needs %s", tool)
		}
	}
	script := quickStartScript(t)
	const readmeURL = "http://127.0.0.1:8080"
	if !strings.Contains(script, readmeURL) {
		t.Fatalf("the quick start no longer sets HANGAR_URL=%s; update this test", readmeURL)
	}

	dev := serveDev(t)
	cmd := exec.Command("bash", "-euo", "pipefail", "-c", strings.ReplaceAll(script, readmeURL, dev.url))
	cmd.Dir = dev.dir
	cmd.Env = os.Environ()
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("the quick start failed: %v\n--- its output:\n%s\n--- hangar dev's:\n%s", err, out, dev.out)
	}
	for _, want := range []string{`"name":"default"`, "exit status 3", "some notes"} {
		if !bytes.Contains(out, []byte(want)) {
			t.Errorf("the quick start's output lacks %q:\n%s", want, out)
		}
	}
}

// devServer is a `hangar dev` (what make dev runs) serving from a fresh directory, with
// bin/hangar built into it as the README's commands expect.
type devServer struct {
	dir, url string
	out      *lockedWriter
}

// serveDev runs `hangar dev` in this process on a free port until t ends, and waits until it serves.
func serveDev(t testing.TB) devServer {
	t.Helper()
	dir := t.TempDir()
	if out, err := exec.Command("go", "build", "-o", filepath.Join(dir, "bin", "hangar"), ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	t.Setenv("HANGAR_PROJECT", testenv.Project(t))
	t.Setenv(supervisorEnv, supervisortest.Binary(t))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	ctx, cancel := context.WithCancel(context.Background())
	devOut := &lockedWriter{w: new(bytes.Buffer)}
	done := make(chan error, 1)
	go func() { done <- runDev(ctx, addr, filepath.Join(dir, ".data"), 5*time.Second, devOut) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("hangar dev: %v", err)
		}
	})
	url := "http://" + addr
	for deadline := time.Now().Add(2 * time.Minute); ; {
		if resp, err := http.Get(url + "/healthz"); err == nil {
			resp.Body.Close()
			break
		}
		select {
		case err := <-done:
			done <- err
			t.Fatalf("hangar dev stopped: %v\n%s", err, devOut)
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatal("hangar dev never served")
		}
	}
	return devServer{dir: dir, url: url, out: devOut}
}

// lockedWriter lets hangar dev's goroutines and the test share one buffer.
type lockedWriter struct {
	mu sync.Mutex
	w  *bytes.Buffer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

func (l *lockedWriter) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.String()
}
