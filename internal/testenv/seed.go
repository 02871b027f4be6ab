package testenv

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"golang.org/x/sys/unix"

	"github.com/hangar-dev/hangar/platform/egress"
	"github.com/hangar-dev/hangar/sandboxhosts/images"
	"github.com/hangar-dev/hangar/sandboxhosts/images/imagestest"
)

// The agent image (~470 MB compressed, ~1.4 GB unpacked) is what the tests of the real CLIs
// run. Pulling it for every host — a push to a loopback registry, then the host's download,
// digest checks and unpack, all race-instrumented under `make test` — took a few minutes each
// time. Those tests are about what runs in a session of the image, not about pulling it (the
// image pipeline's tests pull from registries), so SeedImage pulls an image once per machine
// into a shared cache, and each host's own cache links its layers from there.

// seedDir holds the shared image cache, kept from run to run as wasmCache is: a layer in it is
// immutable under its digest, and a pull renames it into place only whole and verified.
var seedDir = filepath.Join(os.TempDir(), "hangar-test-image-seed")

// seedMu serializes this process's seedings; a lock file, other processes' (another package's
// or worktree's tests), which would clear each other's unpacks in progress.
var seedMu sync.Mutex

// SeedImage puts img into the image cache of every host StartHost starts from now on, as a pull
// of it would, and returns its reference by digest in s.Registry under repo. The registry never
// holds img: a host serves a digest its cache holds from disk, without asking the registry.
// Call it before StartHost.
func (s *Sandboxes) SeedImage(t testing.TB, repo string, img v1.Image) string {
	t.Helper()
	p, err := seeded(t, img)
	if err != nil {
		t.Fatalf("seed image: %v", err)
	}
	s.seeds = append(s.seeds, p)
	return s.Registry + "/" + repo + "@" + p.Digest
}

// seeded is img as the shared cache holds it, pulled there first if it is not.
func seeded(t testing.TB, img v1.Image) (*images.Pulled, error) {
	digest, err := img.Digest()
	if err != nil {
		return nil, err
	}
	seedMu.Lock()
	defer seedMu.Unlock()
	if err := os.MkdirAll(seedDir, 0o700); err != nil {
		return nil, err
	}
	lock, err := os.OpenFile(filepath.Join(seedDir, "lock"), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, err
	}
	defer lock.Close() // and the lock with it
	if err := unix.Flock(int(lock.Fd()), unix.LOCK_EX); err != nil {
		return nil, fmt.Errorf("lock %s: %w", seedDir, err)
	}
	cache, err := images.New(filepath.Join(seedDir, "cache"), images.WithRegistries(egress.MustParse("127.0.0.1")))
	if err != nil {
		return nil, err
	}
	if p, err := cache.Lookup(digest.String()); err == nil {
		return p, nil
	}
	ref := imagestest.Push(t, imagestest.Registry(t), "seed/image", img)
	if _, err := cache.Pull(context.Background(), ref); err != nil {
		return nil, err
	}
	return cache.Lookup(digest.String())
}

// linkSeeds makes the images of seeds present in the image cache at dir: its layers link to the
// shared cache's, and its record is the one a pull wrote.
func linkSeeds(dir string, seeds []*images.Pulled) error {
	cache, err := images.New(dir)
	if err != nil {
		return err
	}
	for _, p := range seeds {
		for i, l := range p.Layers {
			link, err := cache.LayerDir(l)
			if err != nil {
				return err
			}
			if err := os.MkdirAll(filepath.Dir(link), 0o700); err != nil {
				return err
			}
			if err := os.Symlink(p.LayerDirs[i], link); err != nil && !os.IsExist(err) {
				return err
			}
		}
		if err := cache.AddRecord(p.Record); err != nil {
			return err
		}
	}
	return nil
}
