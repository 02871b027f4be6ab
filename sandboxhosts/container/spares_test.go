package container

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/hangar-dev/hangar/internal/testkit"
)

// spareDriver is a test driver that keeps keep spare disks of each size.
func spareDriver(tb testing.TB, stateDir string, keep int) *Driver {
	tb.Helper()
	requirements(tb)
	d, err := NewDriver(DriverOptions{StateDir: stateDir, CgroupParent: testCgroupParent, Subreaper: true, SpareDisks: keep})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = d.Close() })
	return d
}

// readySpares waits until the driver holds n spare disks of size and returns their paths.
func readySpares(tb testing.TB, d *Driver, size int64, n int) []string {
	tb.Helper()
	var list []string
	testkit.Eventually(tb, 30*time.Second, "spare disks made", func() (bool, string) {
		d.spares.mu.Lock()
		defer d.spares.mu.Unlock()
		list = append([]string(nil), d.spares.ready[size]...)
		return len(list) >= n, fmt.Sprintf("%d of %d ready", len(list), n)
	})
	return list
}

func inode(tb testing.TB, path string) uint64 {
	tb.Helper()
	var st unix.Stat_t
	if err := unix.Stat(path, &st); err != nil {
		tb.Fatal(err)
	}
	return st.Ino
}

// The attack: a sandbox writes a file (or plants a setuid binary, a symlink) on its disk and
// hopes the next session's sandbox is given that disk. A spare disk is made fresh, never mounted,
// and handed out once, so the next sandbox sees none of it.
func TestASpareDiskIsFreshAndGoesToOneSandboxOnly(t *testing.T) {
	d := spareDriver(t, t.TempDir(), 1)
	lower := testImage(t)
	ctx := context.Background()

	first := create(t, d, diskSpec(t, lower)) // no spare yet: makes its own, and asks for spares
	sh(t, first, "echo secret > /root/left-behind && cp /bin/busybox /root/planted && chmod 4755 /root/planted && sync")
	spares := readySpares(t, d, testDiskBytes, 1)
	spareInode := inode(t, spares[0])
	if err := first.Remove(ctx); err != nil {
		t.Fatal(err)
	}

	next := create(t, d, diskSpec(t, lower))
	if got := inode(t, diskImage(next.Dir())); got != spareInode {
		t.Fatalf("the next sandbox's disk is inode %d, not the spare's %d: no spare was taken", got, spareInode)
	}
	if _, err := os.Stat(spares[0]); !os.IsNotExist(err) {
		t.Errorf("the taken spare is still among the spares (%v)", err)
	}
	if got := sh(t, next, "ls -A /root; ls -A /"); got != "bin\ndev\netc\nproc\nroot\nsys\ntmp" {
		t.Errorf("the sandbox on a spare disk sees:\n%s\nwant only its image's files", got)
	}
	if u, err := next.DiskUsage(); err != nil || u.SizeBytes > testDiskBytes || u.SizeBytes < testDiskBytes*9/10 {
		t.Errorf("DiskUsage of the spare disk = %+v, %v; want a %d-byte disk", u, err, testDiskBytes)
	}

	// Two sandboxes at once never share a disk, spare or not.
	readySpares(t, d, testDiskBytes, 1)
	a := create(t, d, diskSpec(t, lower))
	b := create(t, d, diskSpec(t, lower))
	if ia, ib := inode(t, diskImage(a.Dir())), inode(t, diskImage(b.Dir())); ia == ib {
		t.Errorf("two sandboxes share the disk inode %d", ia)
	}
	sh(t, a, "echo mine > /root/a")
	if got := sh(t, b, "ls -A /root"); got != "" {
		t.Errorf("the other sandbox's /root holds %q", got)
	}
}

func TestSpareDisksAreDeletedByCloseAndByTheNextDriver(t *testing.T) {
	cases := []struct {
		name string
		end  func(t *testing.T, d *Driver, stateDir string)
	}{
		{"Close deletes them, and later sandboxes make their own disks", func(t *testing.T, d *Driver, _ string) {
			if err := d.Close(); err != nil {
				t.Fatal(err)
			}
			sb := create(t, d, diskSpec(t, testImage(t)))
			if got := sh(t, sb, "echo ok"); got != "ok" {
				t.Errorf("a sandbox created after Close answered %q", got)
			}
		}},
		{"a driver left them (a crash): the next driver on the state dir deletes them", func(t *testing.T, _ *Driver, stateDir string) {
			spareDriver(t, stateDir, 0)
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			stateDir := t.TempDir()
			d := spareDriver(t, stateDir, 2)
			create(t, d, diskSpec(t, testImage(t)))
			readySpares(t, d, testDiskBytes, 2)
			c.end(t, d, stateDir)
			if left, _ := filepath.Glob(filepath.Join(stateDir, "spare-disks", "*")); len(left) != 0 {
				t.Errorf("spare disks left: %v", left)
			}
		})
	}
}
