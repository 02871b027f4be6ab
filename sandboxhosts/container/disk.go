package container

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// A sandbox's disk is an ext4 file system in a sparse image file of its own (Dir/disk.img),
// loop-mounted at Dir/disk. The overlay's upper and work dirs live on it, and so does anything
// else of the sandbox's that it can write (the host puts its run dir there), so the disk's size
// is the sandbox's quota: a write past it fails with ENOSPC inside the sandbox, while the host's
// file system and other sandboxes never see it. Sparse and mounted with discard, the image takes
// host space only for what the sandbox holds, and gives back what it deletes.
//
// Project quotas would do the same without loop devices, but they need a file system made with
// them and mounted with prjquota, which a host's data dir usually is not.

// MinDiskBytes is the smallest disk a sandbox gets: ext4's own metadata takes a few MiB.
const MinDiskBytes = 32 << 20

// DiskDir is where the disk of the sandbox whose Dir is dir is mounted: it holds upper/, work/
// and whatever else of the sandbox's is to count against its quota.
func DiskDir(dir string) string { return filepath.Join(dir, "disk") }

// NetNSPath is where a sandbox Dir's network namespace is bind-mounted when the host made one
// (Spec.NetNS); RemoveDir unbinds it.
func NetNSPath(dir string) string { return filepath.Join(dir, "netns") }

// UpperDir is the overlay upper dir of the sandbox whose Dir is dir, on its disk.
func UpperDir(dir string) string { return filepath.Join(DiskDir(dir), "upper") }

func diskImage(dir string) string { return filepath.Join(dir, "disk.img") }

// MountDisk gives dir a disk of size bytes mounted at DiskDir(dir), unless one is mounted
// there already. An image file left in dir (a sandbox kept across a reboot) is mounted as it
// is, whatever its size; otherwise a new one is made. Dir is created when missing. Create calls
// it; call it first to fill a new sandbox's upper dir before Create (a restore).
func (d *Driver) MountDisk(dir string, size int64) error {
	target := DiskDir(dir)
	if err := os.MkdirAll(target, 0o700); err != nil {
		return fmt.Errorf("sandbox disk: %w", err)
	}
	if mounted, err := isMountPoint(target); err != nil || mounted {
		return err
	}
	img := diskImage(dir)
	if _, err := os.Stat(img); errors.Is(err, os.ErrNotExist) {
		// A disk made ahead (spares.go) when there is one.
		if !d.spares.take(size, img) {
			if err := d.makeDisk(img, size, false); err != nil {
				return err
			}
		}
	} else if err != nil {
		return fmt.Errorf("sandbox disk: %w", err)
	}
	return mountLoop(img, target)
}

// loopAttempts bounds the retries of a free loop device that another process took first.
const loopAttempts = 16

// mountLoop attaches img to a free loop device, set to detach itself at the unmount, and mounts
// its ext4 at target: what `mount -o loop` does, without starting mount(8), which took a few
// milliseconds of every cold sandbox start. nodev and nosuid because nothing on the disk is ever
// run or opened as a device from the host's side; discard gives back the space of what the
// sandbox deletes; noinit_itable, see makeDisk.
func mountLoop(img, target string) error {
	file, err := os.OpenFile(img, os.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("sandbox disk: %w", err)
	}
	// The loop device holds the image open on its own once configured.
	defer file.Close()
	ctl, err := os.OpenFile("/dev/loop-control", os.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("sandbox disk: %w", err)
	}
	defer ctl.Close()
	for attempt := 1; ; attempt++ {
		n, err := unix.IoctlRetInt(int(ctl.Fd()), unix.LOOP_CTL_GET_FREE)
		if err != nil {
			return fmt.Errorf("sandbox disk: find a free loop device: %w", err)
		}
		dev := fmt.Sprintf("/dev/loop%d", n)
		loop, err := os.OpenFile(dev, os.O_RDWR|unix.O_CLOEXEC, 0)
		if err != nil {
			return fmt.Errorf("sandbox disk: %w", err)
		}
		cfg := unix.LoopConfig{Fd: uint32(file.Fd())}
		cfg.Info.Flags = unix.LO_FLAGS_AUTOCLEAR
		copy(cfg.Info.File_name[:len(cfg.Info.File_name)-1], img)
		err = unix.IoctlLoopConfigure(int(loop.Fd()), &cfg)
		if errors.Is(err, unix.EBUSY) && attempt < loopAttempts {
			// Another process configured it between our finding and our taking it.
			loop.Close()
			continue
		}
		if err == nil {
			err = unix.Mount(dev, target, "ext4", unix.MS_NODEV|unix.MS_NOSUID, "discard,noinit_itable")
		}
		// Closed after the mount, which holds the device from then on: with autoclear, the
		// last close of an unmounted device detaches it, so a failed mount leaves nothing.
		if cerr := loop.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return fmt.Errorf("sandbox disk: mount %s on %s: %w", img, dev, err)
		}
		return nil
	}
}

