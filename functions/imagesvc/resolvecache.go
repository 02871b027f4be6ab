package imagesvc

import (
	"context"
	"sync"
	"time"

	appv1 "github.com/hangar-dev/hangar/gen/svc/app/v1"
)

// ResolveCacheTTL bounds how long ResolveImage answers from memory. CreateSession resolves the
// image on every call, and reading the record from Firestore was the one step an enabled image
// added to a session's start; the price is that an API instance other than the one that
// disabled, refreshed or updated an image may start sessions from the image's previous state
// for up to this long (the instance that made the change forgets its copy at once). Sessions
// started in that window are like sessions already running when the change was made: they
// continue.
const ResolveCacheTTL = 2 * time.Second

// maxResolveCached bounds the cache: expired entries are dropped when it is full.
const maxResolveCached = 1024

// resolveCache keeps usable image records by id for ResolveCacheTTL. Only usable records are
// kept: an image that is not ready yet is read again on every call, so it is usable as soon as
// its job finishes.
type resolveCache struct {
	mu      sync.Mutex
	entries map[string]resolveEntry
}

type resolveEntry struct {
	img    *Image
	config *appv1.ImageConfig
	until  time.Time
}

// get answers the image id, from memory when a usable record of it was read recently.
func (c *resolveCache) get(ctx context.Context, r *records, id string) (*Image, *appv1.ImageConfig, error) {
	now := r.now()
	c.mu.Lock()
	e, ok := c.entries[id]
	c.mu.Unlock()
	if ok && now.Before(e.until) {
		return e.img, e.config, nil
	}
	img, err := r.image(ctx, id)
	if err != nil || !img.Usable() {
		return img, nil, err
	}
	config := decodeConfig(img.Config)
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.entries == nil {
		c.entries = map[string]resolveEntry{}
	}
	if len(c.entries) >= maxResolveCached {
		for k, old := range c.entries {
			if !now.Before(old.until) {
				delete(c.entries, k)
			}
		}
		if len(c.entries) >= maxResolveCached {
			clear(c.entries)
		}
	}
	c.entries[id] = resolveEntry{img: img, config: config, until: now.Add(ResolveCacheTTL)}
	return img, config, nil
}

// forget drops image id, which this instance just changed.
func (c *resolveCache) forget(id string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.entries, id)
}
