// Package sandboxfs opens files inside a sandbox's root filesystem from the host, confined to it
// by the kernel: every path resolves with openat2 and RESOLVE_IN_ROOT, so absolute paths,
// symlinks and ".." mean what they mean inside the sandbox and can never reach the host's files;
// magic links (/proc/*/root and friends) are refused outright. Paths given by API callers with
// ".." components are refused before any lookup: they are never needed to name a file, and
// refusing them keeps what a caller asked for and what was opened the same.
package sandboxfs

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path"
	"strings"

	"golang.org/x/sys/unix"
)

// ErrBadPath is a path the API refuses to look up: empty, relative, with NUL or "..".
var ErrBadPath = errors.New("bad sandbox path")

// ErrEscape is a lookup the kernel refused because it would leave the sandbox's root or
// went through a magic link.
var ErrEscape = errors.New("path leaves the sandbox")

// MaxPathLen bounds a path, as PATH_MAX does.
const MaxPathLen = 4096

// Clean checks a sandbox path given by a caller and returns it relative to the root. Paths are
// absolute, as the sandbox sees them.
func Clean(p string) (string, error) {
	switch {
	case p == "":
		return "", fmt.Errorf("%w: empty", ErrBadPath)
	case len(p) > MaxPathLen:
		return "", fmt.Errorf("%w: longer than %d bytes", ErrBadPath, MaxPathLen)
	case strings.ContainsRune(p, 0):
		return "", fmt.Errorf("%w: contains NUL", ErrBadPath)
	case !strings.HasPrefix(p, "/"):
		return "", fmt.Errorf("%w: %q is not absolute", ErrBadPath, p)
	}
	for _, part := range strings.Split(p, "/") {
		if part == ".." {
			return "", fmt.Errorf("%w: %q has a '..' component", ErrBadPath, p)
		}
	}
	rel := strings.TrimPrefix(path.Clean(p), "/")
	if rel == "" {
		rel = "."
	}
	return rel, nil
}

// Root is a sandbox's root filesystem, opened once.
type Root struct {
	dir *os.File
}

// Open opens the root directory dir (the host path of the sandbox's merged root).
func Open(dir string) (*Root, error) {
	f, err := os.OpenFile(dir, unix.O_DIRECTORY|unix.O_PATH|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("open sandbox root: %w", err)
	}
	return &Root{dir: f}, nil
}

// Close releases the root.
func (r *Root) Close() error { return r.dir.Close() }

const resolve = unix.RESOLVE_IN_ROOT | unix.RESOLVE_NO_MAGICLINKS

func (r *Root) openat(rel string, flags int, mode uint32) (*os.File, error) {
	how := unix.OpenHow{Flags: uint64(flags | unix.O_CLOEXEC), Mode: uint64(mode), Resolve: resolve}
	for {
		fd, err := unix.Openat2(int(r.dir.Fd()), rel, &how)
		if errors.Is(err, unix.EINTR) || errors.Is(err, unix.EAGAIN) {
			// EAGAIN: a rename raced the lookup; the kernel asks us to retry.
			continue
		}
		if errors.Is(err, unix.EXDEV) || errors.Is(err, unix.ELOOP) {
			return nil, fmt.Errorf("%w: %s: %v", ErrEscape, rel, err)
		}
		if err != nil {
			return nil, &os.PathError{Op: "open", Path: "/" + rel, Err: err}
		}
		return os.NewFile(uintptr(fd), "/"+rel), nil
	}
}

// OpenFile opens the sandbox path p for reading.
func (r *Root) OpenFile(p string) (*os.File, error) {
	rel, err := Clean(p)
	if err != nil {
		return nil, err
	}
	// O_NONBLOCK: opening a fifo must not hang the host; callers check the file's type.
	return r.openat(rel, unix.O_RDONLY|unix.O_NONBLOCK, 0)
}

// Upload is a file being written: bytes go to a hidden temporary file in the target's
// directory, and Commit renames it over the target in one step, so readers see the old file
// or the whole new one.
type Upload struct {
	*os.File
	parent *os.File
	tmp    string
	name   string
}

