package container

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// testDiskBytes is a quota small enough to fill in a test.
const testDiskBytes = 64 << 20

func diskSpec(tb testing.TB, lower string) Spec {
	spec := sleepSpec(tb, lower)
	spec.Resources.DiskBytes = testDiskBytes
	return spec
}

// hostFree is the free space of the file system holding dir.
func hostFree(tb testing.TB, dir string) int64 {
	tb.Helper()
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		tb.Fatal(err)
	}
	return int64(st.Bavail) * st.Bsize
}

// allocated is the host space a file takes (its blocks, not its apparent size).
func allocated(tb testing.TB, path string) int64 {
	tb.Helper()
	var st unix.Stat_t
	if err := unix.Stat(path, &st); err != nil {
		tb.Fatal(err)
	}
	return st.Blocks * 512
}

// The attack: a sandbox wrote 2 GiB, and it all landed on the host's disk.
func TestAWritePastTheDiskQuotaGetsENOSPCAndTheHostAndOtherSandboxesDoNot(t *testing.T) {
	d := newTestDriver(t, "")
	lower := testImage(t)
	greedy := create(t, d, diskSpec(t, lower))
	other := create(t, d, diskSpec(t, lower))
	freeBefore := hostFree(t, greedy.Dir())
	if got := allocated(t, diskImage(other.Dir())); got > 4<<20 {
		t.Errorf("a new, sparse disk takes %d bytes of the host", got)
	}

	out, err := execIn(t, greedy, "dd", "if=/dev/zero", "of=/root/big", "bs=1M", "count=2048")
	if err == nil || !strings.Contains(out, "No space left on device") {
		t.Fatalf("dd of 2 GiB into a %d-byte disk: %v: %s; want ENOSPC", testDiskBytes, err, out)
	}
	if got := allocated(t, diskImage(greedy.Dir())); got > testDiskBytes {
		t.Errorf("the full disk's image takes %d bytes of the host, more than its %d-byte quota", got, testDiskBytes)
	}
	if used := freeBefore - hostFree(t, greedy.Dir()); used > 2*testDiskBytes {
		t.Errorf("the host lost %d bytes of free space to a sandbox with a %d-byte quota", used, testDiskBytes)
	}
	if u, err := greedy.DiskUsage(); err != nil || u.SizeBytes > testDiskBytes || u.UsedBytes < u.SizeBytes*9/10 {
		t.Errorf("DiskUsage of the full disk = %+v, %v", u, err)
	}
	sh(t, other, "dd if=/dev/zero of=/root/fits bs=1M count=16 2>/dev/null && sync")
	if got := sh(t, other, "wc -c < /root/fits"); got != "16777216" {
		t.Errorf("another sandbox's 16 MiB write kept %s bytes", got)
	}
	// Deleting gives the space back, to the sandbox and (discard) to the host.
	sh(t, greedy, "rm /root/big && dd if=/dev/zero of=/root/again bs=1M count=16 2>/dev/null && sync")
	if got := allocated(t, diskImage(greedy.Dir())); got > testDiskBytes/2 {
		t.Errorf("after the sandbox deleted its big file its disk image still takes %d bytes of the host", got)
	}
}

func TestTheDiskKeepsTheUpperDirAcrossStopAndARemount(t *testing.T) {
	d := newTestDriver(t, "")
	spec := diskSpec(t, testImage(t))
	ctx := context.Background()
	sb := create(t, d, spec)
	sh(t, sb, "echo kept > /root/file")
	if err := sb.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(filepath.Join(sb.UpperDir(), "root", "file")); err != nil || string(b) != "kept\n" {
		t.Fatalf("upper dir after Stop: %q, %v", b, err)
	}
	// A reboot unmounts the disk; its image stays in Dir and is mounted again. Its loop device
	// went with the unmount.
	img := diskImage(spec.Dir)
	if devs := loopDevicesOf(t, img); len(devs) != 1 {
		t.Fatalf("the mounted disk is on loop devices %v, want one", devs)
	}
	if err := unix.Unmount(DiskDir(spec.Dir), 0); err != nil {
		t.Fatal(err)
	}
	if devs := loopDevicesOf(t, img); len(devs) != 0 {
		t.Fatalf("loop devices %v stayed attached after the unmount", devs)
	}
	sb = create(t, d, spec)
	if got := sh(t, sb, "cat /root/file"); got != "kept" {
		t.Errorf("file after a remount of the disk = %q", got)
	}
	if err := sb.Remove(ctx); err != nil {
		t.Fatal(err)
	}
	if mounted, err := isMountPoint(DiskDir(spec.Dir)); err != nil || mounted {
		t.Errorf("disk still mounted after Remove (%v)", err)
	}
	if devs := loopDevicesOf(t, img); len(devs) != 0 {
		t.Errorf("loop devices %v stayed attached after Remove", devs)
	}
	if _, err := os.Stat(spec.Dir); !os.IsNotExist(err) {
		t.Errorf("Dir after Remove: %v", err)
	}
}

// loopDevicesOf lists the loop devices whose backing file is img.
func loopDevicesOf(t *testing.T, img string) []string {
	t.Helper()
	files, err := filepath.Glob("/sys/block/loop*/loop/backing_file")
	if err != nil {
		t.Fatal(err)
	}
	var devs []string
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err == nil && strings.TrimSpace(string(b)) == img {
			devs = append(devs, filepath.Base(filepath.Dir(filepath.Dir(f))))
		}
	}
	return devs
}