// makeDisk writes a sparse ext4 image of size bytes at img. No journal: a sandbox's files do not
// outlive a host crash (the host recovers sessions from their checkpoints), and none saves the
// journal's space and writes. No reserved blocks: the sandbox's root may fill all of it anyway.
// No resize inode: a disk never grows, and its reserved tables would take 4 MiB of host space.
// Inode tables are not zeroed (lazy_itable_init, and noinit_itable at the mount): the holes of a
// sparse file read as zeros already, so zeroing would only take host space. A new 10 GiB disk
// takes about 250 KiB of the host. A background one (a spare) runs mkfs at the lowest CPU
// priority, so as not to slow the sandboxes starting meanwhile.
func (d *Driver) makeDisk(img string, size int64, background bool) error {
	if size < MinDiskBytes {
		return fmt.Errorf("sandbox disk of %d bytes: want at least %d", size, MinDiskBytes)
	}
	f, err := os.OpenFile(img, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if err != nil {
		return fmt.Errorf("sandbox disk: %w", err)
	}
	err = f.Truncate(size)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = runTool(background, d.mkfs, "-q", "-F", "-m", "0", "-O", "^has_journal,^resize_inode", "-E", "lazy_itable_init=1,nodiscard", img)
	}
	if err != nil {
		_ = os.Remove(img)
		return fmt.Errorf("make sandbox disk of %d bytes: %w", size, err)
	}
	return nil
}

// RemoveDir unmounts everything of a sandbox's Dir (its overlay, then its disk) and deletes it.
// The sandbox must be stopped; a Dir that is not there is fine.
func (d *Driver) RemoveDir(dir string) error {
	for _, target := range []string{filepath.Join(dir, "rootfs"), DiskDir(dir), NetNSPath(dir)} {
		if err := unmountAll(target); err != nil {
			return fmt.Errorf("remove sandbox dir: %w", err)
		}
	}
	if err := os.RemoveAll(dir); err != nil {
		return fmt.Errorf("remove sandbox dir: %w", err)
	}
	return nil
}

// DiskUsage is how full a sandbox's disk is.
type DiskUsage struct {
	UsedBytes, SizeBytes int64
}

// DiskUsage reads how full the sandbox's disk is (statfs).
func (s *Sandbox) DiskUsage() (DiskUsage, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(DiskDir(s.dir), &st); err != nil {
		return DiskUsage{}, fmt.Errorf("sandbox %s disk: %w", s.id, err)
	}
	return DiskUsage{UsedBytes: int64(st.Blocks-st.Bfree) * st.Bsize, SizeBytes: int64(st.Blocks) * st.Bsize}, nil
}

// runTool runs a host tool, its output becoming the error when it fails; idle runs it at the
// lowest CPU priority (nice 19), for work nobody waits for.
func runTool(idle bool, bin string, args ...string) error {
	cmd := exec.Command(bin, args...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("%s: %w", filepath.Base(bin), err)
	}
	if idle {
		// Set after the start, so the tool may run its first instants at normal priority:
		// harmless.
		_ = unix.Setpriority(unix.PRIO_PROCESS, cmd.Process.Pid, 19)
	}
	if err := cmd.Wait(); err != nil {
		return fmt.Errorf("%s: %w: %s", filepath.Base(bin), err, bytes.TrimSpace(out.Bytes()))
	}
	return nil
}

// sbinDirs are searched after PATH for host tools: services often start with a PATH that lacks
// them.
var sbinDirs = []string{"/usr/local/sbin", "/usr/sbin", "/sbin"}

// lookTool finds a host tool on PATH or in the sbin dirs; pkg names the Debian package that
// has it, for the error.
func lookTool(name, pkg string) (string, error) {
	if p, err := exec.LookPath(name); err == nil {
		return p, nil
	}
	for _, dir := range sbinDirs {
		if p, err := exec.LookPath(filepath.Join(dir, name)); err == nil {
			return p, nil
		}
	}
	return "", fmt.Errorf("runtime driver: %s not found on PATH or in %v (install it: apt-get install %s)", name, sbinDirs, pkg)
}
