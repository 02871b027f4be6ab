package container

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/hangar-dev/hangar/internal/testkit"
)

func TestInitIsPID1InItsOwnPIDNamespace(t *testing.T) {
	d := newTestDriver(t, "")
	spec := sleepSpec(t, testImage(t))
	spec.Hostname = "box1"
	sb := create(t, d, spec)

	if got := sh(t, sb, "tr '\\0' ' ' < /proc/1/cmdline"); got != "/bin/sleep 100000" {
		t.Errorf("/proc/1/cmdline inside = %q, want the init argv", got)
	}
	// init and ps itself: nothing of the host.
	ps := strings.Split(mustExec(t, sb, "ps", "-o", "pid,args"), "\n")
	if len(ps) != 3 || strings.Join(strings.Fields(ps[1]), " ") != "1 /bin/sleep 100000" {
		t.Errorf("processes inside:\n%s\nwant only init as 1 and ps", strings.Join(ps, "\n"))
	}
	host, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", sb.Pid()))
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.TrimRight(strings.ReplaceAll(string(host), "\x00", " "), " "); got != "/bin/sleep 100000" {
		t.Errorf("Pid() %d is %q on the host, want the init", sb.Pid(), got)
	}
	if got := mustExec(t, sb, "hostname"); got != "box1" {
		t.Errorf("hostname = %q, want box1", got)
	}
	if got, err := sb.Status(context.Background()); err != nil || got != StatusRunning {
		t.Errorf("Status = %q, %v; want running", got, err)
	}
}

