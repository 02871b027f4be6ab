package harness_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/hangar-dev/hangar/harnesses/harness"
	"github.com/hangar-dev/hangar/runtimes/wasm"
)

// guestBuilds are the test plugins: a package under testdata and the build tags that vary it.
var guestBuilds = map[string]struct{ pkg, tags string }{
	"good":          {"./testdata/good", ""},
	"badversion":    {"./testdata/good", "badversion"},
	"noplan":        {"./testdata/good", "noplan"},
	"toolresult":    {"./testdata/good", "toolresult"},
	"badtoolresult": {"./testdata/good", "badtoolresult"},
	"hostile":       {"./testdata/hostile", ""},
	// The real Claude Code harness, for the benchmark of a turn of its output.
	"claude-code": {"../plugins/claude-code/plugin", ""},
}

var (
	guests = sync.OnceValues(buildGuests)
	// cacheDir holds compiled modules for the whole test process, so each module is compiled
	// once however many runtimes the tests make.
	cacheDir string
)

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "hangar-plugin-cache-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	cacheDir = dir
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// guest returns the wasm of a test plugin, building all of them once per test process.
func guest(tb testing.TB, name string) []byte {
	tb.Helper()
	built, err := guests()
	if err != nil {
		tb.Fatalf("build test plugins: %v", err)
	}
	wasm, ok := built[name]
	if !ok {
		tb.Fatalf("no test plugin %q", name)
	}
	return wasm
}

func buildGuests() (map[string][]byte, error) {
	// go test puts its own GOROOT/bin first on the PATH of the tests it runs.
	goTool, err := exec.LookPath("go")
	if err != nil {
		return nil, fmt.Errorf("the go tool is needed to build the test plugins: %w", err)
	}
	dir, err := os.MkdirTemp("", "hangar-test-plugins-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	built := make(map[string][]byte, len(guestBuilds))
	for name, b := range guestBuilds {
		out := filepath.Join(dir, name+".wasm")
		cmd := exec.Command(goTool, "build", "-buildmode=c-shared", "-trimpath", "-tags="+b.tags, "-o", out, b.pkg)
		cmd.Env = append(os.Environ(), "GOOS=wasip1", "GOARCH=wasm", "CGO_ENABLED=0")
		if msg, err := cmd.CombinedOutput(); err != nil {
			return nil, fmt.Errorf("go build %s -tags=%q: %w\n%s", b.pkg, b.tags, err, msg)
		}
		if built[name], err = os.ReadFile(out); err != nil {
			return nil, err
		}
	}
	return built, nil
}

// newRuntime starts a runtime on the process's compilation cache, closed when the test ends.
func newRuntime(tb testing.TB, opts wasm.Options) *wasm.Runtime {
	tb.Helper()
	if opts.CacheDir == "" {
		opts.CacheDir = cacheDir
	}
	r, err := wasm.NewRuntime(context.Background(), opts)
	if err != nil {
		tb.Fatalf("NewRuntime: %v", err)
	}
	tb.Cleanup(func() { r.Close(context.Background()) })
	return r
}

func load(tb testing.TB, r *wasm.Runtime, name string) *harness.Plugin {
	tb.Helper()
	p, err := harness.Load(context.Background(), r, guest(tb, name))
	if err != nil {
		tb.Fatalf("Load %s: %v", name, err)
	}
	tb.Cleanup(func() { p.Close(context.Background()) })
	return p
}

// lines is n lines of output of the given width, newline included.
func lines(n, width int) string {
	line := strings.Repeat("x", width-1) + "\n"
	return strings.Repeat(line, n)
}
