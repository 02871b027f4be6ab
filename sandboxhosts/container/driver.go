// Package container owns the sandbox host's OCI runtime driver: it runs each
// sandbox as a runc container whose root file system is an overlay of the
// image's read-only layer dirs and a per-sandbox upper dir, and it finds and
// removes what a crashed host process left behind.
//
// A sandbox gets its own pid, mount, uts, ipc and network namespaces (the
// network namespace has only loopback), cgroup limits on memory, CPU and
// processes, Docker's default capability set, no_new_privileges, Docker's
// masked and read-only paths, and a default-deny seccomp allow-list (see
// seccomp.go). It sees no host file but its image, its upper dir and the bind
// mounts its Spec names. Its processes run as root inside; there is no user namespace.
//
// Layout of a sandbox's Dir:
//
//	disk.img   the sandbox's disk: a sparse ext4 image of its quota's size (disk.go)
//	disk/      the disk's mount point; stays mounted until RemoveDir
//	  upper/   the overlay upper dir: exactly the sandbox's changes; kept by Stop
//	  work/    the overlay work dir
//	rootfs/    the merged overlay while the sandbox runs (the host edits files here)
//	layers/    links to the lower, upper and work dirs, which the overlay is mounted through
//	           so that its options show no host path inside the sandbox
//	bundle/    config.json and init.pid for runc
//	init.log   PID 1's stdout and stderr
//
// Layout of DriverOptions.StateDir:
//
//	runc/              runc's --root
//	sandboxes/<id>.json which Dir belongs to which sandbox, written before
//	                   anything is mounted and removed after everything is
//	                   undone, so Cleanup can always find the leftovers
//	spare-disks/       disks made ahead, never yet mounted (spares.go)
//
// Needs root, runc, overlayfs, loop devices and mkfs.ext4. Each
// sandbox's init is reparented to the host process's reaper when runc exits:
// run the host under an init that reaps orphans (systemd does), or set
// DriverOptions.Subreaper.
package container

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	gorunc "github.com/containerd/go-runc"
	"golang.org/x/sys/unix"
)

// ErrNotFound is returned for a sandbox id the driver has no record of.
var ErrNotFound = errors.New("sandbox not found")

// ErrExists is returned by Create for an id the driver already has.
var ErrExists = errors.New("sandbox already exists")

// DriverOptions configure a Driver.
type DriverOptions struct {
	// StateDir holds runc's state and the driver's sandbox records
	// (absolute, e.g. <data>/runtime). One driver per StateDir.
	StateDir string
	// Runc is the runc binary; empty looks for "runc" on PATH and in the
	// sbin dirs.
	Runc string
	// CgroupParent is the cgroup every sandbox's cgroup is made under
	// (<parent>/<id> in each controller); "hangar" when empty.
	CgroupParent string
	// DefaultResources fill the limits (disk size included) a Spec leaves
	// zero; fields left zero here take DefaultResources.
	DefaultResources Resources
	// Subreaper makes this process the child subreaper (prctl
	// PR_SET_CHILD_SUBREAPER) so sandbox inits are reparented to it and Stop
	// reaps them. Set it when the host's PID 1 does not reap orphans (some
	// containers and VMs); otherwise each stopped sandbox leaves a zombie.
	// It is process-wide: other orphaned grandchildren of this process become
	// its children too.
	Subreaper bool
	// SpareDisks is how many fresh disks of each recently used size the
	// driver makes ahead, so that a cold boot skips mkfs (spares.go); 0 makes
	// none. Close deletes them.
	SpareDisks int
}

// Driver creates and tears down sandboxes with runc.
type Driver struct {
	runc      *gorunc.Runc
	runcRoot  string
	recordDir string
	cgroup    string
	defaults  Resources
	subreaper bool
	// mkfs is the host's mkfs.ext4, which makes sandbox disks.
	mkfs string
	// maxOpenFiles is sandboxes' RLIMIT_NOFILE: wantOpenFiles, or less when
	// this process's hard limit is lower, since raising a hard limit takes
	// CAP_SYS_RESOURCE, which the host may not hold.
	maxOpenFiles uint64
	// spares are the disks made ahead.
	spares *spares
}

// wantOpenFiles is the open-file limit sandboxes get where the host allows it.
const wantOpenFiles = 65536