func TestUpperDirHoldsTheChangesAndLowerStaysUntouched(t *testing.T) {
	d := newTestDriver(t, "")
	lower := testImage(t)
	before := treeDigest(t, lower)
	sb := create(t, d, sleepSpec(t, lower))

	sh(t, sb, "echo new > /root/new.txt && rm /etc/motd && echo changed > /etc/passwd")
	if err := sb.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}

	if b, err := os.ReadFile(filepath.Join(sb.UpperDir(), "root", "new.txt")); err != nil || string(b) != "new\n" {
		t.Errorf("upper root/new.txt = %q, %v; want the file written inside", b, err)
	}
	if b, err := os.ReadFile(filepath.Join(sb.UpperDir(), "etc", "passwd")); err != nil || string(b) != "changed\n" {
		t.Errorf("upper etc/passwd = %q, %v; want the copied-up change", b, err)
	}
	var st unix.Stat_t
	if err := unix.Lstat(filepath.Join(sb.UpperDir(), "etc", "motd"), &st); err != nil {
		t.Fatalf("deleted lower file has no whiteout in upper: %v", err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFCHR || st.Rdev != 0 {
		t.Errorf("upper etc/motd mode %o rdev %d, want a 0:0 character device (whiteout)", st.Mode, st.Rdev)
	}
	if after := treeDigest(t, lower); after != before {
		t.Error("the lower dir changed")
	}
	if mounted, err := isMountPoint(sb.RootFS()); err != nil || mounted {
		t.Errorf("rootfs still mounted after Stop (%v)", err)
	}
}

// treeDigest hashes every path, mode, link target and file content under dir.
func treeDigest(t *testing.T, dir string) string {
	t.Helper()
	h := sha256.New()
	err := filepath.WalkDir(dir, func(p string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		info, err := e.Info()
		if err != nil {
			return err
		}
		fmt.Fprintf(h, "%s %v %d\n", p, info.Mode(), info.ModTime().UnixNano())
		switch {
		case info.Mode()&fs.ModeSymlink != 0:
			target, err := os.Readlink(p)
			if err != nil {
				return err
			}
			fmt.Fprintln(h, target)
		case info.Mode().IsRegular():
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			h.Write(b)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("%x", h.Sum(nil))
}

func TestBindMountsHonourReadOnly(t *testing.T) {
	d := newTestDriver(t, "")
	host := t.TempDir()
	bin := filepath.Join(host, "supervisor")
	if err := os.WriteFile(bin, []byte("#!/bin/sh\necho supervisor\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	run := filepath.Join(host, "run")
	if err := os.Mkdir(run, 0o755); err != nil {
		t.Fatal(err)
	}
	spec := sleepSpec(t, testImage(t))
	spec.Mounts = []Mount{
		{Source: bin, Destination: "/.hangar/bin/supervisor", ReadOnly: true},
		{Source: run, Destination: "/.hangar/run"},
	}
	sb := create(t, d, spec)

	if got := mustExec(t, sb, "/.hangar/bin/supervisor"); got != "supervisor" {
		t.Errorf("read-only bind-mounted binary ran with output %q", got)
	}
	if out, err := execIn(t, sb, "sh", "-c", "echo overwritten > /.hangar/bin/supervisor"); err == nil {
		t.Errorf("writing the read-only bind mount succeeded: %s", out)
	}
	if b, _ := os.ReadFile(bin); !strings.Contains(string(b), "echo supervisor") {
		t.Errorf("host file changed to %q", b)
	}
	sh(t, sb, "echo ping > /.hangar/run/from-inside")
	if b, err := os.ReadFile(filepath.Join(run, "from-inside")); err != nil || string(b) != "ping\n" {
		t.Errorf("file written into the rw mount = %q, %v on the host", b, err)
	}
}

func TestHostFilesAreInvisible(t *testing.T) {
	d := newTestDriver(t, "")
	marker := filepath.Join(t.TempDir(), "host-marker-"+uniqueID(t))
	if err := os.WriteFile(marker, []byte("secret"), 0o644); err != nil {
		t.Fatal(err)
	}
	spec := sleepSpec(t, testImage(t))
	sb := create(t, d, spec)

	if out, err := execIn(t, sb, "cat", marker); err == nil {
		t.Errorf("host file %s readable inside: %q", marker, out)
	}
	if got := sh(t, sb, "find / -name '"+filepath.Base(marker)+"' 2>/dev/null; true"); got != "" {
		t.Errorf("find inside found the host marker at %q", got)
	}
	if got := sh(t, sb, "ls /"); strings.Join(strings.Fields(got), " ") != "bin dev etc proc root sys tmp" {
		t.Errorf("/ inside holds %q, want only the image's dirs", got)
	}
}

// cgroupRoot is where the cgroup file systems are mounted.
const cgroupRoot = "/sys/fs/cgroup"

// cgroupFiles are the files (under cgroupRoot) that show the limits of the sandbox with
// cgroup id and init pid under each cgroup version, with the values 1.5 CPUs, 96 MiB of memory
// and no swap, and 48 pids give them; ok is false when the host has neither version's files.
func cgroupFiles(id string, pid int) (files map[string]string, ok bool) {
	mem := strconv.Itoa(96 << 20)
	if _, err := os.Stat(filepath.Join(cgroupRoot, "cgroup.controllers")); err == nil {
		// cgroup v2 (Debian 12's default): one hierarchy, swap limited on its own.
		dir := filepath.Join(testCgroupParent, id)
		return map[string]string{
			filepath.Join(dir, "memory.max"):      mem,
			filepath.Join(dir, "memory.swap.max"): "0",
			filepath.Join(dir, "pids.max"):        "48",
			filepath.Join(dir, "cpu.max"):         "150000 100000",
			filepath.Join(dir, "cgroup.procs"):    strconv.Itoa(pid),
		}, true
	}
	if _, err := os.Stat(filepath.Join(cgroupRoot, "memory", "memory.limit_in_bytes")); err == nil {
		// cgroup v1: one hierarchy per controller, swap limited as memory plus swap.
		in := func(controller, file string) string {
			return filepath.Join(controller, testCgroupParent, id, file)
		}
		return map[string]string{
			in("memory", "memory.limit_in_bytes"):       mem,
			in("memory", "memory.memsw.limit_in_bytes"): mem,
			in("pids", "pids.max"):                      "48",
			in("cpu", "cpu.cfs_period_us"):              "100000",
			in("cpu", "cpu.cfs_quota_us"):               "150000",
			in("pids", "cgroup.procs"):                  strconv.Itoa(pid),
		}, true
	}
	return nil, false
}

func TestCgroupLimitsAreSet(t *testing.T) {
	if _, ok := cgroupFiles("", 0); !ok {
		testkit.Missing(t, "neither a cgroup v2 hierarchy nor a cgroup v1 memory controller is mounted at "+cgroupRoot)
	}
	d := newTestDriver(t, "")
	spec := sleepSpec(t, testImage(t))
	spec.Resources = Resources{CPUs: 1.5, MemoryBytes: 96 << 20, Pids: 48}
	sb := create(t, d, spec)

	files, _ := cgroupFiles(sb.ID(), sb.Pid())
	for file, want := range files {
		b, err := os.ReadFile(filepath.Join(cgroupRoot, file))
		if err != nil {
			t.Fatal(err)
		}
		if got := strings.TrimSpace(string(b)); got != want {
			t.Errorf("%s = %s, want %s", file, got, want)
		}
	}
	st, err := sb.Stats(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if st.MemoryLimitBytes != 96<<20 || st.PidsLimit != 48 || st.Pids != 1 || st.MemoryBytes == 0 {
		t.Errorf("Stats = %+v, want the limits, 1 pid and some memory", st)
	}
}

func TestDefaultResourcesFillUnsetLimits(t *testing.T) {
	got := Resources{MemoryBytes: 5}.withDefaults(Resources{CPUs: 3})
	want := Resources{CPUs: 3, MemoryBytes: 5, Pids: DefaultResources.Pids, DiskBytes: DefaultResources.DiskBytes}
	if got != want {
		t.Errorf("withDefaults = %+v, want %+v", got, want)
	}
}

func TestForkBombIsStoppedByThePidsLimit(t *testing.T) {
	d := newTestDriver(t, "")
	spec := sleepSpec(t, testImage(t))
	spec.Resources.Pids = 32
	sb := create(t, d, spec)

	// The bomb keeps forking in the background; its output goes nowhere so
	// the exec returns while it runs. The shell's own next fork may already
	// fail at the limit, so its exit status says nothing: the cgroup does.
	_, _ = execIn(t, sb, "/bin/sh", "-c", "b(){ b|b& }; b >/dev/null 2>&1 </dev/null; exit 0")
	var st Stats
	testkit.Eventually(t, 10*time.Second, "the bomb filling the pids cgroup", func() (bool, string) {
		var err error
		if st, err = sb.Stats(context.Background()); err != nil {
			t.Fatal(err)
		}
		return st.Pids >= 16, fmt.Sprintf("%d pids", st.Pids)
	})
	if st.Pids > 32 {
		t.Errorf("%d pids in the sandbox, limit 32", st.Pids)
	}
	if st.Pids < 16 {
		t.Errorf("only %d pids: the bomb did not run", st.Pids)
	}
	if err := exec.Command("/bin/true").Run(); err != nil {
		t.Errorf("the host cannot fork during the bomb: %v", err)
	}
	if err := sb.Stop(context.Background()); err != nil {
		t.Fatalf("Stop during the bomb: %v", err)
	}
	if _, err := os.Stat(filepath.Join("/sys/fs/cgroup/pids", testCgroupParent, sb.ID())); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("pids cgroup still there after Stop: %v", err)
	}
}

func TestNetworkIsLoopbackOnly(t *testing.T) {
	d := newTestDriver(t, "")
	sb := create(t, d, sleepSpec(t, testImage(t)))

	links := sh(t, sb, "ip -o link")
	if n := len(strings.Split(links, "\n")); n != 1 || !strings.Contains(links, "1: lo:") || !strings.Contains(links, "UP") {
		t.Errorf("links inside:\n%s\nwant only lo, UP", links)
	}
	if got := sh(t, sb, "ip -o -4 addr"); !strings.Contains(got, " lo ") || !strings.Contains(got, "127.0.0.1/8") || strings.Count(got, "\n") != 0 {
		t.Errorf("IPv4 addresses inside: %q, want only lo 127.0.0.1/8", got)
	}
	if got := sh(t, sb, "ip route; ip -6 route | grep -v '^::1\\|^fe80' ; true"); got != "" {
		t.Errorf("routes inside: %q, want none", got)
	}
	// Loopback inside works...
	if got := sh(t, sb, "nc -l -p 7000 -e echo inside & for i in $(seq 100); do nc 127.0.0.1 7000 2>/dev/null && break; sleep 0.05; done"); got != "inside" {
		t.Errorf("loopback connection inside got %q", got)
	}
	// ...and is not the host's: a host listener on 127.0.0.1 is unreachable,
	// and so is every host address.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	port := strconv.Itoa(l.Addr().(*net.TCPAddr).Port)
	targets := []string{"127.0.0.1"}
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range addrs {
		if ip, ok := a.(*net.IPNet); ok && ip.IP.To4() != nil && !ip.IP.IsLoopback() {
			targets = append(targets, ip.IP.String())
		}
	}
	for _, ip := range targets {
		if out, err := execIn(t, sb, "nc", "-w", "2", ip, port); err == nil {
			t.Errorf("connecting to host %s:%s from inside succeeded: %s", ip, port, out)
		}
	}
}

func TestCapabilitiesAreTheDefaultSet(t *testing.T) {
	d := newTestDriver(t, "")
	sb := create(t, d, sleepSpec(t, testImage(t)))

	var want uint64
	for _, c := range []int{
		unix.CAP_CHOWN, unix.CAP_DAC_OVERRIDE, unix.CAP_FSETID, unix.CAP_FOWNER, unix.CAP_MKNOD,
		unix.CAP_SETGID, unix.CAP_SETUID, unix.CAP_SETFCAP, unix.CAP_SETPCAP, unix.CAP_KILL,
		unix.CAP_NET_BIND_SERVICE, unix.CAP_AUDIT_WRITE, unix.CAP_SYS_CHROOT,
	} {
		want |= 1 << c
	}
	status := map[string]string{}
	for _, pid := range []string{"1", "self"} {
		for _, line := range strings.Split(mustExec(t, sb, "cat", "/proc/"+pid+"/status"), "\n") {
			if k, v, ok := strings.Cut(line, ":"); ok {
				status[pid+"/"+k] = strings.TrimSpace(v)
			}
		}
	}
	for _, k := range []string{"1/CapEff", "1/CapBnd", "1/CapPrm", "self/CapEff", "self/CapBnd"} {
		if got, _ := strconv.ParseUint(status[k], 16, 64); got != want {
			t.Errorf("%s = %s, want %016x", k, status[k], want)
		}
	}
	for k, want := range map[string]string{
		"1/CapInh": "0000000000000000", "1/CapAmb": "0000000000000000",
		"1/NoNewPrivs": "1", "self/NoNewPrivs": "1", "1/Seccomp": "2",
	} {
		if status[k] != want {
			t.Errorf("%s = %q, want %q", k, status[k], want)
		}
	}
}

func TestSandboxCannotReachTheKernelsKnobs(t *testing.T) {
	d := newTestDriver(t, "")
	sb := create(t, d, sleepSpec(t, testImage(t)))

	for _, c := range []struct{ name, script string }{
		{"new user namespace (seccomp)", "unshare -U true"},
		{"new mount namespace (no CAP_SYS_ADMIN)", "unshare -m true"},
		{"mount (no CAP_SYS_ADMIN)", "mkdir -p /mnt && mount -t tmpfs none /mnt"},
		{"write /proc/sys (read-only)", "echo 1 > /proc/sys/vm/drop_caches"},
		{"write /proc/sysrq-trigger (read-only)", "echo h > /proc/sysrq-trigger"},
		{"write /sys (read-only)", "touch /sys/kernel/x"},
		{"read the host kernel's key list (masked)", "test -n \"$(cat /proc/keys)\""},
		{"read firmware tables (masked)", "test -n \"$(ls /sys/firmware)\""},
		{"make a block device node (device cgroup)", "mknod /tmp/sda b 8 0 && head -c1 /tmp/sda"},
	} {
		t.Run(c.name, func(t *testing.T) {
			if out, err := execIn(t, sb, "sh", "-c", c.script); err == nil {
				t.Errorf("%q succeeded inside: %s", c.script, out)
			}
		})
	}
}

func TestStopThenCreateWithTheSameDirResumes(t *testing.T) {
	d := newTestDriver(t, "")
	spec := sleepSpec(t, testImage(t))
	sb := create(t, d, spec)
	sh(t, sb, "echo kept > /root/state.txt && rm /etc/motd")
	if err := sb.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := sb.Stop(context.Background()); err != nil {
		t.Fatalf("second Stop: %v", err)
	}

	again := create(t, d, spec)
	if got := mustExec(t, again, "cat", "/root/state.txt"); got != "kept" {
		t.Errorf("after resume /root/state.txt = %q", got)
	}
	if out, err := execIn(t, again, "cat", "/etc/motd"); err == nil {
		t.Errorf("file deleted before the stop is back: %q", out)
	}
}

func TestInitOutputGoesToTheLogAndStopWorksAfterInitExited(t *testing.T) {
	d := newTestDriver(t, "")
	spec := sleepSpec(t, testImage(t))
	spec.Init = []string{"/bin/sh", "-c", "echo out-from-init; echo err-from-init >&2; exit 3"}
	sb := create(t, d, spec)
	ctx := context.Background()

	testkit.Eventually(t, 30*time.Second, "init exiting", func() (bool, string) {
		st, err := sb.Status(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return st == StatusStopped, "the sandbox is " + string(st)
	})
	if b, err := os.ReadFile(sb.LogPath()); err != nil || string(b) != "out-from-init\nerr-from-init\n" {
		t.Errorf("init log = %q, %v", b, err)
	}
	if err := sb.Stop(ctx); err != nil {
		t.Fatalf("Stop after init exited: %v", err)
	}
	if infos, err := d.List(ctx); err != nil || len(infos) != 0 {
		t.Errorf("List after Stop = %+v, %v", infos, err)
	}
}

func TestFreezeStopsProcessesAndStopKillsAFrozenSandbox(t *testing.T) {
	d := newTestDriver(t, "")
	sb := create(t, d, sleepSpec(t, testImage(t)))
	ctx := context.Background()

	if err := sb.Freeze(ctx); err != nil {
		t.Fatal(err)
	}
	if got, err := sb.Status(ctx); err != nil || got != StatusPaused {
		t.Errorf("Status after Freeze = %q, %v", got, err)
	}
	b, err := os.ReadFile(filepath.Join("/sys/fs/cgroup/freezer", testCgroupParent, sb.ID(), "freezer.state"))
	if err == nil && strings.TrimSpace(string(b)) != "FROZEN" {
		t.Errorf("freezer.state = %q, want FROZEN", b)
	}
	if err := sb.Thaw(ctx); err != nil {
		t.Fatal(err)
	}
	if got := mustExec(t, sb, "echo", "alive"); got != "alive" {
		t.Errorf("exec after Thaw = %q", got)
	}
	if err := sb.Freeze(ctx); err != nil {
		t.Fatal(err)
	}
	pid := sb.Pid()
	if err := sb.Stop(ctx); err != nil {
		t.Fatalf("Stop of a frozen sandbox: %v", err)
	}
	// Gone and, with Subreaper, reaped: not even a zombie is left.
	if err := unix.Kill(pid, 0); !errors.Is(err, unix.ESRCH) {
		t.Errorf("init %d still exists after Stop (kill 0: %v)", pid, err)
	}
	if _, err := sb.Status(ctx); !errors.Is(err, ErrNotFound) {
		t.Errorf("Status after Stop: %v, want ErrNotFound", err)
	}
}

func TestCleanupRemovesWhatACrashedDriverLeft(t *testing.T) {
	stateDir := t.TempDir()
	crashed := newTestDriver(t, stateDir)
	lower := testImage(t)
	gone, kept := sleepSpec(t, lower), sleepSpec(t, lower)
	kept.ID += "-kept"
	create(t, crashed, gone)
	create(t, crashed, kept)
	// The process "crashes": the driver is forgotten, nothing is stopped.

	d := newTestDriver(t, stateDir)
	ctx := context.Background()
	infos, err := d.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(infos) != 2 {
		t.Fatalf("List = %+v, want the two leftovers", infos)
	}
	for _, in := range infos {
		if in.Status != StatusRunning || !in.Mounted || in.Pid == 0 || in.Dir == "" {
			t.Errorf("leftover %+v: want running, mounted, with pid and dir", in)
		}
	}

	if err := d.Cleanup(ctx, func(id string) bool { return id == kept.ID }); err != nil {
		t.Fatal(err)
	}
	infos, err = d.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(infos) != 1 || infos[0].ID != kept.ID || infos[0].Status != StatusRunning {
		t.Errorf("List after Cleanup = %+v, want only the kept sandbox, running", infos)
	}
	if mounted, _ := isMountPoint(filepath.Join(gone.Dir, "rootfs")); mounted {
		t.Error("cleaned-up sandbox's overlay is still mounted")
	}
	if _, err := os.Stat(UpperDir(gone.Dir)); err != nil {
		t.Errorf("Cleanup removed the upper dir: %v", err)
	}

	sb, err := d.Adopt(ctx, kept.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got := mustExec(t, sb, "echo", "adopted"); got != "adopted" || sb.Pid() != infos[0].Pid {
		t.Errorf("adopted sandbox: exec %q, pid %d want %d", got, sb.Pid(), infos[0].Pid)
	}
	if err := sb.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := d.Adopt(ctx, gone.ID); !errors.Is(err, ErrNotFound) {
		t.Errorf("Adopt of a cleaned-up sandbox: %v, want ErrNotFound", err)
	}
}

func TestCleanupFindsAContainerWithoutARecord(t *testing.T) {
	d := newTestDriver(t, "")
	sb := create(t, d, sleepSpec(t, testImage(t)))
	// A crash between runc and the record: only runc knows the container.
	if err := os.Remove(d.recordPath(sb.ID())); err != nil {
		t.Fatal(err)
	}
	if err := d.Cleanup(context.Background(), nil); err != nil {
		t.Fatal(err)
	}
	if infos, err := d.List(context.Background()); err != nil || len(infos) != 0 {
		t.Errorf("List after Cleanup = %+v, %v; want nothing", infos, err)
	}
}

func TestCreateRejectsBadSpecs(t *testing.T) {
	d := newTestDriver(t, "")
	lower := testImage(t)
	for _, c := range []struct {
		name   string
		change func(*Spec)
	}{
		{"id with a slash", func(s *Spec) { s.ID = "a/b" }},
		{"empty id", func(s *Spec) { s.ID = "" }},
		{"relative dir", func(s *Spec) { s.Dir = "sandbox" }},
		{"no lower dirs", func(s *Spec) { s.LowerDirs = nil }},
		{"empty init", func(s *Spec) { s.Init = nil }},
		{"relative cwd", func(s *Spec) { s.Cwd = "root" }},
		{"relative mount destination", func(s *Spec) { s.Mounts = []Mount{{Source: lower, Destination: "mnt"}} }},
		{"mount over /", func(s *Spec) { s.Mounts = []Mount{{Source: lower, Destination: "/"}} }},
		{"negative memory", func(s *Spec) { s.Resources.MemoryBytes = -1 }},
		{"disk below the minimum", func(s *Spec) { s.Resources.DiskBytes = MinDiskBytes - 1 }},
		{"lower dir with a colon", func(s *Spec) {
			s.LowerDirs = []string{filepath.Join(t.TempDir(), "a:b")}
			if err := os.Mkdir(s.LowerDirs[0], 0o755); err != nil {
				t.Fatal(err)
			}
		}},
		{"missing lower dir", func(s *Spec) { s.LowerDirs = []string{filepath.Join(lower, "nope")} }},
		{"missing init binary", func(s *Spec) { s.Init = []string{"/bin/nope"} }},
	} {
		t.Run(c.name, func(t *testing.T) {
			spec := sleepSpec(t, lower)
			c.change(&spec)
			if filepath.IsAbs(spec.Dir) {
				t.Cleanup(func() { forceCleanup(t, d, spec.ID, spec.Dir) })
			}
			if sb, err := d.Create(context.Background(), spec); err == nil {
				t.Fatalf("Create succeeded: %s", sb.ID())
			} else {
				t.Log(err)
			}
			if infos, err := d.List(context.Background()); err != nil || len(infos) != 0 {
				t.Errorf("after a failed Create List = %+v, %v; want nothing left", infos, err)
			}
			if mounted, _ := isMountPoint(filepath.Join(spec.Dir, "rootfs")); mounted {
				t.Error("failed Create left the overlay mounted")
			}
		})
	}
}

func TestCreateRefusesAnIDInUse(t *testing.T) {
	d := newTestDriver(t, "")
	spec := sleepSpec(t, testImage(t))
	create(t, d, spec)
	other := spec
	other.Dir = filepath.Join(t.TempDir(), "other")
	if _, err := d.Create(context.Background(), other); !errors.Is(err, ErrExists) {
		t.Errorf("second Create with the same id: %v, want ErrExists", err)
	}
}

func TestRemoveDeletesTheDir(t *testing.T) {
	d := newTestDriver(t, "")
	sb := create(t, d, sleepSpec(t, testImage(t)))
	if err := sb.Remove(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(sb.Dir()); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Dir after Remove: %v", err)
	}
}

func TestNewDriverNamesAMissingRunc(t *testing.T) {
	_, err := NewDriver(DriverOptions{StateDir: t.TempDir(), Runc: "/nonexistent/runc"})
	if err == nil || !strings.Contains(err.Error(), "/nonexistent/runc") {
		t.Errorf("NewDriver with a missing runc: %v", err)
	}
	t.Setenv("PATH", t.TempDir())
	saved := sbinDirs
	sbinDirs = nil
	t.Cleanup(func() { sbinDirs = saved })
	if _, err := findRunc(""); err == nil || !strings.Contains(err.Error(), "apt-get install runc") {
		t.Errorf("missing runc error %v does not say how to install it", err)
	}
}
