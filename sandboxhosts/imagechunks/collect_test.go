package imagechunks_test

import (
	"context"
	"crypto/rand"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"gocloud.dev/blob"
	"gocloud.dev/blob/memblob"

	"github.com/hangar-dev/hangar/internal/testkit"
	"github.com/hangar-dev/hangar/sandboxhosts/imagechunks"
	"github.com/hangar-dev/hangar/sandboxhosts/images"
	"github.com/hangar-dev/hangar/sandboxhosts/images/imagestest"
	"github.com/hangar-dev/hangar/sandboxhosts/snapshots"
)

func randomText(t *testing.T, n int) string {
	t.Helper()
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return string(b)
}

// chunksOf maps each file of the newest manifest of session to its chunks.
func chunksOf(t *testing.T, snaps *snapshots.Store, session string) map[string][]string {
	t.Helper()
	ctx := context.Background()
	list, err := snaps.List(ctx, session)
	if err != nil || len(list) == 0 {
		t.Fatalf("manifests of %s: %v (%d)", session, err, len(list))
	}
	m, err := snaps.Load(ctx, session, list[0].ID)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]string{}
	for _, e := range m.Entries {
		for _, c := range e.Chunks {
			out[string(e.Path)] = append(out[string(e.Path)], c.SHA256)
		}
	}
	return out
}

// chunkExists reports whether the bucket still holds chunk sum (the snapshot store's layout:
// chunks/<first two hex>/<sum>).
func chunkExists(t *testing.T, bucket *blob.Bucket, sum string) bool {
	t.Helper()
	ok, err := bucket.Exists(context.Background(), "chunks/"+sum[:2]+"/"+sum)
	if err != nil {
		t.Fatal(err)
	}
	return ok
}