// NewDriver checks that runc is there and prepares StateDir.
func NewDriver(opts DriverOptions) (*Driver, error) {
	if !filepath.IsAbs(opts.StateDir) {
		return nil, fmt.Errorf("runtime driver: state dir %q is not absolute", opts.StateDir)
	}
	bin, err := findRunc(opts.Runc)
	if err != nil {
		return nil, err
	}
	d := &Driver{
		runcRoot:  filepath.Join(opts.StateDir, "runc"),
		recordDir: filepath.Join(opts.StateDir, "sandboxes"),
		cgroup:    opts.CgroupParent,
		defaults:  opts.DefaultResources.withDefaults(Resources{}),
		subreaper: opts.Subreaper,
	}
	if d.mkfs, err = lookTool("mkfs.ext4", "e2fsprogs"); err != nil {
		return nil, err
	}
	var nofile unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &nofile); err != nil {
		return nil, fmt.Errorf("runtime driver: getrlimit: %w", err)
	}
	d.maxOpenFiles = min(wantOpenFiles, nofile.Max)
	if d.cgroup == "" {
		d.cgroup = "hangar"
	}
	for _, dir := range []string{d.runcRoot, d.recordDir} {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return nil, fmt.Errorf("runtime driver: %w", err)
		}
	}
	d.spares, err = newSpares(filepath.Join(opts.StateDir, "spare-disks"), opts.SpareDisks, func(img string, size int64) error {
		return d.makeDisk(img, size, true)
	})
	if err != nil {
		return nil, fmt.Errorf("runtime driver: %w", err)
	}
	if opts.Subreaper {
		if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
			return nil, fmt.Errorf("runtime driver: become child subreaper: %w", err)
		}
	}
	d.runc = &gorunc.Runc{
		Command: bin,
		Root:    d.runcRoot,
		// Own process group: a Ctrl-C at the host's terminal must not reach
		// runc or the sandboxes it starts.
		Setpgid: true,
	}
	return d, nil
}

// Close stops making spare disks and deletes those made; sandboxes are left
// as they are. Create may still be called, and makes every disk itself.
func (d *Driver) Close() error { return d.spares.close() }

func findRunc(bin string) (string, error) {
	if bin != "" {
		if _, err := exec.LookPath(bin); err != nil {
			return "", fmt.Errorf("runtime driver: runc binary %q: %w", bin, err)
		}
		return bin, nil
	}
	return lookTool("runc", "runc")
}

// RuncRoot is runc's --root for this driver's sandboxes, for running runc
// by hand (runc --root <RuncRoot> exec <id> sh).
func (d *Driver) RuncRoot() string { return d.runcRoot }

// record is what StateDir/sandboxes/<id>.json holds.
type record struct {
	ID  string `json:"id"`
	Dir string `json:"dir"`
}

func (d *Driver) recordPath(id string) string { return filepath.Join(d.recordDir, id+".json") }

func (d *Driver) writeRecord(r record) error {
	b, err := json.Marshal(r)
	if err != nil {
		return err
	}
	tmp := d.recordPath(r.ID) + ".tmp"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return fmt.Errorf("write sandbox record: %w", err)
	}
	if err := os.Rename(tmp, d.recordPath(r.ID)); err != nil {
		return fmt.Errorf("write sandbox record: %w", err)
	}
	return nil
}

func (d *Driver) readRecord(id string) (record, error) {
	b, err := os.ReadFile(d.recordPath(id))
	if errors.Is(err, os.ErrNotExist) {
		return record{}, fmt.Errorf("sandbox %s: %w", id, ErrNotFound)
	}
	if err != nil {
		return record{}, fmt.Errorf("read sandbox record: %w", err)
	}
	var r record
	if err := json.Unmarshal(b, &r); err != nil {
		return record{}, fmt.Errorf("read sandbox record %s: %w", id, err)
	}
	return r, nil
}

