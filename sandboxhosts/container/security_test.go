package container

import (
	"bytes"
	"context"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/hangar-dev/hangar/sandboxhosts/container/containertest"
	"github.com/hangar-dev/hangar/sandboxhosts/supervisor"
	"github.com/hangar-dev/hangar/sandboxhosts/supervisor/supervisortest"
)

// probeImage is the test image with sysprobe at /bin/sysprobe.
func probeImage(t *testing.T) string {
	t.Helper()
	lower := testImage(t)
	b, err := os.ReadFile(containertest.Sysprobe(t))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(lower, "bin", "sysprobe"), b, 0o755); err != nil {
		t.Fatal(err)
	}
	return lower
}

// probe makes the raw syscall nr with args inside the sandbox, through amd64's 32-bit entry
// with i386's numbers when ia32 is set, and returns what sysprobe printed: "ok", the errno or
// "killed".
func probe(t *testing.T, sb *Sandbox, ia32 bool, nr uintptr, args ...uintptr) string {
	t.Helper()
	argv := []string{"/bin/sysprobe"}
	if ia32 {
		argv = append(argv, "ia32")
	}
	for _, a := range append([]uintptr{nr}, args...) {
		argv = append(argv, strconv.FormatUint(uint64(a), 10))
	}
	return mustExec(t, sb, argv...)
}

func TestSeccompAllowsOnlyTheAllowList(t *testing.T) {
	d := newTestDriver(t, "")
	sb := create(t, d, sleepSpec(t, probeImage(t)))
	// x32's syscalls are amd64's entry with this bit in their numbers.
	const x32 = 0x40000000
	for _, c := range []struct {
		name string
		// ia32 makes the syscall through amd64's 32-bit entry, with i386's numbers.
		ia32 bool
		nr   uintptr
		args []uintptr
		want string
	}{
		{"getpid is allowed", false, unix.SYS_GETPID, nil, "ok"},
		{"clone3 answers ENOSYS so libc falls back to clone", false, unix.SYS_CLONE3, nil, "ENOSYS"},
		{"keyctl is denied", false, unix.SYS_KEYCTL, []uintptr{unix.KEYCTL_GET_KEYRING_ID, 0}, "EPERM"},
		{"io_uring_setup is denied", false, unix.SYS_IO_URING_SETUP, []uintptr{1, 0}, "EPERM"},
		{"bpf is denied", false, unix.SYS_BPF, nil, "EPERM"},
		{"userfaultfd is denied", false, unix.SYS_USERFAULTFD, nil, "EPERM"},
		{"the kernel log is denied", false, unix.SYS_SYSLOG, []uintptr{10, 0, 0}, "EPERM"},
		{"a new user namespace is denied", false, unix.SYS_UNSHARE, []uintptr{unix.CLONE_NEWUSER}, "EPERM"},
		{"clone with a namespace flag is denied", false, unix.SYS_CLONE, []uintptr{unix.CLONE_NEWUSER | uintptr(unix.SIGCHLD)}, "EPERM"},
		{"pidfd_getfd is denied", false, unix.SYS_PIDFD_GETFD, nil, "EPERM"},
		{"kcmp is denied", false, unix.SYS_KCMP, nil, "EPERM"},
		{"personality is allowed", false, unix.SYS_PERSONALITY, []uintptr{0xffffffff}, "ok"},
		// A 32-bit syscall is filtered by the same rules, not let past the 64-bit ones.
		{"a 32-bit getpid is allowed", true, 20, nil, "ok"},
		{"a 32-bit keyctl is denied", true, 288, []uintptr{0xfffffffd, 0}, "EPERM"},
		{"a 32-bit unshare of a user namespace is denied", true, 310, []uintptr{unix.CLONE_NEWUSER}, "EPERM"},
		// The x32 ABI is not in the filter: its syscalls kill their thread.
		{"an x32 getpid kills its thread", false, x32 | unix.SYS_GETPID, nil, "killed"},
	} {
		t.Run(c.name, func(t *testing.T) {
			if (c.ia32 || c.nr&x32 != 0) && runtime.GOARCH != "amd64" {
				t.Skip("amd64's 32-bit entries")
			}
			if got := probe(t, sb, c.ia32, c.nr, c.args...); got != c.want {
				t.Errorf("syscall %d%v (ia32 %v) inside = %s, want %s", c.nr, c.args, c.ia32, got, c.want)
			}
		})
	}
}