// TestCollectForgetsImagesNothingReferencesAndKeepsSharedChunks: images A and B share a layer;
// a session's snapshot holds a copy of one of A's files; both have warm layers. Collecting with
// only B kept deletes A's record, its own layer's manifest, its warm layer and the chunks only
// those held, and keeps the shared layer's chunks, B's, B's warm layer's and the snapshot's —
// one mark and sweep, the snapshot GC's — but not while a chunking holds the manifests.
// Pruning the cache then drops A's prestaged copy.
func TestCollectForgetsImagesNothingReferencesAndKeepsSharedChunks(t *testing.T) {
	testkit.RequireRoot(t, "unpacking layers chowns")
	ctx := context.Background()
	bucket := memblob.OpenBucket(nil)
	t.Cleanup(func() { _ = bucket.Close() })
	reg := imagestest.Registry(t)
	snapCopy := randomText(t, 256<<10)
	shared := imagestest.Layer(t, imagestest.Dir("opt/", 0o755), imagestest.File("opt/shared.bin", randomText(t, 256<<10), 0o644))
	refA := imagestest.Push(t, reg, "test/a", imagestest.Image(t, shared,
		imagestest.Layer(t, imagestest.Dir("opt/", 0o755), imagestest.File("opt/a.bin", randomText(t, 256<<10), 0o644), imagestest.File("opt/a-copied.bin", snapCopy, 0o644))))
	refB := imagestest.Push(t, reg, "test/b", imagestest.Image(t, shared,
		imagestest.Layer(t, imagestest.Dir("opt/", 0o755), imagestest.File("opt/b.bin", randomText(t, 256<<10), 0o644))))

	cache, store, snaps := newHostWithSnapshots(t, bucket)
	pulled := map[string]*images.Pulled{}
	for name, ref := range map[string]string{"a": refA, "b": refB} {
		img, err := cache.Pull(ctx, ref)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := store.Chunk(ctx, img.Digest, noProgress); err != nil {
			t.Fatal(err)
		}
		if pulled[name], err = cache.Lookup(img.Digest); err != nil {
			t.Fatal(err)
		}
	}
	warm, warmDirs := map[string]string{}, map[string]string{}
	for _, name := range []string{"a", "b"} {
		upper := t.TempDir()
		if err := os.WriteFile(filepath.Join(upper, "warm-"+name), []byte(randomText(t, 64<<10)), 0o644); err != nil {
			t.Fatal(err)
		}
		ref, err := store.SaveWarm(ctx, "img_"+name+"-ejob_1", upper)
		if err != nil {
			t.Fatal(err)
		}
		warm[name] = ref
		if warmDirs[name], err = store.StageWarm(ctx, ref); err != nil {
			t.Fatal(err)
		}
	}
	session := t.TempDir()
	if err := os.WriteFile(filepath.Join(session, "copy.bin"), []byte(snapCopy), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, _, err := snaps.Snapshot(ctx, session, nil, snapshots.Meta{SessionID: "sess_using_a"}); err != nil {
		t.Fatal(err)
	}

	layerA := chunksOf(t, snaps, "imglayer-"+pulled["a"].Layers[1][len("sha256:"):])
	sharedLayer := chunksOf(t, snaps, "imglayer-"+pulled["a"].Layers[0][len("sha256:"):])
	layerB := chunksOf(t, snaps, "imglayer-"+pulled["b"].Layers[1][len("sha256:"):])
	warmA, warmB := chunksOf(t, snaps, filepath.Dir(warm["a"])), chunksOf(t, snaps, filepath.Dir(warm["b"]))

	keepB := imagechunks.Keep{Images: []string{pulled["b"].Digest}, WarmLayers: []string{warm["b"]}}
	// While a chunking holds the manifests (it may be reusing A's layers), nothing is deleted.
	err := snaps.HoldingManifests(ctx, "imgchunk-test", func() error {
		got, err := store.Collect(ctx, keepB, 0)
		if err != nil || !got.Busy || got.Records+got.Manifests+got.Chunks != 0 {
			t.Errorf("collect during a chunking: %+v %v, want busy and nothing deleted", got, err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	got, err := store.Collect(ctx, keepB, 0)
	if err != nil {
		t.Fatal(err)
	}
	if got.Records != 1 || got.Manifests != 2 || got.Chunks == 0 || got.Busy {
		t.Fatalf("collected %+v, want A's record, its layer and warm manifests and their chunks", got)
	}
	for _, tc := range []struct {
		name   string
		chunks []string
		kept   bool
	}{
		{"A's own file", layerA["opt/a.bin"], false},
		{"A's warm layer", warmA["warm-a"], false},
		{"A's file a snapshot copied", layerA["opt/a-copied.bin"], true},
		{"the shared layer", sharedLayer["opt/shared.bin"], true},
		{"B's own file", layerB["opt/b.bin"], true},
		{"B's warm layer", warmB["warm-b"], true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if len(tc.chunks) == 0 {
				t.Fatal("no chunks to look for")
			}
			for _, c := range tc.chunks {
				if chunkExists(t, bucket, c) != tc.kept {
					t.Fatalf("chunk %s: kept=%v, want %v", c, !tc.kept, tc.kept)
				}
			}
		})
	}

	_, other := newHost(t, bucket)
	if err := other.Stage(ctx, pulled["a"].Digest, noProgress); !errors.Is(err, imagechunks.ErrNotChunked) {
		t.Fatalf("staging the collected image: %v", err)
	}
	if err := other.Stage(ctx, pulled["b"].Digest, noProgress); err != nil {
		t.Fatalf("staging the kept image: %v", err)
	}
	if _, err := other.StageWarm(ctx, warm["b"]); err != nil {
		t.Fatalf("staging the kept warm layer: %v", err)
	}

	if n, err := store.PruneCache(imagechunks.Keep{Images: []string{pulled["b"].Digest}, WarmLayers: []string{warm["b"]}}); err != nil || n != 1 {
		t.Fatalf("pruning the cache removed %d images (%v), want A", n, err)
	}
	if _, err := cache.Lookup(pulled["a"].Digest); !errors.Is(err, images.ErrNotPulled) {
		t.Fatalf("A is still in the cache: %v", err)
	}
	if _, err := cache.Lookup(pulled["b"].Digest); err != nil {
		t.Fatalf("B left the cache: %v", err)
	}
	if _, err := os.Stat(filepath.Join(warmDirs["b"], "warm-b")); err != nil {
		t.Fatalf("B's staged warm layer was pruned: %v", err)
	}
	if _, err := os.Stat(warmDirs["a"]); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("A's staged warm layer is still in the cache: %v", err)
	}
}
