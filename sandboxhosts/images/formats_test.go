package images_test

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/compression"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/static"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/hangar-dev/hangar/sandboxhosts/images/imagestest"
)

func TestPullUnpacksEveryLayerCompression(t *testing.T) {
	requireRoot(t)
	rc, err := imagestest.Layer(t, imagestest.File("hello", "world", 0o644)).Uncompressed()
	if err != nil {
		t.Fatal(err)
	}
	tarBytes, err := io.ReadAll(rc)
	rc.Close()
	if err != nil {
		t.Fatal(err)
	}
	opener := func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(tarBytes)), nil }
	zstdLayer, err := tarball.LayerFromOpener(opener, tarball.WithCompression(compression.ZStd), tarball.WithMediaType(types.OCILayerZStd))
	if err != nil {
		t.Fatal(err)
	}
	host := imagestest.Registry(t)
	for _, tt := range []struct {
		name  string
		layer v1.Layer
	}{
		{"gzip", imagestest.Layer(t, imagestest.File("hello", "world", 0o644))},
		{"zstd", zstdLayer},
		{"uncompressed", static.NewLayer(tarBytes, types.OCIUncompressedLayer)},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ref := imagestest.Push(t, host, "format-"+tt.name, imagestest.Image(t, tt.layer))
			img := pull(t, newCache(t, t.TempDir()), ref)
			if b, err := os.ReadFile(filepath.Join(img.LowerDirs[0], "hello")); err != nil || string(b) != "world" {
				t.Errorf("hello = %q, %v; want world", b, err)
			}
		})
	}
}

func TestPullRefusesUnrunnableImageBeforeDownloading(t *testing.T) {
	requireRoot(t)
	host := imagestest.Registry(t)
	layer := imagestest.Layer(t, imagestest.File("hello", "world", 0o644))
	for _, tt := range []struct {
		name    string
		edit    func(*v1.ConfigFile)
		wantErr string
	}{
		{"windows image", func(c *v1.ConfigFile) { c.OS = "windows" }, "windows"},
		{"malformed resource label", func(c *v1.ConfigFile) {
			c.Config.Labels = map[string]string{"dev.hangar.resources.pids": "many"}
		}, "dev.hangar.resources.pids"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			base := imagestest.Image(t, layer)
			cfg, err := base.ConfigFile()
			if err != nil {
				t.Fatal(err)
			}
			cfg = cfg.DeepCopy()
			tt.edit(cfg)
			img, err := mutate.ConfigFile(base, cfg)
			if err != nil {
				t.Fatal(err)
			}
			ref := imagestest.Push(t, host, "unrunnable", img)
			dir := t.TempDir()
			_, err = newCache(t, dir).Pull(t.Context(), ref)
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("pull: %v, want an error naming %q", err, tt.wantErr)
			}
			assertEmptyDir(t, filepath.Join(dir, "layers"))
			assertEmptyDir(t, filepath.Join(dir, "manifests"))
		})
	}
}
