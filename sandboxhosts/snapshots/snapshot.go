package snapshots

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"gocloud.dev/blob"
	"golang.org/x/sync/errgroup"
	"golang.org/x/sys/unix"

	"github.com/hangar-dev/hangar/platform/ids"
)

// Meta is what the caller knows about the snapshot that the tree does not say.
type Meta struct {
	SessionID string
	SandboxID string
	// CreatedAt defaults to now.
	CreatedAt time.Time
	// EventsCursor is the idx of the last session event written before the snapshot.
	EventsCursor int64
	// NoLocalCache leaves the chunks out of this host's chunk cache: for a tree that stays on
	// the host (an image layer in its image cache), the copy would be written for nothing.
	NoLocalCache bool
}

// xattrPrefixes are the extended attributes a snapshot carries: overlayfs's own (opaque dirs,
// redirects, origins), user attributes, and file capabilities, which a copied-up binary such as
// ping needs to keep working.
var xattrPrefixes = []string{"trusted.overlay.", "user.", "security.capability"}

// Snapshot records upperDir — which must not change meanwhile — as a new manifest of
// meta.SessionID and stores it. With base (the session's previous manifest) it is incremental:
// files whose size, mtime, inode and ctime are unchanged keep base's chunks without being read.
func (s *Store) Snapshot(ctx context.Context, upperDir string, base *Manifest, meta Meta) (*Manifest, Stats, error) {
	if base != nil && base.SessionID != meta.SessionID {
		return nil, Stats{}, fmt.Errorf("snapshot: base %s belongs to session %s, not %s", base.ID, base.SessionID, meta.SessionID)
	}
	run, err := s.begin(ctx, !meta.NoLocalCache)
	if err != nil {
		return nil, Stats{}, fmt.Errorf("snapshot %s: %w", upperDir, err)
	}
	defer run.end()
	return run.snapshot(ctx, upperDir, base, meta, nil)
}

// begin starts a snapshot run: it takes the snapshot lease (so no GC deletes a chunk this run
// counts on) and starts the run's upload pool, which lives until end.
func (s *Store) begin(ctx context.Context, localCache bool) (*snapshotRun, error) {
	if err := s.opts.validate(); err != nil {
		return nil, err
	}
	r := &snapshotRun{store: s, id: ids.New("snap"), began: time.Now(), cache: localCache, claimed: make(map[string]struct{})}
	l, gen, err := s.beginSnapshot(ctx, r.id)
	if err != nil {
		return nil, err
	}
	r.lease, r.gen = l, gen
	r.uploads, r.uctx = errgroup.WithContext(ctx)
	r.uploads.SetLimit(s.opts.Transfers)
	return r, nil
}

// end waits for the run's uploads and releases its lease; it may be called more than once.
func (r *snapshotRun) end() {
	r.ended.Do(func() {
		_ = r.uploads.Wait()
		r.lease.release()
	})
}

