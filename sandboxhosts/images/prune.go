package images

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// Prune removes every remembered manifest whose digest is not in keep (either
// the digest pulled or the image manifest digest it resolved to), and every
// unpacked layer neither a kept manifest uses nor keepLayers names (layers added
// by AddLayer that no record lists, such as an enabled image's warm layer). The
// caller passes the images its sandboxes still run on; pulls wait while Prune
// runs. It returns how many manifests it removed.
func (c *Cache) Prune(keep, keepLayers []string) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()

	wanted := map[string]bool{}
	for _, k := range keep {
		h, err := v1.NewHash(k)
		if err != nil {
			return 0, fmt.Errorf("prune: keep %q: %w", k, err)
		}
		wanted[h.String()] = true
	}
	usedLayers := map[string]bool{}
	for _, l := range keepLayers {
		h, err := v1.NewHash(l)
		if err != nil {
			return 0, fmt.Errorf("prune: keep layer %q: %w", l, err)
		}
		usedLayers[c.layerDir(h)] = true
	}
	records, err := filepath.Glob(filepath.Join(c.dir, "manifests", "*", "*.json"))
	if err != nil {
		return 0, fmt.Errorf("prune: %w", err)
	}
	removed := 0
	for _, p := range records {
		h := v1.Hash{Algorithm: filepath.Base(filepath.Dir(p)), Hex: strings.TrimSuffix(filepath.Base(p), ".json")}
		data, err := os.ReadFile(p)
		if err != nil {
			return removed, fmt.Errorf("prune: %w", err)
		}
		var rec record
		if err := json.Unmarshal(data, &rec); err != nil {
			return removed, fmt.Errorf("prune: manifest record %s: %w", h, err)
		}
		if !wanted[h.String()] && !wanted[rec.Digest.String()] {
			if err := os.Remove(p); err != nil {
				return removed, fmt.Errorf("prune: %w", err)
			}
			removed++
			continue
		}
		for _, l := range rec.Layers {
			usedLayers[c.layerDir(l)] = true
		}
	}
	layers, err := filepath.Glob(filepath.Join(c.dir, "layers", "*", "*"))
	if err != nil {
		return removed, fmt.Errorf("prune: %w", err)
	}
	for _, dir := range layers {
		if usedLayers[dir] {
			continue
		}
		// Moved out first: a half-removed layer must never look unpacked.
		doomed, err := os.MkdirTemp(c.tmpDir(), "prune-")
		if err != nil {
			return removed, fmt.Errorf("prune: %w", err)
		}
		if err := os.Rename(dir, filepath.Join(doomed, "layer")); err != nil {
			return removed, fmt.Errorf("prune: layer %s: %w", filepath.Base(dir), err)
		}
		if err := os.RemoveAll(doomed); err != nil {
			return removed, fmt.Errorf("prune: layer %s: %w", filepath.Base(dir), err)
		}
	}
	return removed, nil
}
