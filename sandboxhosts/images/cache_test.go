package images_test

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"golang.org/x/sys/unix"

	"github.com/hangar-dev/hangar/internal/testkit"
	"github.com/hangar-dev/hangar/sandboxhosts/images"
	"github.com/hangar-dev/hangar/sandboxhosts/images/imagestest"
)

// requireRoot: unpacking chowns files and makes whiteout device nodes.
func requireRoot(t testing.TB) {
	t.Helper()
	testkit.RequireRoot(t, "image unpacking (chown, mknod, trusted.* xattrs)")
}

func newCache(t testing.TB, dir string) *images.Cache {
	t.Helper()
	c, err := images.New(dir, images.WithRegistries(imagestest.Allow))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func pull(t testing.TB, c *images.Cache, ref string) *images.Image {
	t.Helper()
	img, err := c.Pull(t.Context(), ref)
	if err != nil {
		t.Fatalf("pull %s: %v", ref, err)
	}
	return img
}

func lstat(t *testing.T, p string) *syscall.Stat_t {
	t.Helper()
	fi, err := os.Lstat(p)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Sys().(*syscall.Stat_t)
}

func busybox(t testing.TB, extra map[string]images.File) v1.Image {
	t.Helper()
	img, err := images.Busybox(extra)
	if err != nil {
		t.Fatal(err)
	}
	return img
}

var mtime = time.Date(2021, 3, 4, 5, 6, 7, 0, time.UTC)

func withMeta(e images.TarEntry, uid, gid int, xattrs map[string]string) images.TarEntry {
	e.Header.Uid, e.Header.Gid, e.Header.ModTime = uid, gid, mtime
	if xattrs != nil {
		e.Header.PAXRecords = map[string]string{}
		for k, v := range xattrs {
			e.Header.PAXRecords["SCHILY.xattr."+k] = v
		}
	}
	return e
}

func TestPullUnpacksLayersAsOverlayLowerDirs(t *testing.T) {
	requireRoot(t)
	host := imagestest.Registry(t)
	lower := imagestest.Layer(t,
		imagestest.Dir("etc/", 0o755),
		imagestest.File("etc/keep", "keep", 0o640),
		imagestest.File("etc/gone", "gone", 0o644),
		imagestest.Dir("opq/", 0o755),
		imagestest.File("opq/old", "old", 0o644),
		withMeta(imagestest.File("bin/tool", "#!/bin/sh\n", 0o4755), 1000, 1001,
			map[string]string{"user.origin": "test", "trusted.overlay.redirect": "/etc", "security.selinux": "x"}),
		imagestest.Symlink("bin/alias", "tool"),
		imagestest.Hardlink("bin/tool2", "bin/tool"),
		withMeta(images.TarEntry{Header: tar.Header{Typeflag: tar.TypeFifo, Name: "run/pipe", Mode: 0o620}}, 7, 8, nil),
		withMeta(imagestest.Dir("stamped/", 0o750), 5, 6, nil),
		imagestest.File("stamped/child", "c", 0o644),
	)
	upper := imagestest.Layer(t,
		imagestest.Whiteout("etc", "gone"),
		imagestest.Opaque("opq"),
		imagestest.File("opq/new", "new", 0o600),
	)
	ref := imagestest.Push(t, host, "tree", imagestest.Image(t, lower, upper))

	c := newCache(t, t.TempDir())
	img := pull(t, c, ref)
	if len(img.LowerDirs) != 2 {
		t.Fatalf("LowerDirs = %v, want 2", img.LowerDirs)
	}
	top, bottom := img.LowerDirs[0], img.LowerDirs[1]

	t.Run("files keep content, mode, owner and mtime", func(t *testing.T) {
		st := lstat(t, filepath.Join(bottom, "bin/tool"))
		if st.Mode&0o7777 != 0o4755 || st.Uid != 1000 || st.Gid != 1001 {
			t.Errorf("bin/tool mode %o uid %d gid %d, want 4755 1000 1001", st.Mode&0o7777, st.Uid, st.Gid)
		}
		if got := time.Unix(st.Mtim.Unix()); !got.Equal(mtime) {
			t.Errorf("bin/tool mtime %v, want %v", got, mtime)
		}
		if st := lstat(t, filepath.Join(bottom, "etc/keep")); st.Mode&0o7777 != 0o640 {
			t.Errorf("etc/keep mode %o, want 640", st.Mode&0o7777)
		}
		if b, _ := os.ReadFile(filepath.Join(top, "opq/new")); string(b) != "new" {
			t.Errorf("opq/new = %q, want new", b)
		}
	})
	t.Run("directory keeps owner, mode and mtime after children are created", func(t *testing.T) {
		st := lstat(t, filepath.Join(bottom, "stamped"))
		if st.Mode&0o7777 != 0o750 || st.Uid != 5 || st.Gid != 6 {
			t.Errorf("stamped mode %o uid %d gid %d, want 750 5 6", st.Mode&0o7777, st.Uid, st.Gid)
		}
		if got := time.Unix(st.Mtim.Unix()); !got.Equal(mtime) {
			t.Errorf("stamped mtime %v, want %v", got, mtime)
		}
	})
	t.Run("symlink is stored as written", func(t *testing.T) {
		if target, err := os.Readlink(filepath.Join(bottom, "bin/alias")); err != nil || target != "tool" {
			t.Errorf("bin/alias -> %q, %v; want tool", target, err)
		}
	})
	t.Run("hardlink shares the inode", func(t *testing.T) {
		a, b := lstat(t, filepath.Join(bottom, "bin/tool")), lstat(t, filepath.Join(bottom, "bin/tool2"))
		if a.Ino != b.Ino || a.Nlink != 2 {
			t.Errorf("inodes %d %d nlink %d, want one inode with 2 links", a.Ino, b.Ino, a.Nlink)
		}
	})
	t.Run("fifo is created with its mode and owner", func(t *testing.T) {
		st := lstat(t, filepath.Join(bottom, "run/pipe"))
		if st.Mode&unix.S_IFMT != unix.S_IFIFO || st.Mode&0o7777 != 0o620 || st.Uid != 7 {
			t.Errorf("run/pipe mode %o uid %d, want fifo 620 uid 7", st.Mode, st.Uid)
		}
	})
	t.Run("only trusted xattrs are kept", func(t *testing.T) {
		p := filepath.Join(bottom, "bin/tool")
		buf := make([]byte, 64)
		if n, err := unix.Lgetxattr(p, "user.origin", buf); err != nil || string(buf[:n]) != "test" {
			t.Errorf("user.origin = %q, %v; want test", buf[:max(n, 0)], err)
		}
		for _, attr := range []string{"trusted.overlay.redirect", "security.selinux"} {
			if _, err := unix.Lgetxattr(p, attr, buf); !errors.Is(err, unix.ENODATA) {
				t.Errorf("%s: %v, want ENODATA", attr, err)
			}
		}
		if s := c.Stats().EntriesSkipped; s != 2 {
			t.Errorf("EntriesSkipped = %d, want 2 (the two untrusted xattrs)", s)
		}
	})
	t.Run("whiteout becomes a 0:0 char device", func(t *testing.T) {
		st := lstat(t, filepath.Join(top, "etc/gone"))
		if st.Mode&unix.S_IFMT != unix.S_IFCHR || st.Rdev != 0 {
			t.Errorf("etc/gone mode %o rdev %d, want char device 0:0", st.Mode, st.Rdev)
		}
		if _, err := os.Lstat(filepath.Join(top, "etc/.wh.gone")); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("the .wh. file itself exists: %v", err)
		}
	})
	t.Run("opaque marker becomes trusted.overlay.opaque", func(t *testing.T) {
		buf := make([]byte, 8)
		n, err := unix.Lgetxattr(filepath.Join(top, "opq"), "trusted.overlay.opaque", buf)
		if err != nil || string(buf[:n]) != "y" {
			t.Errorf("opq opaque xattr = %q, %v; want y", buf[:max(n, 0)], err)
		}
		if _, err := os.Lstat(filepath.Join(top, "opq/.wh..wh..opq")); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("the opaque marker file exists: %v", err)
		}
	})
}

