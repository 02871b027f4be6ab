package e2e

import (
	"context"
	"crypto/rand"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/hangar-dev/hangar/functions/imagesvc"
	appv1 "github.com/hangar-dev/hangar/gen/svc/app/v1"
	"github.com/hangar-dev/hangar/internal/testenv"
	"github.com/hangar-dev/hangar/internal/testkit"
	"github.com/hangar-dev/hangar/records/fleet"
	"github.com/hangar-dev/hangar/records/sessiondb"
	hostimages "github.com/hangar-dev/hangar/sandboxhosts/images"
	"github.com/hangar-dev/hangar/sandboxhosts/images/imagestest"
)

// disabledImageSession is a session of an enabled image with a file of its own, snapshotted,
// whose image was then disabled and collected, and the session evicted.
type disabledImageSession struct {
	uri, digest, session string
	// host is where the session ran; ownChunks the chunks of the image's own file, sum that
	// file's sha256sum as the session read it.
	host      *testenv.TestHost
	ownChunks []string
	sum       string
}

// evictedSessionOfADisabledImage enables an image, starts a session of it that writes
// /root/mine, snapshots it, disables the image, waits until hosts running nothing of it have
// dropped their copies (the disable's collection ran) and evicts the session.
func (is *imageStack) evictedSessionOfADisabledImage(t *testing.T, repo string) *disabledImageSession {
	t.Helper()
	ctx := t.Context()
	base, err := hostimages.Busybox(nil)
	if err != nil {
		t.Fatal(err)
	}
	own := make([]byte, 1<<20)
	_, _ = rand.Read(own)
	layer := imagestest.Layer(t, imagestest.Dir("opt/", 0o755), imagestest.File("opt/own.bin", string(own), 0o644))
	img, err := mutate.AppendLayers(base, layer)
	if err != nil {
		t.Fatal(err)
	}
	d := &disabledImageSession{uri: is.push(t, repo, img)}
	job := is.waitJob(t, is.enable(t, d.uri, nil).GetId(), "ready", "failed")
	if job.GetState() != "ready" {
		t.Fatalf("enable: %s %s", job.GetState(), job.GetError())
	}
	d.digest = job.GetManifestDigest()
	d.ownChunks = is.layerChunks(t, layer)["opt/own.bin"]
	if len(d.ownChunks) == 0 {
		t.Fatal("the image's own file has no chunks")
	}

	d.session = is.create(t, &appv1.CreateSessionRequest{ImageUri: d.uri})
	d.sum = is.sh(t, d.session, "sha256sum < /opt/own.bin")
	is.sh(t, d.session, "echo mine > /root/mine")
	if _, err := is.svc.Snapshot(ctx, connect.NewRequest(&appv1.SnapshotRequest{SessionId: d.session})); err != nil {
		t.Fatal(err)
	}
	got, err := is.svc.GetSession(ctx, connect.NewRequest(&appv1.GetSessionRequest{SessionId: d.session}))
	if err != nil {
		t.Fatal(err)
	}
	for _, h := range is.hosts {
		if h.ID() == got.Msg.GetSession().GetHostId() {
			d.host = h
		}
	}
	if _, err := is.images.DisableImage(ctx, connect.NewRequest(&appv1.DisableImageRequest{ImageUri: d.uri})); err != nil {
		t.Fatal(err)
	}
	if _, err := is.svc.EvictLocal(ctx, connect.NewRequest(&appv1.EvictLocalRequest{SessionId: d.session})); err != nil {
		t.Fatal(err)
	}
	// Now no sandbox runs the image: a collection drops every host's copy.
	is.collect(t)
	for _, h := range is.hosts {
		if cached(h, d.digest) {
			t.Fatalf("host %s kept its copy of the disabled image", h.ID())
		}
	}
	if n := is.chunksKept(t, d.ownChunks); n != len(d.ownChunks) {
		t.Fatalf("%d of %d chunks of the image's own file stayed while its session lives", n, len(d.ownChunks))
	}
	return d
}

// collect runs one collection that is not deferred.
func (is *imageStack) collect(t *testing.T) *imagesvc.Collection {
	t.Helper()
	var c *imagesvc.Collection
	testkit.Eventually(t, time.Minute, "a collection", func() (bool, string) {
		var err error
		c, err = is.a.Images().CollectImages(context.WithoutCancel(t.Context()))
		if err != nil {
			return false, err.Error()
		}
		return c.Deferred == "" && !c.SweepBusy, fmt.Sprintf("%+v", c)
	})
	return c
}

