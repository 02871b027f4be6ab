package container

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	specs "github.com/opencontainers/runtime-spec/specs-go"
)

// Spec describes one sandbox to create.
type Spec struct {
	// ID is the container id: letters, digits, '_', '.', '-'; at most 128 bytes.
	ID string
	// Dir is the sandbox's own host directory (absolute). Create makes its
	// disk, upper/ and work/ on the disk, rootfs/ and bundle/ in it. An upper/ that already holds files
	// (a kept or restored one) is used as it is: that is how a sandbox resumes.
	Dir string
	// LowerDirs are the image's read-only layer directories, top layer first.
	LowerDirs []string
	// Init is PID 1's argv.
	Init []string
	// Env is PID 1's environment; DefaultPath is added when it sets no PATH.
	Env []string
	// Cwd is PID 1's working directory; "/" when empty.
	Cwd string
	// Hostname is the sandbox's host name; "sandbox" when empty.
	Hostname string
	// Mounts are extra bind mounts from the host, in order.
	Mounts []Mount
	// Resources are the cgroup limits; zero fields take the driver's defaults.
	Resources Resources
	// NetNS is a network namespace (a bind-mounted namespace file, see package sandboxnet) the
	// sandbox joins, prepared by the host before init runs; empty gives it a namespace of its
	// own with only loopback, down.
	NetNS string
	// ExtraFiles are open files init inherits as descriptors 3, 4, … (runc --preserve-fds),
	// e.g. a listening socket the host made where the sandbox cannot reach it. Create does not
	// close them.
	ExtraFiles []*os.File
}

// Mount bind-mounts a host file or directory into the sandbox.
type Mount struct {
	Source      string // absolute host path
	Destination string // absolute path inside the sandbox
	ReadOnly    bool
}

// Resources are a sandbox's cgroup limits and the size of its disk.
type Resources struct {
	CPUs        float64 // CPU time per wall second, e.g. 1.5; becomes a CFS quota
	MemoryBytes int64   // memory limit; swap is not allowed on top of it
	Pids        int64   // most processes and threads alive at once
	// DiskBytes is the size of the disk a new sandbox Dir gets (see
	// MountDisk): the quota on everything the sandbox writes. At least
	// MinDiskBytes.
	DiskBytes int64
}

// DefaultResources apply where neither the Spec nor DriverOptions set a limit:
// a sandbox never runs without limits.
var DefaultResources = Resources{CPUs: 1, MemoryBytes: 2 << 30, Pids: 1024, DiskBytes: 10 << 30}

// DefaultPath is the PATH a sandbox gets when its Env sets none.
const DefaultPath = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// DefaultCapabilities are the only capabilities a sandbox's processes hold
// (bounding, effective and permitted): Docker's default set.
var DefaultCapabilities = []string{
	"CAP_AUDIT_WRITE", "CAP_CHOWN", "CAP_DAC_OVERRIDE", "CAP_FOWNER", "CAP_FSETID",
	"CAP_KILL", "CAP_MKNOD", "CAP_NET_BIND_SERVICE", "CAP_SETFCAP", "CAP_SETGID",
	"CAP_SETPCAP", "CAP_SETUID", "CAP_SYS_CHROOT",
}

// Paths hidden (masked) and made read-only inside every sandbox, as Docker does:
// they leak host details or let a process poke at the host kernel.
var (
	maskedPaths = []string{
		"/proc/acpi", "/proc/asound", "/proc/interrupts", "/proc/kcore", "/proc/keys",
		"/proc/latency_stats", "/proc/sched_debug", "/proc/scsi", "/proc/timer_list",
		"/proc/timer_stats", "/sys/devices/virtual/powercap", "/sys/firmware",
	}
	readonlyPaths = []string{
		"/proc/bus", "/proc/fs", "/proc/irq", "/proc/sys", "/proc/sysrq-trigger",
	}
)

// cfsPeriod is the CFS period Resources.CPUs is a fraction of (the kernel default).
const cfsPeriod = 100_000

var idPattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$`)

func (s Spec) validate() error {
	if !idPattern.MatchString(s.ID) {
		return fmt.Errorf("sandbox id %q: want 1-128 of [A-Za-z0-9_.-], starting with a letter or digit", s.ID)
	}
	if !filepath.IsAbs(s.Dir) {
		return fmt.Errorf("sandbox %s: dir %q is not absolute", s.ID, s.Dir)
	}
	if len(s.LowerDirs) == 0 {
		return fmt.Errorf("sandbox %s: no lower dirs", s.ID)
	}
	if len(s.Init) == 0 {
		return fmt.Errorf("sandbox %s: empty init argv", s.ID)
	}
	if s.NetNS != "" && !filepath.IsAbs(s.NetNS) {
		return fmt.Errorf("sandbox %s: network namespace %q is not absolute", s.ID, s.NetNS)
	}
	if s.Cwd != "" && !filepath.IsAbs(s.Cwd) {
		return fmt.Errorf("sandbox %s: cwd %q is not absolute", s.ID, s.Cwd)
	}
	for _, m := range s.Mounts {
		if !filepath.IsAbs(m.Source) || !filepath.IsAbs(m.Destination) {
			return fmt.Errorf("sandbox %s: mount %q -> %q: both paths must be absolute", s.ID, m.Source, m.Destination)
		}
		if filepath.Clean(m.Destination) == "/" {
			return fmt.Errorf("sandbox %s: mount %q over / is not allowed", s.ID, m.Source)
		}
	}
	r := s.Resources
	if r.CPUs < 0 || r.MemoryBytes < 0 || r.Pids < 0 || r.DiskBytes < 0 {
		return fmt.Errorf("sandbox %s: negative resource limit %+v", s.ID, r)
	}
	if r.DiskBytes != 0 && r.DiskBytes < MinDiskBytes {
		return fmt.Errorf("sandbox %s: disk of %d bytes: want at least %d", s.ID, r.DiskBytes, MinDiskBytes)
	}
	return nil
}

// withDefaults fills every zero limit from def, then from DefaultResources.
func (r Resources) withDefaults(def Resources) Resources {
	for _, d := range []Resources{def, DefaultResources} {
		if r.CPUs == 0 {
			r.CPUs = d.CPUs
		}
		if r.MemoryBytes == 0 {
			r.MemoryBytes = d.MemoryBytes
		}
		if r.Pids == 0 {
			r.Pids = d.Pids
		}
		if r.DiskBytes == 0 {
			r.DiskBytes = d.DiskBytes
		}
	}
	return r
}

func (r Resources) linux() *specs.LinuxResources {
	quota := int64(r.CPUs * cfsPeriod)
	period := uint64(cfsPeriod)
	mem := r.MemoryBytes
	swappiness := uint64(0)
	return &specs.LinuxResources{
		// Deny every device node; runc adds back the few every container
		// needs (/dev/null, zero, full, random, urandom, tty, ptmx, pts).
		Devices: []specs.LinuxDeviceCgroup{{Allow: false, Access: "rwm"}},
		Memory: &specs.LinuxMemory{
			Limit: &mem,
			// Swap is the memory+swap limit in cgroup v1: equal means no swap,
			// so a sandbox cannot spill past its limit onto the host's disk.
			Swap:       &mem,
			Swappiness: &swappiness,
		},
		CPU:  &specs.LinuxCPU{Quota: &quota, Period: &period},
		Pids: &specs.LinuxPids{Limit: r.Pids},
	}
}

// ociConfig builds the runtime-spec config for a sandbox whose overlay is
// mounted at rootfs; maxOpenFiles becomes RLIMIT_NOFILE (soft and hard).
func ociConfig(s Spec, rootfs, cgroupsPath string, res Resources, maxOpenFiles uint64) *specs.Spec {
	env := slices.Clone(s.Env)
	if !slices.ContainsFunc(env, func(e string) bool { return strings.HasPrefix(e, "PATH=") }) {
		env = append(env, DefaultPath)
	}
	cwd := s.Cwd
	if cwd == "" {
		cwd = "/"
	}
	hostname := s.Hostname
	if hostname == "" {
		hostname = "sandbox"
	}
	caps := slices.Clone(DefaultCapabilities)
	oomScoreAdj := 500
	return &specs.Spec{
		Version: specs.Version,
		Process: &specs.Process{
			Args: slices.Clone(s.Init),
			Env:  env,
			Cwd:  cwd,
			User: specs.User{UID: 0, GID: 0},
			Capabilities: &specs.LinuxCapabilities{
				Bounding:  caps,
				Effective: caps,
				Permitted: caps,
			},
			Rlimits: []specs.POSIXRlimit{
				{Type: "RLIMIT_NOFILE", Hard: maxOpenFiles, Soft: maxOpenFiles},
				// A core dump would be written into the sandbox's upper dir and
				// then into its snapshots.
				{Type: "RLIMIT_CORE", Hard: 0, Soft: 0},
			},
			NoNewPrivileges: true,
			// Under host-wide memory pressure the kernel kills sandbox
			// processes before the host's own.
			OOMScoreAdj: &oomScoreAdj,
		},
		Root:     &specs.Root{Path: rootfs},
		Hostname: hostname,
		Mounts:   append(standardMounts(), bindMounts(s.Mounts)...),
		Linux: &specs.Linux{
			Namespaces: []specs.LinuxNamespace{
				{Type: specs.PIDNamespace},
				{Type: specs.MountNamespace},
				{Type: specs.UTSNamespace},
				{Type: specs.IPCNamespace},
				{Type: specs.NetworkNamespace, Path: s.NetNS},
			},
			CgroupsPath: cgroupsPath,
			Resources:   res.linux(),
			// Mount events on the host never reach a sandbox.
			RootfsPropagation: "rprivate",
			MaskedPaths:       slices.Clone(maskedPaths),
			ReadonlyPaths:     slices.Clone(readonlyPaths),
			Seccomp:           seccompProfile(),
		},
	}
}

func standardMounts() []specs.Mount {
	return []specs.Mount{
		{Destination: "/proc", Type: "proc", Source: "proc", Options: []string{"nosuid", "noexec", "nodev"}},
		{Destination: "/dev", Type: "tmpfs", Source: "tmpfs", Options: []string{"nosuid", "strictatime", "mode=755", "size=65536k"}},
		{Destination: "/dev/pts", Type: "devpts", Source: "devpts", Options: []string{"nosuid", "noexec", "newinstance", "ptmxmode=0666", "mode=0620", "gid=5"}},
		{Destination: "/dev/shm", Type: "tmpfs", Source: "shm", Options: []string{"nosuid", "noexec", "nodev", "mode=1777", "size=65536k"}},
		{Destination: "/dev/mqueue", Type: "mqueue", Source: "mqueue", Options: []string{"nosuid", "noexec", "nodev"}},
		{Destination: "/sys", Type: "sysfs", Source: "sysfs", Options: []string{"nosuid", "noexec", "nodev", "ro"}},
		// Read-only so tools inside can read their own limits (nproc, JVMs).
		{Destination: "/sys/fs/cgroup", Type: "cgroup", Source: "cgroup", Options: []string{"nosuid", "noexec", "nodev", "relatime", "ro"}},
	}
}

func bindMounts(ms []Mount) []specs.Mount {
	out := make([]specs.Mount, 0, len(ms))
	for _, m := range ms {
		mode := "rw"
		if m.ReadOnly {
			mode = "ro"
		}
		out = append(out, specs.Mount{
			Destination: filepath.Clean(m.Destination),
			Type:        "bind",
			Source:      filepath.Clean(m.Source),
			Options:     []string{"rbind", mode, "nosuid", "nodev"},
		})
	}
	return out
}