func TestPullBusyboxImageConfig(t *testing.T) {
	requireRoot(t)
	host := imagestest.Registry(t)
	base := busybox(t, map[string]images.File{"/usr/local/bin/hello": {Content: []byte("#!/bin/sh\necho hello\n"), Mode: 0o755}})
	withLabels, err := mutate.Config(base, v1.Config{
		Env: images.BusyboxEnv, WorkingDir: "/root", Cmd: []string{"/bin/sh"}, User: "0:0",
		Entrypoint: []string{"/bin/sh", "-c"},
		Labels:     map[string]string{images.LabelCPUs: "2", images.LabelMemoryMB: "1024", "other": "x"},
	})
	if err != nil {
		t.Fatal(err)
	}
	ref := imagestest.Push(t, host, "busybox", withLabels)
	img := pull(t, newCache(t, t.TempDir()), ref)

	if img.Ref != ref {
		t.Errorf("Ref = %q, want %q", img.Ref, ref)
	}
	want, _ := withLabels.Digest()
	if img.Digest != want.String() {
		t.Errorf("Digest = %s, want %s", img.Digest, want)
	}
	cfg := img.Config
	if !slices.Equal(cfg.Env, images.BusyboxEnv) || cfg.WorkingDir != "/root" || cfg.User != "0:0" ||
		!slices.Equal(cfg.Cmd, []string{"/bin/sh"}) || !slices.Equal(cfg.Entrypoint, []string{"/bin/sh", "-c"}) || cfg.Labels["other"] != "x" {
		t.Errorf("Config = %+v", cfg)
	}
	if cfg.SuggestedResources != (images.Resources{CPUs: 2, MemoryMB: 1024}) {
		t.Errorf("SuggestedResources = %+v, want 2 CPUs, 1024 MB, no pids", cfg.SuggestedResources)
	}
	if len(img.LowerDirs) != 2 {
		t.Fatalf("LowerDirs = %v, want busybox layer and extra layer", img.LowerDirs)
	}
	top, bottom := img.LowerDirs[0], img.LowerDirs[1]
	if st := lstat(t, filepath.Join(top, "usr/local/bin/hello")); st.Mode&0o777 != 0o755 {
		t.Errorf("extra file mode %o, want 755", st.Mode&0o777)
	}
	if st := lstat(t, filepath.Join(bottom, "tmp")); st.Mode&0o7777 != 0o1777 {
		t.Errorf("/tmp mode %o, want 1777", st.Mode&0o7777)
	}
	for _, a := range images.BusyboxApplets {
		if target, err := os.Readlink(filepath.Join(bottom, "bin", a)); err != nil || target != "busybox" {
			t.Errorf("/bin/%s -> %q, %v; want busybox", a, target, err)
		}
	}
	passwd, _ := os.ReadFile(filepath.Join(bottom, "etc/passwd"))
	if !strings.HasPrefix(string(passwd), "root:x:0:0:") {
		t.Errorf("/etc/passwd = %q", passwd)
	}
}