// snapshot scans upperDir, chunks its files (but those whose chunks known holds, by inode, for
// their size: files chunked as they were written) and writes the manifest.
func (r *snapshotRun) snapshot(ctx context.Context, upperDir string, base *Manifest, meta Meta, known map[inode]knownFile) (*Manifest, Stats, error) {
	s := r.store
	m := &Manifest{
		Format: FormatVersion, ID: r.id, SessionID: meta.SessionID, SandboxID: meta.SandboxID,
		CreatedAt: meta.CreatedAt.UTC(), EventsCursor: meta.EventsCursor, Version: 1,
		Chunking: Chunking{Min: s.opts.MinChunkSize, Avg: s.opts.AvgChunkSize, Max: s.opts.MaxChunkSize},
	}
	if m.CreatedAt.IsZero() {
		m.CreatedAt = r.began.UTC()
	}
	if base != nil {
		m.ParentID, m.Version = base.ID, base.Version+1
	}
	key, err := manifestKey(m.SessionID, m.ID)
	if err != nil {
		return nil, Stats{}, fmt.Errorf("snapshot: %w", err)
	}

	var st Stats
	if m.Entries, st, err = scan(upperDir, true); err != nil {
		return nil, st, fmt.Errorf("snapshot %s: %w", upperDir, err)
	}
	r.upperDir = upperDir
	if err := r.chunkFiles(ctx, m.Entries, baseFiles(base), known); err != nil {
		return nil, st, fmt.Errorf("snapshot %s: %w", upperDir, err)
	}
	for _, e := range m.Entries {
		m.TotalSize += e.Size
		m.ChunkCount += len(e.Chunks)
	}
	st.Chunks = m.ChunkCount
	st.FilesRead, st.FilesReused = int(r.filesRead.Load()), int(r.filesReused.Load())
	st.BytesRead = r.bytesRead.Load()
	st.ChunksUploaded, st.BytesUploaded = int(r.uploaded.Load()), r.uploadedBytes.Load()

	b, err := json.Marshal(m)
	if err != nil {
		return nil, st, fmt.Errorf("snapshot: encode manifest: %w", err)
	}
	if err := r.lease.check(); err != nil {
		return nil, st, fmt.Errorf("snapshot %s: %w", upperDir, err)
	}
	if err := s.bucket.WriteAll(ctx, key, b, &blob.WriterOptions{ContentType: "application/json"}); err != nil {
		return nil, st, fmt.Errorf("snapshot: write manifest %s: %w", key, err)
	}
	st.Duration = time.Since(r.began)
	return m, st, nil
}

// scan walks dir without following symlinks and returns its entries with everything but chunks,
// and without xattrs unless asked.
func scan(dir string, xattrs bool) ([]Entry, Stats, error) {
	var st Stats
	var entries []Entry
	firstPath := make(map[inode]RawString)
	err := filepath.WalkDir(dir, func(p string, _ fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		var sys unix.Stat_t
		if err := unix.Lstat(p, &sys); err != nil {
			return fmt.Errorf("lstat %s: %w", rel, err)
		}
		e := Entry{
			Path: RawString(filepath.ToSlash(rel)), Mode: sys.Mode & 0o7777, UID: int(sys.Uid), GID: int(sys.Gid),
			MtimeNs: sys.Mtim.Nano(), Dev: sys.Dev, Ino: sys.Ino, CtimeNs: sys.Ctim.Nano(),
		}
		switch sys.Mode & unix.S_IFMT {
		case unix.S_IFDIR:
			e.Type = TypeDir
			st.Dirs++
		case unix.S_IFREG:
			e.Type, e.Size = TypeFile, sys.Size
		case unix.S_IFLNK:
			target, err := os.Readlink(p)
			if err != nil {
				return fmt.Errorf("readlink %s: %w", rel, err)
			}
			e.Type, e.Target = TypeSymlink, RawString(target)
		case unix.S_IFIFO:
			e.Type = TypeFifo
		case unix.S_IFCHR:
			if sys.Rdev == 0 {
				e.Type = TypeWhiteout
			} else {
				e.Type, e.Rdev = TypeCharDev, sys.Rdev
			}
		case unix.S_IFBLK:
			e.Type, e.Rdev = TypeBlockDev, sys.Rdev
		case unix.S_IFSOCK:
			st.Skipped++ // a socket is only meaningful to the process that bound it
			return nil
		default:
			return fmt.Errorf("%s: unsupported file type %o", rel, sys.Mode&unix.S_IFMT)
		}
		// Overlayfs links whiteouts to one shared inode; that sharing is its business, not the
		// tree's, so whiteouts are recreated one by one.
		if e.Type != TypeDir && e.Type != TypeWhiteout && sys.Nlink > 1 {
			id := inode{sys.Dev, sys.Ino}
			if first, ok := firstPath[id]; ok {
				entries = append(entries, Entry{Path: e.Path, Type: TypeHardlink, Target: first})
				st.Others++
				return nil
			}
			firstPath[id] = e.Path
		}
		if e.Type == TypeFile {
			st.Files++
			st.Bytes += e.Size
		} else if e.Type != TypeDir {
			st.Others++
		}
		if xattrs {
			if e.Xattrs, err = readXattrs(p); err != nil {
				return fmt.Errorf("xattrs of %s: %w", rel, err)
			}
		}
		entries = append(entries, e)
		return nil
	})
	if err == nil && (len(entries) == 0 || entries[0].Type != TypeDir) {
		err = errors.New("not a directory")
	}
	return entries, st, err
}

