// Package snapshots owns copy-on-write snapshots of a sandbox's overlay upper dir.
//
// The upper dir holds exactly a session's changes to its image (new and copied-up files,
// whiteouts, opaque dirs). A snapshot cuts every file into FastCDC content-defined chunks, stores
// each chunk once in a blob bucket under its sha256 (uncompressed: most of the bytes are
// already-compressed packages and build outputs, and hashing dominates otherwise), and writes a
// versioned JSON manifest of the tree. Restore recreates the upper dir byte for byte and
// attribute for attribute on any host. Snapshots of one session are incremental: a file whose
// size, mtime, inode and ctime match the previous manifest keeps its chunk list unread.
//
// # Bucket layout
//
//	chunks/<hh>/<sha256hex>                   chunk bytes, shared by every session (dedup)
//	manifests/<session_id>/<manifest_id>.json one manifest
//	leases/snapshot/<manifest_id>             a snapshot in progress
//	leases/gc/<id>                            a GC in progress
//	gc/generation                             changes whenever a GC deleted chunks
//
// # Dedup and GC
//
// A chunk already in the bucket is never uploaded again: the host keeps a local index of chunks
// known to be in the bucket, then asks the bucket (Exists). Because GC deletes chunks no manifest
// references, that knowledge can go stale, so snapshots and GC exclude each other through lease
// objects: a snapshot writes its lease and then waits out any GC lease; a GC writes its lease and
// gives up (ErrBusy) if any snapshot lease is live. One of the two always sees the other. The
// local index is tagged with the GC generation it was built under and dropped when it changes.
package snapshots

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	"gocloud.dev/blob"
	"gocloud.dev/gcerrors"
)

// Options tunes a Store. Zero fields take the defaults shown.
type Options struct {
	MinChunkSize int // 256 KiB; files smaller than this are one chunk
	AvgChunkSize int // 1 MiB; a power of two
	MaxChunkSize int // 4 MiB
	// Transfers bounds parallel chunk uploads and downloads (8).
	Transfers int
	// LeaseTTL is how long a snapshot or GC lease is honoured (1 h). A snapshot or GC that runs
	// longer fails rather than act on a lease the other side may already consider dead.
	LeaseTTL time.Duration
}

func (o Options) withDefaults() Options {
	if o.AvgChunkSize == 0 {
		o.AvgChunkSize = 1 << 20
	}
	if o.MinChunkSize == 0 {
		o.MinChunkSize = 256 << 10
	}
	if o.MaxChunkSize == 0 {
		o.MaxChunkSize = 4 << 20
	}
	if o.Transfers <= 0 {
		o.Transfers = 8
	}
	if o.LeaseTTL <= 0 {
		o.LeaseTTL = time.Hour
	}
	return o
}

func (o Options) validate() error {
	if o.MinChunkSize < 64 || o.MinChunkSize >= o.AvgChunkSize || o.AvgChunkSize >= o.MaxChunkSize {
		return fmt.Errorf("chunk sizes must satisfy 64 <= min < avg < max, got %d/%d/%d", o.MinChunkSize, o.AvgChunkSize, o.MaxChunkSize)
	}
	// FastCDC's cut masks have as many bits as the average size's log2: another average would be
	// cut as the power of two below it.
	if o.AvgChunkSize&(o.AvgChunkSize-1) != 0 {
		return fmt.Errorf("the average chunk size must be a power of two, got %d", o.AvgChunkSize)
	}
	return nil
}

// Store keeps snapshots in a bucket, with a local chunk cache on this host.
type Store struct {
	bucket   *blob.Bucket
	cacheDir string
	opts     Options
	index    chunkIndex
}

// NewStore returns a Store over bucket. cacheDir is this host's chunk cache: every chunk this
// host uploads or downloads is kept there, so restoring on the host that snapshotted reads
// nothing from the bucket. It is created on first use.
func NewStore(bucket *blob.Bucket, cacheDir string, opts Options) *Store {
	return &Store{bucket: bucket, cacheDir: cacheDir, opts: opts.withDefaults(), index: chunkIndex{file: filepath.Join(cacheDir, "known-chunks")}}
}