// TestASessionOfADisabledImageResumesOnAnotherHostWithoutItsRegistry: a session of a disabled
// image, evicted after every host dropped its copy of the image, resumes on the other host with
// its own host dead and the image deleted from a registry that is then down: the host stages the
// image from the chunk store, which keeps it while the session lives, and the session sees the
// image's files and its own. Deleting the session lets the next collection take the chunks.
func TestASessionOfADisabledImageResumesOnAnotherHostWithoutItsRegistry(t *testing.T) {
	is := newImageStack(t, 2)
	is.runWorker(t, imagesvc.WorkerOptions{Name: "w"})
	ctx := t.Context()
	d := is.evictedSessionOfADisabledImage(t, "team/disabled-resume")

	tag, err := name.ParseReference(d.uri)
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.Delete(tag.Context().Digest(d.digest)); err != nil {
		t.Fatalf("delete the image from its registry: %v", err)
	}
	is.offline.Store(true)
	d.host.Kill(t)
	hosts := fleet.New(is.sb.DB, time.Now, is.sb.Config.Host.HostTimeout)
	testkit.Eventually(t, 3*is.sb.Config.Host.HostTimeout, "the fleet to see host "+d.host.ID()+" dead", func() (bool, string) {
		h, err := hosts.Get(ctx, d.host.ID())
		if err != nil {
			return false, err.Error()
		}
		return !hosts.Alive(h), "it still looks alive"
	})

	res, err := is.svc.Resume(ctx, connect.NewRequest(&appv1.ResumeRequest{SessionId: d.session}))
	if err != nil {
		t.Fatalf("resume: %v", err)
	}
	if res.Msg.GetSnapshotId() == "" {
		t.Fatalf("resumed from nothing: %v", res.Msg)
	}
	got, err := is.svc.GetSession(ctx, connect.NewRequest(&appv1.GetSessionRequest{SessionId: d.session}))
	if err != nil {
		t.Fatal(err)
	}
	if got.Msg.GetSession().GetHostId() == d.host.ID() {
		t.Fatalf("resumed on the dead host %s", d.host.ID())
	}
	if out := is.sh(t, d.session, "cat /root/mine; sha256sum < /opt/own.bin"); out != "mine\n"+d.sum {
		t.Fatalf("the resumed session reads %q, want its own file and the image's (%q)", out, d.sum)
	}

	is.collect(t)
	if n := is.chunksKept(t, d.ownChunks); n != len(d.ownChunks) {
		t.Fatalf("a collection took %d of the %d chunks of the resumed session's image", len(d.ownChunks)-n, len(d.ownChunks))
	}
	if _, err := is.svc.DeleteSession(ctx, connect.NewRequest(&appv1.DeleteSessionRequest{SessionId: d.session})); err != nil {
		t.Fatal(err)
	}
	is.collect(t)
	if n := is.chunksKept(t, d.ownChunks); n != 0 {
		t.Fatalf("%d chunks of the image stayed after its last session was deleted", n)
	}
	for _, h := range is.hosts {
		if h != d.host && cached(h, d.digest) {
			t.Errorf("host %s kept its copy of the image after its last session was deleted", h.ID())
		}
	}
}

// TestAResumeFindingItsImageNeitherInChunksNorInItsRegistryFailsNamingIt: when a resumed
// session's image is gone from the chunk store, whole (as a session of a plain reference created
// before its image was enabled has no chunks of it) or in part (a chunk lost), the host falls
// back to the registry; with that down too, the resume fails with failed_precondition naming the
// image, and once the registry is back the session resumes from it.
func TestAResumeFindingItsImageNeitherInChunksNorInItsRegistryFailsNamingIt(t *testing.T) {
	for _, c := range []struct {
		name string
		// lose takes the image out of the chunk store.
		lose func(t *testing.T, is *imageStack, d *disabledImageSession)
	}{
		{"its record gone", func(t *testing.T, is *imageStack, d *disabledImageSession) {
			h, err := v1.NewHash(d.digest)
			if err != nil {
				t.Fatal(err)
			}
			// The chunk store's record of the image is what staging starts from.
			if err := is.sb.Bucket.Delete(t.Context(), "imagerecords/sha256/"+h.Hex+".json"); err != nil {
				t.Fatal(err)
			}
		}},
		{"a chunk of its own file gone", func(t *testing.T, is *imageStack, d *disabledImageSession) {
			sum := d.ownChunks[0]
			if err := is.sb.Bucket.Delete(t.Context(), "chunks/"+sum[:2]+"/"+sum); err != nil {
				t.Fatal(err)
			}
			// The hosts' own copies of chunks would spare them the bucket.
			for _, h := range is.hosts {
				if err := os.Remove(filepath.Join(h.DataDir, "chunks", "chunks", sum)); err != nil && !os.IsNotExist(err) {
					t.Fatal(err)
				}
			}
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			is := newImageStack(t, 1)
			is.runWorker(t, imagesvc.WorkerOptions{Name: "w"})
			ctx := t.Context()
			d := is.evictedSessionOfADisabledImage(t, "team/gone")
			c.lose(t, is, d)
			is.offline.Store(true)
			_, err := is.svc.Resume(ctx, connect.NewRequest(&appv1.ResumeRequest{SessionId: d.session}))
			testenv.WantCode(t, err, connect.CodeFailedPrecondition)
			if !strings.Contains(err.Error(), d.digest) {
				t.Fatalf("the error does not name the image %s: %v", d.digest, err)
			}
			is.offline.Store(false)
			if _, err := is.svc.Resume(ctx, connect.NewRequest(&appv1.ResumeRequest{SessionId: d.session})); err != nil {
				t.Fatalf("resume with the registry back: %v", err)
			}
			if out := is.sh(t, d.session, "cat /root/mine; sha256sum < /opt/own.bin"); out != "mine\n"+d.sum {
				t.Fatalf("the resumed session reads %q", out)
			}
			rec, err := sessiondb.NewStore(is.sb.DB, time.Now).Get(ctx, d.session)
			if err != nil {
				t.Fatal(err)
			}
			// No new session may start from a disabled image: the host keeps none of it warm.
			if _, kept := is.hosts[0].Warm(rec.ImageURI); kept {
				t.Fatalf("the host keeps sandboxes of the disabled image %s warm after resuming its session", rec.ImageURI)
			}
		})
	}
}