func TestBusyboxImageIsReproducible(t *testing.T) {
	extra := map[string]images.File{"a/b": {Content: []byte("1")}, "c": {Content: []byte("2")}}
	a, _ := busybox(t, extra).Digest()
	b, _ := busybox(t, extra).Digest()
	if a != b {
		t.Errorf("two builds differ: %s vs %s", a, b)
	}
}

func TestSecondPullDoesNoLayerWork(t *testing.T) {
	requireRoot(t)
	host := imagestest.Registry(t)
	ref := imagestest.Push(t, host, "again", busybox(t, map[string]images.File{"x": {Content: []byte("x")}}))
	c := newCache(t, t.TempDir())
	first := pull(t, c, ref)
	before := lstat(t, first.LowerDirs[1])

	second := pull(t, c, ref)
	if got := c.Stats(); got.LayersUnpacked != 2 || got.LayersReused != 2 {
		t.Errorf("Stats = %+v, want 2 unpacked (first pull) and 2 reused (second)", got)
	}
	if !slices.Equal(first.LowerDirs, second.LowerDirs) {
		t.Errorf("LowerDirs changed: %v vs %v", first.LowerDirs, second.LowerDirs)
	}
	if after := lstat(t, second.LowerDirs[1]); after.Ino != before.Ino || after.Ctim != before.Ctim {
		t.Errorf("layer dir was rewritten")
	}
}

