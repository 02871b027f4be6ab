package sandboxfs

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"path"

	"golang.org/x/sys/unix"
)

// Symlink makes the sandbox path p a symbolic link to target, replacing a file or link there in
// one step (a directory stays, and is an error). The parent directory must exist. target is
// stored as given and resolved by whoever follows the link, inside the sandbox.
func (r *Root) Symlink(target, p string) error {
	rel, err := Clean(p)
	if err != nil {
		return err
	}
	dir, name := path.Split(rel)
	if name == "" || name == "." {
		return fmt.Errorf("%w: %q names no file", ErrBadPath, p)
	}
	parent, err := r.openat(cmpDot(dir), unix.O_DIRECTORY|unix.O_PATH, 0)
	if err != nil {
		return err
	}
	defer parent.Close()
	suffix := make([]byte, 8)
	_, _ = rand.Read(suffix)
	tmp := ".hangar-link-" + hex.EncodeToString(suffix)
	if err := unix.Symlinkat(target, int(parent.Fd()), tmp); err != nil {
		return &os.PathError{Op: "symlink", Path: p, Err: err}
	}
	if err := unix.Renameat(int(parent.Fd()), tmp, int(parent.Fd()), name); err != nil {
		_ = unix.Unlinkat(int(parent.Fd()), tmp, 0)
		return &os.PathError{Op: "rename", Path: p, Err: err}
	}
	return nil
}
