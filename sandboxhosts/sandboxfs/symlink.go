package sandboxfs

import (
	"os"

	"golang.org/x/sys/unix"
)

// Symlink makes the sandbox path p a symbolic link to target, replacing a file or link there in
// one step (a directory stays, and is an error). The parent directory must exist. target is
// stored as given and resolved by whoever follows the link, inside the sandbox.
func (r *Root) Symlink(target, p string) error {
	parent, name, err := r.parentOf(p)
	if err != nil {
		return err
	}
	defer parent.Close()
	tmp := tempName(".hangar-link-")
	if err := unix.Symlinkat(target, int(parent.Fd()), tmp); err != nil {
		return &os.PathError{Op: "symlink", Path: p, Err: err}
	}
	if err := unix.Renameat(int(parent.Fd()), tmp, int(parent.Fd()), name); err != nil {
		_ = unix.Unlinkat(int(parent.Fd()), tmp, 0)
		return &os.PathError{Op: "rename", Path: p, Err: err}
	}
	return nil
}
