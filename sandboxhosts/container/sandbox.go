package container

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"path/filepath"

	gorunc "github.com/containerd/go-runc"
)

// Status is runc's state of a sandbox's container.
type Status string

// The states runc reports.
const (
	StatusCreated Status = "created"
	StatusRunning Status = "running"
	StatusPaused  Status = "paused"
	StatusStopped Status = "stopped"
)

// Sandbox is one created sandbox. Its methods may be called from several
// goroutines, but Stop, Remove, Freeze and Thaw of one sandbox should not
// race each other.
type Sandbox struct {
	d   *Driver
	id  string
	dir string
	pid int
	// exited closes when init has exited.
	exited <-chan struct{}
}

// ID is the container id.
func (s *Sandbox) ID() string { return s.id }

// Dir is the sandbox's host directory.
func (s *Sandbox) Dir() string { return s.dir }

// RootFS is the host path of the merged overlay: the sandbox's "/" while it
// runs. Host-side file operations go through it.
func (s *Sandbox) RootFS() string { return filepath.Join(s.dir, "rootfs") }

// UpperDir holds the sandbox's changes to its image, on its disk; it
// outlives Stop.
func (s *Sandbox) UpperDir() string { return UpperDir(s.dir) }

// LogPath is the file PID 1's stdout and stderr go to (appended across
// restarts of the same Dir).
func (s *Sandbox) LogPath() string { return filepath.Join(s.dir, "init.log") }

// Pid is PID 1's pid on the host; 0 for an adopted sandbox that was not
// running.
func (s *Sandbox) Pid() int { return s.pid }

// Exited is closed once the sandbox's init has exited — crashed, killed from the host, or
// stopped by Stop — which, with its own pid namespace, means every process in it has. It is
// closed from the start for an adopted sandbox that was not running.
func (s *Sandbox) Exited() <-chan struct{} { return s.exited }

func (s *Sandbox) workDir() string   { return filepath.Join(DiskDir(s.dir), "work") }
func (s *Sandbox) bundleDir() string { return filepath.Join(s.dir, "bundle") }

// Status asks runc for the container's state.
func (s *Sandbox) Status(ctx context.Context) (Status, error) {
	if !s.d.hasContainer(s.id) {
		return "", fmt.Errorf("sandbox %s: %w", s.id, ErrNotFound)
	}
	c, err := s.d.runc.State(ctx, s.id)
	if err != nil {
		return "", fmt.Errorf("sandbox %s: runc state: %w", s.id, err)
	}
	return Status(c.Status), nil
}

// Freeze stops every process of the sandbox in place (runc pause, the
// freezer cgroup), so its files hold still for a snapshot.
func (s *Sandbox) Freeze(ctx context.Context) error {
	if err := s.d.runc.Pause(ctx, s.id); err != nil {
		return fmt.Errorf("freeze sandbox %s: %w", s.id, err)
	}
	return nil
}

// Thaw lets a frozen sandbox run again.
func (s *Sandbox) Thaw(ctx context.Context) error {
	if err := s.d.runc.Resume(ctx, s.id); err != nil {
		return fmt.Errorf("thaw sandbox %s: %w", s.id, err)
	}
	return nil
}

// Stop kills every process of the sandbox (frozen or not), waits until they
// are gone, deletes the container and unmounts the overlay. The upper dir
// stays, complete, for a snapshot or a later Create with the same Dir.
// Stopping a stopped sandbox does nothing.
func (s *Sandbox) Stop(ctx context.Context) error {
	if err := s.d.teardown(ctx, s.id, s.dir); err != nil {
		return err
	}
	s.pid = 0
	return nil
}

// Remove stops the sandbox and deletes its Dir, disk and upper dir included.
func (s *Sandbox) Remove(ctx context.Context) error {
	if err := s.Stop(ctx); err != nil {
		return err
	}
	if err := s.d.RemoveDir(s.dir); err != nil {
		return fmt.Errorf("remove sandbox %s: %w", s.id, err)
	}
	return nil
}

// Stats is a sandbox's resource use, from its cgroups.
type Stats struct {
	MemoryBytes      uint64 // memory in use, page cache included
	MemoryLimitBytes uint64
	Pids             uint64 // processes and threads
	PidsLimit        uint64
	CPUNanos         uint64 // CPU time used since start
}

// Stats reads the sandbox's cgroup counters (runc events --stats, ~10 ms).
func (s *Sandbox) Stats(ctx context.Context) (Stats, error) {
	// Not go-runc's Stats: it reads a StdoutPipe that its own Wait
	// goroutine closes as soon as runc exits, so it fails at random with
	// "read |0: file already closed".
	cmd := exec.CommandContext(ctx, s.d.runc.Command, "--root", s.d.runcRoot, "events", "--stats", s.id)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return Stats{}, fmt.Errorf("sandbox %s stats: runc events: %w: %s", s.id, err, bytes.TrimSpace(stderr.Bytes()))
	}
	var ev gorunc.Event
	if err := json.Unmarshal(out, &ev); err != nil {
		return Stats{}, fmt.Errorf("sandbox %s stats: %w", s.id, err)
	}
	st := ev.Stats
	if st == nil {
		return Stats{}, fmt.Errorf("sandbox %s stats: runc events printed no stats", s.id)
	}
	return Stats{
		MemoryBytes:      st.Memory.Usage.Usage,
		MemoryLimitBytes: st.Memory.Usage.Limit,
		Pids:             st.Pids.Current,
		PidsLimit:        st.Pids.Limit,
		CPUNanos:         st.Cpu.Usage.Total,
	}, nil
}
