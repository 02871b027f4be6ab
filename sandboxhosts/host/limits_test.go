package host

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"connectrpc.com/connect"

	"github.com/hangar-dev/hangar/platform/config"
	"github.com/hangar-dev/hangar/sandboxhosts/container"
	"github.com/hangar-dev/hangar/sandboxhosts/images"
)

// The attack: sandboxes' memory limits added up to more than the host had.
func TestMemoryBeyondTheOvercommitRatioIsRefused(t *testing.T) {
	h := &Host{id: "h1", opts: Options{Config: config.Host{MemoryOvercommitRatio: 1.5}}, memory: memoryBook{capacity: 6 << 30}}
	for i := range 3 {
		if err := h.reserveMemory(2 << 30); err != nil {
			t.Fatalf("sandbox %d of 2 GiB on a 6 GiB capacity: %v", i, err)
		}
	}
	err := h.reserveMemory(1 << 20)
	if connect.CodeOf(err) != connect.CodeResourceExhausted || !strings.Contains(err.Error(), "HANGAR_MEMORY_OVERCOMMIT_RATIO") {
		t.Fatalf("a fourth sandbox past the capacity: %v, want resource_exhausted naming the ratio", err)
	}
	if got := h.memoryReserved(); got != 6<<30 {
		t.Errorf("a refused reservation changed the book: %d reserved", got)
	}
	h.releaseMemory(2 << 30)
	if err := h.reserveMemory(2 << 30); err != nil {
		t.Errorf("after a sandbox went, its memory is free again: %v", err)
	}
}

func TestSandboxResourcesFillDefaultsAndCapTheDisk(t *testing.T) {
	h := &Host{opts: Options{Config: config.Default().Host}}
	def := config.Default().Host
	for _, c := range []struct {
		name    string
		labels  images.Resources
		want    container.Resources
		wantErr string
	}{
		{name: "no labels take the host's defaults", want: container.Resources{
			CPUs: def.SandboxCPUs, MemoryBytes: def.SandboxMemoryBytes, Pids: def.SandboxPids, DiskBytes: def.SandboxDiskBytes}},
		{name: "labels win", labels: images.Resources{MemoryMB: 512, DiskMB: 20 << 10}, want: container.Resources{
			CPUs: def.SandboxCPUs, MemoryBytes: 512 << 20, Pids: def.SandboxPids, DiskBytes: 20 << 30}},
		{name: "a disk over the host's maximum is refused", labels: images.Resources{DiskMB: def.MaxSandboxDiskBytes>>20 + 1}, wantErr: "HANGAR_MAX_SANDBOX_DISK_BYTES"},
		{name: "a disk under the minimum is refused", labels: images.Resources{DiskMB: 1}, wantErr: "at least"},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := h.sandboxResources(&images.Image{Ref: "img", Config: images.Config{SuggestedResources: c.labels}})
			if c.wantErr != "" {
				if connect.CodeOf(err) != connect.CodeInvalidArgument || !strings.Contains(err.Error(), c.wantErr) {
					t.Errorf("err = %v, want invalid_argument saying %q", err, c.wantErr)
				}
				return
			}
			if err != nil || got != c.want {
				t.Errorf("sandboxResources = %+v, %v; want %+v", got, err, c.want)
			}
		})
	}
}

func TestAnImageOverTheSizeLimitIsResourceExhausted(t *testing.T) {
	err := pullError("reg/huge:latest", fmt.Errorf("pull %q: %w: over the limit", "reg/huge:latest", images.ErrTooLarge))
	if connect.CodeOf(err) != connect.CodeResourceExhausted || !strings.Contains(err.Error(), "reg/huge:latest") {
		t.Errorf("pullError(ErrTooLarge) = %v", err)
	}
	if err := pullError("reg/x", errors.New("no such repository")); connect.CodeOf(err) != connect.CodeInvalidArgument {
		t.Errorf("pullError(other) = %v, want invalid_argument", err)
	}
}
