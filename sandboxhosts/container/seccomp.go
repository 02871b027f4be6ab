package container

import (
	goruntime "runtime"
	"slices"

	specs "github.com/opencontainers/runtime-spec/specs-go"
	"golang.org/x/sys/unix"
)

// allowedSyscalls are the only syscalls a sandbox's processes may make: the profile is an
// allow-list, like Docker's default, and anything missing from it fails with EPERM (runc makes
// syscalls newer than any named here answer ENOSYS, so libc falls back from what a future
// kernel adds). Names an architecture lacks (the 32-bit "...32",
// "...64" and "..._time64" variants on 64-bit ones) are skipped by runc. Grouped by purpose;
// what is deliberately missing is said in seccompProfile.
var allowedSyscalls = slices.Concat(
	// Processes, threads and their identity.
	[]string{
		"execve", "execveat", "exit", "exit_group", "fork", "vfork", "wait4", "waitid", "waitpid",
		"getpid", "getppid", "gettid", "getpgid", "getpgrp", "getsid", "setpgid", "setsid",
		"set_tid_address", "set_robust_list", "get_robust_list", "rseq", "arch_prctl", "prctl",
		"get_thread_area", "set_thread_area", "personality",
		"getuid", "getuid32", "geteuid", "geteuid32", "getgid", "getgid32", "getegid", "getegid32",
		"getresuid", "getresuid32", "getresgid", "getresgid32", "getgroups", "getgroups32",
		"setuid", "setuid32", "setgid", "setgid32", "setreuid", "setreuid32", "setregid", "setregid32",
		"setresuid", "setresuid32", "setresgid", "setresgid32", "setgroups", "setgroups32",
		"setfsuid", "setfsuid32", "setfsgid", "setfsgid32", "capget", "capset",
		"getrlimit", "setrlimit", "prlimit64", "ugetrlimit", "getrusage", "times", "umask",
		"getpriority", "setpriority", "ioprio_get", "ioprio_set", "sched_yield",
		"sched_getaffinity", "sched_setaffinity", "sched_getattr", "sched_setattr",
		"sched_getparam", "sched_setparam", "sched_getscheduler", "sched_setscheduler",
		"sched_get_priority_max", "sched_get_priority_min", "sched_rr_get_interval",
		"sched_rr_get_interval_time64", "nice", "getcpu", "uname", "sysinfo", "getrandom", "seccomp",
		"landlock_create_ruleset", "landlock_add_rule", "landlock_restrict_self",
		// Debuggers and sanitizers (strace, gdb, LeakSanitizer) within the sandbox; PID 1 is
		// out of their reach because the supervisor makes itself undumpable.
		"ptrace", "process_vm_readv", "process_vm_writev",
	},
	// Signals and pidfds.
	[]string{
		"kill", "tkill", "tgkill", "rt_sigaction", "rt_sigpending", "rt_sigprocmask",
		"rt_sigqueueinfo", "rt_tgsigqueueinfo", "rt_sigreturn", "rt_sigsuspend", "rt_sigtimedwait",
		"rt_sigtimedwait_time64", "sigaltstack", "sigreturn", "sigprocmask", "signalfd", "signalfd4",
		"sigaction", "sigpending", "sigsuspend", "signal", "pause", "alarm", "pidfd_open",
		"pidfd_send_signal", "restart_syscall",
	},
	// 32-bit ARM's own calls.
	[]string{"arm_fadvise64_64", "arm_sync_file_range", "sync_file_range2", "breakpoint", "cacheflush", "set_tls"},
	// Memory.
	[]string{
		"brk", "mmap", "mmap2", "munmap", "mremap", "mprotect", "madvise", "mincore", "msync",
		"mlock", "mlock2", "mlockall", "munlock", "munlockall", "remap_file_pages", "membarrier",
		"memfd_create", "pkey_alloc", "pkey_free", "pkey_mprotect", "map_shadow_stack", "mseal",
	},
	// Time and timers.
	[]string{
		"clock_gettime", "clock_gettime64", "clock_getres", "clock_getres_time64",
		"clock_nanosleep", "clock_nanosleep_time64", "nanosleep", "gettimeofday", "time",
		"getitimer", "setitimer", "timer_create", "timer_delete", "timer_getoverrun",
		"timer_gettime", "timer_gettime64", "timer_settime", "timer_settime64",
		"timerfd_create", "timerfd_gettime", "timerfd_gettime64", "timerfd_settime",
		"timerfd_settime64",
	},
	// Waiting and synchronisation.
	[]string{
		"futex", "futex_time64", "futex_waitv", "futex_wake", "futex_wait", "futex_requeue",
		"poll", "ppoll", "ppoll_time64", "select", "_newselect", "pselect6", "pselect6_time64",
		"epoll_create", "epoll_create1", "epoll_ctl", "epoll_wait", "epoll_pwait", "epoll_pwait2",
		"eventfd", "eventfd2", "inotify_init", "inotify_init1", "inotify_add_watch",
		"inotify_rm_watch", "fanotify_mark",
		"io_setup", "io_destroy", "io_submit", "io_cancel", "io_getevents", "io_pgetevents",
		"io_pgetevents_time64",
	},
	// Files and directories.
	[]string{
		"read", "readv", "pread64", "preadv", "preadv2", "write", "writev", "pwrite64", "pwritev",
		"pwritev2", "open", "openat", "openat2", "creat", "close", "close_range", "dup", "dup2",
		"dup3", "fcntl", "fcntl64", "flock", "ioctl", "lseek", "_llseek", "pipe", "pipe2",
		"splice", "tee", "vmsplice", "sendfile", "sendfile64", "copy_file_range", "readahead",
		"fadvise64", "fadvise64_64", "fallocate", "fsync", "fdatasync", "sync", "syncfs",
		"sync_file_range", "truncate", "truncate64", "ftruncate", "ftruncate64", "cachestat",
		"stat", "stat64", "lstat", "lstat64", "fstat", "fstat64", "fstatat64", "newfstatat",
		"statx", "statfs", "statfs64", "fstatfs", "fstatfs64", "access", "faccessat",
		"faccessat2", "getdents", "getdents64", "getcwd", "chdir", "fchdir", "chroot",
		"mkdir", "mkdirat", "rmdir", "mknod", "mknodat", "link", "linkat", "symlink", "symlinkat",
		"readlink", "readlinkat", "unlink", "unlinkat", "rename", "renameat", "renameat2",
		"chmod", "fchmod", "fchmodat", "fchmodat2", "chown", "chown32", "fchown", "fchown32",
		"fchownat", "lchown", "lchown32", "utime", "utimes", "utimensat", "utimensat_time64",
		"futimesat", "getxattr", "lgetxattr", "fgetxattr", "getxattrat", "setxattr", "lsetxattr",
		"fsetxattr", "setxattrat", "listxattr", "llistxattr", "flistxattr", "listxattrat",
		"removexattr", "lremovexattr", "fremovexattr", "removexattrat",
	},
	// Sockets (the network namespace has only loopback) and System V / POSIX IPC (the sandbox
	// has its own ipc namespace).
	[]string{
		"socket", "socketpair", "socketcall", "bind", "listen", "accept", "accept4", "connect",
		"getsockname", "getpeername", "getsockopt", "setsockopt", "shutdown", "send", "sendto",
		"sendmsg", "sendmmsg", "recv", "recvfrom", "recvmsg", "recvmmsg", "recvmmsg_time64",
		"ipc", "msgget", "msgsnd", "msgrcv", "msgctl", "semget", "semop", "semtimedop",
		"semtimedop_time64", "semctl", "shmget", "shmat", "shmdt", "shmctl",
		"mq_open", "mq_unlink", "mq_timedsend", "mq_timedsend_time64", "mq_timedreceive",
		"mq_timedreceive_time64", "mq_notify", "mq_getsetattr",
	},
)

