package images

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// Pulled describes an image the cache holds: what a digest resolved to and where its layers
// are unpacked, bottom layer first. An enabled image's chunks are cut from these layer dirs,
// and a host that never pulled the image stages it back from them (AddLayer, AddRecord).
type Pulled struct {
	Digest string
	// Layers are the layers' blob digests and LayerDirs their unpacked dirs, bottom first.
	Layers    []string
	LayerDirs []string
	// Record is the cache's record of the digest, as AddRecord takes it back.
	Record []byte
}

// ErrNotPulled is a digest the cache holds no record of, or not all its layers.
var ErrNotPulled = errors.New("image not in the cache")

// Lookup returns what the cache holds for an image manifest digest, without the registry.
func (c *Cache) Lookup(digest string) (*Pulled, error) {
	h, err := v1.NewHash(digest)
	if err != nil {
		return nil, fmt.Errorf("lookup %q: %w", digest, err)
	}
	c.mu.RLock()
	defer c.mu.RUnlock()
	data, err := os.ReadFile(c.recordPath(h))
	if errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("%s: %w", digest, ErrNotPulled)
	}
	if err != nil {
		return nil, fmt.Errorf("read manifest record: %w", err)
	}
	var rec record
	if err := json.Unmarshal(data, &rec); err != nil {
		return nil, fmt.Errorf("manifest record %s: %w", h, err)
	}
	p := &Pulled{Digest: rec.Digest.String(), Record: data}
	for _, l := range rec.Layers {
		dir := c.layerDir(l)
		if _, err := os.Lstat(dir); err != nil {
			return nil, fmt.Errorf("%s: layer %s: %w", digest, l, ErrNotPulled)
		}
		p.Layers = append(p.Layers, l.String())
		p.LayerDirs = append(p.LayerDirs, dir)
	}
	return p, nil
}

// RecordLayers returns the layer digests (bottom first) and image digest a record names, so a
// host staging an image knows what layers to restore before it adds the record.
func RecordLayers(data []byte) (digest string, layers []string, err error) {
	var rec record
	if err := json.Unmarshal(data, &rec); err != nil {
		return "", nil, fmt.Errorf("manifest record: %w", err)
	}
	for _, l := range rec.Layers {
		layers = append(layers, l.String())
	}
	return rec.Digest.String(), layers, nil
}

// HasLayer reports whether layer digest is unpacked in the cache.
func (c *Cache) HasLayer(digest string) bool {
	h, err := v1.NewHash(digest)
	if err != nil {
		return false
	}
	_, err = os.Lstat(c.layerDir(h))
	return err == nil
}

// AddLayer puts layer digest into the cache from fill, which creates the layer's tree in the
// empty directory it is given (a restore from chunks). A layer already present is kept; a fill
// that fails leaves nothing.
func (c *Cache) AddLayer(digest string, fill func(dir string) error) error {
	h, err := v1.NewHash(digest)
	if err != nil {
		return fmt.Errorf("add layer %q: %w", digest, err)
	}
	c.mu.RLock()
	defer c.mu.RUnlock()
	final := c.layerDir(h)
	if _, err := os.Lstat(final); err == nil {
		c.reused.Add(1)
		return nil
	}
	tmp, err := os.MkdirTemp(c.tmpDir(), h.Hex+"-")
	if err != nil {
		return fmt.Errorf("add layer %s: %w", h, err)
	}
	defer os.RemoveAll(tmp) // gone after the rename; the leftovers of a failure otherwise
	// The restored root dir carries the layer root's own mode; it is created inside tmp.
	root := filepath.Join(tmp, "root")
	if err := os.Mkdir(root, 0o755); err != nil {
		return fmt.Errorf("add layer %s: %w", h, err)
	}
	if err := fill(root); err != nil {
		return fmt.Errorf("add layer %s: %w", h, err)
	}
	if err := syncDir(root, true); err != nil {
		return fmt.Errorf("add layer %s: %w", h, err)
	}
	if err := os.MkdirAll(filepath.Dir(final), 0o700); err != nil {
		return fmt.Errorf("add layer %s: %w", h, err)
	}
	if err := os.Rename(root, final); err != nil && !errors.Is(err, os.ErrExist) {
		if _, serr := os.Lstat(final); serr != nil { // not a concurrent stager's rename
			return fmt.Errorf("add layer %s: %w", h, err)
		}
	}
	return syncDir(filepath.Dir(final), false)
}

// AddRecord stores a record (as Lookup returned it on another host) for its digest, once every
// layer it names is in the cache; the image config is checked as a pull checks it.
func (c *Cache) AddRecord(data []byte) error {
	var rec record
	if err := json.Unmarshal(data, &rec); err != nil {
		return fmt.Errorf("add manifest record: %w", err)
	}
	if _, err := c.image("", rec); err != nil {
		return fmt.Errorf("add manifest record: %w", err)
	}
	for _, l := range rec.Layers {
		if _, err := os.Lstat(c.layerDir(l)); err != nil {
			return fmt.Errorf("add manifest record %s: layer %s: %w", rec.Digest, l, ErrNotPulled)
		}
	}
	return c.writeRecord(rec.Digest, rec)
}

// WithTopLayer returns img with dir as its topmost read-only layer: an enabled image's warm
// layer over its image layers.
func (img *Image) WithTopLayer(dir string) *Image {
	out := *img
	out.LowerDirs = append([]string{dir}, img.LowerDirs...)
	return &out
}

// LayerDir is where layer digest is (or would be) unpacked.
func (c *Cache) LayerDir(digest string) (string, error) {
	h, err := v1.NewHash(digest)
	if err != nil {
		return "", fmt.Errorf("layer %q: %w", digest, err)
	}
	return c.layerDir(h), nil
}
