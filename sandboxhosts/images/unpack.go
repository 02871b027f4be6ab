package images

import (
	"archive/tar"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// ErrUnsafeLayer marks a layer refused because one of its entries tries to
// reach outside the layer directory (or is otherwise a clear attack). The whole
// layer is refused: nothing of it is kept.
var ErrUnsafeLayer = errors.New("unsafe layer")

const (
	maxNameBytes      = 4096 // PATH_MAX: the kernel refuses longer paths anyway
	maxComponentBytes = 255  // NAME_MAX
	maxLinkTarget     = 4095

	whiteoutPrefix = ".wh."
	whiteoutMeta   = ".wh..wh."
	whiteoutOpaque = ".wh..wh..opq"

	overlayOpaqueXattr = "trusted.overlay.opaque"
	paxXattrPrefix     = "SCHILY.xattr."
)

// resolveInLayer is how every path inside a layer is resolved: ".." and
// absolute symlinks stay inside the root, magic links (/proc/self/...) are
// refused, and so is any symlink on the way. Entries of a tar written from a
// real file system never pass through a symlink, so one that does is an attack.
const resolveInLayer = unix.RESOLVE_IN_ROOT | unix.RESOLVE_NO_MAGICLINKS | unix.RESOLVE_NO_SYMLINKS

// trustedXattr says which extended attributes a layer may set. user.* is
// harmless and security.capability is how images ship file capabilities (ping).
// trusted.* would let a layer forge overlay metadata (redirects, metacopy) and
// security.selinux/system.* belong to the host, so they are skipped.
func trustedXattr(name string) bool {
	return strings.HasPrefix(name, "user.") || name == "security.capability"
}

// skippedEntry is an entry (or part of one) that was deliberately not
// created, with the reason.
type skippedEntry struct {
	Name   string
	Reason string
}

// unpacker writes one layer's tar stream into an empty directory. Every entry
// is created relative to a directory fd opened with openat2(resolveInLayer), so
// the kernel, not string checks, keeps writes inside the layer.
type unpacker struct {
	root int

	// The parent directory of the previous entry stays open: tars list a
	// directory's entries together, so this saves most openat2 calls.
	parentName string
	parentFD   int

	// files holds the regular files and symlinks created so far: the only
	// targets a hardlink may name.
	files map[string]bool
	// dirTimes holds directory times, applied once all entries exist because
	// creating a child changes its parent's mtime.
	dirTimes map[string]time.Time

	skipped []skippedEntry
	buf     []byte
	// tap, when not nil, is given every regular file's content as it is written.
	tap LayerTap
}

// unpackTar extracts the tar stream r into dir, which must exist and be empty, with tap (nil:
// none) given the regular files' content as it is written.
func unpackTar(r io.Reader, dir string, tap LayerTap) ([]skippedEntry, error) {
	root, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("open layer dir: %w", err)
	}
	u := &unpacker{
		root:     root,
		parentFD: -1,
		files:    map[string]bool{},
		dirTimes: map[string]time.Time{},
		buf:      make([]byte, 128<<10),
		tap:      tap,
	}
	defer u.close()

	tr := tar.NewReader(r)
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			break
		}
		// ErrInsecurePath only appears under GODEBUG=tarinsecurepath=0; names are
		// checked below in any case.
		if err != nil && !errors.Is(err, tar.ErrInsecurePath) {
			return nil, fmt.Errorf("read tar: %w", err)
		}
		if err := u.entry(hdr, tr); err != nil {
			return nil, fmt.Errorf("entry %s: %w", quoteName(hdr.Name), err)
		}
	}
	if err := u.applyDirTimes(); err != nil {
		return nil, err
	}
	return u.skipped, nil
}

func (u *unpacker) close() {
	u.forgetParent()
	unix.Close(u.root)
}

func (u *unpacker) skip(name, reason string) {
	u.skipped = append(u.skipped, skippedEntry{Name: name, Reason: reason})
}

// cleanName turns a tar name into a path relative to the layer root ("" is the
// root itself). Leading slashes are dropped (an absolute name means "from the
// image root"); a ".." component is refused, since no tool writing real layers
// produces one.
func cleanName(name string) (string, error) {
	if strings.IndexByte(name, 0) >= 0 {
		return "", fmt.Errorf("%w: name contains a NUL byte", ErrUnsafeLayer)
	}
	if len(name) > maxNameBytes {
		return "", fmt.Errorf("%w: name is %d bytes, longer than %d", ErrUnsafeLayer, len(name), maxNameBytes)
	}
	var parts []string
	for _, p := range strings.Split(name, "/") {
		switch {
		case p == "" || p == ".":
			continue
		case p == "..":
			return "", fmt.Errorf("%w: name has a \"..\" component", ErrUnsafeLayer)
		case len(p) > maxComponentBytes:
			return "", fmt.Errorf("%w: name component is %d bytes, longer than %d", ErrUnsafeLayer, len(p), maxComponentBytes)
		}
		parts = append(parts, p)
	}
	return strings.Join(parts, "/"), nil
}

