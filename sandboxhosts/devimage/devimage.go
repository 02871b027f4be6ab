// Package devimage owns the image `hangar dev` offers out of the box, so a new
// user can start a session offline with nothing to build or pull from the
// internet: a busybox image made once from this machine's /bin/busybox, kept
// as an OCI image layout in a data directory, and served by a read-only
// registry on loopback that the sandbox host pulls from like any other.
//
// Layout under the data directory:
//
//	oci/           the image, an OCI image layout; also the registry's blob store
//	oci-build-*/   a build in progress, renamed to oci/ when complete
//	images/<name>/ more images made elsewhere (`make agent-image` writes images/agent), each an
//	               OCI image layout of one image, served as hangar/<name>:latest: Serve links
//	               their blobs into oci/'s blob store. images/<name> may be a symlink to a
//	               layout elsewhere (on the same filesystem: blobs are hard-linked); one that
//	               leads to no directory is skipped with a log line
//
// A data directory belongs to one Registry at a time.
package devimage

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log"
	"maps"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/hangar-dev/hangar/sandboxhosts/images"
)

const (
	// The registry serves the image as repository:tag.
	repository = "hangar/dev"
	tag        = "latest"

	// recipe names what build puts into the image. Change it whenever that
	// changes, so caches built by an older hangar are rebuilt, not served.
	recipe           = "1"
	recipeAnnotation = "dev.hangar.devimage.recipe"

	layoutDir   = "oci"
	moreDir     = "images"
	buildPrefix = "oci-build-"

	// shutdownGrace is how long Close lets pulls in flight finish before it
	// cuts their connections.
	shutdownGrace = 5 * time.Second
)

// motd greets whoever logs into a session of the dev image.
const motd = `This is the hangar dev image: busybox from the machine running hangar.
It is meant for trying hangar out; point your profile at a real image for work.
`

// Registry serves the dev image on loopback until Close.
type Registry struct {
	ref    string
	more   map[string]string // the images of images/, by name
	digest string
	srv    *http.Server
	done   chan struct{} // closed when srv.Serve has returned
	err    error         // what srv.Serve returned
}

// Serve makes sure dir holds the dev image, building it when it is missing,
// damaged or of an older recipe, and serves it as hangar/dev:latest on addr, a
// loopback host:port ("" picks a free port on 127.0.0.1). The registry is
// unauthenticated plain HTTP, hence loopback only, and read-only: it has the
// dev image and nothing else. ctx bounds the start; the registry runs until
// Close.
func Serve(ctx context.Context, dir, addr string) (*Registry, error) {
	if addr == "" {
		addr = "127.0.0.1:0"
	}
	ln, err := listen(addr)
	if err != nil {
		return nil, fmt.Errorf("dev image registry: %w", err)
	}
	r, err := start(ctx, dir, ln)
	if err != nil {
		ln.Close()
		return nil, fmt.Errorf("dev image registry: %w", err)
	}
	return r, nil
}

// listen listens on addr when it is an address go-containerregistry (and so
// the image cache) talks plain HTTP to and nobody off this machine can reach.
func listen(addr string) (net.Listener, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	got := ln.Addr().String()
	reg, err := name.NewRegistry(got)
	if err == nil && (!ln.Addr().(*net.TCPAddr).IP.IsLoopback() || reg.Scheme() != "http") {
		err = fmt.Errorf("%s is not 127.0.0.1 or [::1]", got)
	}
	if err != nil {
		ln.Close()
		return nil, fmt.Errorf("listen on %s: %w", addr, err)
	}
	return ln, nil
}

func start(ctx context.Context, dir string, ln net.Listener) (*Registry, error) {
	img, err := ensure(dir)
	if err != nil {
		return nil, err
	}
	digest, err := img.Digest()
	if err != nil {
		return nil, err
	}
	ref, err := name.NewTag(ln.Addr().String() + "/" + repository + ":" + tag)
	if err != nil {
		return nil, err
	}
	// The layout's blobs directory has the sha256/<hex> shape of the disk blob
	// handler: the registry serves the cached files and keeps only the
	// manifest in memory.
	reg := registry.New(
		// A line per request would flood `hangar dev`'s output.
		registry.Logger(log.New(io.Discard, "", 0)),
		registry.WithBlobHandler(registry.NewDiskBlobHandler(filepath.Join(dir, layoutDir, "blobs"))),
	)
	// Every blob is there already, so the push only puts the manifest.
	if err := remote.Write(ref, img, remote.WithContext(ctx), remote.WithTransport(inProcess{reg})); err != nil {
		return nil, fmt.Errorf("push %s: %w", ref, err)
	}
	more, err := serveMore(ctx, dir, ln.Addr().String(), reg)
	if err != nil {
		return nil, err
	}
	r := &Registry{
		ref:    ref.String(),
		more:   more,
		digest: digest.String(),
		srv:    &http.Server{Handler: readOnly(reg), ReadHeaderTimeout: 10 * time.Second},
		done:   make(chan struct{}),
	}
	go func() {
		r.err = r.srv.Serve(ln)
		close(r.done)
	}()
	return r, nil
}

