package supervisor

import (
	"encoding/binary"
	"errors"
	"os"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// An exec's process tree is every process it started, however they detach: a harness's tool runs
// its commands in process groups and sessions of their own (Claude Code's Bash tool, Codex's
// commands), and a command's background job outlives the shell that started it. So the exec's
// main process is made a child subreaper before it runs: an orphan of the tree is reparented to
// it rather than to the supervisor, and while the main process lives every process of its tree
// is its descendant. Killing the exec (cancel, its timeout, the supervisor's stop) stops every
// descendant, again until none is new — a stopped process cannot fork — and then SIGKILLs them
// all, its process group too. Once the main process has exited, what it left behind is the
// supervisor's, as it was before: a daemon an exec starts on purpose lives on.
//
// The subreaper bit is set by a shim: the exec forks the supervisor's own binary under shimArg0,
// which sets it and execs the command (the bit survives execve), reporting a failed execve's
// errno on descriptor 3 so that the exec fails to start as a direct one would.

// shimArg0 is the argv[0] that makes the supervisor's binary the exec shim (RunShimIfAsked).
const shimArg0 = "hangar-exec-subreaper"

// shimErrFD is the shim's descriptor for a failed execve's errno: closed on exec, so EOF means
// the command runs.
const shimErrFD = 3

// RunShimIfAsked runs the exec shim when this process was started as one, and then never
// returns; otherwise it returns at once. The supervisor's main calls it first.
func RunShimIfAsked() {
	if len(os.Args) < 3 || os.Args[0] != shimArg0 {
		return
	}
	errno := runShim(os.Args[1], os.Args[2:])
	var b [4]byte
	binary.BigEndian.PutUint32(b[:], uint32(errno))
	_, _ = unix.Write(shimErrFD, b[:])
	os.Exit(127)
}

// runShim makes this process a subreaper and execs path; it returns only the errno of a failure.
func runShim(path string, argv []string) syscall.Errno {
	unix.CloseOnExec(shimErrFD)
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		return errnoOf(err)
	}
	return errnoOf(unix.Exec(path, argv, os.Environ()))
}

func errnoOf(err error) syscall.Errno {
	var errno syscall.Errno
	if errors.As(err, &errno) {
		return errno
	}
	return syscall.EINVAL
}

// shimFailure reads what the shim said on r: nil once the command runs, else the errno of its
// failed start.
func shimFailure(r *os.File) error {
	var b [4]byte
	n, _ := r.Read(b[:])
	if n < len(b) {
		return nil
	}
	return syscall.Errno(binary.BigEndian.Uint32(b[:]))
}

// killTree SIGKILLs root, its process group and every descendant, after stopping them all so
// that none forks in between.
func killTree(root int) {
	stopped := map[int]bool{}
	for {
		fresh := 0
		for _, pid := range descendants(root) {
			if !stopped[pid] {
				_ = unix.Kill(pid, unix.SIGSTOP)
				stopped[pid] = true
				fresh++
			}
		}
		if fresh == 0 {
			break
		}
	}
	_ = unix.Kill(-root, unix.SIGKILL)
	_ = unix.Kill(root, unix.SIGKILL)
	for pid := range stopped {
		_ = unix.Kill(pid, unix.SIGKILL)
	}
}

// descendants lists the processes whose chain of parents reaches root, from /proc.
func descendants(root int) []int {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	children := map[int][]int{}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if ppid, ok := parentOf(pid); ok {
			children[ppid] = append(children[ppid], pid)
		}
	}
	var out []int
	queue := []int{root}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		for _, c := range children[p] {
			out = append(out, c)
			queue = append(queue, c)
		}
	}
	return out
}

// parentOf is pid's parent, from /proc/pid/stat: "pid (comm) state ppid …", where comm may
// hold spaces and parentheses, so the fields are those after the last ')'.
func parentOf(pid int) (int, bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, false
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, false
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 2 {
		return 0, false
	}
	ppid, err := strconv.Atoi(f[1])
	return ppid, err == nil
}