// quoteName quotes a tar name for an error message, shortened so that an
// absurdly long name does not produce an absurdly long error.
func quoteName(name string) string {
	const keep = 128
	if len(name) > keep {
		return fmt.Sprintf("%q…(%d bytes)", name[:keep], len(name))
	}
	return fmt.Sprintf("%q", name)
}

func splitName(name string) (dir, base string) {
	dir, base = path.Split(name)
	return strings.TrimSuffix(dir, "/"), base
}

func (u *unpacker) entry(hdr *tar.Header, body io.Reader) error {
	name, err := cleanName(hdr.Name)
	if err != nil {
		return err
	}
	if hdr.Typeflag == tar.TypeXGlobalHeader {
		return nil
	}
	if name == "" {
		if hdr.Typeflag != tar.TypeDir {
			return fmt.Errorf("%w: the layer root can only be a directory", ErrUnsafeLayer)
		}
		return u.setDirMeta(u.root, "", hdr)
	}
	dir, base := splitName(name)
	if strings.HasPrefix(base, whiteoutPrefix) {
		return u.whiteout(dir, base)
	}

	switch hdr.Typeflag {
	case tar.TypeDir:
		return u.dir(dir, base, hdr)
	case tar.TypeReg: // archive/tar reads the old TypeRegA as TypeReg
		return u.file(dir, base, hdr, body)
	case tar.TypeSymlink:
		return u.symlink(dir, base, hdr)
	case tar.TypeLink:
		return u.hardlink(dir, base, hdr)
	case tar.TypeFifo:
		return u.fifo(dir, base, hdr)
	case tar.TypeChar, tar.TypeBlock:
		// Device nodes in a rootfs would hand the sandbox raw host devices; the
		// runtime provides /dev. Base images do ship /dev nodes, so skip rather
		// than refuse.
		u.skip(name, fmt.Sprintf("device node %d:%d not created", hdr.Devmajor, hdr.Devminor))
		return nil
	default:
		u.skip(name, fmt.Sprintf("unsupported tar entry type %q", hdr.Typeflag))
		return nil
	}
}

// openDir opens the directory name (relative to at) with resolveInLayer.
func openDir(at int, name string) (int, error) {
	if name == "" {
		name = "."
	}
	how := &unix.OpenHow{
		Flags:   unix.O_RDONLY | unix.O_DIRECTORY | unix.O_CLOEXEC,
		Resolve: resolveInLayer,
	}
	for {
		fd, err := unix.Openat2(at, name, how)
		// EAGAIN: a rename raced the lookup; the kernel asks for a retry.
		if err == unix.EINTR || err == unix.EAGAIN {
			continue
		}
		if err == unix.ELOOP || err == unix.EXDEV {
			return -1, fmt.Errorf("%w: path %q crosses a symlink", ErrUnsafeLayer, name)
		}
		return fd, err
	}
}

// parent returns an fd for the directory dir, creating missing directories the
// way tar does. The fd belongs to the unpacker: callers must not close it.
func (u *unpacker) parent(dir string) (int, error) {
	if dir == "" {
		return u.root, nil
	}
	if u.parentFD >= 0 && u.parentName == dir {
		return u.parentFD, nil
	}
	fd, err := openDir(u.root, dir)
	if errors.Is(err, unix.ENOENT) {
		fd, err = u.mkdirAll(dir)
	}
	if err != nil {
		return -1, fmt.Errorf("open parent %q: %w", dir, err)
	}
	u.forgetParent()
	u.parentName, u.parentFD = dir, fd
	return fd, nil
}

func (u *unpacker) forgetParent() {
	if u.parentFD >= 0 {
		unix.Close(u.parentFD)
	}
	u.parentName, u.parentFD = "", -1
}

func (u *unpacker) mkdirAll(dir string) (int, error) {
	at := u.root
	for _, comp := range strings.Split(dir, "/") {
		if err := unix.Mkdirat(at, comp, 0o755); err != nil && err != unix.EEXIST {
			closeUnlessRoot(u, at)
			return -1, err
		}
		next, err := openDir(at, comp)
		closeUnlessRoot(u, at)
		if err != nil {
			return -1, err
		}
		at = next
	}
	return at, nil
}