// Ref is the image's tag reference, such as
// "127.0.0.1:45123/hangar/dev:latest".
func (r *Registry) Ref() string { return r.ref }

// More is the reference of each image of the data directory's images/, by name, such as
// "agent": "127.0.0.1:45123/hangar/agent:latest".
func (r *Registry) More() map[string]string { return maps.Clone(r.more) }

// serveMore puts the images of dir's images/ into reg, its blobs linked into the blob store; a
// directory there that is not a layout of one image is skipped with a log line, as a build of
// it may be under way.
func serveMore(ctx context.Context, dir, host string, reg http.Handler) (map[string]string, error) {
	entries, err := os.ReadDir(filepath.Join(dir, moreDir))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	more := map[string]string{}
	for _, e := range entries {
		if strings.Contains(e.Name(), ".") {
			continue // builds in progress are <name>.build-*
		}
		src := filepath.Join(dir, moreDir, e.Name())
		if e.Type()&fs.ModeSymlink != 0 {
			// A layout kept elsewhere and linked in is served like one in place; a link that
			// leads nowhere or to no directory is said, not passed over in silence.
			fi, err := os.Stat(src)
			if err != nil || !fi.IsDir() {
				target, _ := os.Readlink(src)
				log.Printf("dev image registry: skipping %s: it links to %s, which is no directory (%v)", src, target, cmp.Or(err, errors.New("not a directory")))
				continue
			}
		} else if !e.IsDir() {
			continue
		}
		img, err := OnlyImage(src)
		if err != nil {
			log.Printf("dev image registry: skipping %s: %v", src, err)
			continue
		}
		if err := linkBlobs(filepath.Join(src, "blobs", "sha256"), filepath.Join(dir, layoutDir, "blobs", "sha256")); err != nil {
			return nil, fmt.Errorf("image %s: %w", e.Name(), err)
		}
		ref, err := name.NewTag(host + "/hangar/" + e.Name() + ":" + tag)
		if err != nil {
			return nil, fmt.Errorf("image %s: %w", e.Name(), err)
		}
		if err := remote.Write(ref, img, remote.WithContext(ctx), remote.WithTransport(inProcess{reg})); err != nil {
			return nil, fmt.Errorf("push %s: %w", ref, err)
		}
		more[e.Name()] = ref.String()
	}
	return more, nil
}

// OnlyManifest is the layout at dir and the descriptor of its one manifest: a layout this
// package or the agent image's build writes holds exactly one image.
func OnlyManifest(dir string) (layout.Path, v1.Descriptor, error) {
	p, err := layout.FromPath(dir)
	if err != nil {
		return "", v1.Descriptor{}, err
	}
	idx, err := p.ImageIndex()
	if err != nil {
		return "", v1.Descriptor{}, err
	}
	im, err := idx.IndexManifest()
	if err != nil {
		return "", v1.Descriptor{}, err
	}
	if len(im.Manifests) != 1 {
		return "", v1.Descriptor{}, fmt.Errorf("layout %s has %d manifests, want 1", dir, len(im.Manifests))
	}
	return p, im.Manifests[0], nil
}

// OnlyImage is the one image of the layout at dir.
func OnlyImage(dir string) (v1.Image, error) {
	p, desc, err := OnlyManifest(dir)
	if err != nil {
		return nil, err
	}
	return p.Image(desc.Digest)
}

// linkBlobs hard-links every blob of from into to (the images are big: no copies), leaving the
// blobs to has already.
func linkBlobs(from, to string) error {
	entries, err := os.ReadDir(from)
	if err != nil {
		return err
	}
	for _, e := range entries {
		err := os.Link(filepath.Join(from, e.Name()), filepath.Join(to, e.Name()))
		if err != nil && !errors.Is(err, fs.ErrExist) {
			return fmt.Errorf("link blob %s: %w", e.Name(), err)
		}
	}
	return nil
}

// Digest is the image manifest digest, the same for every Serve of a data
// directory.
func (r *Registry) Digest() string { return r.digest }

// Close stops the registry: the listener is closed at once and pulls in
// flight get shutdownGrace to finish before their connections are cut.
func (r *Registry) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), shutdownGrace)
	defer cancel()
	if err := r.srv.Shutdown(ctx); err != nil {
		r.srv.Close()
	}
	<-r.done
	if errors.Is(r.err, http.ErrServerClosed) {
		return nil
	}
	return fmt.Errorf("dev image registry: %w", r.err)
}

