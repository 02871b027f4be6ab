package host

import (
	"context"
	"fmt"
	"net/http"

	"golang.org/x/sys/unix"

	"github.com/hangar-dev/hangar/platform/store"
	"github.com/hangar-dev/hangar/platform/telemetry"
)

// minFreeDisk is the free space under the data dir below which a host is not ready: an image
// pull or a snapshot restore would fail on it, so the fleet should place elsewhere.
const minFreeDisk = 1 << 30

// ReadyHandler serves the host's /readyz: Firestore reachable (the host records its sessions
// there), the container runtime answering, and its sandboxes' filesystem with minFreeDisk free.
func (h *Host) ReadyHandler() http.Handler {
	return telemetry.Ready(h.log, map[string]telemetry.Check{
		"firestore": func(ctx context.Context) error { return store.Ping(ctx, h.opts.DB) },
		"runtime":   h.driver.Ready,
		"disk":      func(context.Context) error { return freeDisk(h.boxDir, minFreeDisk) },
	})
}

// freeDisk fails when the filesystem holding dir has less than min bytes free for unprivileged
// use.
func freeDisk(dir string, minBytes uint64) error {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return fmt.Errorf("statfs %s: %w", dir, err)
	}
	if free := st.Bavail * uint64(st.Bsize); free < minBytes {
		return fmt.Errorf("%s has %d bytes free, under %d", dir, free, minBytes)
	}
	return nil
}
