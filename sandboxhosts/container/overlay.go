package container

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// overlayOptions is the mount data for a sandbox's overlay. It pins the
// features that would make the upper dir depend on the exact lower dirs or
// on this mount: index=off (no lower/upper identity recorded, so an upper
// restored elsewhere mounts), redirect_dir=off and metacopy=off (every
// change in upper is whole: renamed dirs are copied, copied-up files carry
// their data), so that the upper dir alone is a complete diff to snapshot.
func overlayOptions(lower []string, upper, work string) (string, error) {
	for _, d := range append([]string{upper, work}, lower...) {
		if strings.ContainsAny(d, ",:\\") {
			return "", fmt.Errorf("overlay dir %q: ',', ':' and '\\' are not supported in paths", d)
		}
	}
	data := fmt.Sprintf("lowerdir=%s,upperdir=%s,workdir=%s,index=off,redirect_dir=off,metacopy=off",
		strings.Join(lower, ":"), upper, work)
	// mount(2) takes at most one page of option data.
	if len(data) >= os.Getpagesize() {
		return "", fmt.Errorf("overlay options are %d bytes (%d lower dirs), more than mount(2) takes (%d)",
			len(data), len(lower), os.Getpagesize()-1)
	}
	return data, nil
}

// mountOverlay mounts the overlay at target. The mount options name the dirs through links in
// layers/ beside target, relative to target's parent (mounted from a thread whose working
// directory that is), because the kernel shows a mount's options, verbatim, in every
// /proc/<pid>/mountinfo: the sandbox reads "lowerdir=layers/0,upperdir=layers/upper", not where
// the host keeps its images and sandboxes.
func mountOverlay(lower []string, upper, work, target string) error {
	for _, d := range lower {
		fi, err := os.Stat(d)
		if err != nil {
			return fmt.Errorf("lower dir: %w", err)
		}
		if !fi.IsDir() {
			return fmt.Errorf("lower dir %s is not a directory", d)
		}
	}
	base := filepath.Dir(target)
	links := filepath.Join(base, "layers")
	if err := os.RemoveAll(links); err != nil {
		return fmt.Errorf("overlay links: %w", err)
	}
	if err := os.Mkdir(links, 0o700); err != nil {
		return fmt.Errorf("overlay links: %w", err)
	}
	link := func(name, dir string) (string, error) {
		if err := os.Symlink(dir, filepath.Join(links, name)); err != nil {
			return "", fmt.Errorf("overlay links: %w", err)
		}
		return "layers/" + name, nil
	}
	rel := make([]string, len(lower))
	for i, d := range lower {
		var err error
		if rel[i], err = link(strconv.Itoa(i), d); err != nil {
			return err
		}
	}
	relUpper, err := link("upper", upper)
	if err != nil {
		return err
	}
	relWork, err := link("work", work)
	if err != nil {
		return err
	}
	data, err := overlayOptions(rel, relUpper, relWork)
	if err != nil {
		return err
	}
	err = inDir(base, func() error {
		return unix.Mount("overlay", filepath.Base(target), "overlay", unix.MS_NODEV, data)
	})
	if err != nil {
		return fmt.Errorf("mount overlay at %s: %w", target, err)
	}
	return nil
}

// inDir runs fn on an OS thread of its own whose working directory is dir, so that relative
// paths in fn resolve from dir while the process's working directory stays where it is.
func inDir(dir string, fn func() error) error {
	errc := make(chan error, 1)
	go func() {
		// Never unlocked: the thread's own working directory must not serve other goroutines,
		// so the runtime ends the thread with this goroutine.
		runtime.LockOSThread()
		if err := unix.Unshare(unix.CLONE_FS); err != nil {
			errc <- fmt.Errorf("unshare the working directory: %w", err)
			return
		}
		if err := unix.Chdir(dir); err != nil {
			errc <- fmt.Errorf("chdir %s: %w", dir, err)
			return
		}
		errc <- fn()
	}()
	return <-errc
}

// unmountAll unmounts everything mounted at target, which is fine when
// nothing is. A host process with a file open in the rootfs makes the
// unmount busy for a moment, so busy is retried briefly; a lazy unmount is
// never used, because it would leave the upper dir in use and a later mount
// of it would fail.
func unmountAll(target string) error {
	for tries := 0; ; {
		mounted, err := isMountPoint(target)
		if err != nil || !mounted {
			return err
		}
		err = unix.Unmount(target, 0)
		switch {
		case err == nil, errors.Is(err, unix.EINVAL), errors.Is(err, unix.ENOENT):
		case errors.Is(err, unix.EBUSY) && tries < 50:
			tries++
			time.Sleep(20 * time.Millisecond)
		default:
			return fmt.Errorf("unmount %s: %w", target, err)
		}
	}
}

// isMountPoint says whether something is mounted at path in this process's
// mount namespace.
func isMountPoint(path string) (bool, error) {
	points, err := mountPoints()
	if err != nil {
		return false, err
	}
	_, ok := points[path]
	return ok, nil
}

// mountPoints returns the mount points of this process's mount namespace.
func mountPoints() (map[string]struct{}, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil, fmt.Errorf("read mount table: %w", err)
	}
	defer f.Close()
	points := map[string]struct{}{}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		// Fields: id parent major:minor root mountpoint options ...
		fields := strings.SplitN(sc.Text(), " ", 6)
		if len(fields) < 5 {
			continue
		}
		points[unescapeMountPath(fields[4])] = struct{}{}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read mount table: %w", err)
	}
	return points, nil
}

// unescapeMountPath undoes the kernel's octal escapes (\040 for space, etc.).
func unescapeMountPath(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+4 <= len(s) {
			if v, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(v))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}