// Create mounts the sandbox's disk (MountDisk) and overlay, writes its runc
// bundle and starts its init detached. On any failure everything it did is
// undone but the disk, which stays mounted, as it would after Stop, until
// RemoveDir (an upper dir that was there before is kept).
func (d *Driver) Create(ctx context.Context, spec Spec) (_ *Sandbox, err error) {
	if err := spec.validate(); err != nil {
		return nil, err
	}
	sb := &Sandbox{d: d, id: spec.ID, dir: filepath.Clean(spec.Dir)}
	if _, err := os.Stat(d.recordPath(sb.id)); err == nil {
		return nil, fmt.Errorf("sandbox %s: %w", sb.id, ErrExists)
	}
	if err := d.MountDisk(sb.dir, spec.Resources.withDefaults(d.defaults).DiskBytes); err != nil {
		return nil, fmt.Errorf("create sandbox %s: %w", sb.id, err)
	}
	for _, dir := range []struct {
		path string
		mode os.FileMode
	}{
		// upper's own mode becomes the mode of the sandbox's "/".
		{sb.UpperDir(), 0o755},
		{sb.workDir(), 0o700},
		{sb.RootFS(), 0o755},
		{sb.bundleDir(), 0o700},
	} {
		if err := os.Mkdir(dir.path, dir.mode); err != nil && !errors.Is(err, os.ErrExist) {
			return nil, fmt.Errorf("create sandbox %s: %w", sb.id, err)
		}
	}
	if err := d.writeRecord(record{ID: sb.id, Dir: sb.dir}); err != nil {
		return nil, fmt.Errorf("create sandbox %s: %w", sb.id, err)
	}
	defer func() {
		if err != nil {
			if terr := d.teardown(context.WithoutCancel(ctx), sb.id, sb.dir); terr != nil {
				err = errors.Join(err, fmt.Errorf("undo: %w", terr))
			}
		}
	}()
	if err := mountOverlay(spec.LowerDirs, sb.UpperDir(), sb.workDir(), sb.RootFS()); err != nil {
		return nil, fmt.Errorf("create sandbox %s: %w", sb.id, err)
	}
	if err := d.writeBundle(spec, sb.RootFS(), sb.bundleDir(), "/"+d.cgroup+"/"+sb.id); err != nil {
		return nil, fmt.Errorf("create sandbox %s: %w", sb.id, err)
	}
	if sb.pid, err = d.run(ctx, sb, spec.ExtraFiles); err != nil {
		return nil, fmt.Errorf("create sandbox %s: %w", sb.id, err)
	}
	if sb.exited, err = watchExit(sb.pid); err != nil {
		return nil, fmt.Errorf("create sandbox %s: %w", sb.id, err)
	}
	return sb, nil
}

// writeBundle writes the runc config of spec's sandbox, over rootfs and in the cgroup at
// cgroupsPath, into bundleDir.
func (d *Driver) writeBundle(spec Spec, rootfs, bundleDir, cgroupsPath string) error {
	cfg := ociConfig(spec, rootfs, cgroupsPath, spec.Resources.withDefaults(d.defaults), d.maxOpenFiles)
	b, err := json.MarshalIndent(cfg, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(bundleDir, "config.json"), b, 0o600)
}

// run starts the sandbox's container detached (`runc run -d`) with PID 1's
// stdio on its log file, and returns PID 1's host pid.
func (d *Driver) run(ctx context.Context, sb *Sandbox, extra []*os.File) (int, error) {
	stdio, err := openLogIO(sb.LogPath())
	if err != nil {
		return 0, err
	}
	defer stdio.Close()
	logStart, err := stdio.out.Seek(0, io.SeekEnd)
	if err != nil {
		return 0, fmt.Errorf("init log: %w", err)
	}
	pidFile := filepath.Join(sb.bundleDir(), "init.pid")
	_, err = d.runc.Run(ctx, sb.id, sb.bundleDir(), &gorunc.CreateOpts{IO: stdio, PidFile: pidFile, Detach: true, ExtraFiles: extra})
	if err != nil {
		// runc reports why on its stderr, which is the log.
		return 0, fmt.Errorf("runc run: %w: %s", err, logTail(sb.LogPath(), logStart))
	}
	b, err := os.ReadFile(pidFile)
	if err != nil {
		return 0, fmt.Errorf("runc pid file: %w", err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		return 0, fmt.Errorf("runc pid file %q: %w", b, err)
	}
	return pid, nil
}

// logTail returns what was appended to the log after offset, at most 4 KiB.
func logTail(path string, offset int64) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	b, _ := io.ReadAll(io.LimitReader(io.NewSectionReader(f, offset, 1<<62), 4<<10))
	return strings.TrimSpace(string(b))
}

// logIO gives runc (and through it PID 1) /dev/null as stdin and the log
// file as stdout and stderr. Plain files, not pipes: nothing in this
// process has to keep reading for the container to make progress, and
// go-runc does not wait for pipe copies that would never end.
type logIO struct {
	in, out *os.File
}

