// Package containertest helps benchmarks measure raw runc beside Hangar's sandboxes, and builds
// the probes tests run inside sandboxes.
package containertest

import (
	"bytes"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
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

// TimeRuncRunEcho is the loop of a benchmark that times `runc run` of bundle, whose process
// prints "hi", up to that output, as a session's create is timed to its first output: runc's
// teardown after it is not timed. Containers are named idPrefix and a number.
func TimeRuncRunEcho(b *testing.B, bundle, idPrefix string) {
	root := b.TempDir()
	first := make([]byte, 64)
	for i := 0; b.Loop(); i++ {
		cmd := exec.Command("runc", "--root", root, "run", "--bundle", bundle, idPrefix+strconv.Itoa(i))
		var errb bytes.Buffer
		cmd.Stderr = &errb
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			b.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			b.Fatal(err)
		}
		n, _ := stdout.Read(first)
		b.StopTimer()
		rest, _ := io.ReadAll(stdout)
		if err := cmd.Wait(); err != nil || string(first[:n])+string(rest) != "hi\n" {
			b.Fatalf("runc run: stdout %q, %v: %s", string(first[:n])+string(rest), err, errb.String())
		}
		b.StartTimer()
	}
}
