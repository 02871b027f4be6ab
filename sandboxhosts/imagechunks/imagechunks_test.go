package imagechunks_test

import (
	"context"
	"crypto/rand"
	"errors"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"gocloud.dev/blob"
	"gocloud.dev/blob/memblob"

	"github.com/hangar-dev/hangar/internal/testkit"
	"github.com/hangar-dev/hangar/sandboxhosts/imagechunks"
	"github.com/hangar-dev/hangar/sandboxhosts/images"
	"github.com/hangar-dev/hangar/sandboxhosts/images/imagestest"
	"github.com/hangar-dev/hangar/sandboxhosts/snapshots"
)

// newHost is one host's image cache and chunk store over the shared bucket.
func newHost(t testing.TB, bucket *blob.Bucket) (*images.Cache, *imagechunks.Store) {
	t.Helper()
	c, store, _ := newHostWithSnapshots(t, bucket)
	return c, store
}

// newHostWithSnapshots is newHost with the host's snapshot store.
func newHostWithSnapshots(t testing.TB, bucket *blob.Bucket) (*images.Cache, *imagechunks.Store, *snapshots.Store) {
	t.Helper()
	dir := t.TempDir()
	c, err := images.New(filepath.Join(dir, "images"), images.WithRegistries(imagestest.Allow))
	if err != nil {
		t.Fatal(err)
	}
	snaps := snapshots.NewStore(bucket, filepath.Join(dir, "chunks"), snapshots.Options{})
	return c, imagechunks.New(c, snaps, bucket), snaps
}

func noProgress(int, int) {}

// stageCopy stages digest from the chunk store with store, whose cache is to, and returns the
// image as from (the host that chunked it) and to hold it, to compare.
func stageCopy(t *testing.T, store *imagechunks.Store, digest string, from, to *images.Cache) (want, got *images.Pulled) {
	t.Helper()
	if err := store.Stage(t.Context(), digest, noProgress); err != nil {
		t.Fatal(err)
	}
	want, err := from.Lookup(digest)
	if err != nil {
		t.Fatal(err)
	}
	if got, err = to.Lookup(digest); err != nil {
		t.Fatal(err)
	}
	return want, got
}

func TestAChunkedImageIsStagedOnAnotherHostWithoutItsRegistry(t *testing.T) {
	testkit.RequireRoot(t, "unpacking layers chowns and makes whiteouts")
	ctx := context.Background()
	bucket := memblob.OpenBucket(nil)
	t.Cleanup(func() { _ = bucket.Close() })
	reg := imagestest.Registry(t)
	ref := imagestest.Push(t, reg, "test/two", imagestest.Image(t,
		imagestest.Layer(t, imagestest.Dir("etc/", 0o755), imagestest.File("etc/a", "first layer\n", 0o644), imagestest.File("etc/gone", "x", 0o644)),
		imagestest.Layer(t, imagestest.Whiteout("etc", "gone"), imagestest.File("etc/b", "second layer\n", 0o600))))

	cacheA, storeA := newHost(t, bucket)
	img, err := cacheA.Pull(ctx, ref)
	if err != nil {
		t.Fatal(err)
	}
	calls := 0
	res, err := storeA.Chunk(ctx, img.Digest, func(int, int) { calls++ })
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Layers) != 2 || calls != 2 || res.BytesUploaded == 0 {
		t.Fatalf("chunk: %+v after %d progress calls", res, calls)
	}
	again, err := storeA.Chunk(ctx, img.Digest, noProgress)
	if err != nil || again.BytesUploaded != 0 {
		t.Fatalf("chunking again uploaded %d bytes (%v): a chunked layer is reused", again.BytesUploaded, err)
	}

	cacheB, storeB := newHost(t, bucket)
	want, got := stageCopy(t, storeB, img.Digest, cacheA, cacheB)
	for i := range want.LayerDirs {
		for _, name := range []string{"etc/a", "etc/b", "etc/gone"} {
			a, errA := os.Lstat(filepath.Join(want.LayerDirs[i], name))
			b, errB := os.Lstat(filepath.Join(got.LayerDirs[i], name))
			if (errA == nil) != (errB == nil) || (errA == nil && (a.Mode() != b.Mode() || a.Size() != b.Size())) {
				t.Fatalf("layer %d %s differs after staging: %v / %v (%v / %v)", i, name, a, b, errA, errB)
			}
		}
	}
	// The staged image is pulled from the cache alone.
	if _, err := cacheB.Pull(ctx, ref[:len(ref)-len(":latest")]+"@"+img.Digest); err != nil {
		t.Fatalf("pull of the staged digest: %v", err)
	}

	unknown := "sha256:" + "00000000000000000000000000000000" + "00000000000000000000000000000000"
	if err := storeB.Stage(ctx, unknown, noProgress); !errors.Is(err, imagechunks.ErrNotChunked) {
		t.Fatalf("staging an image nobody chunked: %v", err)
	}
}