// Create starts writing the sandbox path p with the given permission bits. The parent
// directory must exist.
func (r *Root) Create(p string, mode os.FileMode) (*Upload, error) {
	parent, name, err := r.parentOf(p)
	if err != nil {
		return nil, err
	}
	tmp := tempName(".hangar-upload-")
	fd, err := unix.Openat(int(parent.Fd()), tmp, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, uint32(mode.Perm()))
	if err != nil {
		parent.Close()
		return nil, &os.PathError{Op: "create", Path: p, Err: err}
	}
	// The umask must not narrow what the caller asked for.
	if err := unix.Fchmod(fd, uint32(mode.Perm())); err != nil {
		unix.Close(fd)
		_ = unix.Unlinkat(int(parent.Fd()), tmp, 0)
		parent.Close()
		return nil, &os.PathError{Op: "chmod", Path: p, Err: err}
	}
	return &Upload{File: os.NewFile(uintptr(fd), p), parent: parent, tmp: tmp, name: name}, nil
}

// MkdirAll makes the sandbox directory p and any missing parents with perm, as mkdir -p does.
// Each level is made inside its parent opened under the root, so a symlink on the way is
// followed only as far as the sandbox reaches.
func (r *Root) MkdirAll(p string, perm os.FileMode) error {
	rel, err := Clean(p)
	if err != nil {
		return err
	}
	if rel == "." {
		return nil
	}
	parent := "."
	for _, name := range strings.Split(rel, "/") {
		dir, err := r.openat(parent, unix.O_DIRECTORY|unix.O_PATH, 0)
		if err != nil {
			return err
		}
		err = unix.Mkdirat(int(dir.Fd()), name, uint32(perm.Perm()))
		dir.Close()
		if err != nil && !errors.Is(err, unix.EEXIST) {
			return &os.PathError{Op: "mkdir", Path: "/" + path.Join(parent, name), Err: err}
		}
		parent = path.Join(parent, name)
	}
	return nil
}

// Lchown gives the sandbox path p (not a final symlink's target) to uid and gid.
func (r *Root) Lchown(p string, uid, gid int) error {
	dir, name, err := r.parentOf(p)
	if err != nil {
		return err
	}
	defer dir.Close()
	if err := unix.Fchownat(int(dir.Fd()), name, uid, gid, unix.AT_SYMLINK_NOFOLLOW|unix.AT_EMPTY_PATH); err != nil {
		return fmt.Errorf("chown %s: %w", p, err)
	}
	return nil
}

// parentOf opens the directory holding the sandbox path p and returns it with p's last name.
func (r *Root) parentOf(p string) (*os.File, string, error) {
	rel, err := Clean(p)
	if err != nil {
		return nil, "", err
	}
	dir, name := path.Split(rel)
	if name == "" || name == "." {
		return nil, "", fmt.Errorf("%w: %q names no file", ErrBadPath, p)
	}
	parent, err := r.openat(cmpDot(dir), unix.O_DIRECTORY|unix.O_PATH, 0)
	if err != nil {
		return nil, "", err
	}
	return parent, name, nil
}

// tempName is a fresh name for a file made beside its target and then renamed over it.
func tempName(prefix string) string {
	suffix := make([]byte, 8)
	_, _ = rand.Read(suffix)
	return prefix + hex.EncodeToString(suffix)
}

func cmpDot(dir string) string {
	if dir = strings.TrimSuffix(dir, "/"); dir == "" {
		return "."
	}
	return dir
}

// Commit makes the written bytes the target file.
func (u *Upload) Commit() error {
	defer u.parent.Close()
	if err := u.File.Close(); err != nil {
		_ = unix.Unlinkat(int(u.parent.Fd()), u.tmp, 0)
		return fmt.Errorf("close upload: %w", err)
	}
	if err := unix.Renameat(int(u.parent.Fd()), u.tmp, int(u.parent.Fd()), u.name); err != nil {
		_ = unix.Unlinkat(int(u.parent.Fd()), u.tmp, 0)
		return &os.PathError{Op: "rename", Path: u.Name(), Err: err}
	}
	return nil
}

// Abort drops the upload, leaving the target as it was.
func (u *Upload) Abort() {
	_ = u.File.Close()
	_ = unix.Unlinkat(int(u.parent.Fd()), u.tmp, 0)
	_ = u.parent.Close()
}