func TestExitedClosesWhenInitDiesAndNotBefore(t *testing.T) {
	d := newTestDriver(t, "")
	sb := create(t, d, sleepSpec(t, testImage(t)))
	sh(t, sb, "true")
	select {
	case <-sb.Exited():
		t.Fatal("Exited is closed while init runs")
	default:
	}
	// A crash, as the host sees it: init killed from outside the sandbox.
	if err := unix.Kill(sb.Pid(), unix.SIGKILL); err != nil {
		t.Fatal(err)
	}
	select {
	case <-sb.Exited():
	case <-time.After(time.Minute):
		t.Fatal("Exited still open a minute after init was killed")
	}
	if err := sb.Stop(context.Background()); err != nil {
		t.Fatalf("Stop after init died: %v", err)
	}
}

// supervisorSandbox runs the real supervisor as init, the way the host does: on a listening
// socket the test binds outside the sandbox and passes as descriptor 3.
func supervisorSandbox(t *testing.T) (*Sandbox, *supervisor.Client) {
	t.Helper()
	d := newTestDriver(t, "")
	dir, err := os.MkdirTemp("", "svsock")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	path := filepath.Join(dir, "s.sock")
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	ln.SetUnlinkOnClose(false)
	f, err := ln.File()
	ln.Close()
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	spec := sleepSpec(t, probeImage(t))
	spec.Init = []string{"/.hangar/bin/supervisor", "--listen-fd", "3"}
	spec.Mounts = []Mount{{Source: supervisortest.Binary(t), Destination: "/.hangar/bin/supervisor", ReadOnly: true}}
	spec.ExtraFiles = []*os.File{f}
	sb := create(t, d, spec)
	sup := supervisor.Dial(path)
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	if _, err := sup.WaitReady(ctx); err != nil {
		t.Fatalf("%v; init log: %s", err, logTail(sb.LogPath(), 0))
	}
	return sb, sup
}

// shVia runs script through the supervisor and returns its stdout and shell exit status.
func shVia(t *testing.T, sb *Sandbox, sup *supervisor.Client, script string) (string, int) {
	t.Helper()
	var out bytes.Buffer
	exit, err := sup.Exec(context.Background(), supervisor.ExecRequest{Argv: []string{"/bin/sh", "-c", script}}, supervisor.Events{
		Output: func(o supervisor.Output) error {
			if o.Stream == supervisor.Stdout {
				out.Write(o.Data)
			}
			return nil
		},
	})
	if err != nil {
		t.Fatalf("exec %q: %v; init log: %s", script, err, logTail(sb.LogPath(), 0))
	}
	return strings.TrimSpace(out.String()), exit.ShellExitStatus()
}

func TestSupervisorAsInitOutlivesEverySignalFromInside(t *testing.T) {
	sb, sup := supervisorSandbox(t)
	// Each signal whose Go default would end or crash the supervisor, then SIGKILL, then SIGKILL
	// to every process the shell can reach.
	out, _ := shVia(t, sb, sup, "for s in TERM INT HUP QUIT ABRT SEGV BUS FPE ILL TRAP SYS USR1 PIPE KILL; do kill -$s 1; done; kill -9 -1; echo sent")
	if out != "sent" {
		t.Fatalf("signal script printed %q", out)
	}
	if _, err := sup.Ping(context.Background()); err != nil {
		t.Fatalf("supervisor gone after signals from inside: %v; init log: %s", err, logTail(sb.LogPath(), 0))
	}
	select {
	case <-sb.Exited():
		t.Fatal("init exited after signals from inside")
	default:
	}
	// Execs do not inherit an ignored SIGTERM.
	if out, _ := shVia(t, sb, sup, "sleep 100 & kill $!; wait $!; echo $?"); out != "143" {
		t.Errorf("a child killed with SIGTERM reports %q, want 143", out)
	}
}