func TestConcurrentPullsUnpackEachLayerOnce(t *testing.T) {
	requireRoot(t)
	host := imagestest.Registry(t)
	ref := imagestest.Push(t, host, "concurrent", busybox(t, map[string]images.File{"x": {Content: []byte("x")}}))
	c := newCache(t, t.TempDir())

	const pulls = 8
	var wg sync.WaitGroup
	results := make([]*images.Image, pulls)
	errs := make([]error, pulls)
	for i := range pulls {
		wg.Go(func() { results[i], errs[i] = c.Pull(t.Context(), ref) })
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("pull %d: %v", i, err)
		}
		if !slices.Equal(results[i].LowerDirs, results[0].LowerDirs) {
			t.Errorf("pull %d LowerDirs %v, want %v", i, results[i].LowerDirs, results[0].LowerDirs)
		}
	}
	if got := c.Stats().LayersUnpacked; got != 2 {
		t.Errorf("LayersUnpacked = %d, want 2", got)
	}
}

func TestPullByDigestWorksOfflineAfterRegistryIsGone(t *testing.T) {
	requireRoot(t)
	srv := httptest.NewServer(registry.New())
	defer srv.Close()
	host := strings.TrimPrefix(srv.URL, "http://")
	ref := imagestest.Push(t, host, "offline", busybox(t, nil))
	dir := t.TempDir()
	online := pull(t, newCache(t, dir), ref)
	srv.Close()

	// A fresh Cache on the same directory: what it knows comes from disk.
	c := newCache(t, dir)
	digestRef := host + "/offline@" + online.Digest
	offline := pull(t, c, digestRef)
	if offline.Digest != online.Digest || !slices.Equal(offline.LowerDirs, online.LowerDirs) {
		t.Errorf("offline image %+v, want %+v", offline, online)
	}
	if !slices.Equal(offline.Config.Env, images.BusyboxEnv) {
		t.Errorf("offline Env = %v", offline.Config.Env)
	}
	if _, err := c.Pull(t.Context(), ref); err == nil {
		t.Errorf("pull of a tag with the registry gone succeeded; tags must be resolved")
	}
}