func closeUnlessRoot(u *unpacker, fd int) {
	if fd != u.root {
		unix.Close(fd)
	}
}

// create runs mk to create base in parent. When base already exists (a tar may
// list a path twice; the later entry wins) the old entry is removed and mk runs
// again, except that an existing directory is kept for a directory entry:
// create then reports kept=true.
func (u *unpacker) create(parent int, dir, base string, isDir bool, mk func() error) (kept bool, err error) {
	err = mk()
	if err != unix.EEXIST {
		return false, err
	}
	var st unix.Stat_t
	if err := unix.Fstatat(parent, base, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return false, err
	}
	existingDir := st.Mode&unix.S_IFMT == unix.S_IFDIR
	if isDir && existingDir {
		return true, nil
	}
	if err := u.remove(parent, path.Join(dir, base), base, existingDir); err != nil {
		return false, err
	}
	return false, mk()
}

func (u *unpacker) remove(parent int, name, base string, isDir bool) error {
	if !isDir {
		delete(u.files, name)
		return unix.Unlinkat(parent, base, 0)
	}
	// Only an empty directory is replaced, like tar; it can still be the cached
	// parent (after a whiteout inside it), so drop that fd first.
	if u.parentName == name || strings.HasPrefix(u.parentName, name+"/") {
		u.forgetParent()
	}
	delete(u.dirTimes, name)
	if err := unix.Unlinkat(parent, base, unix.AT_REMOVEDIR); err != nil {
		return fmt.Errorf("replace directory %q: %w", name, err)
	}
	return nil
}

func (u *unpacker) whiteout(dir, base string) error {
	parent, err := u.parent(dir)
	if err != nil {
		return err
	}
	switch {
	case base == whiteoutOpaque:
		if err := unix.Fsetxattr(parent, overlayOpaqueXattr, []byte("y"), 0); err != nil {
			return fmt.Errorf("mark %q opaque: %w", dir, err)
		}
		return nil
	case strings.HasPrefix(base, whiteoutMeta):
		u.skip(path.Join(dir, base), "aufs metadata")
		return nil
	}
	target := strings.TrimPrefix(base, whiteoutPrefix)
	if target == "" || target == "." || target == ".." {
		return fmt.Errorf("%w: whiteout of %q", ErrUnsafeLayer, target)
	}
	// overlayfs: a 0:0 character device hides the same name in lower layers.
	_, err = u.create(parent, dir, target, false, func() error {
		return unix.Mknodat(parent, target, unix.S_IFCHR, 0)
	})
	if err != nil {
		return fmt.Errorf("whiteout %q: %w", target, err)
	}
	return nil
}

func (u *unpacker) dir(dir, base string, hdr *tar.Header) error {
	parent, err := u.parent(dir)
	if err != nil {
		return err
	}
	if _, err := u.create(parent, dir, base, true, func() error {
		return unix.Mkdirat(parent, base, 0o700)
	}); err != nil {
		return err
	}
	fd, err := openDir(parent, base)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	return u.setDirMeta(fd, path.Join(dir, base), hdr)
}

func (u *unpacker) setDirMeta(fd int, name string, hdr *tar.Header) error {
	if err := u.setFDMeta(fd, name, hdr); err != nil {
		return err
	}
	u.dirTimes[name] = hdr.ModTime
	return nil
}

// setFDMeta sets owner, mode (after chown, which clears setuid) and trusted
// xattrs on an open file or directory.
func (u *unpacker) setFDMeta(fd int, name string, hdr *tar.Header) error {
	if err := unix.Fchown(fd, hdr.Uid, hdr.Gid); err != nil {
		return fmt.Errorf("chown: %w", err)
	}
	if err := unix.Fchmod(fd, uint32(hdr.Mode)&0o7777); err != nil {
		return fmt.Errorf("chmod: %w", err)
	}
	for key, value := range hdr.PAXRecords {
		attr, ok := strings.CutPrefix(key, paxXattrPrefix)
		if !ok {
			continue
		}
		if !trustedXattr(attr) {
			u.skip(name, fmt.Sprintf("xattr %q not trusted", attr))
			continue
		}
		if err := unix.Fsetxattr(fd, attr, []byte(value), 0); err != nil {
			return fmt.Errorf("set xattr %q: %w", attr, err)
		}
	}
	return nil
}