func openLogIO(path string) (*logIO, error) {
	out, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, fmt.Errorf("init log: %w", err)
	}
	in, err := os.Open(os.DevNull)
	if err != nil {
		out.Close()
		return nil, fmt.Errorf("init stdin: %w", err)
	}
	return &logIO{in: in, out: out}, nil
}

func (l *logIO) Close() error           { return errors.Join(l.in.Close(), l.out.Close()) }
func (l *logIO) Stdin() io.WriteCloser  { return nil }
func (l *logIO) Stdout() io.ReadCloser  { return nil }
func (l *logIO) Stderr() io.ReadCloser  { return nil }
func (l *logIO) Set(cmd *exec.Cmd)      { cmd.Stdin, cmd.Stdout, cmd.Stderr = l.in, l.out, l.out }
func (l *logIO) CloseAfterStart() error { return nil }

// hasContainer says whether runc has state for id, without asking runc.
func (d *Driver) hasContainer(id string) bool {
	_, err := os.Stat(filepath.Join(d.runcRoot, id, "state.json"))
	return err == nil
}

// teardown undoes whatever part of a sandbox exists: kills and deletes its
// container, unmounts its overlay, drops its record. Dir may be empty when
// only runc knows the sandbox. The upper dir is never touched.
func (d *Driver) teardown(ctx context.Context, id, dir string) error {
	if d.hasContainer(id) {
		if err := d.killAndDelete(ctx, id); err != nil {
			return fmt.Errorf("stop sandbox %s: %w", id, err)
		}
	}
	if dir != "" {
		if err := unmountAll(filepath.Join(dir, "rootfs")); err != nil {
			return fmt.Errorf("stop sandbox %s: %w", id, err)
		}
	}
	if err := os.Remove(d.recordPath(id)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("stop sandbox %s: %w", id, err)
	}
	return nil
}

// killAndDelete SIGKILLs the container's init, waits until it has exited
// (which, with its own pid namespace, means every process in it has), and
// deletes the container.
func (d *Driver) killAndDelete(ctx context.Context, id string) error {
	c, err := d.runc.State(ctx, id)
	if err != nil {
		return fmt.Errorf("runc state: %w", err)
	}
	if c.Status != string(StatusStopped) && c.Pid > 0 {
		if err := d.kill(ctx, id, c.Pid, Status(c.Status)); err != nil {
			return err
		}
	}
	if err := d.runc.Delete(ctx, id, &gorunc.DeleteOpts{Force: true}); err != nil {
		return fmt.Errorf("runc delete: %w", err)
	}
	return nil
}

func (d *Driver) kill(ctx context.Context, id string, pid int, status Status) error {
	// The pidfd pins the process before the kill, so the wait below cannot
	// mistake a recycled pid for the init.
	pidfd, err := unix.PidfdOpen(pid, 0)
	if errors.Is(err, unix.ESRCH) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("pidfd_open %d: %w", pid, err)
	}
	defer unix.Close(pidfd)
	if err := d.runc.Kill(ctx, id, int(unix.SIGKILL), nil); err != nil {
		if exited, _ := pidfdExited(pidfd, 0); !exited {
			return fmt.Errorf("runc kill: %w", err)
		}
	}
	// Whether a frozen task acts on SIGKILL depends on the kernel's freezer
	// (older cgroup v1 ones wait for the thaw), so thaw; "not paused" after
	// the kill means it already died.
	if status == StatusPaused {
		if err := d.runc.Resume(ctx, id); err != nil {
			if c, serr := d.runc.State(ctx, id); serr != nil || c.Status == string(StatusPaused) {
				return fmt.Errorf("runc resume to kill: %w", err)
			}
		}
	}
	for {
		exited, err := pidfdExited(pidfd, 50)
		if err != nil {
			return fmt.Errorf("wait for init %d: %w", pid, err)
		}
		if exited {
			break
		}
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("wait for init %d: %w", pid, err)
		}
	}
	if d.subreaper {
		// Only this pid: a wait for any child would steal exit statuses
		// from os/exec. ECHILD (not our child: adopted after a restart) is fine.
		_, _ = unix.Wait4(pid, nil, unix.WNOHANG, nil)
	}
	return nil
}

