package e2e

import (
	"crypto/rand"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"

	"github.com/hangar-dev/hangar/functions/imagesvc"
	appv1 "github.com/hangar-dev/hangar/gen/svc/app/v1"
	"github.com/hangar-dev/hangar/internal/testenv"
	"github.com/hangar-dev/hangar/internal/testkit"
	"github.com/hangar-dev/hangar/records/sessiondb"
	hostimages "github.com/hangar-dev/hangar/sandboxhosts/images"
	"github.com/hangar-dev/hangar/sandboxhosts/images/imagestest"
	"github.com/hangar-dev/hangar/sandboxhosts/snapshots"
)

// layerChunks maps each file of an enabled image's layer to its chunks in the chunk store.
func (is *imageStack) layerChunks(t *testing.T, layer v1.Layer) map[string][]string {
	t.Helper()
	d, err := layer.Digest()
	if err != nil {
		t.Fatal(err)
	}
	snaps := snapshots.NewStore(is.sb.Bucket, t.TempDir(), snapshots.Options{})
	session := "imglayer-" + d.Hex
	list, err := snaps.List(t.Context(), session)
	if err != nil || len(list) == 0 {
		t.Fatalf("the chunk store has no manifest of layer %s: %v", d, err)
	}
	m, err := snaps.Load(t.Context(), session, list[0].ID)
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

// chunksKept counts how many of chunks the bucket still holds (the snapshot store's layout:
// chunks/<first two hex>/<sum>).
func (is *imageStack) chunksKept(t *testing.T, chunks []string) int {
	t.Helper()
	n := 0
	for _, c := range chunks {
		ok, err := is.sb.Bucket.Exists(t.Context(), "chunks/"+c[:2]+"/"+c)
		if err != nil {
			t.Fatal(err)
		}
		if ok {
			n++
		}
	}
	return n
}

// cached reports whether a host's image cache holds image digest (its prestaged copy).
func cached(h *testenv.TestHost, digest string) bool {
	_, err := os.Stat(filepath.Join(h.DataDir, "images", "manifests", "sha256", strings.TrimPrefix(digest, "sha256:")+".json"))
	return err == nil
}

// TestDisablingAnImageCollectsWhatNothingElseReferences: images A and B share a base layer; a
// session of A copies one of A's files and is snapshotted. Disabling A collects its prestaged
// copy on the host that runs nothing of it, while A's chunks (its session may resume anywhere
// from them), the shared chunks, B (which still starts sessions without its registry) and the
// running session (on its host's copy) stay. Once the session is deleted, the next collection
// takes A's own chunks and those only the snapshot held (one mark and sweep, the snapshot GC's).
func TestDisablingAnImageCollectsWhatNothingElseReferences(t *testing.T) {
	is := newImageStack(t, 2)
	is.runWorker(t, imagesvc.WorkerOptions{Name: "w"})
	ctx := t.Context()
	random := func(n int) string {
		b := make([]byte, n)
		_, _ = rand.Read(b)
		return string(b)
	}
	base, err := hostimages.Busybox(nil)
	if err != nil {
		t.Fatal(err)
	}
	shared := imagestest.Layer(t, imagestest.Dir("opt/", 0o755), imagestest.File("opt/shared.bin", random(2<<20), 0o644))
	ownA := imagestest.Layer(t, imagestest.Dir("opt/", 0o755), imagestest.File("opt/a.bin", random(1<<20), 0o644), imagestest.File("opt/a-copied.bin", random(1<<20), 0o644))
	ownB := imagestest.Layer(t, imagestest.Dir("opt/", 0o755), imagestest.File("opt/b.bin", random(1<<20), 0o644))
	uris, digests := map[string]string{}, map[string]string{}
	for name, own := range map[string]v1.Layer{"a": ownA, "b": ownB} {
		img, err := mutate.AppendLayers(base, shared, own)
		if err != nil {
			t.Fatal(err)
		}
		uris[name] = is.push(t, "team/collect-"+name, img)
		job := is.waitJob(t, is.enable(t, uris[name], nil).GetId(), "ready", "failed")
		if job.GetState() != "ready" {
			t.Fatalf("enable %s: %s %s", name, job.GetState(), job.GetError())
		}
		digests[name] = job.GetManifestDigest()
	}
	chunksA, chunksShared, chunksB := is.layerChunks(t, ownA), is.layerChunks(t, shared), is.layerChunks(t, ownB)

	session := is.create(t, &appv1.CreateSessionRequest{ImageUri: uris["a"]})
	sum := is.sh(t, session, "sha256sum < /opt/a.bin")
	is.sh(t, session, "cp /opt/a-copied.bin /copy.bin")
	if _, err := is.svc.Snapshot(ctx, connect.NewRequest(&appv1.SnapshotRequest{SessionId: session})); err != nil {
		t.Fatal(err)
	}
	rec, err := sessiondb.NewStore(is.sb.DB, time.Now).Get(ctx, session)
	if err != nil {
		t.Fatal(err)
	}
	running, idle := is.hosts[0], is.hosts[1]
	if rec.HostID != running.Host.ID() {
		running, idle = idle, running
	}
	if !cached(idle, digests["a"]) || !cached(running, digests["a"]) {
		t.Fatal("A was not prestaged on both hosts")
	}

	if _, err := is.images.DisableImage(ctx, connect.NewRequest(&appv1.DisableImageRequest{ImageUri: uris["a"]})); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, time.Minute, "A's prestaged copy to leave the host that runs nothing of it", func() (bool, string) {
		return !cached(idle, digests["a"]), "it is still there"
	})
	for _, tc := range []struct {
		name   string
		chunks []string
	}{
		{"A's own (its session lives)", chunksA["opt/a.bin"]},
		{"the shared layer's", chunksShared["opt/shared.bin"]},
		{"B's own", chunksB["opt/b.bin"]},
		{"those of A's file the snapshot holds a copy of", chunksA["opt/a-copied.bin"]},
	} {
		if len(tc.chunks) == 0 || is.chunksKept(t, tc.chunks) != len(tc.chunks) {
			t.Errorf("%s chunks were collected", tc.name)
		}
	}
	if !cached(running, digests["a"]) || !cached(idle, digests["b"]) {
		t.Error("the running session's image or B left a host's cache")
	}
	if got := is.sh(t, session, "sha256sum < /opt/a.bin"); got != sum {
		t.Errorf("the running session of A reads %q, was %q", got, sum)
	}
	_, err = is.svc.CreateSession(ctx, connect.NewRequest(&appv1.CreateSessionRequest{ImageUri: uris["a"]}))
	testenv.WantCode(t, err, connect.CodeFailedPrecondition)
	is.offline.Store(true)
	if got := is.sh(t, is.create(t, &appv1.CreateSessionRequest{ImageUri: uris["b"]}), "wc -c < /opt/shared.bin"); got != fmt.Sprintf("%d\n", 2<<20) {
		t.Errorf("a session of B sees %q", got)
	}

	if _, err := is.svc.DeleteSession(ctx, connect.NewRequest(&appv1.DeleteSessionRequest{SessionId: session})); err != nil {
		t.Fatal(err)
	}
	is.collect(t)
	for _, file := range []string{"opt/a.bin", "opt/a-copied.bin"} {
		if n := is.chunksKept(t, chunksA[file]); n != 0 {
			t.Errorf("%d chunks of A's %s stayed after its last session was deleted", n, file)
		}
	}
	if cached(running, digests["a"]) {
		t.Error("A's copy stayed on the host of the deleted session")
	}
	if is.chunksKept(t, chunksShared["opt/shared.bin"]) != len(chunksShared["opt/shared.bin"]) {
		t.Error("the shared layer's chunks went with A")
	}
}
