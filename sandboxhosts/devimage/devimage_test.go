package devimage_test

import (
	"encoding/json"
	"errors"
	"io"
	"io/fs"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/hangar-dev/hangar/internal/testkit"
	"github.com/hangar-dev/hangar/platform/egress"
	"github.com/hangar-dev/hangar/sandboxhosts/devimage"
	"github.com/hangar-dev/hangar/sandboxhosts/images"
)

func serve(t *testing.T, dir, addr string) *devimage.Registry {
	t.Helper()
	r, err := devimage.Serve(t.Context(), dir, addr)
	if err != nil {
		t.Fatalf("Serve: %v", err)
	}
	t.Cleanup(func() {
		if err := r.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return r
}

func closeRegistry(t *testing.T, r *devimage.Registry) {
	t.Helper()
	if err := r.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
}

// fetch reads the image at ref through the registry API, every blob included
// (go-containerregistry checks each against its digest), and returns its
// manifest digest.
func fetch(t *testing.T, ref string) string {
	t.Helper()
	r, err := name.ParseReference(ref)
	if err != nil {
		t.Fatal(err)
	}
	img, err := remote.Image(r, remote.WithContext(t.Context()))
	if err != nil {
		t.Fatalf("fetch %s: %v", ref, err)
	}
	if _, err := img.ConfigFile(); err != nil {
		t.Fatalf("fetch %s config: %v", ref, err)
	}
	layers, err := img.Layers()
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range layers {
		rc, err := l.Compressed()
		if err == nil {
			_, err = io.Copy(io.Discard, rc)
			rc.Close()
		}
		if err != nil {
			t.Fatalf("fetch %s layer: %v", ref, err)
		}
	}
	d, err := img.Digest()
	if err != nil {
		t.Fatal(err)
	}
	return d.String()
}

type fileState struct {
	ino   uint64
	mtime syscall.Timespec
	size  int64
}

// stamp sets every file under dir to an mtime no new file can have, and
// returns what each file looks like, to tell later whether any was written.
func stamp(t *testing.T, dir string) map[string]fileState {
	t.Helper()
	old := time.Date(2001, 2, 3, 4, 5, 6, 0, time.UTC)
	walk(t, dir, func(p string) {
		if err := os.Chtimes(p, old, old); err != nil {
			t.Fatal(err)
		}
	})
	return snapshot(t, dir)
}

func snapshot(t *testing.T, dir string) map[string]fileState {
	t.Helper()
	files := map[string]fileState{}
	walk(t, dir, func(p string) {
		fi, err := os.Lstat(p)
		if err != nil {
			t.Fatal(err)
		}
		st := fi.Sys().(*syscall.Stat_t)
		files[p] = fileState{ino: st.Ino, mtime: st.Mtim, size: st.Size}
	})
	return files
}

func walk(t *testing.T, dir string, fn func(p string)) {
	t.Helper()
	err := filepath.WalkDir(dir, func(p string, _ fs.DirEntry, err error) error {
		if err == nil {
			fn(p)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}

func TestServeBuildsOnceAndReusesTheCache(t *testing.T) {
	dir := t.TempDir()
	first := serve(t, dir, "")
	if got := fetch(t, first.Ref()); got != first.Digest() {
		t.Fatalf("served digest %s, Digest() %s", got, first.Digest())
	}
	closeRegistry(t, first)
	before := stamp(t, dir)

	second := serve(t, dir, "")
	if second.Digest() != first.Digest() {
		t.Errorf("second Serve digest %s, first %s", second.Digest(), first.Digest())
	}
	if got := fetch(t, second.Ref()); got != first.Digest() {
		t.Errorf("second Serve serves %s, want %s", got, first.Digest())
	}
	if after := snapshot(t, dir); !reflect.DeepEqual(after, before) {
		t.Errorf("second Serve rewrote the data dir:\nbefore %v\nafter  %v", before, after)
	}
}

// blobPaths returns the layout's manifest, config and layer blob files.
func blobPaths(t *testing.T, dir string) (manifest, config string, layers []string) {
	t.Helper()
	p, err := layout.FromPath(filepath.Join(dir, "oci"))
	if err != nil {
		t.Fatal(err)
	}
	idx, err := p.ImageIndex()
	if err != nil {
		t.Fatal(err)
	}
	im, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	img, err := p.Image(im.Manifests[0].Digest)
	if err != nil {
		t.Fatal(err)
	}
	m, err := img.Manifest()
	if err != nil {
		t.Fatal(err)
	}
	blob := func(h v1.Hash) string { return filepath.Join(string(p), "blobs", h.Algorithm, h.Hex) }
	for _, l := range m.Layers {
		layers = append(layers, blob(l.Digest))
	}
	return blob(im.Manifests[0].Digest), blob(m.Config.Digest), layers
}

func editIndex(t *testing.T, dir string, edit func(*v1.IndexManifest)) {
	t.Helper()
	p := filepath.Join(dir, "oci", "index.json")
	data, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	var im v1.IndexManifest
	if err := json.Unmarshal(data, &im); err != nil {
		t.Fatal(err)
	}
	edit(&im)
	if data, err = json.Marshal(im); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, data, 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestServeRebuildsAnUnusableCache(t *testing.T) {
	must := func(t *testing.T, err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	tests := []struct {
		name   string
		damage func(t *testing.T, dir string)
	}{
		{"layer blob truncated", func(t *testing.T, dir string) {
			_, _, layers := blobPaths(t, dir)
			fi, err := os.Stat(layers[0])
			must(t, err)
			must(t, os.Truncate(layers[0], fi.Size()/2))
		}},
		{"layer blob missing", func(t *testing.T, dir string) {
			_, _, layers := blobPaths(t, dir)
			must(t, os.Remove(layers[len(layers)-1]))
		}},
		{"config blob altered", func(t *testing.T, dir string) {
			_, config, _ := blobPaths(t, dir)
			must(t, os.WriteFile(config, []byte(`{"architecture":"arm64","os":"linux"}`), 0o644))
		}},
		{"manifest blob altered", func(t *testing.T, dir string) {
			manifest, _, _ := blobPaths(t, dir)
			f, err := os.OpenFile(manifest, os.O_APPEND|os.O_WRONLY, 0)
			must(t, err)
			_, err = f.WriteString("\n")
			must(t, errors.Join(err, f.Close()))
		}},
		{"manifest blob missing", func(t *testing.T, dir string) {
			manifest, _, _ := blobPaths(t, dir)
			must(t, os.Remove(manifest))
		}},
		{"index.json garbage", func(t *testing.T, dir string) {
			must(t, os.WriteFile(filepath.Join(dir, "oci", "index.json"), []byte("{not json"), 0o644))
		}},
		{"index.json missing", func(t *testing.T, dir string) {
			must(t, os.Remove(filepath.Join(dir, "oci", "index.json")))
		}},
		{"index lists no image", func(t *testing.T, dir string) {
			editIndex(t, dir, func(im *v1.IndexManifest) { im.Manifests = nil })
		}},
		{"built by an older recipe", func(t *testing.T, dir string) {
			editIndex(t, dir, func(im *v1.IndexManifest) { im.Manifests[0].Annotations["dev.hangar.devimage.recipe"] = "0" })
		}},
		{"layout dir replaced by a file", func(t *testing.T, dir string) {
			must(t, os.RemoveAll(filepath.Join(dir, "oci")))
			must(t, os.WriteFile(filepath.Join(dir, "oci"), []byte("x"), 0o644))
		}},
		{"unfinished build left behind", func(t *testing.T, dir string) {
			must(t, os.MkdirAll(filepath.Join(dir, "oci-build-123", "blobs"), 0o755))
			must(t, os.WriteFile(filepath.Join(dir, "oci-build-123", "index.json"), []byte("{"), 0o644))
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			first := serve(t, dir, "")
			closeRegistry(t, first)
			index, err := os.ReadFile(filepath.Join(dir, "oci", "index.json"))
			must(t, err)
			tt.damage(t, dir)

			again := serve(t, dir, "")
			if again.Digest() != first.Digest() {
				t.Errorf("digest after rebuild %s, first %s", again.Digest(), first.Digest())
			}
			if got := fetch(t, again.Ref()); got != first.Digest() {
				t.Errorf("serves %s, want %s", got, first.Digest())
			}
			// The build is reproducible: a rebuilt layout has the same index.
			if got, err := os.ReadFile(filepath.Join(dir, "oci", "index.json")); err != nil || string(got) != string(index) {
				t.Errorf("index.json after rebuild %q (%v), want %q", got, err, index)
			}
			if leftovers, _ := filepath.Glob(filepath.Join(dir, "oci-build-*")); len(leftovers) > 0 {
				t.Errorf("build dirs left: %v", leftovers)
			}
		})
	}
}

func TestImageCachePullsTheDevImage(t *testing.T) {
	testkit.RequireRoot(t, "unpacking an image")
	r := serve(t, t.TempDir(), "")
	host, _, _ := strings.Cut(r.Ref(), "/")
	regHost, _, _ := strings.Cut(host, ":")
	cache, err := images.New(t.TempDir(), images.WithRegistries(egress.MustParse(regHost)))
	if err != nil {
		t.Fatal(err)
	}
	for _, ref := range []string{r.Ref(), host + "/hangar/dev@" + r.Digest()} {
		img, err := cache.Pull(t.Context(), ref)
		if err != nil {
			t.Fatalf("Pull %s: %v", ref, err)
		}
		if img.Digest != r.Digest() {
			t.Errorf("Pull %s digest %s, want %s", ref, img.Digest, r.Digest())
		}
		if want := []string{"/bin/sh"}; !reflect.DeepEqual(img.Config.Cmd, want) {
			t.Errorf("Cmd %v, want %v", img.Config.Cmd, want)
		}
		for file, mode := range map[string]fs.FileMode{"bin/busybox": 0, "bin/sh": fs.ModeSymlink, "etc/motd": 0} {
			fi, err := lstatInImage(img, file)
			if err != nil {
				t.Errorf("%s: %v", file, err)
			} else if fi.Mode().Type() != mode {
				t.Errorf("%s type %v, want %v", file, fi.Mode().Type(), mode)
			}
		}
	}
}

// lstatInImage finds file in the topmost layer of img that has it.
func lstatInImage(img *images.Image, file string) (fs.FileInfo, error) {
	for _, d := range img.LowerDirs {
		fi, err := os.Lstat(filepath.Join(d, file))
		if err == nil || !os.IsNotExist(err) {
			return fi, err
		}
	}
	return nil, fs.ErrNotExist
}

func TestCloseReleasesThePort(t *testing.T) {
	dir := t.TempDir()
	r := serve(t, dir, "")
	addr, _, _ := strings.Cut(r.Ref(), "/")
	closeRegistry(t, r)

	if resp, err := http.Get("http://" + addr + "/v2/"); err == nil {
		resp.Body.Close()
		t.Fatalf("registry still answers after Close: %s", resp.Status)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatalf("port not released: %v", err)
	}
	ln.Close()

	again := serve(t, dir, addr)
	if !strings.HasPrefix(again.Ref(), addr+"/") {
		t.Errorf("Ref %s, want it on %s", again.Ref(), addr)
	}
	if got := fetch(t, again.Ref()); got != r.Digest() {
		t.Errorf("serves %s, want %s", got, r.Digest())
	}
}

func TestRegistryRefusesPushes(t *testing.T) {
	r := serve(t, t.TempDir(), "")
	ref, err := name.ParseReference(r.Ref())
	if err != nil {
		t.Fatal(err)
	}
	other, err := random.Image(1024, 1)
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.Write(ref, other, remote.WithContext(t.Context())); err == nil {
		t.Fatal("push to the dev image registry succeeded")
	}
	if got := fetch(t, r.Ref()); got != r.Digest() {
		t.Errorf("after a push the registry serves %s, want %s", got, r.Digest())
	}
}

func TestServeRefusesAddressesOffLoopback(t *testing.T) {
	for _, addr := range []string{
		"0.0.0.0:0",   // every interface: the registry has no auth
		"127.0.0.2:0", // loopback, but go-containerregistry would want https there
	} {
		t.Run(addr, func(t *testing.T) {
			r, err := devimage.Serve(t.Context(), t.TempDir(), addr)
			if err == nil {
				r.Close()
				t.Fatalf("Serve on %s succeeded", addr)
			}
		})
	}
}

// An image layout that `make agent-image` (or anything else) put under images/<name> is served
// as hangar/<name>:latest beside the dev image, blob for blob; a directory there that is no
// layout (a build cut short) is skipped, and a restart serves the image again.
func TestServeServesTheImagesOfImagesDir(t *testing.T) {
	dir := t.TempDir()
	img, err := random.Image(4096, 2)
	if err != nil {
		t.Fatal(err)
	}
	p, err := layout.Write(filepath.Join(dir, "images", "agent"), empty.Index)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.AppendImage(img); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(dir, "images", "broken"), 0o755); err != nil {
		t.Fatal(err)
	}
	want, err := img.Digest()
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		r := serve(t, dir, "")
		more := r.More()
		if len(more) != 1 || !strings.HasSuffix(more["agent"], "/hangar/agent:latest") {
			t.Fatalf("More() = %v, want the agent image alone", more)
		}
		if got := fetch(t, more["agent"]); got != want.String() {
			t.Errorf("served %s, want %s", got, want)
		}
		if got := fetch(t, r.Ref()); got != r.Digest() {
			t.Errorf("the dev image is served as %s, want %s", got, r.Digest())
		}
		closeRegistry(t, r)
	}
}

// A layout kept outside the data directory and symlinked in as images/<name> is served like one
// in place; a symlink there that leads nowhere is skipped (with a log line), not fatal.
func TestServeFollowsASymlinkedImageLayout(t *testing.T) {
	dir, elsewhere := t.TempDir(), t.TempDir()
	img, err := random.Image(4096, 2)
	if err != nil {
		t.Fatal(err)
	}
	p, err := layout.Write(filepath.Join(elsewhere, "agent"), empty.Index)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.AppendImage(img); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(dir, "images"), 0o755); err != nil {
		t.Fatal(err)
	}
	for name, target := range map[string]string{"agent": filepath.Join(elsewhere, "agent"), "gone": filepath.Join(elsewhere, "nothing")} {
		if err := os.Symlink(target, filepath.Join(dir, "images", name)); err != nil {
			t.Fatal(err)
		}
	}
	want, err := img.Digest()
	if err != nil {
		t.Fatal(err)
	}
	r := serve(t, dir, "")
	defer closeRegistry(t, r)
	more := r.More()
	if len(more) != 1 || !strings.HasSuffix(more["agent"], "/hangar/agent:latest") {
		t.Fatalf("More() = %v, want the symlinked agent image alone", more)
	}
	if got := fetch(t, more["agent"]); got != want.String() {
		t.Errorf("served %s, want %s", got, want)
	}
}
