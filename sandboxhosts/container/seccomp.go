package container

import (
	goruntime "runtime"

	specs "github.com/opencontainers/runtime-spec/specs-go"
	"golang.org/x/sys/unix"
)

// deniedSyscalls fail with EPERM in every sandbox. The profile is a deny
// list, not Docker's allow list: it removes what a process without
// CAP_SYS_ADMIN has no business calling and what has a history of kernel
// exploits reachable from unprivileged code (new user namespaces, io_uring,
// bpf, userfaultfd, keyrings), while leaving ptrace and everything ordinary
// build tools use alone.
var deniedSyscalls = []string{
	"_sysctl", "acct", "add_key", "bpf", "clock_adjtime", "clock_settime",
	"create_module", "delete_module", "finit_module", "fsconfig", "fsmount",
	"fsopen", "fspick", "get_kernel_syms", "init_module", "io_uring_enter",
	"io_uring_register", "io_uring_setup", "ioperm", "iopl", "kexec_file_load",
	"kexec_load", "keyctl", "lookup_dcookie", "mount", "mount_setattr",
	"move_mount", "nfsservctl", "open_by_handle_at", "open_tree",
	"perf_event_open", "pivot_root", "query_module", "quotactl", "reboot",
	"request_key", "setns", "settimeofday", "stime", "swapoff", "swapon",
	"syslog", "umount", "umount2", "unshare", "uselib", "userfaultfd", "ustat",
	"vm86", "vm86old",
}

// seccompProfile allows every syscall but deniedSyscalls and clone with
// CLONE_NEWUSER (the one namespace an unprivileged process may create, which
// would hand it every capability over its own new namespaces). clone3 passes
// its flags in memory that seccomp cannot read, so it answers ENOSYS and libc
// falls back to clone, as under Docker.
func seccompProfile() *specs.LinuxSeccomp {
	eperm := uint(unix.EPERM)
	enosys := uint(unix.ENOSYS)
	return &specs.LinuxSeccomp{
		DefaultAction: specs.ActAllow,
		Architectures: seccompArches[goruntime.GOARCH],
		Syscalls: []specs.LinuxSyscall{
			{Names: deniedSyscalls, Action: specs.ActErrno, ErrnoRet: &eperm},
			{Names: []string{"clone3"}, Action: specs.ActErrno, ErrnoRet: &enosys},
			{
				Names:    []string{"clone"},
				Action:   specs.ActErrno,
				ErrnoRet: &eperm,
				Args: []specs.LinuxSeccompArg{{
					Index: 0, Value: unix.CLONE_NEWUSER, ValueTwo: unix.CLONE_NEWUSER, Op: specs.OpMaskedEqual,
				}},
			},
		},
	}
}

// seccompArches are the syscall ABIs a process may use on each host
// architecture: all of them must be filtered, or a 32-bit syscall would
// slip past the 64-bit rules.
var seccompArches = map[string][]specs.Arch{
	"amd64": {specs.ArchX86_64, specs.ArchX86, specs.ArchX32},
	"arm64": {specs.ArchAARCH64, specs.ArchARM},
}
