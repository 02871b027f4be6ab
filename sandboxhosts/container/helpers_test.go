package container

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/hangar-dev/hangar/internal/testkit"
)

// testCgroupParent keeps test sandboxes' cgroups apart from a real host's.
const testCgroupParent = "hangar-test"

// requirements skips (or fails under CI=true) when this machine cannot run
// sandboxes.
func requirements(tb testing.TB) {
	tb.Helper()
	missing := ""
	switch {
	case os.Geteuid() != 0:
		missing = "tests need root (runc, overlay mounts)"
	case func() bool { _, err := findRunc(""); return err != nil }():
		missing = "tests need runc (apt-get install runc)"
	case func() bool { _, err := lookTool("mkfs.ext4", "e2fsprogs"); return err != nil }():
		missing = "tests need mkfs.ext4 (apt-get install e2fsprogs)"
	case func() bool { _, err := os.Stat("/bin/busybox"); return err != nil }():
		missing = "tests need a static /bin/busybox (apt-get install busybox-static)"
	}
	if missing != "" {
		testkit.Missing(tb, missing)
	}
}

// testApplets are the busybox applets the test rootfs links in /bin.
var testApplets = []string{
	"sh", "true", "false", "sleep", "ls", "cat", "echo", "ip", "ifconfig", "id", "wget",
	"nc", "ps", "mount", "touch", "mkdir", "rm", "find", "grep", "seq", "unshare", "stat",
	"wc", "hostname", "head", "sed", "dd", "df",
}

// busyboxRootfs builds a minimal rootfs in dir: static busybox, applet
// symlinks, the usual empty dirs and /etc/motd (a lower file tests delete).
func busyboxRootfs(tb testing.TB, dir string) {
	tb.Helper()
	for _, d := range []string{"bin", "proc", "dev", "sys", "tmp", "etc", "root"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			tb.Fatal(err)
		}
	}
	if err := os.Chmod(filepath.Join(dir, "tmp"), 0o1777); err != nil {
		tb.Fatal(err)
	}
	bin, err := os.ReadFile("/bin/busybox")
	if err != nil {
		tb.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "bin", "busybox"), bin, 0o755); err != nil {
		tb.Fatal(err)
	}
	for _, a := range testApplets {
		if err := os.Symlink("busybox", filepath.Join(dir, "bin", a)); err != nil {
			tb.Fatal(err)
		}
	}
	files := map[string]string{
		"etc/motd":   "from the image\n",
		"etc/passwd": "root:x:0:0:root:/root:/bin/sh\n",
		"etc/group":  "root:x:0:\n",
	}
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			tb.Fatal(err)
		}
	}
}

var notIDChars = regexp.MustCompile(`[^A-Za-z0-9_.-]+`)

// uniqueID is a container id unique to this test run.
func uniqueID(tb testing.TB) string {
	b := make([]byte, 4)
	if _, err := rand.Read(b); err != nil {
		tb.Fatal(err)
	}
	name := notIDChars.ReplaceAllString(tb.Name(), "-")
	if len(name) > 40 {
		name = name[:40]
	}
	return "t-" + name + "-" + hex.EncodeToString(b)
}

// newTestDriver returns a driver on a fresh state dir.
func newTestDriver(tb testing.TB, stateDir string) *Driver {
	tb.Helper()
	requirements(tb)
	if stateDir == "" {
		stateDir = tb.TempDir()
	}
	d, err := NewDriver(DriverOptions{StateDir: stateDir, CgroupParent: testCgroupParent, Subreaper: true})
	if err != nil {
		tb.Fatal(err)
	}
	return d
}

// testImage is one busybox lower dir shared by a test's sandboxes.
func testImage(tb testing.TB) string {
	tb.Helper()
	lower := filepath.Join(tb.TempDir(), "lower")
	busyboxRootfs(tb, lower)
	return lower
}

// sleepSpec is a spec whose init sleeps, in a new dir under the test's temp dir.
func sleepSpec(tb testing.TB, lower string) Spec {
	return Spec{
		ID:        uniqueID(tb),
		Dir:       filepath.Join(tb.TempDir(), "sandbox"),
		LowerDirs: []string{lower},
		Init:      []string{"/bin/sleep", "100000"},
		Resources: Resources{CPUs: 0.5, MemoryBytes: 64 << 20, Pids: 64},
	}
}

// create creates the sandbox and makes sure it is gone after the test,
// whatever happens, without relying on the driver under test.
func create(tb testing.TB, d *Driver, spec Spec) *Sandbox {
	tb.Helper()
	tb.Cleanup(func() { forceCleanup(tb, d, spec.ID, spec.Dir) })
	sb, err := d.Create(context.Background(), spec)
	if err != nil {
		tb.Fatalf("create: %v", err)
	}
	return sb
}

// forceCleanup removes a test's container and mounts (overlay, then disk)
// with plain runc and umount, and resumes first in case a test left it frozen.
func forceCleanup(tb testing.TB, d *Driver, id, dir string) {
	runc := func(args ...string) {
		_ = exec.Command("runc", append([]string{"--root", d.RuncRoot()}, args...)...).Run()
	}
	runc("resume", id)
	runc("delete", "--force", id)
	for _, target := range []string{filepath.Join(dir, "rootfs"), DiskDir(dir)} {
		for {
			if err := unix.Unmount(target, unix.MNT_DETACH); err != nil {
				if !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.ENOENT) {
					tb.Errorf("cleanup: unmount %s: %v", target, err)
				}
				break
			}
		}
	}
}

// execIn runs argv inside the sandbox with runc exec and returns its
// combined output.
func execIn(tb testing.TB, sb *Sandbox, argv ...string) (string, error) {
	tb.Helper()
	cmd := exec.Command("runc", append([]string{"--root", sb.d.RuncRoot(), "exec", sb.ID()}, argv...)...)
	out, err := cmd.CombinedOutput()
	return strings.TrimSpace(string(out)), err
}

// mustExec is execIn that fails the test when argv fails.
func mustExec(tb testing.TB, sb *Sandbox, argv ...string) string {
	tb.Helper()
	out, err := execIn(tb, sb, argv...)
	if err != nil {
		tb.Fatalf("exec %q: %v: %s", argv, err, out)
	}
	return out
}

// sh runs a shell script inside the sandbox.
func sh(tb testing.TB, sb *Sandbox, script string) string {
	tb.Helper()
	return mustExec(tb, sb, "/bin/sh", "-c", script)
}

// TestMain removes the cgroup parent runc made for the tests' sandboxes
// (runc deletes a container's own cgroups, never their parents).
func TestMain(m *testing.M) {
	code := m.Run()
	dirs, _ := filepath.Glob(filepath.Join("/sys/fs/cgroup", "*", testCgroupParent))
	for _, dir := range dirs {
		_ = os.Remove(dir)
	}
	os.Exit(code)
}