func TestSupervisorAsInitIsOutOfReachThroughProc(t *testing.T) {
	sb, sup := supervisorSandbox(t)
	for _, c := range []struct{ name, script string }{
		{"write the host's log file through /proc/1/fd", "echo planted >> /proc/1/fd/1"},
		{"see where PID 1's descriptors lead", "readlink /proc/1/fd/1"},
		{"read PID 1's environment", "cat /proc/1/environ"},
		{"read PID 1's memory", "head -c 1 /proc/1/mem"},
		{"open PID 1's root", "ls /proc/1/root/"},
	} {
		t.Run(c.name, func(t *testing.T) {
			if out, status := shVia(t, sb, sup, c.script+" 2>/dev/null"); status == 0 {
				t.Errorf("%q succeeded inside: %q", c.script, out)
			}
		})
	}
	t.Run("ptrace PID 1", func(t *testing.T) {
		if got, _ := shVia(t, sb, sup, "/bin/sysprobe "+strconv.Itoa(unix.SYS_PTRACE)+" "+strconv.Itoa(unix.PTRACE_ATTACH)+" 1"); got != "EPERM" {
			t.Errorf("ptrace(PTRACE_ATTACH, 1) inside = %s, want EPERM", got)
		}
	})
	t.Run("ptrace a sibling still works", func(t *testing.T) {
		script := "sleep 100 & p=$!; /bin/sysprobe " + strconv.Itoa(unix.SYS_PTRACE) + " " + strconv.Itoa(unix.PTRACE_ATTACH) + " $p; kill -9 $p"
		if got, _ := shVia(t, sb, sup, script); got != "ok" {
			t.Errorf("ptrace(PTRACE_ATTACH, sibling) inside = %s, want ok (debuggers work in the sandbox)", got)
		}
	})
	if b, err := os.ReadFile(sb.LogPath()); err != nil || bytes.Contains(b, []byte("planted")) {
		t.Errorf("init log = %q, %v: a sandbox process wrote to it", b, err)
	}
}

// TestMountTableShowsNoHostPathOfTheOverlay: the overlay shows relative links, and a file bound
// from SharedFiles (as the host binds the supervisor) shows its name on a tmpfs, not the host
// path it was copied from or the one it is bound from.
func TestMountTableShowsNoHostPathOfTheOverlay(t *testing.T) {
	d := newTestDriver(t, "")
	spec := sleepSpec(t, testImage(t))
	hostDir := t.TempDir()
	tool := filepath.Join(hostDir, "tool")
	if err := os.WriteFile(tool, []byte("the shared tool\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	shared, err := MountSharedFiles(filepath.Join(hostDir, "shared"), map[string]string{"tool": tool})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := shared.Unmount(); err != nil {
			t.Error(err)
		}
	})
	if err := os.WriteFile(shared.Path("tool"), []byte("changed"), 0o644); err == nil {
		t.Error("the shared files are writable from the host")
	}
	spec.Mounts = []Mount{{Source: shared.Path("tool"), Destination: "/opt/tool", ReadOnly: true}}
	sb := create(t, d, spec)
	mounts := sh(t, sb, "cat /proc/self/mountinfo")
	for _, hostPath := range append([]string{spec.Dir, hostDir}, spec.LowerDirs...) {
		if strings.Contains(mounts, hostPath) {
			t.Errorf("the sandbox's mount table names host path %s:\n%s", hostPath, mounts)
		}
	}
	if got := sh(t, sb, "awk '$5 == \"/opt/tool\" {print $4, $(NF-1)}' /proc/self/mountinfo; cat /opt/tool"); got != "/tool hangar\nthe shared tool" {
		t.Errorf("the shared file's mount and content inside = %q, want its name on the %q tmpfs and its content", got, "hangar")
	}
	if root := sh(t, sb, "awk '$5 == \"/\" {print $NF}' /proc/self/mountinfo"); !strings.Contains(root, "lowerdir=layers/0,upperdir=layers/upper,workdir=layers/work") {
		t.Errorf("overlay options inside = %q, want the relative links", root)
	}
	sh(t, sb, "echo through > /root/f")
	if b, err := os.ReadFile(filepath.Join(sb.UpperDir(), "root", "f")); err != nil || string(b) != "through\n" {
		t.Errorf("upper dir got %q, %v: the overlay is not on the sandbox's upper dir", b, err)
	}
}
