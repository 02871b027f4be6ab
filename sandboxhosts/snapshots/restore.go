package snapshots

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sync/errgroup"
	"golang.org/x/sys/unix"
)

// ErrNotEmpty is returned by Restore when the target directory already has entries.
var ErrNotEmpty = errors.New("restore target is not empty")

type restoreCounters struct {
	fromCache, downloaded atomic.Int64
	downloadedBytes       atomic.Int64
}

// Restore recreates the tree of m in dir, which must exist and be empty. Chunks come from the
// local cache when it has them and from the bucket otherwise, and are verified either way.
// Every entry is created relative to dir without following any symlink, so a hostile manifest
// cannot write outside dir; it is rejected whole before anything is created.
func (s *Store) Restore(ctx context.Context, m *Manifest, dir string) (Stats, error) {
	start := time.Now()
	if m == nil {
		return Stats{}, errors.New("restore: nil manifest")
	}
	if err := m.validate(); err != nil {
		return Stats{}, fmt.Errorf("restore %s: %w", m.ID, err)
	}
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return Stats{}, fmt.Errorf("restore %s: open %s: %w", m.ID, dir, err)
	}
	root := os.NewFile(uintptr(fd), dir)
	defer root.Close()
	if names, err := root.Readdirnames(1); len(names) > 0 {
		return Stats{}, fmt.Errorf("restore %s into %s: %w", m.ID, dir, ErrNotEmpty)
	} else if err != nil && !errors.Is(err, io.EOF) {
		return Stats{}, fmt.Errorf("restore %s: read %s: %w", m.ID, dir, err)
	}
	r := &restorer{store: s, root: fd, fetched: make(map[string]*fetch)}
	st, err := r.run(ctx, m)
	st.Duration = time.Since(start)
	if err != nil {
		return st, fmt.Errorf("restore %s into %s: %w", m.ID, dir, err)
	}
	return st, nil
}

type restorer struct {
	store    *Store
	root     int
	counters restoreCounters

	mu      sync.Mutex
	fetched map[string]*fetch // chunks this restore has started to get, so each downloads once
}

type fetch struct {
	done chan struct{}
	err  error
}