func TestPullIndexPicksLinuxAmd64(t *testing.T) {
	requireRoot(t)
	host := imagestest.Registry(t)
	amd := imagestest.Image(t, imagestest.Layer(t, imagestest.File("arch", "amd64", 0o644)))
	arm := imagestest.Image(t, imagestest.Layer(t, imagestest.File("arch", "arm64", 0o644)))
	idx := mutate.AppendManifests(empty.Index,
		mutate.IndexAddendum{Add: arm, Descriptor: v1.Descriptor{Platform: &v1.Platform{OS: "linux", Architecture: "arm64"}}},
		mutate.IndexAddendum{Add: amd, Descriptor: v1.Descriptor{Platform: &v1.Platform{OS: "linux", Architecture: "amd64"}}},
	)
	r, err := name.ParseReference(host + "/multi:latest")
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.WriteIndex(r, idx, remote.WithContext(t.Context())); err != nil {
		t.Fatal(err)
	}
	idxDigest, _ := idx.Digest()
	amdDigest, _ := amd.Digest()

	c := newCache(t, t.TempDir())
	img := pull(t, c, host+"/multi@"+idxDigest.String())
	if img.Digest != amdDigest.String() {
		t.Errorf("Digest = %s, want the amd64 manifest %s", img.Digest, amdDigest)
	}
	if b, _ := os.ReadFile(filepath.Join(img.LowerDirs[0], "arch")); string(b) != "amd64" {
		t.Errorf("arch = %q, want amd64", b)
	}
	// The index digest is remembered too: pulling it again needs no layer work.
	unpacked := c.Stats().LayersUnpacked
	again := pull(t, c, host+"/multi@"+idxDigest.String())
	if again.Digest != amdDigest.String() || c.Stats().LayersUnpacked != unpacked {
		t.Errorf("second pull by index digest: %s, stats %+v", again.Digest, c.Stats())
	}
}

// corruptBlob serves blob with a flipped byte in the gzip header's MTIME
// field: still valid gzip of the same tar, same size, but a different digest,
// so only digest verification can notice.
func corruptBlob(blob v1.Hash) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Method != http.MethodGet || !strings.HasSuffix(r.URL.Path, "/blobs/"+blob.String()) {
				next.ServeHTTP(w, r)
				return
			}
			rec := httptest.NewRecorder()
			next.ServeHTTP(rec, r)
			body := rec.Body.Bytes()
			body[4] ^= 0xff
			for k, v := range rec.Header() {
				w.Header()[k] = v
			}
			w.WriteHeader(rec.Code)
			w.Write(body)
		})
	}
}

func TestPullRefusesLayerWithWrongDigest(t *testing.T) {
	requireRoot(t)
	layer := imagestest.Layer(t, imagestest.File("hello", "world", 0o644))
	digest, _ := layer.Digest()
	host := imagestest.Registry(t, corruptBlob(digest))
	ref := imagestest.Push(t, host, "corrupt", imagestest.Image(t, layer))

	dir := t.TempDir()
	c := newCache(t, dir)
	_, err := c.Pull(t.Context(), ref)
	if err == nil || !strings.Contains(err.Error(), "verifying") {
		t.Fatalf("pull of a corrupted layer: %v, want a digest verification error", err)
	}
	if _, err := os.Lstat(filepath.Join(dir, "layers", digest.Algorithm, digest.Hex)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("corrupted layer was kept: %v", err)
	}
	assertEmptyDir(t, filepath.Join(dir, "tmp"))
}

func assertEmptyDir(t *testing.T, dir string) {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 0 {
		var names []string
		for _, e := range entries {
			names = append(names, e.Name())
		}
		t.Errorf("%s holds %v, want nothing", dir, names)
	}
}

