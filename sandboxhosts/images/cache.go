// Package images owns the sandbox host's OCI image cache: it resolves image
// references with go-containerregistry, unpacks every layer once per layer
// digest into a directory that overlayfs can use as a read-only lower dir, and
// remembers resolved manifests so digest references work offline. It also
// builds the small busybox image that `hangar dev` and the tests run.
//
// Layout under the cache directory:
//
//	layers/<algo>/<hex>/       one unpacked layer (overlay whiteouts, ready as a lowerdir)
//	manifests/<algo>/<hex>.json what a digest resolved to: image manifest digest, layers, config
//	tmp/                        layers being unpacked (same file system, renamed into place)
//
// Unpacking needs root (chown, whiteout device nodes, trusted.* xattrs). A
// cache directory belongs to one process: New clears tmp/.
//
// Safety: every layer entry is created relative to a directory fd opened with
// openat2(RESOLVE_IN_ROOT|RESOLVE_NO_MAGICLINKS|RESOLVE_NO_SYMLINKS). Layers
// with ".." components, paths through symlinks, hardlinks to anything but an
// earlier file of the same layer, over-long names or NUL bytes are refused
// whole (ErrUnsafeLayer). Absolute names are taken as relative to the layer
// root. Device nodes (other than overlay whiteouts, which the unpacker makes
// itself) and untrusted xattrs are skipped and logged; fifos are created.
package images

import (
	"bufio"
	"bytes"

	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/remote/transport"
	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zstd"
	"golang.org/x/sync/errgroup"
	"golang.org/x/sync/singleflight"
	"golang.org/x/sys/unix"

	"github.com/hangar-dev/hangar/platform/egress"
)

// Labels an image may carry to suggest sandbox resources.
const (
	LabelCPUs     = "dev.hangar.resources.cpus"
	LabelMemoryMB = "dev.hangar.resources.memory_mb"
	LabelPids     = "dev.hangar.resources.pids"
	// LabelDiskMB asks for a sandbox disk of this size instead of the host's default, up to the
	// host's maximum.
	LabelDiskMB = "dev.hangar.resources.disk_mb"
)

// The only platform the cache pulls from an index (and Busybox builds).
const (
	PlatformOS   = "linux"
	PlatformArch = "amd64"
)

var platform = v1.Platform{OS: PlatformOS, Architecture: PlatformArch}

// Image is a pulled image, ready to become a sandbox's root file system.
type Image struct {
	Ref    string // as given to Pull
	Digest string // image manifest digest (the linux/amd64 one for an index)
	// LowerDirs are the unpacked layers, top layer first: the order of
	// overlayfs lowerdir=.
	LowerDirs []string
	Config    Config
}

// Config is the part of the image configuration a sandbox needs.
type Config struct {
	Env                []string
	WorkingDir         string
	Entrypoint         []string
	Cmd                []string
	User               string
	Labels             map[string]string
	SuggestedResources Resources
}

// Resources an image suggests through its dev.hangar.resources.* labels; zero
// where a label is absent.
type Resources struct {
	CPUs     float64
	MemoryMB int64
	Pids     int64
	DiskMB   int64
}

// Stats counts layer work since New.
type Stats struct {
	LayersUnpacked int64 // layers downloaded and unpacked
	LayersReused   int64 // layers found already unpacked
	EntriesSkipped int64 // layer entries or xattrs deliberately not created
}

// Option configures a Cache.
type Option func(*Cache)

// WithRegistries sets what pulls may reach beyond public addresses (default: public addresses
// only): every registry connection, redirects included, dials through it.
func WithRegistries(p egress.Policy) Option {
	return func(c *Cache) { c.registries = p }
}

// WithKeychain sets how pulls sign in to registries (default authn.DefaultKeychain, the
// machine's docker config). A sandbox host passes the registry store's keychain
// (records/registryauth), so that every pull of the deployment uses the registries an admin
// configured.
func WithKeychain(k authn.Keychain) Option {
	return func(c *Cache) { c.keychain = k }
}

