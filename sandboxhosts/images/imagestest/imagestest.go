// Package imagestest owns the test side of OCI images: an in-process registry
// on loopback, pushing images to it, small layer builders, and the malicious
// layers that the image cache must refuse or contain.
package imagestest

import (
	"archive/tar"
	"crypto/subtle"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/hangar-dev/hangar/platform/egress"
	"github.com/hangar-dev/hangar/sandboxhosts/images"
)

// Allow is the operator's entry that opens Registry's loopback address to pulls; without it a
// pull of a test image is refused, as any pull of a loopback registry is.
var Allow = egress.MustParse("127.0.0.1")

// Registry starts go-containerregistry's in-memory registry on
// 127.0.0.1 for the test and returns its host:port. Each wrap, when given,
// wraps the registry handler (to corrupt or count responses).
func Registry(t testing.TB, wrap ...func(http.Handler) http.Handler) string {
	t.Helper()
	h := registry.New(registry.Logger(log.New(io.Discard, "", 0)))
	for _, w := range wrap {
		h = w(h)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return strings.TrimPrefix(srv.URL, "http://")
}

// HostileBody is what a hostile (or internal) server puts in its answers to a pull; no error
// Hangar reports may repeat it.
const HostileBody = "PRIVATE-INTERNAL-BODY"

// Hostile wraps a registry so that its manifest requests answer, by repository, as an
// attacker's server or an internal service would: "body/..." 403 with HostileBody as text,
// "diagnostics/..." 404 with registry errors whose message is HostileBody, "redirect/..." a 302
// to redirectTo. Everything else reaches the registry. hits, when not nil, counts every
// request that arrives.
func Hostile(redirectTo string, hits *atomic.Int32) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if hits != nil {
				hits.Add(1)
			}
			repo, _, manifest := strings.Cut(strings.TrimPrefix(r.URL.Path, "/v2/"), "/manifests/")
			switch {
			case !manifest:
				next.ServeHTTP(w, r)
			case strings.HasPrefix(repo, "body/"):
				http.Error(w, HostileBody, http.StatusForbidden)
			case strings.HasPrefix(repo, "diagnostics/"):
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(http.StatusNotFound)
				_, _ = io.WriteString(w, `{"errors":[{"code":"MANIFEST_UNKNOWN","message":"`+HostileBody+`","detail":"`+HostileBody+`"}]}`)
			case strings.HasPrefix(repo, "redirect/"):
				http.Redirect(w, r, redirectTo, http.StatusFound)
			default:
				next.ServeHTTP(w, r)
			}
		})
	}
}

// BasicAuth wraps a registry so that every request must carry HTTP basic auth with user and
// password, as a private registry's does; others get 401 with a Basic challenge, the answer
// go-containerregistry's clients sign in after. refused, when not nil, counts the requests it
// turned away.
func BasicAuth(user, password string, refused *atomic.Int32) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			u, p, ok := r.BasicAuth()
			if !ok || subtle.ConstantTimeCompare([]byte(u), []byte(user)) != 1 || subtle.ConstantTimeCompare([]byte(p), []byte(password)) != 1 {
				if refused != nil {
					refused.Add(1)
				}
				w.Header().Set("WWW-Authenticate", `Basic realm="test registry"`)
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(http.StatusUnauthorized)
				_, _ = io.WriteString(w, `{"errors":[{"code":"UNAUTHORIZED","message":"authentication required"}]}`)
				return
			}
			next.ServeHTTP(w, r)
		})
	}
}

// Push pushes img as host/repo:latest and returns that reference; opts add to the push's
// options (remote.WithAuth for a registry behind BasicAuth).
func Push(t testing.TB, host, repo string, img v1.Image, opts ...remote.Option) string {
	t.Helper()
	ref := host + "/" + repo + ":latest"
	r, err := name.ParseReference(ref)
	if err != nil {
		t.Fatalf("push %s: %v", ref, err)
	}
	if err := remote.Write(r, img, append([]remote.Option{remote.WithContext(t.Context())}, opts...)...); err != nil {
		t.Fatalf("push %s: %v", ref, err)
	}
	return ref
}

// Image returns a linux/amd64 OCI image made of layers, bottom first.
func Image(t testing.TB, layers ...v1.Layer) v1.Image {
	t.Helper()
	img, err := mutate.ConfigFile(mutate.MediaType(empty.Image, types.OCIManifestSchema1), &v1.ConfigFile{
		OS:           images.PlatformOS,
		Architecture: images.PlatformArch,
	})
	if err != nil {
		t.Fatal(err)
	}
	img, err = mutate.AppendLayers(mutate.ConfigMediaType(img, types.OCIConfigJSON), layers...)
	if err != nil {
		t.Fatal(err)
	}
	return img
}

// Layer builds a gzip layer of entries, in order.
func Layer(t testing.TB, entries ...images.TarEntry) v1.Layer {
	t.Helper()
	l, err := images.TarLayer(entries...)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// File is a regular file entry.
func File(name, body string, mode int64) images.TarEntry {
	return images.TarEntry{Header: tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: mode}, Body: []byte(body)}
}

// Dir is a directory entry.
func Dir(name string, mode int64) images.TarEntry {
	return images.TarEntry{Header: tar.Header{Typeflag: tar.TypeDir, Name: name, Mode: mode}}
}

// Symlink is a symlink entry name -> target.
func Symlink(name, target string) images.TarEntry {
	return images.TarEntry{Header: tar.Header{Typeflag: tar.TypeSymlink, Name: name, Linkname: target, Mode: 0o777}}
}

// Hardlink is a hardlink entry name => target.
func Hardlink(name, target string) images.TarEntry {
	return images.TarEntry{Header: tar.Header{Typeflag: tar.TypeLink, Name: name, Linkname: target, Mode: 0o644}}
}

// Device is a character (tar.TypeChar) or block (tar.TypeBlock) device entry.
func Device(name string, typ byte, major, minor int64) images.TarEntry {
	return images.TarEntry{Header: tar.Header{Typeflag: typ, Name: name, Mode: 0o600, Devmajor: major, Devminor: minor}}
}

// Whiteout is the OCI whiteout hiding dir/name of lower layers.
func Whiteout(dir, name string) images.TarEntry {
	return File(joinName(dir, ".wh."+name), "", 0o644)
}

// Opaque is the OCI marker hiding everything lower layers have in dir.
func Opaque(dir string) images.TarEntry {
	return File(joinName(dir, ".wh..wh..opq"), "", 0o644)
}

func joinName(dir, name string) string {
	if dir == "" {
		return name
	}
	return strings.TrimSuffix(dir, "/") + "/" + name
}