func TestMaliciousLayersStayInsideTheLayerDir(t *testing.T) {
	requireRoot(t)
	host := imagestest.Registry(t)
	base := t.TempDir()
	sentinel := filepath.Join(base, "sentinel")
	if err := os.Mkdir(sentinel, 0o755); err != nil {
		t.Fatal(err)
	}
	passwdBefore := lstat(t, "/etc/passwd")

	for i, trick := range imagestest.Tricks(sentinel) {
		t.Run(trick.Name, func(t *testing.T) {
			ref := imagestest.Push(t, host, fmt.Sprintf("trick%d", i), imagestest.Image(t, imagestest.MaliciousLayer(t, trick)))
			cacheDir := filepath.Join(base, fmt.Sprintf("cache%d", i), "images")
			c := newCache(t, cacheDir)
			img, err := c.Pull(t.Context(), ref)

			if trick.Refused {
				if !errors.Is(err, images.ErrUnsafeLayer) {
					t.Fatalf("pull: %v, want ErrUnsafeLayer", err)
				}
				if entry := trick.Entry[:min(len(trick.Entry), 100)]; !strings.Contains(err.Error(), entry) {
					t.Errorf("error %q does not name the entry %q", err, entry)
				}
				assertEmptyDir(t, filepath.Join(cacheDir, "layers"))
			} else {
				if err != nil {
					t.Fatalf("pull: %v, want the layer unpacked with the trick neutralised", err)
				}
				if trick.Inside != "" {
					if fi, err := os.Lstat(filepath.Join(img.LowerDirs[0], trick.Inside)); err != nil || !fi.Mode().IsRegular() {
						t.Errorf("%s in the layer: %v, %v; want a regular file", trick.Inside, fi, err)
					}
				}
				if trick.Missing != "" {
					if _, err := os.Lstat(filepath.Join(img.LowerDirs[0], trick.Missing)); !errors.Is(err, os.ErrNotExist) {
						t.Errorf("%s was created in the layer: %v", trick.Missing, err)
					}
				}
			}
			assertEmptyDir(t, filepath.Join(cacheDir, "tmp"))
			assertEmptyDir(t, sentinel)
			if after := lstat(t, "/etc/passwd"); after.Nlink != passwdBefore.Nlink || after.Ino != passwdBefore.Ino || after.Mtim != passwdBefore.Mtim {
				t.Errorf("/etc/passwd changed: nlink %d -> %d", passwdBefore.Nlink, after.Nlink)
			}
			entries, _ := os.ReadDir(base)
			for _, e := range entries {
				if e.Name() != "sentinel" && !strings.HasPrefix(e.Name(), "cache") {
					t.Errorf("unexpected %s next to the cache", e.Name())
				}
			}
		})
	}
}

func TestPruneKeepsOnlyLayersOfKeptImages(t *testing.T) {
	requireRoot(t)
	host := imagestest.Registry(t)
	refA := imagestest.Push(t, host, "a", busybox(t, map[string]images.File{"a": {Content: []byte("a")}}))
	refB := imagestest.Push(t, host, "b", busybox(t, map[string]images.File{"b": {Content: []byte("b")}}))
	dir := t.TempDir()
	c := newCache(t, dir)
	a, b := pull(t, c, refA), pull(t, c, refB)
	if a.LowerDirs[1] != b.LowerDirs[1] {
		t.Fatalf("the busybox layer is not shared: %v vs %v", a.LowerDirs, b.LowerDirs)
	}

	if n, err := c.Prune([]string{a.Digest}, nil); err != nil || n != 1 {
		t.Fatalf("prune removed %d manifests (%v), want b's", n, err)
	}
	for _, d := range a.LowerDirs {
		if _, err := os.Lstat(d); err != nil {
			t.Errorf("kept layer %s: %v", d, err)
		}
	}
	if _, err := os.Lstat(b.LowerDirs[0]); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("b's own layer survived prune: %v", err)
	}
	bDigest := strings.TrimPrefix(b.Digest, "sha256:")
	if _, err := os.Lstat(filepath.Join(dir, "manifests", "sha256", bDigest+".json")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("b's manifest record survived prune: %v", err)
	}
	assertEmptyDir(t, filepath.Join(dir, "tmp"))
	// b pulls again, unpacking only its own layer.
	unpacked := c.Stats().LayersUnpacked
	pull(t, c, refB)
	if got := c.Stats().LayersUnpacked - unpacked; got != 1 {
		t.Errorf("re-pull of b unpacked %d layers, want 1", got)
	}
}

