package imagechunks

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"gocloud.dev/blob"
	"gocloud.dev/gcerrors"

	"github.com/hangar-dev/hangar/sandboxhosts/images"
	"github.com/hangar-dev/hangar/sandboxhosts/snapshots"
)

// Keep is what still references enabled images' data: image manifest digests (sha256:...) of
// enabled images, enable jobs in progress and sessions not deleted, and the warm layers (as
// SaveWarm returned them) of the same.
type Keep struct {
	Images     []string
	WarmLayers []string
}

// Collected is what Collect removed.
type Collected struct {
	// Records and Manifests count the image records and the layer and warm manifests deleted.
	Records, Manifests int
	// Chunks counts the chunks the snapshot GC then deleted; Busy reports that a snapshot or a
	// chunking was in progress, so the deletes or the GC did not run (the next collection, or
	// the hosts' hourly GC, does them).
	Chunks int
	Busy   bool
}

// Collect makes the chunk store forget the images keep does not name, then collects chunks.
// There is one collector of chunks, the snapshot GC (mark and sweep over every manifest under
// manifests/): an image's layer and warm manifests are roots of its chunks only while something
// references the image, so Collect deletes the image records of digests keep does not name, the
// layer manifests no kept record uses and the warm manifests keep does not name, and the GC
// that follows deletes exactly the chunks no remaining manifest — a kept image's layer, a
// session's snapshot — references. grace is the GC's (chunks younger are kept).
func (s *Store) Collect(ctx context.Context, keep Keep, grace time.Duration) (Collected, error) {
	var out Collected
	// The deletes step aside while a chunking (or a snapshot) is in progress: it may be reusing
	// a layer manifest its record does not name yet.
	err := s.snaps.WithoutSnapshots(ctx, func() (err error) {
		out, err = s.forget(ctx, keep)
		return err
	})
	if errors.Is(err, snapshots.ErrBusy) {
		out.Busy = true
		return out, nil
	}
	if err != nil {
		return out, err
	}
	out.Chunks, err = s.snaps.GC(ctx, grace)
	if errors.Is(err, snapshots.ErrBusy) {
		out.Busy, err = true, nil
	}
	return out, err
}

// forget deletes the image records, layer manifests and warm manifests keep does not hold.
func (s *Store) forget(ctx context.Context, keep Keep) (Collected, error) {
	var out Collected
	wanted := map[string]bool{}
	for _, d := range keep.Images {
		h, err := v1.NewHash(d)
		if err != nil {
			return out, fmt.Errorf("collect: keep %q: %w", d, err)
		}
		wanted[h.Hex] = true
	}
	// Records first, so a layer goes only after no record can stage it.
	liveLayers := map[string]bool{}
	records, err := s.list(ctx, recordsPrefix, "")
	if err != nil {
		return out, err
	}
	for _, key := range records {
		hex := strings.TrimSuffix(path.Base(key), ".json")
		if !wanted[hex] {
			if err := s.delete(ctx, key); err != nil {
				return out, err
			}
			out.Records++
			continue
		}
		rec, err := s.bucket.ReadAll(ctx, key)
		if err != nil {
			return out, fmt.Errorf("collect: read %s: %w", key, err)
		}
		_, layers, err := images.RecordLayers(rec)
		if err != nil {
			return out, fmt.Errorf("collect: %s: %w", key, err)
		}
		for _, l := range layers {
			sess, err := layerSession(l)
			if err != nil {
				return out, err
			}
			liveLayers[sess] = true
		}
	}
	liveWarm := map[string]bool{}
	for _, ref := range keep.WarmLayers {
		sess, _, _ := strings.Cut(ref, "/")
		liveWarm[sess] = true
	}
	for _, kind := range []struct {
		prefix string
		live   map[string]bool
	}{{"imglayer-", liveLayers}, {"imgwarm-", liveWarm}} {
		prefix, live := kind.prefix, kind.live
		sessions, err := s.list(ctx, "manifests/"+prefix, "/")
		if err != nil {
			return out, err
		}
		for _, dir := range sessions {
			sess := path.Base(strings.TrimSuffix(dir, "/"))
			if live[sess] {
				continue
			}
			n, err := s.snaps.DeleteSession(ctx, sess)
			out.Manifests += n
			if err != nil {
				return out, fmt.Errorf("collect: %w", err)
			}
		}
	}
	return out, nil
}

// recordsPrefix is where image records are (recordKey).
const recordsPrefix = "imagerecords/sha256/"

// list returns the keys under prefix, or with a delimiter the "directories" under it.
func (s *Store) list(ctx context.Context, prefix, delimiter string) ([]string, error) {
	var out []string
	it := s.bucket.List(&blob.ListOptions{Prefix: prefix, Delimiter: delimiter})
	for {
		obj, err := it.Next(ctx)
		if err == io.EOF {
			return out, nil
		}
		if err != nil {
			return nil, fmt.Errorf("collect: list %s: %w", prefix, err)
		}
		if delimiter == "" || obj.IsDir {
			out = append(out, obj.Key)
		}
	}
}

func (s *Store) delete(ctx context.Context, key string) error {
	if err := s.bucket.Delete(ctx, key); err != nil && gcerrors.Code(err) != gcerrors.NotFound {
		return fmt.Errorf("collect: delete %s: %w", key, err)
	}
	return nil
}

// PruneCache removes from the host's image cache every image keep does not name and every
// layer only those used, keeping the warm layers keep names: the host's prestaged copies of
// images nothing references. The caller adds the images its own sandboxes run on to keep.
func (s *Store) PruneCache(keep Keep) (int, error) {
	warm := make([]string, len(keep.WarmLayers))
	for i, ref := range keep.WarmLayers {
		warm[i] = warmDigest(ref)
	}
	return s.cache.Prune(keep.Images, warm)
}
