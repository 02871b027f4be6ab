// Package appstest builds fakeapp, the stand-in for the servers sandbox apps run, and puts it
// in a test image as an app, an IDE server and a headless Chromium.
package appstest

import (
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/hangar-dev/hangar/sandboxhosts/images"
)

const pkg = "github.com/hangar-dev/hangar/internal/appstest/fakeapp"

var (
	once     sync.Once
	binary   []byte
	buildErr error
)

// Binary is the static fakeapp executable, built once per test process.
func Binary(t testing.TB) []byte {
	t.Helper()
	once.Do(func() {
		dir, err := os.MkdirTemp("", "fakeapp-")
		if err != nil {
			buildErr = err
			return
		}
		defer os.RemoveAll(dir)
		out := filepath.Join(dir, "fakeapp")
		cmd := exec.Command("go", "build", "-trimpath", "-ldflags=-s", "-o", out, pkg)
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if msg, err := cmd.CombinedOutput(); err != nil {
			t.Logf("go build %s:\n%s", pkg, msg)
			buildErr = err
			return
		}
		binary, buildErr = os.ReadFile(out)
	})
	if buildErr != nil {
		t.Fatalf("build fakeapp: %v", buildErr)
	}
	return binary
}

// Image is a busybox image with fakeapp installed as /usr/local/bin/fakeapp, code-server and
// chromium: an image that has an IDE server and a browser.
func Image(t testing.TB) v1.Image {
	t.Helper()
	bin := Binary(t)
	f := images.File{Content: bin, Mode: 0o755}
	img, err := images.Busybox(map[string]images.File{
		"/usr/local/bin/fakeapp":     f,
		"/usr/local/bin/code-server": f,
		"/usr/local/bin/chromium":    f,
	})
	if err != nil {
		t.Fatal(err)
	}
	return img
}
