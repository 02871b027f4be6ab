package imagechunks_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"gocloud.dev/blob/memblob"

	"github.com/hangar-dev/hangar/internal/testkit"
	"github.com/hangar-dev/hangar/sandboxhosts/images/imagestest"
)

// BenchmarkPullChunk200MiB is the host's share of enabling a 200 MiB image (four layers of
// random hex text, as e2e's BenchmarkImageEnable200MiB pushes): pull and unpack, then chunk
// into the chunk store (as the layers stream past), then the chunk stage, which finds them done.
// It reports each stage's time so a profile can be read per stage.
func BenchmarkPullChunk200MiB(b *testing.B) {
	testkit.RequireRoot(b, "unpacking layers chowns and makes whiteouts")
	ctx := context.Background()
	reg := imagestest.Registry(b)
	var pullNs, chunkNs time.Duration
	for i := 0; b.Loop(); i++ {
		b.StopTimer()
		bucket := memblob.OpenBucket(&memblob.Options{NoMD5: true}) // as internal/testenv's
		ref := imagestest.Push(b, reg, fmt.Sprintf("bench/pc%d", i), hexImage(b, 200<<20, 4))
		_, store := newHost(b, bucket)
		b.StartTimer()
		began := time.Now()
		img, _, err := store.Pull(ctx, ref)
		if err != nil {
			b.Fatal(err)
		}
		pulled := time.Now()
		if _, err := store.Chunk(ctx, img.Digest, noProgress); err != nil {
			b.Fatal(err)
		}
		pullNs += pulled.Sub(began)
		chunkNs += time.Since(pulled)
		b.StopTimer()
		_ = bucket.Close()
		b.StartTimer()
	}
	b.ReportMetric(float64(pullNs.Milliseconds())/float64(b.N), "pull-ms/op")
	b.ReportMetric(float64(chunkNs.Milliseconds())/float64(b.N), "chunk-ms/op")
}

// hexImage is an image of n bytes of random hex text in the given number of layers.
func hexImage(b testing.TB, n, layers int) v1.Image {
	var ls []v1.Layer
	for i := range layers {
		p := make([]byte, n/layers/2)
		_, _ = rand.Read(p)
		dir := fmt.Sprintf("data%d/", i)
		ls = append(ls, imagestest.Layer(b, imagestest.Dir(dir, 0o755), imagestest.File(dir+"blob.hex", hex.EncodeToString(p), 0o644)))
	}
	return imagestest.Image(b, ls...)
}