// Stats reports what a Snapshot or Restore did.
type Stats struct {
	Files    int   // regular files (hardlinks not counted twice)
	Dirs     int   // directories, the root included
	Others   int   // symlinks, hardlinks, whiteouts, fifos and devices
	Skipped  int   // sockets, which cannot be carried to another host
	Bytes    int64 // size of all regular files
	Chunks   int   // chunk references of all files
	Duration time.Duration

	// Snapshot only.
	FilesRead   int // files whose content was read and chunked
	FilesReused int // files whose chunk list came unread from the base manifest
	// FilesChunkedAhead are files a Prechunk cut as they were written, not read again.
	FilesChunkedAhead int
	BytesRead         int64 //
	ChunksUploaded    int
	BytesUploaded     int64

	// Restore only.
	ChunksFromCache  int
	ChunksDownloaded int
	BytesDownloaded  int64
}

func chunkKey(sum string) string { return "chunks/" + sum[:2] + "/" + sum }

// cachePath is flat, unlike the bucket's layout: creating 256 fan-out directories is a cost on
// every fresh host, and ext4's hashed directories look names up fast at any size.
func (s *Store) cachePath(sum string) string {
	return filepath.Join(s.cacheDir, "chunks", sum)
}

// ErrCorruptChunk is wrapped when a chunk's bytes do not hash to its name.
var ErrCorruptChunk = errors.New("corrupt chunk")

// putChunk makes sure chunk sum is in the bucket and, with cache, in the local cache: data is
// its content. It reports whether it uploaded.
func (s *Store) putChunk(ctx context.Context, gen, sum string, data []byte, cache bool) (bool, error) {
	key := chunkKey(sum)
	ok, err := s.bucket.Exists(ctx, key)
	if err != nil {
		return false, fmt.Errorf("check chunk %s: %w", key, err)
	}
	if !ok {
		// Upload, not WriteAll: WriteAll hashes the bytes with MD5 twice, and every reader
		// verifies the chunk's sha256 anyway.
		if err := s.bucket.Upload(ctx, key, bytes.NewReader(data), &blob.WriterOptions{ContentType: "application/octet-stream"}); err != nil {
			return false, fmt.Errorf("upload chunk %s: %w", key, err)
		}
	}
	if cache {
		if err := s.writeCache(sum, data); err != nil {
			return false, err
		}
	}
	return !ok, s.index.add(gen, sum)
}

// chunkPresent reports whether chunk sum is in the bucket, trusting the local index first.
func (s *Store) chunkPresent(ctx context.Context, gen, sum string) (bool, error) {
	if s.index.has(sum) {
		return true, nil
	}
	ok, err := s.bucket.Exists(ctx, chunkKey(sum))
	if err != nil {
		return false, fmt.Errorf("check chunk %s: %w", chunkKey(sum), err)
	}
	if ok {
		return true, s.index.add(gen, sum)
	}
	return false, nil
}

// getChunk returns chunk sum's verified bytes, from the local cache when it holds a good copy.
func (s *Store) getChunk(ctx context.Context, sum string, st *restoreCounters) ([]byte, error) {
	if b, err := os.ReadFile(s.cachePath(sum)); err == nil {
		if hashHex(b) == sum {
			st.fromCache.Add(1)
			return b, nil
		}
		os.Remove(s.cachePath(sum)) // torn or rotten: the download below rewrites it
	}
	gen := s.index.generation()
	key := chunkKey(sum)
	b, err := s.bucket.ReadAll(ctx, key)
	if err != nil {
		return nil, fmt.Errorf("download chunk %s: %w", key, err)
	}
	if got := hashHex(b); got != sum {
		return nil, fmt.Errorf("%w %s: content hashes to %s", ErrCorruptChunk, key, got)
	}
	st.downloaded.Add(1)
	st.downloadedBytes.Add(int64(len(b)))
	if err := s.writeCache(sum, b); err != nil {
		return nil, err
	}
	return b, s.index.add(gen, sum)
}