// chunk returns chunk sum's bytes; a chunk several files share is downloaded once, and the
// others read the copy the first one left in the cache.
func (r *restorer) chunk(ctx context.Context, sum string) ([]byte, error) {
	r.mu.Lock()
	f, started := r.fetched[sum]
	if !started {
		f = &fetch{done: make(chan struct{})}
		r.fetched[sum] = f
	}
	r.mu.Unlock()
	if !started {
		b, err := r.store.getChunk(ctx, sum, &r.counters)
		f.err = err
		close(f.done)
		return b, err
	}
	select {
	case <-f.done:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	if f.err != nil {
		return nil, f.err
	}
	return r.store.getChunk(ctx, sum, &r.counters)
}

func (r *restorer) run(ctx context.Context, m *Manifest) (Stats, error) {
	var st Stats
	var files, links, others, dirs []*Entry
	for i := range m.Entries {
		e := &m.Entries[i]
		switch e.Type {
		case TypeDir:
			dirs = append(dirs, e)
			st.Dirs++
		case TypeFile:
			files = append(files, e)
			st.Files++
			st.Bytes += e.Size
			st.Chunks += len(e.Chunks)
		case TypeHardlink:
			links = append(links, e)
			st.Others++
		default:
			others = append(others, e)
			st.Others++
		}
	}

	// Directories are created owner-only and get their real mode last, so a read-only directory
	// can still be filled and no one else can look in before the tree is whole.
	p := r.parents()
	defer p.close()
	for _, e := range append(dirs[1:], others...) {
		if err := p.do(e.Path, func(dfd int, name string) error { return create(dfd, name, e) }); err != nil {
			return st, err
		}
	}

	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(r.store.opts.Transfers)
	for _, e := range files {
		g.Go(func() error { return r.writeFile(gctx, e) })
	}
	err := g.Wait()
	st.ChunksFromCache = int(r.counters.fromCache.Load())
	st.ChunksDownloaded = int(r.counters.downloaded.Load())
	st.BytesDownloaded = r.counters.downloadedBytes.Load()
	if err != nil {
		return st, err
	}

	for _, e := range links {
		if err := r.link(e); err != nil {
			return st, err
		}
	}
	for _, e := range others {
		if err := p.do(e.Path, func(dfd int, name string) error { return applyMeta(dfd, name, e) }); err != nil {
			return st, err
		}
	}
	// Deepest first: setting a directory's attributes never touches its parent's mtime, but
	// creating entries does, so each directory's mtime is set after everything inside it exists.
	slices.SortStableFunc(dirs, func(a, b *Entry) int { return cmp.Compare(depth(b.Path), depth(a.Path)) })
	for _, e := range dirs {
		if e.Path == "." {
			if err := applyMeta(r.root, ".", e); err != nil {
				return st, err
			}
			continue
		}
		if err := p.do(e.Path, func(dfd int, name string) error { return applyMeta(dfd, name, e) }); err != nil {
			return st, err
		}
	}
	return st, nil
}

func depth(p RawString) int {
	if p == "." {
		return 0
	}
	return strings.Count(string(p), "/") + 1
}

func create(dfd int, name string, e *Entry) error {
	var err error
	switch e.Type {
	case TypeDir:
		err = unix.Mkdirat(dfd, name, 0o700)
	case TypeSymlink:
		err = unix.Symlinkat(string(e.Target), dfd, name)
	case TypeFifo:
		err = unix.Mknodat(dfd, name, unix.S_IFIFO|0o600, 0)
	case TypeWhiteout:
		err = unix.Mknodat(dfd, name, unix.S_IFCHR|0o600, 0)
	case TypeCharDev:
		err = unix.Mknodat(dfd, name, unix.S_IFCHR|0o600, int(e.Rdev))
	case TypeBlockDev:
		err = unix.Mknodat(dfd, name, unix.S_IFBLK|0o600, int(e.Rdev))
	default:
		err = fmt.Errorf("cannot create type %q here", e.Type)
	}
	if err != nil {
		return fmt.Errorf("create %s %q: %w", e.Type, e.Path, err)
	}
	return nil
}

func (r *restorer) writeFile(ctx context.Context, e *Entry) error {
	p := r.parents()
	defer p.close()
	return p.do(e.Path, func(dfd int, name string) error {
		fd, err := unix.Openat(dfd, name, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
		if err != nil {
			return fmt.Errorf("create file %q: %w", e.Path, err)
		}
		f := os.NewFile(uintptr(fd), name)
		werr := r.fill(ctx, f, e)
		if err := errors.Join(werr, f.Close()); err != nil {
			return err
		}
		return applyMeta(dfd, name, e)
	})
}

func (r *restorer) fill(ctx context.Context, f *os.File, e *Entry) error {
	for _, c := range e.Chunks {
		b, err := r.chunk(ctx, c.SHA256)
		if err != nil {
			return fmt.Errorf("file %q: %w", e.Path, err)
		}
		if int64(len(b)) != c.Size {
			return fmt.Errorf("file %q: chunk %s is %d bytes, manifest says %d", e.Path, c.SHA256, len(b), c.Size)
		}
		if _, err := f.Write(b); err != nil {
			return fmt.Errorf("write %q: %w", e.Path, err)
		}
	}
	return nil
}

func (r *restorer) link(e *Entry) error {
	tp := r.parents()
	defer tp.close()
	return tp.do(e.Target, func(tdfd int, tname string) error {
		p := r.parents()
		defer p.close()
		return p.do(e.Path, func(dfd int, name string) error {
			// No AT_SYMLINK_FOLLOW: a link to a symlink links the symlink itself.
			if err := unix.Linkat(tdfd, tname, dfd, name, 0); err != nil {
				return fmt.Errorf("hardlink %q to %q: %w", e.Path, e.Target, err)
			}
			return nil
		})
	})
}

// applyMeta sets owner, mode, xattrs and times of dfd/name without following a final symlink.
// Owner goes first because chown clears setuid bits and file capabilities.
func applyMeta(dfd int, name string, e *Entry) error {
	if err := unix.Fchownat(dfd, name, e.UID, e.GID, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return fmt.Errorf("chown %q: %w", e.Path, err)
	}
	if e.Type != TypeSymlink {
		if err := unix.Fchmodat(dfd, name, e.Mode, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			return fmt.Errorf("chmod %q: %w", e.Path, err)
		}
	}
	if len(e.Xattrs) > 0 {
		// The *xattr calls take no dirfd; /proc/self/fd/N resolves to the directory dfd was
		// opened on (beneath the root), and the l-variant does not follow name itself.
		p := fmt.Sprintf("/proc/self/fd/%d/%s", dfd, name)
		for _, k := range slices.Sorted(maps.Keys(e.Xattrs)) {
			if err := unix.Lsetxattr(p, k, e.Xattrs[k], 0); err != nil {
				return fmt.Errorf("set xattr %s on %q: %w", k, e.Path, err)
			}
		}
	}
	t := unix.NsecToTimespec(e.MtimeNs)
	if err := unix.UtimesNanoAt(dfd, name, []unix.Timespec{t, t}, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return fmt.Errorf("set times of %q: %w", e.Path, err)
	}
	return nil
}

// parentCache opens the directory of each entry path beneath the root, reusing the last one:
// entries come sorted, so siblings share it.
type parentCache struct {
	root int
	dir  string
	fd   int
}

func (r *restorer) parents() *parentCache { return &parentCache{root: r.root, fd: -1} }

func (p *parentCache) do(rel RawString, fn func(dfd int, name string) error) error {
	dir, name := path.Split(string(rel))
	dir = strings.TrimSuffix(dir, "/")
	if dir == "" {
		return fn(p.root, name)
	}
	if p.fd < 0 || p.dir != dir {
		p.close()
		fd, err := unix.Openat2(p.root, dir, &unix.OpenHow{
			Flags:   unix.O_PATH | unix.O_DIRECTORY | unix.O_CLOEXEC,
			Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS | unix.RESOLVE_NO_XDEV,
		})
		if err != nil {
			return fmt.Errorf("open directory %q beneath the restore root: %w", dir, err)
		}
		p.dir, p.fd = dir, fd
	}
	return fn(p.fd, name)
}

func (p *parentCache) close() {
	if p.fd >= 0 {
		unix.Close(p.fd)
		p.fd = -1
	}
}

// Adopt returns a copy of m, just restored into dir, whose files carry dir's inode identity, so
// that a CowState or Snapshot on top of it finds them unchanged instead of re-reading every
// file the restore wrote. Call it right after Restore, before anything else writes to dir.
func (s *Store) Adopt(m *Manifest, dir string) (*Manifest, error) {
	entries, _, err := scan(dir, false)
	if err != nil {
		return nil, fmt.Errorf("adopt %s in %s: %w", m.ID, dir, err)
	}
	local := make(map[RawString]*Entry, len(entries))
	for i := range entries {
		if e := &entries[i]; e.Type == TypeFile {
			local[e.Path] = e
		}
	}
	out := *m
	out.Entries = slices.Clone(m.Entries)
	for i := range out.Entries {
		e := &out.Entries[i]
		if cur := local[e.Path]; e.Type == TypeFile && cur != nil && cur.Size == e.Size && cur.MtimeNs == e.MtimeNs {
			e.Dev, e.Ino, e.CtimeNs = cur.Dev, cur.Ino, cur.CtimeNs
		}
	}
	return &out, nil
}