// seccompProfile is the sandboxes' filter: allowedSyscalls, clone without namespace flags, and
// EPERM for the rest. Left out on purpose, as under Docker: new namespaces (unshare, setns, clone
// with CLONE_NEW*: a user namespace would hand a process every capability over namespaces of its
// own), mounts and the new mount API, modules, kexec, reboot, swap, clocks, accounting, quotas,
// keyrings, bpf, perf_event_open, userfaultfd, io_uring, open_by_handle_at, kcmp, pidfd_getfd,
// the kernel log (syslog), NUMA policy, ioperm/iopl and modify_ldt. clone3 passes its flags in
// memory seccomp cannot read, so it answers ENOSYS and libc falls back to clone. (CLONE_NEWTIME
// exists only for clone3 and unshare; in clone's flags its bit belongs to the exit signal.)
func seccompProfile() *specs.LinuxSeccomp {
	eperm := uint(unix.EPERM)
	enosys := uint(unix.ENOSYS)
	newNamespaces := uint64(unix.CLONE_NEWNS | unix.CLONE_NEWUTS | unix.CLONE_NEWIPC | unix.CLONE_NEWUSER |
		unix.CLONE_NEWPID | unix.CLONE_NEWNET | unix.CLONE_NEWCGROUP)
	return &specs.LinuxSeccomp{
		DefaultAction:   specs.ActErrno,
		DefaultErrnoRet: &eperm,
		Architectures:   seccompArches[goruntime.GOARCH],
		Syscalls: []specs.LinuxSyscall{
			{Names: slices.Clone(allowedSyscalls), Action: specs.ActAllow},
			{Names: []string{"clone3"}, Action: specs.ActErrno, ErrnoRet: &enosys},
			{
				Names:  []string{"clone"},
				Action: specs.ActAllow,
				Args:   []specs.LinuxSeccompArg{{Index: 0, Value: newNamespaces, ValueTwo: 0, Op: specs.OpMaskedEqual}},
			},
		},
	}
}

// seccompArches are the syscall ABIs a process may use on each host architecture, each
// filtered by the same rules. A syscall of an ABI left out (x32's on amd64) matches no
// architecture of the filter and kills its thread, so it slips past nothing. x32 is left out
// because every architecture in the list costs each sandbox's start about 2.5 ms (runc compiles
// the filter in its init), and x32 programs are all but extinct (most distributions' kernels
// no longer even run them); 32-bit x86 (ia32) programs still run.
var seccompArches = map[string][]specs.Arch{
	"amd64": {specs.ArchX86_64, specs.ArchX86},
	"arm64": {specs.ArchAARCH64, specs.ArchARM},
}