// writeCache keeps a chunk on this host. It writes in place, without a temp file and rename:
// every read verifies the hash and drops a bad copy, so a torn write costs one download later,
// while file creation is the dearest part of a snapshot on a local disk.
func (s *Store) writeCache(sum string, data []byte) error {
	p := s.cachePath(sum)
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if errors.Is(err, fs.ErrNotExist) {
		if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			return fmt.Errorf("chunk cache: %w", err)
		}
		f, err = os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	}
	if errors.Is(err, fs.ErrExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("chunk cache: %w", err)
	}
	_, werr := f.Write(data)
	if err := errors.Join(werr, f.Close()); err != nil {
		os.Remove(p)
		return fmt.Errorf("chunk cache %s: %w", sum, err)
	}
	return nil
}

func hashHex(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// chunkIndex is the set of chunks this host knows to be in the bucket, valid for one GC
// generation and persisted as lines in a file: the generation, then one sha256 per line.
type chunkIndex struct {
	file   string
	mu     sync.Mutex
	loaded bool
	gen    string
	known  map[string]struct{}
}

func (ix *chunkIndex) load() {
	if ix.loaded {
		return
	}
	ix.loaded = true
	ix.known = make(map[string]struct{})
	b, err := os.ReadFile(ix.file)
	if err != nil {
		return // a missing or unreadable index only costs Exists calls
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	if !sc.Scan() {
		return
	}
	ix.gen = strings.TrimPrefix(sc.Text(), "generation ")
	for sc.Scan() {
		if isSHA256Hex(sc.Text()) {
			ix.known[sc.Text()] = struct{}{}
		}
	}
}

// sync adopts the bucket's GC generation, forgetting everything learnt under another one.
func (ix *chunkIndex) sync(gen string) error {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	ix.load()
	if ix.gen == gen {
		return nil
	}
	ix.gen = gen
	ix.known = make(map[string]struct{})
	if err := os.MkdirAll(filepath.Dir(ix.file), 0o700); err != nil {
		return fmt.Errorf("chunk index: %w", err)
	}
	if err := os.WriteFile(ix.file, []byte("generation "+gen+"\n"), 0o600); err != nil {
		return fmt.Errorf("chunk index: %w", err)
	}
	return nil
}

func (ix *chunkIndex) generation() string {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	ix.load()
	return ix.gen
}

func (ix *chunkIndex) has(sum string) bool {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	ix.load()
	_, ok := ix.known[sum]
	return ok
}

// add records sum as present in the bucket, unless the index moved to another generation since
// the caller saw the chunk there: a GC in between may have deleted it.
func (ix *chunkIndex) add(gen, sum string) error {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	ix.load()
	if gen != ix.gen {
		return nil
	}
	if _, ok := ix.known[sum]; ok {
		return nil
	}
	// The index is often the first thing written to the cache dir: a host that uploads image
	// layers keeps no chunk copies there.
	f, err := os.OpenFile(ix.file, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if errors.Is(err, fs.ErrNotExist) {
		if err := os.MkdirAll(filepath.Dir(ix.file), 0o700); err != nil {
			return fmt.Errorf("chunk index: %w", err)
		}
		f, err = os.OpenFile(ix.file, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	}
	if err != nil {
		return fmt.Errorf("chunk index: %w", err)
	}
	ix.known[sum] = struct{}{}
	if fi, err := f.Stat(); err == nil && fi.Size() == 0 {
		fmt.Fprintf(f, "generation %s\n", gen)
	}
	_, werr := io.WriteString(f, sum+"\n")
	return errors.Join(werr, f.Close())
}

var sha256Hex = regexp.MustCompile(`^[0-9a-f]{64}$`)

func isSHA256Hex(s string) bool { return sha256Hex.MatchString(s) }

// idPart accepts session and manifest ids that are safe as one bucket key segment.
var idPart = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$`)

func manifestKey(sessionID, manifestID string) (string, error) {
	if !idPart.MatchString(sessionID) {
		return "", fmt.Errorf("invalid session id %q", sessionID)
	}
	if !idPart.MatchString(manifestID) {
		return "", fmt.Errorf("invalid manifest id %q", manifestID)
	}
	return "manifests/" + sessionID + "/" + manifestID + ".json", nil
}

// ErrNotFound is wrapped when a manifest does not exist.
var ErrNotFound = errors.New("not found")

// Load reads one manifest of a session.
func (s *Store) Load(ctx context.Context, sessionID, manifestID string) (*Manifest, error) {
	key, err := manifestKey(sessionID, manifestID)
	if err != nil {
		return nil, err
	}
	return s.loadKey(ctx, key)
}

func (s *Store) loadKey(ctx context.Context, key string) (*Manifest, error) {
	b, err := s.bucket.ReadAll(ctx, key)
	if gcerrors.Code(err) == gcerrors.NotFound {
		return nil, fmt.Errorf("manifest %s: %w", key, ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("read manifest %s: %w", key, err)
	}
	m, err := decodeManifest(b)
	if err != nil {
		return nil, fmt.Errorf("manifest %s: %w", key, err)
	}
	return m, nil
}

// List returns the summaries of a session's manifests, newest (highest version) first.
func (s *Store) List(ctx context.Context, sessionID string) ([]Summary, error) {
	keys, err := s.manifestKeys(ctx, sessionID)
	if err != nil {
		return nil, err
	}
	out := make([]Summary, 0, len(keys))
	for _, k := range keys {
		m, err := s.loadKey(ctx, k)
		if err != nil {
			return nil, err
		}
		out = append(out, m.Summary())
	}
	slices.SortFunc(out, func(a, b Summary) int {
		return cmp.Or(cmp.Compare(b.Version, a.Version), strings.Compare(b.ID, a.ID))
	})
	return out, nil
}

func (s *Store) manifestKeys(ctx context.Context, sessionID string) ([]string, error) {
	if !idPart.MatchString(sessionID) {
		return nil, fmt.Errorf("invalid session id %q", sessionID)
	}
	return s.keys(ctx, "manifests/"+sessionID+"/")
}

func (s *Store) keys(ctx context.Context, prefix string) ([]string, error) {
	var keys []string
	it := s.bucket.List(&blob.ListOptions{Prefix: prefix})
	for {
		obj, err := it.Next(ctx)
		if err == io.EOF {
			return keys, nil
		}
		if err != nil {
			return nil, fmt.Errorf("list %s: %w", prefix, err)
		}
		if strings.HasSuffix(obj.Key, ".json") {
			keys = append(keys, obj.Key)
		}
	}
}

// Delete removes one manifest. Its chunks stay until GC finds them unreferenced.
func (s *Store) Delete(ctx context.Context, sessionID, manifestID string) error {
	key, err := manifestKey(sessionID, manifestID)
	if err != nil {
		return err
	}
	if err := s.bucket.Delete(ctx, key); err != nil {
		if gcerrors.Code(err) == gcerrors.NotFound {
			return fmt.Errorf("manifest %s: %w", key, ErrNotFound)
		}
		return fmt.Errorf("delete manifest %s: %w", key, err)
	}
	return nil
}

// DeleteSession removes every manifest of a session and reports how many there were.
func (s *Store) DeleteSession(ctx context.Context, sessionID string) (int, error) {
	keys, err := s.manifestKeys(ctx, sessionID)
	if err != nil {
		return 0, err
	}
	for i, k := range keys {
		if err := s.bucket.Delete(ctx, k); err != nil && gcerrors.Code(err) != gcerrors.NotFound {
			return i, fmt.Errorf("delete manifest %s: %w", k, err)
		}
	}
	return len(keys), nil
}