// WithLogger sets where skipped layer entries are reported (default slog.Default()).
func WithLogger(l *slog.Logger) Option {
	return func(c *Cache) { c.log = l }
}

// WithMaxImageBytes refuses (ErrTooLarge) an image whose layers take more than n bytes, either
// as the manifest says the registry serves them or decompressed while they are unpacked
// (n <= 0: no limit). The manifest's sizes are checked before any download; the unpacked bytes
// catch the layer that compresses a lot into a little (a zip bomb), and stop it at the limit.
func WithMaxImageBytes(n int64) Option {
	return func(c *Cache) { c.maxImageBytes = n }
}

// ErrTooLarge is an image over the cache's size limit.
var ErrTooLarge = errors.New("image too large")

// ErrUnrunnable is what an image whose config this host cannot run (another OS, malformed
// resource labels) matches.
var ErrUnrunnable = errors.New("image cannot run here")

// Cache pulls images and keeps their unpacked layers under one directory.
type Cache struct {
	dir        string
	log        *slog.Logger
	registries egress.Policy
	keychain   authn.Keychain
	// One puller for all pulls: it keeps each repository's auth token, saving
	// the ping and token round trips on every pull.
	puller *remote.Puller

	flight singleflight.Group
	// Pulls hold mu for reading, Prune for writing, so Prune never removes a
	// layer a pull is about to return.
	mu sync.RWMutex

	unpacked, reused, skipped atomic.Int64
	maxImageBytes             int64
}

// New returns a cache rooted at dir, creating it if needed.
func New(dir string, opts ...Option) (*Cache, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("image cache dir: %w", err)
	}
	c := &Cache{dir: abs, log: slog.Default(), keychain: authn.DefaultKeychain}
	for _, o := range opts {
		o(c)
	}
	if c.puller, err = remote.NewPuller(append(c.registries.Registry(), remote.WithAuthFromKeychain(c.keychain), remote.WithPlatform(platform))...); err != nil {
		return nil, fmt.Errorf("image cache: %w", err)
	}
	for _, sub := range []string{"layers", "manifests", "tmp"} {
		if err := os.MkdirAll(filepath.Join(abs, sub), 0o700); err != nil {
			return nil, fmt.Errorf("image cache dir: %w", err)
		}
	}
	// Leftovers of unpacks interrupted by a crash.
	stale, err := os.ReadDir(c.tmpDir())
	if err != nil {
		return nil, fmt.Errorf("image cache tmp: %w", err)
	}
	for _, e := range stale {
		if err := os.RemoveAll(filepath.Join(c.tmpDir(), e.Name())); err != nil {
			return nil, fmt.Errorf("image cache tmp: %w", err)
		}
	}
	return c, nil
}

// Stats returns the layer counters.
func (c *Cache) Stats() Stats {
	return Stats{LayersUnpacked: c.unpacked.Load(), LayersReused: c.reused.Load(), EntriesSkipped: c.skipped.Load()}
}

func (c *Cache) tmpDir() string { return filepath.Join(c.dir, "tmp") }

func (c *Cache) layerDir(h v1.Hash) string {
	return filepath.Join(c.dir, "layers", h.Algorithm, h.Hex)
}

func (c *Cache) recordPath(h v1.Hash) string {
	return filepath.Join(c.dir, "manifests", h.Algorithm, h.Hex+".json")
}

// record is what a digest resolved to, kept so a digest reference can be
// pulled again without the registry.
type record struct {
	Digest v1.Hash         `json:"digest"` // image manifest digest
	Layers []v1.Hash       `json:"layers"` // bottom layer first, as in the manifest
	Config json.RawMessage `json:"config"`
}

// Pull resolves ref (a tag or a digest), unpacks the layers not already in the
// cache and returns the image. A digest reference whose layers are all
// unpacked is served from disk without contacting the registry. A failure is
// described in Hangar's words (egress.RegistryError): nothing the registry
// sent is repeated.
func (c *Cache) Pull(ctx context.Context, ref string) (*Image, error) {
	return c.PullTapped(ctx, ref, nil)
}

