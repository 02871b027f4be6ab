package container

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// SharedFiles is a small read-only tmpfs holding copies of host files that every sandbox
// bind-mounts read-only (the supervisor binary). A bind mount's root field in the sandbox's
// /proc/self/mountinfo is its source's path inside the source's file system, so a file bound
// from the host's data dir shows that host path (and the host disk's device); bound from here it
// shows only "/<name>" on a tmpfs. One copy serves every sandbox of the host, so creating a
// sandbox copies nothing.
type SharedFiles struct {
	dir string
}

// sharedSource is the tmpfs's source as mount tables show it.
const sharedSource = "hangar"

// MountSharedFiles mounts a tmpfs at dir, copies each files[name] (a host path) to dir/name
// (mode 0555) and makes the tmpfs read-only. Whatever was mounted at dir (a crashed run's copy)
// is detached first; sandboxes still holding it keep their view.
func MountSharedFiles(dir string, files map[string]string) (*SharedFiles, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("shared files: %w", err)
	}
	for {
		if err := unix.Unmount(dir, unix.MNT_DETACH); err != nil {
			if !errors.Is(err, unix.EINVAL) {
				return nil, fmt.Errorf("shared files: detach the old mount at %s: %w", dir, err)
			}
			break // not a mount point (any more)
		}
	}
	var size int64 = 64 << 10
	for name, src := range files {
		if name == "" || filepath.Base(name) != name || name == "." || name == ".." {
			return nil, fmt.Errorf("shared files: %q is not a file name", name)
		}
		fi, err := os.Stat(src)
		if err != nil {
			return nil, fmt.Errorf("shared files: %w", err)
		}
		size += fi.Size() + 4<<10
	}
	opts := fmt.Sprintf("mode=0755,size=%d,nr_inodes=%d", size, len(files)+16)
	if err := unix.Mount(sharedSource, dir, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, opts); err != nil {
		return nil, fmt.Errorf("shared files: mount a tmpfs at %s: %w", dir, err)
	}
	s := &SharedFiles{dir: dir}
	for name, src := range files {
		if err := copyFile(src, filepath.Join(dir, name), 0o555); err != nil {
			_ = s.Unmount()
			return nil, fmt.Errorf("shared files: %w", err)
		}
	}
	// Read-only for the host as well: no process of the host can change what sandboxes run.
	if err := unix.Mount("", dir, "", unix.MS_REMOUNT|unix.MS_RDONLY|unix.MS_NOSUID|unix.MS_NODEV, opts); err != nil {
		_ = s.Unmount()
		return nil, fmt.Errorf("shared files: make %s read-only: %w", dir, err)
	}
	return s, nil
}

// Path is the host path of the copy named name, for a Mount's Source.
func (s *SharedFiles) Path(name string) string { return filepath.Join(s.dir, name) }

// Unmount detaches the tmpfs; sandboxes that still bind a file of it keep it until they go.
func (s *SharedFiles) Unmount() error {
	if err := unix.Unmount(s.dir, unix.MNT_DETACH); err != nil && !errors.Is(err, unix.EINVAL) {
		return fmt.Errorf("shared files: unmount %s: %w", s.dir, err)
	}
	return nil
}

func copyFile(src, dst string, mode os.FileMode) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}
