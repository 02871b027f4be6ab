package host

import (
	"cmp"
	"errors"
	"fmt"

	"github.com/hangar-dev/hangar/platform/apierr"
	"github.com/hangar-dev/hangar/sandboxhosts/container"
	"github.com/hangar-dev/hangar/sandboxhosts/images"
)

// memoryBook keeps what the memory limits of a host's sandboxes (warm ones included) add up to,
// against what they may: the host's RAM times the overcommit ratio. A limit is only a ceiling,
// but one promised past the RAM is one the kernel may have to break by killing whichever
// sandbox it picks, when all of them use what they were promised; refusing the placement
// instead sends the session to another host. Guarded by Host.mu.
type memoryBook struct {
	capacity, reserved int64
}

// refusal is a host's refusal of a sandbox that leaves its session as it was, for the
// functions to place it on the next host (launch fails the session on any other error).
type refusal struct{ error }

func (r refusal) Unwrap() error { return r.error }

// reserveMemory books a new sandbox's memory limit, or refuses it with resource_exhausted when
// it would take the host's sandboxes past its capacity.
func (h *Host) reserveMemory(bytes int64) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.memory.reserved+bytes > h.memory.capacity {
		return refusal{apierr.ResourceExhausted("host %s cannot take a sandbox with a %d MiB memory limit: its sandboxes' limits already take %d of %d MiB (its RAM times HANGAR_MEMORY_OVERCOMMIT_RATIO %g); retry to be placed elsewhere",
			h.id, bytes>>20, h.memory.reserved>>20, h.memory.capacity>>20, h.opts.Config.MemoryOvercommitRatio)}
	}
	h.memory.reserved += bytes
	return nil
}

func (h *Host) releaseMemory(bytes int64) {
	h.mu.Lock()
	h.memory.reserved -= bytes
	h.mu.Unlock()
}

// memoryReserved is what the memory limits of the host's sandboxes add up to.
func (h *Host) memoryReserved() int64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.memory.reserved
}

// sandboxResources are a sandbox's limits as its image suggests them, every one filled in: the
// ones it leaves zero take the host's defaults. A disk larger than the host allows is refused:
// the label would lift the quota it is there to keep.
func (h *Host) sandboxResources(img *images.Image) (container.Resources, error) {
	s, c := img.Config.SuggestedResources, h.opts.Config
	res := container.Resources{
		CPUs:        cmp.Or(s.CPUs, c.SandboxCPUs, container.DefaultResources.CPUs),
		MemoryBytes: cmp.Or(s.MemoryMB<<20, c.SandboxMemoryBytes, container.DefaultResources.MemoryBytes),
		Pids:        cmp.Or(s.Pids, c.SandboxPids, container.DefaultResources.Pids),
		DiskBytes:   cmp.Or(s.DiskMB<<20, c.SandboxDiskBytes, container.DefaultResources.DiskBytes),
	}
	if c.MaxSandboxDiskBytes > 0 && res.DiskBytes > c.MaxSandboxDiskBytes {
		return res, apierr.InvalidArgument("image_uri", fmt.Sprintf("image %s asks for a %d MiB disk (label %s); this host allows at most %d MiB (HANGAR_MAX_SANDBOX_DISK_BYTES)",
			img.Ref, s.DiskMB, images.LabelDiskMB, c.MaxSandboxDiskBytes>>20))
	}
	if res.DiskBytes < container.MinDiskBytes {
		return res, apierr.InvalidArgument("image_uri", fmt.Sprintf("image %s asks for a %d MiB disk (label %s); a sandbox needs at least %d MiB",
			img.Ref, s.DiskMB, images.LabelDiskMB, container.MinDiskBytes>>20))
	}
	return res, nil
}

// pullError is what a failed pull means to the caller: an image over the size limit exhausts
// a resource, anything else is a bad image_uri.
func pullError(ref string, err error) error {
	if errors.Is(err, images.ErrTooLarge) {
		return apierr.ResourceExhausted("cannot use image %s: %v", ref, err)
	}
	return apierr.InvalidArgument("image_uri", fmt.Sprintf("cannot use image %s: %v", ref, err))
}