func TestOverlayOfPulledImageRuns(t *testing.T) {
	requireRoot(t)
	host := imagestest.Registry(t)
	bb := busybox(t, map[string]images.File{
		"etc/motd":      {Content: []byte("hi")},
		"data/old/file": {Content: []byte("old")},
	})
	img, err := mutate.AppendLayers(bb, imagestest.Layer(t,
		imagestest.Whiteout("etc", "motd"),
		imagestest.Dir("data/old/", 0o755),
		imagestest.Opaque("data/old"),
		imagestest.File("data/old/new", "new", 0o644),
	))
	if err != nil {
		t.Fatal(err)
	}
	ref := imagestest.Push(t, host, "overlay", img)
	pulled := pull(t, newCache(t, t.TempDir()), ref)

	work := t.TempDir()
	merged, upper, wdir := filepath.Join(work, "merged"), filepath.Join(work, "upper"), filepath.Join(work, "work")
	for _, d := range []string{merged, upper, wdir} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	opts := fmt.Sprintf("lowerdir=%s,upperdir=%s,workdir=%s", strings.Join(pulled.LowerDirs, ":"), upper, wdir)
	if err := unix.Mount("overlay", merged, "overlay", 0, opts); err != nil {
		t.Fatalf("mount overlay: %v", err)
	}
	t.Cleanup(func() {
		if err := unix.Unmount(merged, unix.MNT_DETACH); err != nil {
			t.Errorf("unmount %s: %v", merged, err)
		}
	})

	if _, err := os.Lstat(filepath.Join(merged, "etc/motd")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("/etc/motd deleted by the top layer is visible: %v", err)
	}
	if _, err := os.Lstat(filepath.Join(merged, "data/old/file")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("/data/old/file hidden by the opaque dir is visible: %v", err)
	}
	if fi, err := os.Stat(filepath.Join(merged, "bin/busybox")); err != nil || fi.Mode()&0o111 == 0 {
		t.Errorf("/bin/busybox: %v, %v", fi, err)
	}

	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "/bin/sh", "-c", "cat /data/old/new; ls /data/old; test -e /etc/motd || echo motd-gone")
	cmd.SysProcAttr = &syscall.SysProcAttr{Chroot: merged}
	cmd.Dir = "/"
	cmd.Env = pulled.Config.Env
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, io.Discard
	if err := cmd.Run(); err != nil {
		t.Fatalf("run in the merged root: %v (%s)", err, out.String())
	}
	if got, want := out.String(), "newnew\nmotd-gone\n"; got != want {
		t.Errorf("output %q, want %q", got, want)
	}
}

// gateBlob holds GETs of blob until release is closed, reporting each request
// on started.
func gateBlob(blob v1.Hash, started chan<- struct{}, release <-chan struct{}) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Method == http.MethodGet && strings.HasSuffix(r.URL.Path, "/blobs/"+blob.String()) {
				started <- struct{}{}
				select {
				case <-release:
				case <-r.Context().Done():
					return
				}
			}
			next.ServeHTTP(w, r)
		})
	}
}

func TestCancelledPullDoesNotFailAnotherPullOfTheSameLayer(t *testing.T) {
	requireRoot(t)
	layer := imagestest.Layer(t, imagestest.File("hello", "world", 0o644))
	digest, _ := layer.Digest()
	started, release := make(chan struct{}, 4), make(chan struct{})
	host := imagestest.Registry(t, gateBlob(digest, started, release))
	ref := imagestest.Push(t, host, "cancel", imagestest.Image(t, layer))
	c := newCache(t, t.TempDir())

	ctxA, cancelA := context.WithCancel(t.Context())
	errA := make(chan error, 1)
	go func() { _, err := c.Pull(ctxA, ref); errA <- err }()
	<-started // A is downloading the layer.

	resB := make(chan error, 1)
	go func() { _, err := c.Pull(t.Context(), ref); resB <- err }()
	cancelA()
	if err := <-errA; !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled pull: %v, want context.Canceled", err)
	}
	select {
	case <-started: // B downloads the layer itself.
		close(release)
	case err := <-resB:
		t.Fatalf("second pull ended without downloading the layer: %v", err)
	}
	if err := <-resB; err != nil {
		t.Fatalf("second pull: %v", err)
	}
	if got := c.Stats().LayersUnpacked; got != 1 {
		t.Errorf("LayersUnpacked = %d, want 1", got)
	}
}