func readXattrs(p string) (map[string][]byte, error) {
	buf := make([]byte, 1024)
	for {
		n, err := unix.Llistxattr(p, buf)
		if errors.Is(err, unix.ERANGE) {
			buf = make([]byte, len(buf)*4)
			continue
		}
		if errors.Is(err, unix.ENOTSUP) {
			return nil, nil
		}
		if err != nil {
			return nil, err
		}
		buf = buf[:n]
		break
	}
	var out map[string][]byte
	for _, name := range strings.Split(string(buf), "\x00") {
		if !carried(name) {
			continue
		}
		val, err := getXattr(p, name)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		if out == nil {
			out = make(map[string][]byte)
		}
		out[name] = val
	}
	return out, nil
}

func carried(name string) bool {
	for _, p := range xattrPrefixes {
		if strings.HasPrefix(name, p) {
			return true
		}
	}
	return false
}

func getXattr(p, name string) ([]byte, error) {
	buf := make([]byte, 256)
	for {
		n, err := unix.Lgetxattr(p, name, buf)
		if errors.Is(err, unix.ERANGE) {
			buf = make([]byte, len(buf)*4)
			continue
		}
		if err != nil {
			return nil, err
		}
		return buf[:n], nil
	}
}

func baseFiles(base *Manifest) map[RawString]*Entry {
	out := make(map[RawString]*Entry)
	if base == nil {
		return out
	}
	for i := range base.Entries {
		if e := &base.Entries[i]; e.Type == TypeFile {
			out[e.Path] = e
		}
	}
	return out
}

// unchanged reports whether cur is the same inode in the same state as prev was.
func unchanged(prev, cur *Entry) bool {
	return prev != nil && prev.Size == cur.Size && prev.MtimeNs == cur.MtimeNs && prev.Ino == cur.Ino &&
		prev.Dev == cur.Dev && prev.CtimeNs == cur.CtimeNs
}

// snapshotRun is the state of one Snapshot's chunking and uploads.
type snapshotRun struct {
	store    *Store
	id       string // the manifest's, which names the run's lease
	began    time.Time
	lease    *lease
	gen      string
	upperDir string
	cache    bool // keep uploaded chunks in the host's chunk cache
	ended    sync.Once

	uploads *errgroup.Group
	uctx    context.Context // the uploads' context, which outlives the file readers'

	mu      sync.Mutex
	claimed map[string]struct{} // chunks this run has already seen to, so a repeat is not re-sent

	filesRead, filesReused, uploaded atomic.Int64
	filesChunkedAhead                atomic.Int64
	bytesRead, uploadedBytes         atomic.Int64
}

// chunkFiles fills in the chunk list of every file entry: known's when it has the file at its
// size, reused from base when unchanged and all its chunks are still in the bucket, else by
// reading the file. Reading runs on every core, uploads run in the run's bounded pool so one
// big file still uploads in parallel.
func (r *snapshotRun) chunkFiles(ctx context.Context, entries []Entry, base map[RawString]*Entry, known map[inode]knownFile) error {
	files, fctx := errgroup.WithContext(r.uctx)
	files.SetLimit(runtime.GOMAXPROCS(0))
	for i := range entries {
		e := &entries[i]
		if e.Type != TypeFile {
			continue
		}
		if k, ok := known[inode{e.Dev, e.Ino}]; ok && k.size == e.Size {
			e.Chunks = k.chunks
			r.filesChunkedAhead.Add(1)
			continue
		}
		files.Go(func() error {
			if prev := base[e.Path]; unchanged(prev, e) {
				ok, err := r.allPresent(fctx, prev.Chunks)
				if err != nil {
					return err
				}
				if ok {
					e.Chunks = prev.Chunks
					r.filesReused.Add(1)
					return nil
				}
			}
			return r.chunkFile(fctx, e)
		})
	}
	ferr, uerr := files.Wait(), r.uploads.Wait()
	// A failed upload cancels the readers: their "context canceled" is not the cause, and
	// reporting it would read as a cancelled request (apierr says "request canceled").
	if uerr != nil && errors.Is(ferr, context.Canceled) {
		return uerr
	}
	return errors.Join(ferr, uerr)
}