// pidfdExited polls the pidfd for up to timeoutMs: readable means exited.
func pidfdExited(pidfd int, timeoutMs int) (bool, error) {
	fds := []unix.PollFd{{Fd: int32(pidfd), Events: unix.POLLIN}}
	n, err := unix.Poll(fds, timeoutMs)
	if errors.Is(err, unix.EINTR) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	return n > 0, nil
}

// Info is what List finds of one sandbox.
type Info struct {
	ID string
	// Dir is the sandbox's Dir; empty when only runc knows the container.
	Dir string
	// Status is runc's view; empty when runc has no container for it.
	Status Status
	// Pid is init's host pid while it runs.
	Pid int
	// Mounted says whether the overlay is mounted at Dir/rootfs.
	Mounted bool
}

// List returns every sandbox this driver's StateDir knows of — records
// and runc containers — sorted by id. After a host crash these are the
// leftovers Cleanup removes.
func (d *Driver) List(ctx context.Context) ([]Info, error) {
	byID := map[string]*Info{}
	entries, err := os.ReadDir(d.recordDir)
	if err != nil {
		return nil, fmt.Errorf("list sandboxes: %w", err)
	}
	for _, e := range entries {
		id, ok := strings.CutSuffix(e.Name(), ".json")
		if !ok {
			continue
		}
		r, err := d.readRecord(id)
		if err != nil {
			return nil, fmt.Errorf("list sandboxes: %w", err)
		}
		byID[id] = &Info{ID: id, Dir: r.Dir}
	}
	containers, err := d.runc.List(ctx)
	if err != nil {
		return nil, fmt.Errorf("list sandboxes: runc list: %w", err)
	}
	for _, c := range containers {
		in := byID[c.ID]
		if in == nil {
			in = &Info{ID: c.ID}
			byID[c.ID] = in
		}
		in.Status = Status(c.Status)
		if in.Status != StatusStopped {
			in.Pid = c.Pid
		}
	}
	points, err := mountPoints()
	if err != nil {
		return nil, fmt.Errorf("list sandboxes: %w", err)
	}
	out := make([]Info, 0, len(byID))
	for _, in := range byID {
		if in.Dir != "" {
			_, in.Mounted = points[filepath.Join(in.Dir, "rootfs")]
		}
		out = append(out, *in)
	}
	slices.SortFunc(out, func(a, b Info) int { return strings.Compare(a.ID, b.ID) })
	return out, nil
}

// Cleanup stops every sandbox List finds for which keep is false (keep may
// be nil): kills and deletes its container, unmounts its overlay and drops
// its record. Upper dirs stay, for snapshots. Errors are collected; one
// sandbox failing does not stop the others.
func (d *Driver) Cleanup(ctx context.Context, keep func(id string) bool) error {
	infos, err := d.List(ctx)
	if err != nil {
		return err
	}
	var errs []error
	for _, in := range infos {
		if keep != nil && keep(in.ID) {
			continue
		}
		errs = append(errs, d.teardown(ctx, in.ID, in.Dir))
	}
	return errors.Join(errs...)
}

// Adopt returns the Sandbox for an id this driver (or an earlier process
// with the same StateDir) created and has not stopped: how a restarted host
// takes back the sandboxes Cleanup kept.
func (d *Driver) Adopt(ctx context.Context, id string) (*Sandbox, error) {
	if !idPattern.MatchString(id) {
		return nil, fmt.Errorf("sandbox %s: %w", id, ErrNotFound)
	}
	r, err := d.readRecord(id)
	if err != nil {
		return nil, err
	}
	sb := &Sandbox{d: d, id: id, dir: r.Dir}
	if d.hasContainer(id) {
		c, err := d.runc.State(ctx, id)
		if err != nil {
			return nil, fmt.Errorf("adopt sandbox %s: runc state: %w", id, err)
		}
		if c.Status != string(StatusStopped) {
			sb.pid = c.Pid
		}
	}
	if sb.exited, err = watchExit(sb.pid); err != nil {
		return nil, fmt.Errorf("adopt sandbox %s: %w", id, err)
	}
	return sb, nil
}

// Ready checks the container runtime answers: runc lists its containers.
func (d *Driver) Ready(ctx context.Context) error {
	if _, err := d.runc.List(ctx); err != nil {
		return fmt.Errorf("runc: %w", err)
	}
	return nil
}
