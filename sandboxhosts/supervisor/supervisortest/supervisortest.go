// Package supervisortest builds the hangar-supervisor binary for tests that run it, in or out of
// a container.
package supervisortest

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
)

const (
	pkg = "github.com/hangar-dev/hangar/cmd/hangar-supervisor"
	// dirPrefix is followed by the building process's pid, so later builds can tell which
	// directories belong to processes that have exited.
	dirPrefix = "hangar-supervisor-test-"
)

var (
	once     sync.Once
	binary   string
	buildErr error
)

// Binary returns the path of a static hangar-supervisor built the way sandboxes get it, building
// it once per test process. The binary lives in a temporary directory for the whole process
// (tests may bind-mount it into containers at any time), so it is not removed per test; instead
// each build removes the directories of test processes that are gone.
func Binary(t testing.TB) string {
	t.Helper()
	once.Do(func() { binary, buildErr = build() })
	if buildErr != nil {
		t.Fatalf("build hangar-supervisor: %v", buildErr)
	}
	return binary
}

func build() (string, error) {
	// go test puts its own GOROOT/bin first on the PATH of the tests it runs.
	goTool, err := exec.LookPath("go")
	if err != nil {
		return "", fmt.Errorf("the go tool is needed to build the supervisor: %w", err)
	}
	removeDeadProcessDirs()
	dir, err := os.MkdirTemp("", fmt.Sprintf("%s%d-", dirPrefix, os.Getpid()))
	if err != nil {
		return "", fmt.Errorf("temp dir for the binary: %w", err)
	}
	out := filepath.Join(dir, "hangar-supervisor")
	cmd := exec.Command(goTool, "build", "-trimpath", "-ldflags=-s", "-o", out, pkg)
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if msg, err := cmd.CombinedOutput(); err != nil {
		os.RemoveAll(dir)
		return "", fmt.Errorf("go build %s: %w\n%s", pkg, err, msg)
	}
	return out, nil
}

func removeDeadProcessDirs() {
	dirs, _ := filepath.Glob(filepath.Join(os.TempDir(), dirPrefix+"*"))
	for _, dir := range dirs {
		pid, _, ok := strings.Cut(strings.TrimPrefix(filepath.Base(dir), dirPrefix), "-")
		if !ok {
			continue
		}
		if _, err := strconv.Atoi(pid); err != nil {
			continue
		}
		if _, err := os.Stat(filepath.Join("/proc", pid)); errors.Is(err, fs.ErrNotExist) {
			os.RemoveAll(dir)
		}
	}
}