func (r *snapshotRun) allPresent(ctx context.Context, chunks []ChunkRef) (bool, error) {
	for _, c := range chunks {
		ok, err := r.store.chunkPresent(ctx, r.gen, c.SHA256)
		if !ok || err != nil {
			return false, err
		}
	}
	return true, nil
}

func (r *snapshotRun) chunkFile(ctx context.Context, e *Entry) error {
	p := filepath.Join(r.upperDir, filepath.FromSlash(string(e.Path)))
	f, err := os.OpenFile(p, os.O_RDONLY|unix.O_NOFOLLOW|unix.O_NOATIME, 0)
	if errors.Is(err, unix.EPERM) { // O_NOATIME is refused on files of other owners without CAP_FOWNER
		f, err = os.OpenFile(p, os.O_RDONLY|unix.O_NOFOLLOW, 0)
	}
	if err != nil {
		return fmt.Errorf("open %s: %w", e.Path, err)
	}
	defer f.Close()
	r.filesRead.Add(1)
	chunks, total, err := r.chunkReader(ctx, f, e.Size)
	if err != nil {
		return fmt.Errorf("%s: %w", e.Path, err)
	}
	e.Chunks = chunks
	r.bytesRead.Add(total)
	if total != e.Size {
		return fmt.Errorf("%s changed during the snapshot: %d bytes read, %d expected", e.Path, total, e.Size)
	}
	return nil
}

// chunkReader cuts what rd holds (size bytes, as far as the caller knows) into chunks, sees to
// their upload and returns them with the bytes it read.
func (r *snapshotRun) chunkReader(ctx context.Context, rd io.Reader, size int64) ([]ChunkRef, int64, error) {
	opts := r.store.opts
	var chunks []ChunkRef
	var total int64
	emit := func(data []byte) error {
		sum := sha256.Sum256(data)
		h := hex.EncodeToString(sum[:])
		chunks = append(chunks, ChunkRef{SHA256: h, Size: int64(len(data))})
		total += int64(len(data))
		return r.ensure(ctx, h, data)
	}
	if size < int64(opts.MinChunkSize) {
		data, err := io.ReadAll(io.LimitReader(rd, int64(opts.MinChunkSize)))
		if err != nil {
			return nil, total, fmt.Errorf("read: %w", err)
		}
		if len(data) > 0 {
			if err := emit(data); err != nil {
				return nil, total, err
			}
		}
		return chunks, total, nil
	}
	if err := cut(rd, size, opts, emit); err != nil {
		return nil, total, err
	}
	return chunks, total, nil
}

// ensure gets chunk h into the bucket unless it is known to be there or already being sent by
// this run. data is copied because the chunker reuses its buffer.
func (r *snapshotRun) ensure(ctx context.Context, h string, data []byte) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if r.store.index.has(h) {
		return nil
	}
	r.mu.Lock()
	_, dup := r.claimed[h]
	r.claimed[h] = struct{}{}
	r.mu.Unlock()
	if dup {
		return nil
	}
	own := append([]byte(nil), data...)
	r.uploads.Go(func() error {
		if err := r.uctx.Err(); err != nil {
			return err
		}
		sent, err := r.store.putChunk(r.uctx, r.gen, h, own, r.cache)
		if err != nil {
			return err
		}
		if sent {
			r.uploaded.Add(1)
			r.uploadedBytes.Add(int64(len(own)))
		}
		return nil
	})
	return nil
}