// LayerTap watches one layer as this cache unpacks it: an enabled image's layers are chunked
// as they stream past, not read back afterwards.
type LayerTap interface {
	// File returns a writer that is given the content of the new regular file dev/ino, size
	// bytes, as it is written (nil: not watched). It is closed at the file's end, and an error
	// of either fails the layer.
	File(dev, ino uint64, size int64) io.WriteCloser
	// Unpacked is given the layer's finished tree before the cache takes it in; an error
	// fails the layer.
	Unpacked(dir string) error
	// Abort is called instead of Unpacked when the layer failed.
	Abort()
}

// PullTapped is Pull with tap(layer digest) watching each layer this pull unpacks (nil: no
// tap). Layers the cache holds already, or that a concurrent pull unpacks, are not seen.
func (c *Cache) PullTapped(ctx context.Context, ref string, tap func(layer string) (LayerTap, error)) (*Image, error) {
	r, err := name.ParseReference(ref)
	if err != nil {
		return nil, fmt.Errorf("pull %q: %w", ref, err)
	}
	c.mu.RLock()
	defer c.mu.RUnlock()

	if d, ok := r.(name.Digest); ok {
		img, err := c.fromDisk(ref, d.DigestStr())
		if err != nil {
			return nil, fmt.Errorf("pull %q: %w", ref, err)
		}
		if img != nil {
			return img, nil
		}
	}
	img, err := c.fromRemote(ctx, ref, r, tap)
	if err != nil {
		return nil, fmt.Errorf("pull %q: %w%s", ref, egress.RegistryError(err, ErrTooLarge, ErrUnsafeLayer, ErrUnrunnable), signInHint(err, r.Context().RegistryStr()))
	}
	return img, nil
}

// signInHint says what to do about a registry that refused the pull's credentials (or wanted
// some): the registry's 401 or 403 alone does not tell a user that credentials are per host and
// an admin's to set.
func signInHint(err error, registry string) string {
	var terr *transport.Error
	if !errors.As(err, &terr) || (terr.StatusCode != http.StatusUnauthorized && terr.StatusCode != http.StatusForbidden) {
		return ""
	}
	return fmt.Sprintf(": the credentials Hangar has for registry %s were refused, or it has none "+
		"(an admin sees them with `hangar registries list` and sets them with `hangar registries add %s`)", registry, registry)
}

// fromDisk returns the image a digest was resolved to earlier, or nil when it
// was not or when one of its layers is gone.
func (c *Cache) fromDisk(ref, digest string) (*Image, error) {
	h, err := v1.NewHash(digest)
	if err != nil {
		return nil, err
	}
	data, err := os.ReadFile(c.recordPath(h))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read manifest record: %w", err)
	}
	var rec record
	if err := json.Unmarshal(data, &rec); err != nil {
		return nil, fmt.Errorf("manifest record %s: %w", h, err)
	}
	for _, l := range rec.Layers {
		if _, err := os.Lstat(c.layerDir(l)); err != nil {
			return nil, nil
		}
	}
	c.reused.Add(int64(len(rec.Layers)))
	return c.image(ref, rec)
}

