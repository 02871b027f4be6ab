// Package imagechunks keeps enabled images in the chunk store that session snapshots use: each
// unpacked layer of an image becomes one snapshot manifest of FastCDC chunks (so a file that
// two images, or an image and a session, share is stored once), the image's manifest record
// goes next to them, and a host that never pulled the image stages it back from the chunks into
// its image cache without asking a registry.
//
// # Bucket layout (beside the snapshots package's)
//
//	manifests/imglayer-<sha256hex>/<id>.json  one image layer (a snapshot manifest)
//	manifests/imgwarm-<key>/<id>.json         an image's warm layer (a snapshot manifest)
//	imagerecords/sha256/<hex>.json            the image cache's record of an image digest
//
// Layer and warm manifests live under manifests/ so that the snapshot GC counts their chunks
// as referenced, for as long as they are there: Collect (collect.go) deletes those of images
// nothing references any more, and the GC then takes their chunks.
package imagechunks

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"gocloud.dev/blob"
	"gocloud.dev/gcerrors"
	"golang.org/x/sync/errgroup"

	"github.com/hangar-dev/hangar/sandboxhosts/images"
	"github.com/hangar-dev/hangar/sandboxhosts/snapshots"
)

// Store puts images into the chunk store and takes them back out.
type Store struct {
	cache  *images.Cache
	snaps  *snapshots.Store
	bucket *blob.Bucket
}

// New returns a Store over a host's image cache and its snapshot store on bucket.
func New(cache *images.Cache, snaps *snapshots.Store, bucket *blob.Bucket) *Store {
	return &Store{cache: cache, snaps: snaps, bucket: bucket}
}

// Progress reports chunk work as it goes: chunks (references) done out of an estimated total,
// which becomes exact with the last call.
type Progress func(done, total int)

// Layer is one chunked layer.
type Layer struct {
	Digest string
	Chunks int
}

// Result is what Chunk did.
type Result struct {
	Layers        []Layer
	BytesTotal    int64
	BytesUploaded int64
}

// layerSession is the snapshot "session" a layer's manifest is filed under.
func layerSession(digest string) (string, error) {
	h, err := v1.NewHash(digest)
	if err != nil || h.Algorithm != "sha256" {
		return "", fmt.Errorf("layer digest %q is not a sha256 digest", digest)
	}
	return "imglayer-" + h.Hex, nil
}

func recordKey(digest string) (string, error) {
	h, err := v1.NewHash(digest)
	if err != nil || h.Algorithm != "sha256" {
		return "", fmt.Errorf("image digest %q is not a sha256 digest", digest)
	}
	return recordsPrefix + h.Hex + ".json", nil
}

// Chunk cuts every layer of the pulled image digest into the chunk store, skipping layers some
// image already put there, then stores the image's record. It is idempotent. It holds the
// store's manifests (snapshots.HoldingManifests) from its first look at a layer to the record's
// write, so a Collect cannot delete a layer manifest it reuses before its record names it.
func (s *Store) Chunk(ctx context.Context, digest string, progress Progress) (*Result, error) {
	var res *Result
	err := s.snaps.HoldingManifests(ctx, "imgchunk-"+strings.TrimPrefix(digest, "sha256:"), func() (err error) {
		res, err = s.chunk(ctx, digest, progress)
		return err
	})
	return res, err
}

