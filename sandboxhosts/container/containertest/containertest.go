// Package containertest helps benchmarks measure raw runc beside Hangar's sandboxes, and builds
// the probes tests run inside sandboxes.
package containertest

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	specs "github.com/opencontainers/runtime-spec/specs-go"
)

// Bundle writes a runc bundle of runc's own default spec (`runc spec`) over rootfs, read-only
// and without a terminal, running args: what runc costs with none of a sandbox's extra mounts,
// limits or seccomp filter.
func Bundle(tb testing.TB, rootfs string, args ...string) string {
	tb.Helper()
	bundle := tb.TempDir()
	if out, err := exec.Command("runc", "spec", "--bundle", bundle).CombinedOutput(); err != nil {
		tb.Fatalf("runc spec: %v: %s", err, out)
	}
	path := filepath.Join(bundle, "config.json")
	raw, err := os.ReadFile(path)
	if err != nil {
		tb.Fatal(err)
	}
	var spec specs.Spec
	if err := json.Unmarshal(raw, &spec); err != nil {
		tb.Fatal(err)
	}
	spec.Root = &specs.Root{Path: rootfs, Readonly: true}
	spec.Process.Terminal = false
	spec.Process.Args = args
	if raw, err = json.Marshal(spec); err != nil {
		tb.Fatal(err)
	}
	if err := os.WriteFile(path, raw, 0o600); err != nil {
		tb.Fatal(err)
	}
	return bundle
}

// Sysprobe builds the static sysprobe command (see its package) into a temporary directory and
// returns its path: a test copies it into a sandbox to make raw syscalls there.
func Sysprobe(tb testing.TB) string {
	tb.Helper()
	// go test puts its own GOROOT/bin first on the PATH of the tests it runs.
	out := filepath.Join(tb.TempDir(), "sysprobe")
	cmd := exec.Command("go", "build", "-trimpath", "-o", out, "github.com/hangar-dev/hangar/sandboxhosts/container/containertest/sysprobe")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if msg, err := cmd.CombinedOutput(); err != nil {
		tb.Fatalf("build sysprobe: %v\n%s", err, msg)
	}
	return out
}