func TestAWarmLayerRoundTripsThroughTheChunkStore(t *testing.T) {
	testkit.RequireRoot(t, "restoring keeps owners")
	ctx := context.Background()
	bucket := memblob.OpenBucket(nil)
	t.Cleanup(func() { _ = bucket.Close() })
	_, storeA := newHost(t, bucket)
	upper := t.TempDir()
	if err := os.MkdirAll(filepath.Join(upper, "opt", "deps"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(upper, "opt", "deps", "ok"), []byte("installed\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	ref, err := storeA.SaveWarm(ctx, "img_x-ejob_y", upper)
	if err != nil {
		t.Fatal(err)
	}
	_, storeB := newHost(t, bucket)
	dir, err := storeB.StageWarm(ctx, ref)
	if err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "opt", "deps", "ok")); err != nil || string(b) != "installed\n" {
		t.Fatalf("staged warm layer holds %q (%v)", b, err)
	}
	for _, bad := range []string{"", "manifests/x", "imglayer-abc/snap_1", "imgwarm-a"} {
		if _, err := storeB.StageWarm(ctx, bad); err == nil {
			t.Fatalf("warm layer reference %q was accepted", bad)
		}
	}
}

// An image or warm layer whose record is in the chunk store but one of whose chunks is gone, or
// rotten, stages as ErrIncomplete (a host then pulls the image from its registry), never as the
// files it could restore, and leaves nothing in the cache.
func TestAnImageOrWarmLayerMissingAChunkStagesAsIncomplete(t *testing.T) {
	testkit.RequireRoot(t, "unpacking layers chowns and makes whiteouts")
	ctx := context.Background()
	reg := imagestest.Registry(t)
	ref := imagestest.Push(t, reg, "test/holes", imagestest.Image(t,
		imagestest.Layer(t, imagestest.Dir("etc/", 0o755), imagestest.File("etc/a", "the layer's one file\n", 0o644))))
	chunkKeys := func(t *testing.T, bucket *blob.Bucket) []string {
		var keys []string
		it := bucket.List(&blob.ListOptions{Prefix: "chunks/"})
		for {
			obj, err := it.Next(ctx)
			if err == io.EOF {
				return keys
			}
			if err != nil {
				t.Fatal(err)
			}
			keys = append(keys, obj.Key)
		}
	}
	for _, c := range []struct {
		name   string
		damage func(t *testing.T, bucket *blob.Bucket, key string)
	}{
		{"a chunk deleted", func(t *testing.T, bucket *blob.Bucket, key string) {
			if err := bucket.Delete(ctx, key); err != nil {
				t.Fatal(err)
			}
		}},
		{"a chunk rotten", func(t *testing.T, bucket *blob.Bucket, key string) {
			if err := bucket.WriteAll(ctx, key, []byte("not what it hashed to"), nil); err != nil {
				t.Fatal(err)
			}
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			bucket := memblob.OpenBucket(nil)
			t.Cleanup(func() { _ = bucket.Close() })
			cacheA, storeA := newHost(t, bucket)
			img, err := cacheA.Pull(ctx, ref)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := storeA.Chunk(ctx, img.Digest, noProgress); err != nil {
				t.Fatal(err)
			}
			for _, key := range chunkKeys(t, bucket) {
				c.damage(t, bucket, key)
			}
			cacheB, storeB := newHost(t, bucket)
			if err := storeB.Stage(ctx, img.Digest, noProgress); !errors.Is(err, imagechunks.ErrIncomplete) {
				t.Fatalf("staging an image with %s: %v, want ErrIncomplete", c.name, err)
			}
			if _, err := cacheB.Lookup(img.Digest); err == nil {
				t.Fatal("the image is in the cache after a failed stage")
			}

			upper := t.TempDir()
			if err := os.WriteFile(filepath.Join(upper, "deps"), []byte("installed once\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			before := len(chunkKeys(t, bucket))
			warm, err := storeA.SaveWarm(ctx, "img_x-ejob_"+strings.ReplaceAll(c.name, " ", "_"), upper)
			if err != nil {
				t.Fatal(err)
			}
			if after := chunkKeys(t, bucket); len(after) != before+1 {
				t.Fatalf("the warm layer added %d chunks, want 1", len(after)-before)
			}
			for _, key := range chunkKeys(t, bucket) {
				c.damage(t, bucket, key)
			}
			if _, err := storeB.StageWarm(ctx, warm); !errors.Is(err, imagechunks.ErrIncomplete) {
				t.Fatalf("staging a warm layer with %s: %v, want ErrIncomplete", c.name, err)
			}
		})
	}
}

// TestPullCutsLayersIntoChunksAsTheyUnpack pulls through the chunk store: every layer is cut
// as it unpacks, so the chunk stage that follows uploads nothing, and another host staging the
// image from the chunks gets the very files the registry's layers hold — also when the layer
// plays tricks on a streaming chunker: a path written twice, a written file then replaced by a
// hardlink to another file of the same size, a big file linked under a name that sorts first.
func TestPullCutsLayersIntoChunksAsTheyUnpack(t *testing.T) {
	testkit.RequireRoot(t, "unpacking layers chowns and makes whiteouts")
	ctx := context.Background()
	bucket := memblob.OpenBucket(nil)
	t.Cleanup(func() { _ = bucket.Close() })
	reg := imagestest.Registry(t)
	big := make([]byte, 3<<20) // several chunks
	_, _ = rand.Read(big)
	ref := imagestest.Push(t, reg, "test/tricks", imagestest.Image(t,
		imagestest.Layer(t, imagestest.Dir("etc/", 0o755), imagestest.File("etc/a", "first layer\n", 0o644), imagestest.File("etc/gone", "x", 0o644)),
		imagestest.Layer(t, imagestest.Whiteout("etc", "gone"),
			imagestest.File("twice", "old content", 0o644), imagestest.File("twice", "new content", 0o600),
			imagestest.File("x", "xxxxxxxxxxx", 0o644), imagestest.File("y", "yyyyyyyyyyy", 0o644), imagestest.Hardlink("x", "y"),
			imagestest.File("zbig", string(big), 0o644), imagestest.Hardlink("abig", "zbig"))))

	cacheA, storeA := newHost(t, bucket)
	img, uploaded, err := storeA.Pull(ctx, ref)
	if err != nil {
		t.Fatal(err)
	}
	if uploaded < int64(len(big)) {
		t.Fatalf("the pull uploaded %d bytes, less than the layer's big file", uploaded)
	}
	res, err := storeA.Chunk(ctx, img.Digest, noProgress)
	if err != nil || len(res.Layers) != 2 || res.BytesUploaded != 0 {
		t.Fatalf("chunk after a chunking pull: %+v, %v: the pull cut every layer already", res, err)
	}

	cacheB, storeB := newHost(t, bucket)
	want, got := stageCopy(t, storeB, img.Digest, cacheA, cacheB)
	expect := map[string]string{"twice": "new content", "x": "yyyyyyyyyyy", "y": "yyyyyyyyyyy", "zbig": string(big), "abig": string(big)}
	for name, content := range expect {
		for host, dirs := range map[string][]string{"A": want.LayerDirs, "B": got.LayerDirs} {
			b, err := os.ReadFile(filepath.Join(dirs[1], name))
			if err != nil || string(b) != content {
				t.Fatalf("host %s: %s holds %.20q (%d bytes), want %.20q: %v", host, name, b, len(b), content, err)
			}
		}
	}
	if fi, err := os.Lstat(filepath.Join(got.LayerDirs[1], "etc", "gone")); err != nil || fi.Mode()&os.ModeCharDevice == 0 {
		t.Fatalf("the staged whiteout: %v, %v", fi, err)
	}
}

// TestALayerThatFailsItsEndChecksLeavesNoManifest: the registry flips one byte in the middle of
// a layer's blob (stored, incompressible data, so the tar stays well formed and the unpacker
// and the chunker see the whole layer); only the checks at its end fail. The pull fails and no
// manifest of that layer is written: nothing could stage the wrong bytes as the image's layer.
func TestALayerThatFailsItsEndChecksLeavesNoManifest(t *testing.T) {
	testkit.RequireRoot(t, "unpacking layers chowns and makes whiteouts")
	ctx := context.Background()
	bucket := memblob.OpenBucket(nil)
	t.Cleanup(func() { _ = bucket.Close() })
	big := make([]byte, 2<<20)
	_, _ = rand.Read(big)
	layer := imagestest.Layer(t, imagestest.Dir("opt/", 0o755), imagestest.File("opt/a.bin", string(big), 0o644))
	digest, err := layer.Digest()
	if err != nil {
		t.Fatal(err)
	}
	reg := imagestest.Registry(t, func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Method == http.MethodGet && strings.HasSuffix(r.URL.Path, "/blobs/"+digest.String()) {
				w = &flipByte{ResponseWriter: w, at: 1 << 20}
			}
			next.ServeHTTP(w, r)
		})
	})
	ref := imagestest.Push(t, reg, "test/flipped", imagestest.Image(t, layer))

	_, store := newHost(t, bucket)
	_, _, err = store.Pull(ctx, ref)
	if err == nil {
		t.Fatal("a layer with a flipped byte was pulled")
	}
	t.Logf("the pull failed: %v", err)
	it := bucket.List(&blob.ListOptions{Prefix: "manifests/imglayer-" + digest.Hex + "/"})
	if obj, err := it.Next(ctx); err != io.EOF {
		t.Fatalf("the failed layer has a manifest: %v, %v", obj, err)
	}
}

// flipByte inverts the body byte at offset at.
type flipByte struct {
	http.ResponseWriter
	at, off int
}

func (f *flipByte) Write(p []byte) (int, error) {
	if i := f.at - f.off; i >= 0 && i < len(p) {
		p = append([]byte(nil), p...)
		p[i] ^= 0xff
	}
	f.off += len(p)
	return f.ResponseWriter.Write(p)
}