func (c *Cache) fromRemote(ctx context.Context, ref string, r name.Reference, tap func(string) (LayerTap, error)) (*Image, error) {
	desc, err := c.puller.Get(ctx, r)
	if err != nil {
		return nil, fmt.Errorf("resolve: %w", err)
	}
	// A tag resolving to a digest pulled before needs nothing more.
	if img, err := c.fromDisk(ref, desc.Digest.String()); img != nil || err != nil {
		return img, err
	}
	// For an index, Image picks the WithPlatform (linux/amd64) manifest.
	img, err := desc.Image()
	if err != nil {
		return nil, fmt.Errorf("resolve %s: %w", platform.String(), err)
	}
	digest, err := img.Digest()
	if err != nil {
		return nil, err
	}
	rawConfig, err := img.RawConfigFile()
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	layers, err := img.Layers()
	if err != nil {
		return nil, fmt.Errorf("layers: %w", err)
	}
	rec := record{Digest: digest, Config: rawConfig}
	var compressed int64
	for _, l := range layers {
		h, err := l.Digest()
		if err != nil {
			return nil, err
		}
		rec.Layers = append(rec.Layers, h)
		size, err := l.Size()
		if err != nil {
			return nil, fmt.Errorf("layer %s size: %w", h, err)
		}
		compressed += size
	}
	if c.maxImageBytes > 0 && compressed > c.maxImageBytes {
		return nil, fmt.Errorf("%w: its layers are %d bytes compressed, over the limit of %d", ErrTooLarge, compressed, c.maxImageBytes)
	}
	// The config is checked before any download: an image this host cannot
	// run is not unpacked, and a record written below always loads.
	out, err := c.image(ref, rec)
	if err != nil {
		return nil, err
	}
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(3)
	budget := c.newBudget()
	for i, l := range layers {
		g.Go(func() error { return c.ensureLayer(gctx, l, rec.Layers[i], budget, tap) })
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	if err := c.writeRecord(digest, rec); err != nil {
		return nil, err
	}
	if desc.Digest != digest {
		if err := c.writeRecord(desc.Digest, rec); err != nil {
			return nil, err
		}
	}
	return out, nil
}

func (c *Cache) image(ref string, rec record) (*Image, error) {
	cfg, err := v1.ParseConfigFile(bytes.NewReader(rec.Config))
	if err != nil {
		return nil, fmt.Errorf("config of %s: %w", rec.Digest, err)
	}
	if cfg.OS != "" && cfg.OS != PlatformOS {
		return nil, fmt.Errorf("%w: image %s is for %s, not %s", ErrUnrunnable, rec.Digest, cfg.OS, PlatformOS)
	}
	res, err := suggestedResources(cfg.Config.Labels)
	if err != nil {
		return nil, fmt.Errorf("%w: image %s: %w", ErrUnrunnable, rec.Digest, err)
	}
	img := &Image{
		Ref:    ref,
		Digest: rec.Digest.String(),
		Config: Config{
			Env:                cfg.Config.Env,
			WorkingDir:         cfg.Config.WorkingDir,
			Entrypoint:         cfg.Config.Entrypoint,
			Cmd:                cfg.Config.Cmd,
			User:               cfg.Config.User,
			Labels:             cfg.Config.Labels,
			SuggestedResources: res,
		},
	}
	for i := len(rec.Layers) - 1; i >= 0; i-- {
		img.LowerDirs = append(img.LowerDirs, c.layerDir(rec.Layers[i]))
	}
	return img, nil
}

// suggestedResources parses the dev.hangar.resources.* labels. A malformed
// value is an error: someone set it on purpose and should hear it is wrong.
func suggestedResources(labels map[string]string) (Resources, error) {
	var res Resources
	if v, ok := labels[LabelCPUs]; ok {
		f, err := strconv.ParseFloat(v, 64)
		if err != nil || f <= 0 {
			return Resources{}, fmt.Errorf("label %s=%q: want a positive number", LabelCPUs, v)
		}
		res.CPUs = f
	}
	for _, l := range []struct {
		key string
		dst *int64
	}{{LabelMemoryMB, &res.MemoryMB}, {LabelPids, &res.Pids}, {LabelDiskMB, &res.DiskMB}} {
		v, ok := labels[l.key]
		if !ok {
			continue
		}
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n <= 0 {
			return Resources{}, fmt.Errorf("label %s=%q: want a positive integer", l.key, v)
		}
		*l.dst = n
	}
	return res, nil
}

// ensureLayer makes sure layer h is unpacked, doing the work once however
// many pulls ask for it at the same time.
func (c *Cache) ensureLayer(ctx context.Context, l v1.Layer, h v1.Hash, budget *budget, tap func(string) (LayerTap, error)) error {
	if _, err := os.Lstat(c.layerDir(h)); err == nil {
		c.reused.Add(1)
		return nil
	}
	for {
		ch := c.flight.DoChan(h.String(), func() (any, error) {
			return nil, c.unpackLayer(ctx, l, h, budget, tap)
		})
		select {
		case <-ctx.Done():
			return ctx.Err()
		case res := <-ch:
			// The shared work ran under the first caller's context; when that
			// caller gave up, try again under ours.
			if res.Shared && ctx.Err() == nil && (errors.Is(res.Err, context.Canceled) || errors.Is(res.Err, context.DeadlineExceeded)) {
				continue
			}
			return res.Err
		}
	}
}

func (c *Cache) unpackLayer(ctx context.Context, l v1.Layer, h v1.Hash, budget *budget, tapFor func(string) (LayerTap, error)) error {
	final := c.layerDir(h)
	if _, err := os.Lstat(final); err == nil {
		c.reused.Add(1)
		return nil
	}
	var tap LayerTap
	if tapFor != nil {
		var err error
		if tap, err = tapFor(h.String()); err != nil {
			return fmt.Errorf("unpack layer %s: %w", h, err)
		}
	}
	tmp, err := os.MkdirTemp(c.tmpDir(), h.Hex+"-")
	if err != nil {
		if tap != nil {
			tap.Abort()
		}
		return fmt.Errorf("unpack layer %s: %w", h, err)
	}
	committed := false
	defer func() {
		if !committed {
			os.RemoveAll(tmp)
		}
	}()
	skipped, err := extractInto(ctx, l, tmp, budget, tap)
	if err != nil {
		return fmt.Errorf("unpack layer %s: %w", h, err)
	}
	if err := syncDir(tmp, true); err != nil {
		return fmt.Errorf("unpack layer %s: %w", h, err)
	}
	if err := os.MkdirAll(filepath.Dir(final), 0o700); err != nil {
		return fmt.Errorf("unpack layer %s: %w", h, err)
	}
	if err := os.Rename(tmp, final); err != nil {
		return fmt.Errorf("unpack layer %s: %w", h, err)
	}
	committed = true
	if err := syncDir(filepath.Dir(final), false); err != nil {
		return fmt.Errorf("unpack layer %s: %w", h, err)
	}
	c.unpacked.Add(1)
	c.skipped.Add(int64(len(skipped)))
	// A few lines say what kind of thing was skipped; a layer full of device
	// nodes must not flood the log.
	const logged = 10
	for _, s := range skipped[:min(len(skipped), logged)] {
		c.log.Warn("image layer entry skipped", "layer", h.String(), "entry", s.Name, "reason", s.Reason)
	}
	if len(skipped) > logged {
		c.log.Warn("image layer entries skipped", "layer", h.String(), "more", len(skipped)-logged)
	}
	return nil
}

// extractInto unpacks the layer into dir, a new temporary directory, with tap (nil: none)
// watching: the tap sees the finished tree, or is aborted.
func extractInto(ctx context.Context, l v1.Layer, dir string, budget *budget, tap LayerTap) (skipped []skippedEntry, err error) {
	if tap != nil {
		defer func() {
			if err != nil {
				tap.Abort()
			}
		}()
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		return nil, err
	}
	if skipped, err = extractVerified(ctx, l, dir, budget, tap); err != nil {
		return nil, err
	}
	if tap != nil {
		if err := tap.Unpacked(dir); err != nil {
			return nil, fmt.Errorf("chunk: %w", err)
		}
	}
	return skipped, nil
}

// extractVerified unpacks the layer's compressed blob into dir, its
// decompressed bytes spent from budget. The blob is read through
// go-containerregistry's verifying reader, which reports a digest mismatch
// only at EOF, so the stream is drained to the end before the layer counts as
// good.
func extractVerified(ctx context.Context, l v1.Layer, dir string, budget *budget, tap LayerTap) ([]skippedEntry, error) {
	rc, err := l.Compressed()
	if err != nil {
		return nil, fmt.Errorf("fetch: %w", err)
	}
	defer rc.Close()
	blob := bufio.NewReaderSize(&ctxReader{ctx: ctx, r: rc}, 1<<20)
	tarStream, closeTar, err := decompress(blob)
	if err != nil {
		return nil, err
	}
	defer closeTar()
	tarStream = budget.reader(tarStream)
	skipped, err := unpackTar(tarStream, dir, tap)
	if err != nil {
		return nil, err
	}
	// Tar padding, then whatever follows the compressed stream.
	if _, err := io.Copy(io.Discard, tarStream); err != nil {
		return nil, fmt.Errorf("read layer: %w", err)
	}
	if _, err := io.Copy(io.Discard, blob); err != nil {
		return nil, fmt.Errorf("verify layer: %w", err)
	}
	return skipped, nil
}

// decompress sniffs the blob's compression: layer media types are not
// trustworthy (Docker media types say gzip for zstd layers and vice versa).
func decompress(blob *bufio.Reader) (io.Reader, func(), error) {
	magic, err := blob.Peek(4)
	if err != nil && err != io.EOF {
		return nil, nil, fmt.Errorf("read layer: %w", err)
	}
	switch {
	case bytes.HasPrefix(magic, []byte{0x1f, 0x8b}):
		zr, err := gzip.NewReader(blob)
		if err != nil {
			return nil, nil, fmt.Errorf("gzip: %w", err)
		}
		return zr, func() { zr.Close() }, nil
	case bytes.HasPrefix(magic, []byte{0x28, 0xb5, 0x2f, 0xfd}):
		zr, err := zstd.NewReader(blob)
		if err != nil {
			return nil, nil, fmt.Errorf("zstd: %w", err)
		}
		return zr, zr.Close, nil
	default:
		return blob, func() {}, nil
	}
}

// budget is what one pull's layers may still take decompressed; nil is no limit.
type budget struct {
	left  atomic.Int64
	limit int64
}

func (c *Cache) newBudget() *budget {
	if c.maxImageBytes <= 0 {
		return nil
	}
	b := &budget{limit: c.maxImageBytes}
	b.left.Store(c.maxImageBytes)
	return b
}

// reader spends from the budget what is read through it, failing with ErrTooLarge once it is
// spent.
func (b *budget) reader(r io.Reader) io.Reader {
	if b == nil {
		return r
	}
	return &budgetReader{b: b, r: r}
}

type budgetReader struct {
	b *budget
	r io.Reader
}

func (r *budgetReader) Read(p []byte) (int, error) {
	n, err := r.r.Read(p)
	if r.b.left.Add(-int64(n)) < 0 {
		return n, fmt.Errorf("%w: its layers are more than %d bytes unpacked", ErrTooLarge, r.b.limit)
	}
	return n, err
}

// ctxReader stops a long layer download when the pull is cancelled.
type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (r *ctxReader) Read(p []byte) (int, error) {
	if err := r.ctx.Err(); err != nil {
		return 0, err
	}
	return r.r.Read(p)
}

// syncDir makes dir durable: with wholeFS it flushes the file system (all the
// files just unpacked, far cheaper than an fsync each), else just dir itself.
func syncDir(dir string, wholeFS bool) error {
	f, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer f.Close()
	if wholeFS {
		return unix.Syncfs(int(f.Fd()))
	}
	return f.Sync()
}

func (c *Cache) writeRecord(h v1.Hash, rec record) error {
	data, err := json.Marshal(rec)
	if err != nil {
		return err
	}
	p := c.recordPath(h)
	if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
		return fmt.Errorf("manifest record: %w", err)
	}
	f, err := os.CreateTemp(c.tmpDir(), "manifest-")
	if err != nil {
		return fmt.Errorf("manifest record: %w", err)
	}
	defer os.Remove(f.Name())
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(f.Name(), p)
	}
	if err != nil {
		return fmt.Errorf("manifest record %s: %w", h, err)
	}
	return nil
}
