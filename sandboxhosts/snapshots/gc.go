package snapshots

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path"
	"strings"
	"sync/atomic"
	"time"

	"gocloud.dev/blob"
	"gocloud.dev/gcerrors"
	"golang.org/x/sync/errgroup"

	"github.com/hangar-dev/hangar/platform/ids"
)

const (
	snapshotLeases = "leases/snapshot/"
	gcLeases       = "leases/gc/"
	generationKey  = "gc/generation"
)

// ErrBusy is returned by GC while a snapshot is in progress; try again later.
var ErrBusy = errors.New("snapshot in progress")

// lease is a marker object whose presence tells the other side to keep off.
type lease struct {
	bucket *blob.Bucket
	key    string
	start  time.Time
	ttl    time.Duration
}

func (s *Store) takeLease(ctx context.Context, key string) (*lease, error) {
	l := &lease{bucket: s.bucket, key: key, start: time.Now(), ttl: s.opts.LeaseTTL}
	if err := s.bucket.WriteAll(ctx, key, nil, &blob.WriterOptions{ContentType: "application/octet-stream"}); err != nil {
		return nil, fmt.Errorf("take lease %s: %w", key, err)
	}
	return l, nil
}

// check fails once the lease is older than its TTL: the other side no longer honours it.
func (l *lease) check() error {
	if time.Since(l.start) > l.ttl {
		return fmt.Errorf("lease %s outlived its %s TTL", l.key, l.ttl)
	}
	return nil
}

func (l *lease) release() {
	// The work is done whether or not the delete lands: a leftover lease expires after its TTL.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_ = l.bucket.Delete(ctx, l.key)
}

// liveLeases counts the leases under prefix younger than the TTL.
func (s *Store) liveLeases(ctx context.Context, prefix string) (int, error) {
	n := 0
	it := s.bucket.List(&blob.ListOptions{Prefix: prefix})
	for {
		obj, err := it.Next(ctx)
		if err == io.EOF {
			return n, nil
		}
		if err != nil {
			return 0, fmt.Errorf("list leases %s: %w", prefix, err)
		}
		if time.Since(obj.ModTime) < s.opts.LeaseTTL {
			n++
		}
	}
}

// beginSnapshot takes a snapshot lease, waits until no GC is running and returns the GC
// generation the local index is now synced to.
func (s *Store) beginSnapshot(ctx context.Context, id string) (*lease, string, error) {
	l, err := s.takeLease(ctx, snapshotLeases+id)
	if err != nil {
		return nil, "", err
	}
	for {
		n, err := s.liveLeases(ctx, gcLeases)
		if err != nil {
			l.release()
			return nil, "", err
		}
		if n == 0 {
			break
		}
		select {
		case <-ctx.Done():
			l.release()
			return nil, "", fmt.Errorf("wait for GC to finish: %w", ctx.Err())
		case <-time.After(200 * time.Millisecond):
		}
	}
	gen, err := s.bucket.ReadAll(ctx, generationKey)
	if err != nil && gcerrors.Code(err) != gcerrors.NotFound {
		l.release()
		return nil, "", fmt.Errorf("read GC generation: %w", err)
	}
	if err := s.index.sync(string(gen)); err != nil {
		l.release()
		return nil, "", err
	}
	return l, string(gen), nil
}

// HoldingManifests runs fn under a snapshot lease, once no GC is running: GC (and whatever runs
// under WithoutSnapshots) steps aside until fn returns, so the manifests fn finds stay while it
// relies on them — as an image's chunking relies on a layer manifest it reuses until its record
// names the layer. id names the lease.
func (s *Store) HoldingManifests(ctx context.Context, id string, fn func() error) error {
	l, _, err := s.beginSnapshot(ctx, id)
	if err != nil {
		return err
	}
	defer l.release()
	return fn()
}

// WithoutSnapshots runs fn under a GC lease when no snapshot (or HoldingManifests) is in
// progress, and returns ErrBusy without running it otherwise: for work that deletes manifests,
// which a snapshot in progress may be reusing.
func (s *Store) WithoutSnapshots(ctx context.Context, fn func() error) error {
	l, err := s.takeLease(ctx, gcLeases+ids.New("gc"))
	if err != nil {
		return err
	}
	defer l.release()
	if n, err := s.liveLeases(ctx, snapshotLeases); err != nil {
		return err
	} else if n > 0 {
		return fmt.Errorf("%d live snapshot leases: %w", n, ErrBusy)
	}
	return fn()
}

// GC deletes every chunk that no stored manifest of any session references and that is older
// than grace, and reports how many it deleted. Chunks are shared across sessions, so the mark
// phase reads every manifest in the bucket; a manifest it cannot read stops GC before anything
// is deleted. It returns ErrBusy while a snapshot is in progress. grace protects chunks a
// snapshot that died before its manifest was written may still be retried with.
func (s *Store) GC(ctx context.Context, grace time.Duration) (int, error) {
	l, err := s.takeLease(ctx, gcLeases+ids.New("gc"))
	if err != nil {
		return 0, err
	}
	defer l.release()
	if n, err := s.liveLeases(ctx, snapshotLeases); err != nil {
		return 0, err
	} else if n > 0 {
		return 0, fmt.Errorf("gc: %d live snapshot leases: %w", n, ErrBusy)
	}

	marked := make(map[string]struct{})
	manifests, err := s.keys(ctx, "manifests/")
	if err != nil {
		return 0, err
	}
	for _, k := range manifests {
		m, err := s.loadKey(ctx, k)
		if err != nil {
			return 0, fmt.Errorf("gc mark: %w", err)
		}
		for _, e := range m.Entries {
			for _, c := range e.Chunks {
				marked[c.SHA256] = struct{}{}
			}
		}
	}

	cutoff := time.Now().Add(-grace)
	var doomed []string
	it := s.bucket.List(&blob.ListOptions{Prefix: "chunks/"})
	for {
		obj, err := it.Next(ctx)
		if err == io.EOF {
			break
		}
		if err != nil {
			return 0, fmt.Errorf("gc list chunks: %w", err)
		}
		sum := path.Base(obj.Key)
		if !isSHA256Hex(sum) || !strings.HasPrefix(obj.Key, chunkKey(sum)) {
			continue
		}
		if _, ok := marked[sum]; !ok && obj.ModTime.Before(cutoff) {
			doomed = append(doomed, obj.Key)
		}
	}
	if len(doomed) == 0 {
		return 0, nil
	}

	// Bump the generation before deleting: should GC die half way, every host still drops the
	// knowledge that the deleted chunks exist.
	if err := s.bucket.WriteAll(ctx, generationKey, []byte(ids.New("gen")), &blob.WriterOptions{ContentType: "text/plain"}); err != nil {
		return 0, fmt.Errorf("gc bump generation: %w", err)
	}
	var deleted atomic.Int64
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(s.opts.Transfers)
	for _, k := range doomed {
		g.Go(func() error {
			if err := l.check(); err != nil {
				return err
			}
			if err := s.bucket.Delete(gctx, k); err != nil && gcerrors.Code(err) != gcerrors.NotFound {
				return fmt.Errorf("gc delete %s: %w", k, err)
			}
			deleted.Add(1)
			return nil
		})
	}
	err = g.Wait()
	return int(deleted.Load()), err
}