func (s *Store) chunk(ctx context.Context, digest string, progress Progress) (*Result, error) {
	pulled, err := s.cache.Lookup(digest)
	if err != nil {
		return nil, fmt.Errorf("chunk %s: %w", digest, err)
	}
	total := 0
	for _, dir := range pulled.LayerDirs {
		total += estimateChunks(dir)
	}
	// Layers are chunked side by side: a layer is often one big file, which one core chunks.
	res := &Result{Layers: make([]Layer, len(pulled.Layers))}
	var mu sync.Mutex
	done, left := 0, len(pulled.Layers)
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(runtime.GOMAXPROCS(0))
	for i, l := range pulled.Layers {
		g.Go(func() error {
			m, err := s.layerManifest(gctx, l)
			var st snapshots.Stats
			if errors.Is(err, snapshots.ErrNotFound) {
				sess, _ := layerSession(l)
				// The layer dir is the host's copy: no chunk cache copy of it.
				m, st, err = s.snaps.Snapshot(gctx, pulled.LayerDirs[i], nil, snapshots.Meta{SessionID: sess, NoLocalCache: true})
			}
			if err != nil {
				return fmt.Errorf("chunk layer %s: %w", l, err)
			}
			mu.Lock()
			defer mu.Unlock()
			res.Layers[i] = Layer{Digest: l, Chunks: m.ChunkCount}
			res.BytesTotal += m.TotalSize
			res.BytesUploaded += st.BytesUploaded
			done += m.ChunkCount
			if left--; left == 0 {
				total = done
			}
			progress(done, max(total, done))
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	key, err := recordKey(pulled.Digest)
	if err != nil {
		return nil, err
	}
	if err := s.bucket.WriteAll(ctx, key, pulled.Record, &blob.WriterOptions{ContentType: "application/json"}); err != nil {
		return nil, fmt.Errorf("chunk %s: write record: %w", digest, err)
	}
	return res, nil
}

// Pull pulls ref into the host's image cache and cuts each layer it unpacks into the chunk
// store as the layer streams past, on another goroutine, so that its files are read once; a
// layer some image put into the store already is not cut again. Chunk then finds these layers
// done, and cuts only those the cache held before (or a concurrent pull unpacked). It returns
// the image and the bytes it uploaded to the chunk store.
func (s *Store) Pull(ctx context.Context, ref string) (*images.Image, int64, error) {
	var uploaded atomic.Int64
	img, err := s.cache.PullTapped(ctx, ref, func(layer string) (images.LayerTap, error) {
		sess, err := layerSession(layer)
		if err != nil {
			return nil, err
		}
		if _, err := s.layerManifest(ctx, layer); err == nil {
			return nil, nil
		} else if !errors.Is(err, snapshots.ErrNotFound) {
			return nil, err
		}
		p, err := s.snaps.Prechunk(ctx)
		if err != nil {
			return nil, err
		}
		return &layerTap{ctx: ctx, p: p, session: sess, uploaded: &uploaded}, nil
	})
	return img, uploaded.Load(), err
}

// layerTap cuts one layer into the chunk store as the image cache unpacks it.
type layerTap struct {
	ctx      context.Context
	p        *snapshots.Prechunk
	session  string
	uploaded *atomic.Int64
}

func (t *layerTap) File(dev, ino uint64, size int64) io.WriteCloser { return t.p.File(dev, ino, size) }

func (t *layerTap) Unpacked(dir string) error {
	_, st, err := t.p.Finish(t.ctx, dir, snapshots.Meta{SessionID: t.session})
	t.uploaded.Add(st.BytesUploaded)
	return err
}

func (t *layerTap) Abort() { t.p.Abort() }

// layerManifest is the newest manifest of layer digest, or snapshots.ErrNotFound.
func (s *Store) layerManifest(ctx context.Context, digest string) (*snapshots.Manifest, error) {
	sess, err := layerSession(digest)
	if err != nil {
		return nil, err
	}
	list, err := s.snaps.List(ctx, sess)
	if err != nil {
		return nil, err
	}
	if len(list) == 0 {
		return nil, fmt.Errorf("layer %s: %w", digest, snapshots.ErrNotFound)
	}
	return s.snaps.Load(ctx, sess, list[0].ID)
}

// ErrNotChunked is an image digest no Chunk stored.
var ErrNotChunked = errors.New("image not in the chunk store")

// ErrIncomplete is an image or warm layer whose record is in the chunk store while some of what
// it names is missing there, or does not hash to its name (a chunk collected or lost, a
// manifest damaged). An image's registry still serves the same bytes by digest; a warm layer
// exists nowhere else.
var ErrIncomplete = errors.New("incomplete in the chunk store")

// incomplete marks err with ErrIncomplete when it says the chunk store lacks, or holds a bad
// copy of, something a record names.
func incomplete(err error) error {
	if gcerrors.Code(err) == gcerrors.NotFound || errors.Is(err, snapshots.ErrNotFound) ||
		errors.Is(err, snapshots.ErrCorruptChunk) || errors.Is(err, snapshots.ErrInvalidManifest) {
		return fmt.Errorf("%w: %w", ErrIncomplete, err)
	}
	return err
}

// Stage makes the image digest pullable from this host's cache without a registry: every layer
// the cache lacks is restored from its chunks, then the record is added. It is idempotent.
func (s *Store) Stage(ctx context.Context, digest string, progress Progress) error {
	if _, err := s.cache.Lookup(digest); err == nil {
		return nil
	}
	key, err := recordKey(digest)
	if err != nil {
		return err
	}
	rec, err := s.bucket.ReadAll(ctx, key)
	if gcerrors.Code(err) == gcerrors.NotFound {
		return fmt.Errorf("stage %s: %w", digest, ErrNotChunked)
	}
	if err != nil {
		return fmt.Errorf("stage %s: read record: %w", digest, err)
	}
	_, layers, err := images.RecordLayers(rec)
	if err != nil {
		return fmt.Errorf("stage %s: %w", digest, err)
	}
	manifests := make([]*snapshots.Manifest, len(layers))
	total := 0
	for i, l := range layers {
		if manifests[i], err = s.layerManifest(ctx, l); err != nil {
			return fmt.Errorf("stage %s: %w", digest, incomplete(err))
		}
		total += manifests[i].ChunkCount
	}
	done := 0
	for i, l := range layers {
		if !s.cache.HasLayer(l) {
			err := s.cache.AddLayer(l, func(dir string) error {
				_, err := s.snaps.Restore(ctx, manifests[i], dir)
				return err
			})
			if err != nil {
				return fmt.Errorf("stage %s: %w", digest, incomplete(err))
			}
		}
		done += manifests[i].ChunkCount
		progress(done, total)
	}
	if err := s.cache.AddRecord(rec); err != nil {
		return fmt.Errorf("stage %s: %w", digest, err)
	}
	return nil
}

// warmSession is the snapshot "session" of the warm layers made under key.
func warmSession(key string) string { return "imgwarm-" + key }

// SaveWarm stores upperDir, a sandbox's changes after a warm command, as the warm layer named by
// key, and returns the layer's reference for StageWarm.
func (s *Store) SaveWarm(ctx context.Context, key, upperDir string) (string, error) {
	m, _, err := s.snaps.Snapshot(ctx, upperDir, nil, snapshots.Meta{SessionID: warmSession(key)})
	if err != nil {
		return "", fmt.Errorf("save warm layer %s: %w", key, err)
	}
	return m.SessionID + "/" + m.ID, nil
}

// StageWarm restores the warm layer ref (as SaveWarm returned it) into the image cache unless
// it is there already, and returns its directory, ready as an overlay lower dir.
func (s *Store) StageWarm(ctx context.Context, ref string) (string, error) {
	sess, id, ok := strings.Cut(ref, "/")
	if !ok || !strings.HasPrefix(sess, "imgwarm-") {
		return "", fmt.Errorf("warm layer %q is not a warm layer reference", ref)
	}
	m, err := s.snaps.Load(ctx, sess, id)
	if err != nil {
		return "", fmt.Errorf("warm layer %s: %w", ref, incomplete(err))
	}
	digest := warmDigest(ref)
	if !s.cache.HasLayer(digest) {
		err := s.cache.AddLayer(digest, func(d string) error {
			_, err := s.snaps.Restore(ctx, m, d)
			return err
		})
		if err != nil {
			return "", fmt.Errorf("warm layer %s: %w", ref, incomplete(err))
		}
	}
	return s.cache.LayerDir(digest)
}

// warmDigest is the digest a warm layer is kept under in the image cache: it goes through the
// cache like any layer, under a digest of its ref.
func warmDigest(ref string) string { return "sha256:" + hashHex(ref) }

// DeleteWarm removes every warm layer filed under key; its chunks go with the next GC when
// nothing else references them.
func (s *Store) DeleteWarm(ctx context.Context, key string) error {
	_, err := s.snaps.DeleteSession(ctx, warmSession(key))
	return err
}

// estimateChunks guesses the chunk references of a layer dir before it is chunked: one per
// started MiB of every regular file (the store's average chunk size).
func estimateChunks(dir string) int {
	n := 0
	_ = filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return nil
		}
		if info, err := d.Info(); err == nil {
			n += int(max(1, (info.Size()+(1<<20)-1)>>20))
		}
		return nil
	})
	return n
}

func hashHex(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}
