package images_test

import (
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/hangar-dev/hangar/sandboxhosts/images"
	"github.com/hangar-dev/hangar/sandboxhosts/images/imagestest"
)

// BenchmarkPullUnpacked measures a pull whose layers are all unpacked: by tag
// (one manifest round trip to the loopback registry) and by digest (disk only).
func BenchmarkPullUnpacked(b *testing.B) {
	requireRoot(b)
	host := imagestest.Registry(b)
	ref := imagestest.Push(b, host, "bench", busybox(b, map[string]images.File{"x": {Content: []byte("x")}}))
	c := newCache(b, b.TempDir())
	img := pull(b, c, ref)

	for _, bc := range []struct{ name, ref string }{
		{"tag", ref},
		{"digest", host + "/bench@" + img.Digest},
	} {
		b.Run(bc.name, func(b *testing.B) {
			for b.Loop() {
				pull(b, c, bc.ref)
			}
		})
	}
}

// BenchmarkUnpackBusybox measures a cold pull of the busybox image (download
// from the loopback registry, verify, unpack, sync) into an empty cache.
func BenchmarkUnpackBusybox(b *testing.B) {
	requireRoot(b)
	host := imagestest.Registry(b)
	ref := imagestest.Push(b, host, "bench", busybox(b, nil))
	root := b.TempDir()
	i := 0
	for b.Loop() {
		b.StopTimer()
		dir := filepath.Join(root, strconv.Itoa(i))
		i++
		c := newCache(b, dir)
		b.StartTimer()
		pull(b, c, ref)
		b.StopTimer()
		if err := os.RemoveAll(dir); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
}