func (u *unpacker) file(dir, base string, hdr *tar.Header, body io.Reader) error {
	parent, err := u.parent(dir)
	if err != nil {
		return err
	}
	fd := -1
	if _, err := u.create(parent, dir, base, false, func() (err error) {
		fd, err = unix.Openat(parent, base, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
		return err
	}); err != nil {
		return err
	}
	name := path.Join(dir, base)
	f := os.NewFile(uintptr(fd), name)
	if err := u.write(f, hdr.Size, body); err != nil {
		f.Close()
		return fmt.Errorf("write: %w", err)
	}
	err = u.setFDMeta(fd, name, hdr)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	u.files[name] = true
	return setTimes(parent, base, hdr.ModTime)
}

// write copies a regular file's body into f, and to the tap when there is one.
func (u *unpacker) write(f *os.File, size int64, body io.Reader) error {
	if u.tap == nil {
		_, err := io.CopyBuffer(f, body, u.buf)
		return err
	}
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil {
		return err
	}
	w := u.tap.File(st.Dev, st.Ino, size)
	if w == nil {
		_, err := io.CopyBuffer(f, body, u.buf)
		return err
	}
	_, err := io.CopyBuffer(io.MultiWriter(f, w), body, u.buf)
	return errors.Join(err, w.Close())
}

func (u *unpacker) symlink(dir, base string, hdr *tar.Header) error {
	target := hdr.Linkname
	if target == "" || len(target) > maxLinkTarget || strings.IndexByte(target, 0) >= 0 {
		return fmt.Errorf("%w: symlink target %s is empty, too long or has a NUL byte", ErrUnsafeLayer, quoteName(target))
	}
	parent, err := u.parent(dir)
	if err != nil {
		return err
	}
	// The target is stored as written: it is only ever followed inside the
	// sandbox's root, and never by the unpacker (resolveInLayer).
	if _, err := u.create(parent, dir, base, false, func() error {
		return unix.Symlinkat(target, parent, base)
	}); err != nil {
		return err
	}
	if err := unix.Fchownat(parent, base, hdr.Uid, hdr.Gid, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return fmt.Errorf("chown: %w", err)
	}
	u.files[path.Join(dir, base)] = true
	return setTimes(parent, base, hdr.ModTime)
}

func (u *unpacker) hardlink(dir, base string, hdr *tar.Header) error {
	target, err := cleanName(hdr.Linkname)
	if err != nil {
		return fmt.Errorf("hardlink target %s: %w", quoteName(hdr.Linkname), err)
	}
	if !u.files[target] {
		return fmt.Errorf("%w: hardlink target %s is not an earlier file of this layer", ErrUnsafeLayer, quoteName(hdr.Linkname))
	}
	tdir, tbase := splitName(target)
	tparent, err := openDir(u.root, tdir)
	if err != nil {
		return fmt.Errorf("open hardlink target dir: %w", err)
	}
	defer unix.Close(tparent)
	parent, err := u.parent(dir)
	if err != nil {
		return err
	}
	// flags 0: a symlink target is linked itself, never followed.
	if _, err := u.create(parent, dir, base, false, func() error {
		return unix.Linkat(tparent, tbase, parent, base, 0)
	}); err != nil {
		return fmt.Errorf("hardlink to %q: %w", target, err)
	}
	u.files[path.Join(dir, base)] = true
	return nil
}

func (u *unpacker) fifo(dir, base string, hdr *tar.Header) error {
	parent, err := u.parent(dir)
	if err != nil {
		return err
	}
	if _, err := u.create(parent, dir, base, false, func() error {
		return unix.Mknodat(parent, base, unix.S_IFIFO|0o600, 0)
	}); err != nil {
		return err
	}
	if err := unix.Fchownat(parent, base, hdr.Uid, hdr.Gid, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return fmt.Errorf("chown: %w", err)
	}
	// Following is fine here: base is the fifo just created and nothing else
	// writes into a layer being unpacked.
	if err := unix.Fchmodat(parent, base, uint32(hdr.Mode)&0o7777, 0); err != nil {
		return fmt.Errorf("chmod: %w", err)
	}
	return setTimes(parent, base, hdr.ModTime)
}

func setTimes(parent int, base string, mtime time.Time) error {
	ts := unix.Timespec{Sec: mtime.Unix(), Nsec: int64(mtime.Nanosecond())}
	if err := unix.UtimesNanoAt(parent, base, []unix.Timespec{ts, ts}, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return fmt.Errorf("set times of %q: %w", base, err)
	}
	return nil
}

func (u *unpacker) applyDirTimes() error {
	for name, mtime := range u.dirTimes {
		fd, err := openDir(u.root, name)
		if err != nil {
			return fmt.Errorf("set times of dir %q: %w", name, err)
		}
		err = setTimes(fd, ".", mtime)
		unix.Close(fd)
		if err != nil {
			return fmt.Errorf("dir %q: %w", name, err)
		}
	}
	return nil
}