// readOnly refuses whatever would change the registry: anyone on this
// machine can reach it, and a push would change the image every new session
// starts from (and write into the data directory).
func readOnly(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if req.Method != http.MethodGet && req.Method != http.MethodHead {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusMethodNotAllowed)
			io.WriteString(w, `{"errors":[{"code":"UNSUPPORTED","message":"the hangar dev image registry is read-only"}]}`)
			return
		}
		h.ServeHTTP(w, req)
	})
}

// inProcess hands requests straight to a handler: it is how the registry gets
// its image while its network side stays read-only. (pkg/registry links
// net/http/httptest already.)
type inProcess struct{ h http.Handler }

func (t inProcess) RoundTrip(req *http.Request) (*http.Response, error) {
	// A server-side request always has a body; pkg/registry closes it
	// without checking.
	sreq := req.Clone(req.Context())
	if sreq.Body == nil {
		sreq.Body = http.NoBody
	}
	defer sreq.Body.Close()
	rec := httptest.NewRecorder()
	t.h.ServeHTTP(rec, sreq)
	resp := rec.Result()
	resp.Request = req
	return resp, nil
}

// ensure returns the image cached in dir, building it first when the cache
// is not usable.
func ensure(dir string) (v1.Image, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("data dir: %w", err)
	}
	// Builds interrupted by a crash.
	stale, err := filepath.Glob(filepath.Join(dir, buildPrefix+"*"))
	if err != nil {
		return nil, err
	}
	for _, s := range stale {
		if err := os.RemoveAll(s); err != nil {
			return nil, fmt.Errorf("remove unfinished build: %w", err)
		}
	}
	if img, err := cached(filepath.Join(dir, layoutDir)); err == nil {
		return img, nil
	}
	// Whatever is wrong with the cache, a new build replaces it: the build is
	// reproducible, so the digest stays the same.
	if err := build(dir); err != nil {
		return nil, err
	}
	img, err := cached(filepath.Join(dir, layoutDir))
	if err != nil {
		return nil, fmt.Errorf("read back built image: %w", err)
	}
	return img, nil
}

// cached returns the image of the layout at dir when the layout has exactly
// one image, of the current recipe, with every blob present and intact.
func cached(dir string) (v1.Image, error) {
	p, desc, err := OnlyManifest(dir)
	if err != nil {
		return nil, err
	}
	if got := desc.Annotations[recipeAnnotation]; got != recipe {
		return nil, fmt.Errorf("layout %s has recipe %q, want %q", dir, got, recipe)
	}
	if err := verifyBlob(p, desc); err != nil {
		return nil, err
	}
	img, err := p.Image(desc.Digest)
	if err != nil {
		return nil, err
	}
	m, err := img.Manifest()
	if err != nil {
		return nil, err
	}
	for _, d := range append([]v1.Descriptor{m.Config}, m.Layers...) {
		if err := verifyBlob(p, d); err != nil {
			return nil, err
		}
	}
	return img, nil
}

// verifyBlob checks that the blob d describes has d's size and digest.
func verifyBlob(p layout.Path, d v1.Descriptor) error {
	rc, err := p.Blob(d.Digest)
	if err != nil {
		return err
	}
	defer rc.Close()
	h, n, err := v1.SHA256(rc)
	if err != nil {
		return fmt.Errorf("blob %s: %w", d.Digest, err)
	}
	if h != d.Digest || n != d.Size {
		return fmt.Errorf("blob %s has digest %s and %d bytes, want %d", d.Digest, h, n, d.Size)
	}
	return nil
}

// build writes a new layout of the dev image and puts it in place of the old
// one.
func build(dir string) error {
	img, err := images.Busybox(map[string]images.File{"/etc/motd": {Content: []byte(motd)}})
	if err != nil {
		return err
	}
	tmp, err := os.MkdirTemp(dir, buildPrefix)
	if err != nil {
		return fmt.Errorf("build dev image: %w", err)
	}
	defer os.RemoveAll(tmp)
	p, err := layout.Write(tmp, empty.Index)
	if err != nil {
		return fmt.Errorf("build dev image: %w", err)
	}
	err = p.AppendImage(img, layout.WithAnnotations(map[string]string{
		recipeAnnotation: recipe,
		// What OCI tools (skopeo oci:dir:latest) look the image up by.
		"org.opencontainers.image.ref.name": tag,
	}))
	if err != nil {
		return fmt.Errorf("build dev image: %w", err)
	}
	final := filepath.Join(dir, layoutDir)
	if err := os.RemoveAll(final); err != nil {
		return fmt.Errorf("replace dev image: %w", err)
	}
	if err := os.Rename(tmp, final); err != nil {
		return fmt.Errorf("replace dev image: %w", err)
	}
	return nil
}
