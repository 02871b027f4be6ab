package images_test

import (
	"crypto/rand"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/hangar-dev/hangar/sandboxhosts/images"
	"github.com/hangar-dev/hangar/sandboxhosts/images/imagestest"
)

// countLayerGets counts the registry's answers to GETs of blobs other than configs: a
// pull refused on the manifest's sizes downloads no layer.
func countLayerGets(n *atomic.Int64, configDigest string) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Method == http.MethodGet && strings.Contains(r.URL.Path, "/blobs/") && !strings.HasSuffix(r.URL.Path, configDigest) {
				n.Add(1)
			}
			next.ServeHTTP(w, r)
		})
	}
}

// The attack: image pulls had no size limit, so one session could fill the host's disk with an
// image, or with a layer that unpacks to far more than it downloads.
func TestPullRefusesAnImageOverTheSizeLimit(t *testing.T) {
	requireRoot(t)
	const limit = 1 << 20
	random := make([]byte, 2*limit)
	if _, err := rand.Read(random); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name      string
		layer     images.TarEntry
		wantWords string
		// downloads says whether the layer is fetched before the refusal.
		downloads bool
	}{
		{"compressed size in the manifest over the limit", imagestest.File("big", string(random), 0o644), "compressed", false},
		{"a small layer that unpacks past the limit (zip bomb)", imagestest.File("zeros", strings.Repeat("\x00", 8*limit), 0o644), "unpacked", true},
	} {
		t.Run(c.name, func(t *testing.T) {
			img := imagestest.Image(t, imagestest.Layer(t, c.layer))
			cfg, err := img.ConfigName()
			if err != nil {
				t.Fatal(err)
			}
			var gets atomic.Int64
			ref := imagestest.Push(t, imagestest.Registry(t, countLayerGets(&gets, cfg.String())), "huge", img)
			dir := t.TempDir()
			cache, err := images.New(dir, images.WithRegistries(imagestest.Allow), images.WithMaxImageBytes(limit))
			if err != nil {
				t.Fatal(err)
			}
			_, err = cache.Pull(t.Context(), ref)
			if !errors.Is(err, images.ErrTooLarge) || !strings.Contains(err.Error(), ref) || !strings.Contains(err.Error(), c.wantWords) {
				t.Fatalf("pull = %v; want ErrTooLarge naming %s and saying %q", err, ref, c.wantWords)
			}
			if got := gets.Load() > 0; got != c.downloads {
				t.Errorf("layer downloaded: %v, want %v", got, c.downloads)
			}
			for _, pattern := range []string{"layers/*/*", "tmp/*"} {
				if left, _ := filepath.Glob(filepath.Join(dir, pattern)); len(left) != 0 {
					t.Errorf("a refused pull left %v", left)
				}
			}
		})
	}
}

func TestPullTakesAnImageUnderTheSizeLimit(t *testing.T) {
	requireRoot(t)
	ref := imagestest.Push(t, imagestest.Registry(t), "small", imagestest.Image(t, imagestest.Layer(t, imagestest.File("f", "fits", 0o644))))
	cache, err := images.New(t.TempDir(), images.WithRegistries(imagestest.Allow), images.WithMaxImageBytes(1<<20))
	if err != nil {
		t.Fatal(err)
	}
	img := pull(t, cache, ref)
	if b, err := os.ReadFile(filepath.Join(img.LowerDirs[0], "f")); err != nil || string(b) != "fits" {
		t.Errorf("f = %q, %v", b, err)
	}
}
