package host

import (
	"context"
	"fmt"
	"runtime/debug"

	"connectrpc.com/connect"

	"golang.org/x/sys/unix"

	"github.com/hangar-dev/hangar/records/fleet"
)

// fleetState is the host's fleet state as last read (ready until the first registration).
func (h *Host) fleetState() fleet.State {
	if s, ok := h.state.Load().(fleet.State); ok {
		return s
	}
	return fleet.Ready
}

// refuseNew is unavailable when the host is cordoned, draining or drained: a new sandbox goes
// to another host. The functions' placement skips such hosts already; this catches the ones
// placed from a view of the fleet older than the host's new state. A host that last read a
// state other than ready reads its record again before it refuses, so that an uncordon takes
// effect at once rather than at the next heartbeat.
func (h *Host) refuseNew(ctx context.Context) error {
	state := h.fleetState()
	if state == fleet.Ready {
		return nil
	}
	if rec, err := h.fleet.Get(ctx, h.id); err == nil {
		state = rec.State
		h.state.Store(state)
	}
	if state != fleet.Ready {
		return connect.NewError(connect.CodeUnavailable, fmt.Errorf("host %s is %s and takes no new sandboxes; retry to be placed elsewhere", h.id, state))
	}
	return nil
}

// load is what a heartbeat reports: how full the host is, for placement, and the rest of what
// FleetService shows.
func (h *Host) load() fleet.Load {
	h.mu.Lock()
	n, reserved, cpus := len(h.boxes), h.memory.reserved, 0.0
	for _, b := range h.boxes {
		if b.ready.Load() {
			cpus += b.cpus
		}
	}
	h.mu.Unlock()
	_, used := diskBytes(h.dataDir)
	u := fleet.Usage{CPUsBooked: cpus, MemoryUsedBytes: memoryUsed(), DiskUsedBytes: used, WarmTarget: h.opts.Config.WarmSandboxes,
		WarmReady: map[string]int{}}
	h.pool.mu.Lock()
	for ref, list := range h.pool.ready {
		u.WarmReady[ref] = len(list)
	}
	u.CachedImages = append(u.CachedImages, h.pool.recent...)
	h.pool.mu.Unlock()
	return fleet.Load{Sandboxes: n, MemoryReservedBytes: reserved, Usage: u}
}

// diskBytes is the size of the file system holding dir, and how much of it is used.
func diskBytes(dir string) (total, used int64) {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return 0, 0
	}
	return int64(st.Blocks) * st.Bsize, int64(st.Blocks-st.Bfree) * st.Bsize
}

// memoryUsed is the machine's RAM in use (not free, buffers and cache included).
func memoryUsed() int64 {
	var si unix.Sysinfo_t
	if err := unix.Sysinfo(&si); err != nil {
		return 0
	}
	return int64(si.Totalram-si.Freeram) * int64(si.Unit)
}

// buildVersion is the module version or VCS revision the binary was built from.
func buildVersion() string {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return "unknown"
	}
	for _, s := range info.Settings {
		if s.Key == "vcs.revision" {
			return s.Value
		}
	}
	return info.Main.Version
}
